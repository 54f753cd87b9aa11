"""Deriving seeds from other values, the same on every machine and in every process.

Seeds are derived with SHA-256, never with Python's `hash()` (salted per process for
strings) and never from set or dict order, so that the same inputs give the same seed
everywhere and a run can be reproduced or resumed.
"""

from __future__ import annotations

import hashlib

SEPARATOR = "\x1f"  # ASCII unit separator: ("a", "b c") and ("a b", "c") stay apart


def derive_seed(*parts: object, bits: int = 31) -> int:
    """A `bits`-bit seed from `parts`: the first ceil(bits / 8) bytes of
    sha256(str(part_0) + "\\x1f" + str(part_1) + ...) read big-endian, masked to `bits`.

    31 bits fit every RNG (numpy's legacy seeding, C ints); 63 fit a torch.Generator.
    """
    if not isinstance(bits, int) or isinstance(bits, bool) or not 1 <= bits <= 256:
        raise ValueError(f"bits must be an integer from 1 to 256, not {bits!r}")
    payload = SEPARATOR.join(str(part) for part in parts).encode("utf-8", "surrogatepass")
    digest = hashlib.sha256(payload).digest()
    return int.from_bytes(digest[:(bits + 7) // 8], "big") & ((1 << bits) - 1)


def sample_seed(seed: int, index: int) -> int:
    """The seed of sample `index` of a request seeded with `seed` (a 63-bit value).

    Model plugins that draw `params.n` samples for one request use it, so a request's
    samples are reproducible and sample `index` does not depend on the others; sample 0
    of n agrees with the single sample of the same request with n = 1.
    """
    return derive_seed("sample", seed, index, bits=63)


def numpy_seed(seed: int) -> int:
    """`seed` as the 32-bit seed NumPy's legacy seeding takes (Optuna's samplers and
    transformers' `set_seed` use it): itself below 2**32, derived from it above (a run
    seed may be 64-bit: 2**32 raised there)."""
    return seed if 0 <= seed < 2**32 else derive_seed("numpy", seed, bits=32)
