"""Loading a Hugging Face causal LM: where it comes from, on which device, in which dtype.

Shared by inference (`model.py`), adapter training (`adapters.py`) and the benchmarks, so
that all three read a model and pick a device the same way (`prompts` renders prompts).
torch and transformers are imported inside the functions: importing this module stays cheap.

A model directory comes from the internet, so nothing in it is trusted: JSON files are read
under a size cap, each safetensors header is checked before transformers maps the file, the
memory the configuration asks for is compared with what the device has (a huge
`vocab_size` is refused before anything is allocated), and any failure of transformers,
tokenizers, safetensors or torch (a pickle refused by `weights_only`, a corrupt file...)
becomes one `UserError` line naming the file and the reason. Pickled weights are only ever
read by torch's `weights_only` unpickler (transformers' default).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import pickle  # nosec B403 - only to recognise torch's refusal of a pickle, never to load
import re
import socket
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping
from urllib.parse import urlsplit

from coral_core.files.decoding import DecodeError, json_value
from coral_core.errors import UserError
from coral_core.shown import one_line
from coral_core.files.fileio import read_bytes

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_DTYPES = {
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "fp16": "float16", "half": "float16",
    "float32": "float32", "fp32": "float32", "float": "float32",
}
JSON_LIMIT = 16 * 1024 * 1024  # config.json, tokenizer_config.json, adapter_config.json...
OFFLINE_HINT = (
    "for a hub id the model must be downloadable or already in the Hugging Face cache "
    "(HF_HOME; set HF_HUB_OFFLINE=1 to use the cache without network)"
)


@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from: a local directory or a hub repository id (+ revision)."""

    location: str
    local: bool
    revision: str | None = None

    @property
    def cache_only(self) -> bool:
        """Load from the local cache without asking the hub: a local directory, the hub
        client's own offline setting, or a hub that does not answer (one quick probe instead
        of the client's retries, about a minute, before the same error)."""
        return self.local or _hub_offline()


def resolve_source(target: str, revision: str | None = None) -> ModelSource:
    """Tell a local model directory from a hub id, failing early on a path that is no model."""
    if not target:
        raise UserError("hf model: give a local model directory or a hub id, as hf:PATH_OR_ID")
    path = Path(target).expanduser()
    if path.exists():
        if revision:  # it was dropped without a word
            raise UserError(f"hf model: revision = {revision!r} is for a hub id, but {target} "
                            "is a local directory (drop the revision)")
        if not (path / "config.json").is_file():
            raise UserError(
                f"hf model: {path} is not a Hugging Face model directory (no config.json)"
            )
        return ModelSource(str(path.resolve()), local=True, revision=None)
    if target.startswith((".", "/", "~")) or not _HUB_ID.match(target):
        raise UserError(f"hf model: no such model directory: {target}")
    return ModelSource(target, local=False, revision=revision)


_HUB_PROBE_SECONDS = 3.0


@functools.lru_cache(maxsize=1)
def _hub_offline() -> bool:
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return True
    endpoint = urlsplit(constants.ENDPOINT)
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    answered: list[bool] = []

    def probe() -> None:
        with contextlib.suppress(OSError):
            socket.create_connection((endpoint.hostname or "", port),
                                     timeout=_HUB_PROBE_SECONDS).close()
            answered.append(True)

    thread = threading.Thread(target=probe, daemon=True)  # a resolver may hang past timeout
    thread.start()
    thread.join(_HUB_PROBE_SECONDS)
    if not answered:
        log.info("hf model: %s does not answer; loading from the local cache only",
                 endpoint.hostname)
    return not answered


_DEVICE = re.compile(r"[a-z][a-z0-9_]*(:[0-9]{1,6})?")


def check_device_name(device: str | None) -> None:
    """A device name that cannot be one, judged without torch or this machine's devices
    (the driver of a Ray run checks the name; the machine that builds the model, the rest)."""
    if device in (None, "", "auto"):
        return
    if not _DEVICE.fullmatch(str(device)):
        raise UserError(f"hf model: device '{device}' is not a device (auto, cpu, cuda, "
                        "cuda:N)")
    if str(device).partition(":")[0] == "meta":
        raise UserError(f"hf model: device '{device}' asked for, but meta holds no weights "
                        "(auto, cpu, cuda, cuda:N)")


def resolve_device(device: str | None) -> str:
    """`None`/"auto" picks CUDA where present, else the CPU."""
    import torch

    if device in (None, "", "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    check_device_name(device)
    try:
        parsed = torch.device(str(device))
    except (RuntimeError, ValueError):
        raise UserError(f"hf model: device '{device}' is not a device (auto, cpu, cuda, "
                        "cuda:N)") from None
    if parsed.type == "cpu":
        return "cpu"
    available = getattr(getattr(torch, parsed.type, None), "is_available", None)
    if parsed.type == "meta" or not callable(available) or not available():
        why = ("holds no weights" if parsed.type == "meta" else
               "is not available" if callable(available) else "cannot run a model here")
        raise UserError(f"hf model: device '{device}' asked for, but {parsed.type} {why} "
                        "(auto, cpu, cuda, cuda:N)")
    if parsed.type == "cuda" and (parsed.index or 0) >= torch.cuda.device_count():
        raise UserError(f"hf model: device '{device}': this machine has "
                        f"{torch.cuda.device_count()} CUDA device(s)")
    return str(device)


def resolve_dtype(dtype: str | None, device: str) -> "torch.dtype":
    """`None`/"auto": bfloat16 on CUDA (float16 where bf16 is unsupported), float32 elsewhere."""
    import torch

    if dtype in (None, "", "auto"):
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    return getattr(torch, check_dtype(str(dtype)))


def check_dtype(dtype: str) -> str:
    """The torch name of a `dtype` option ("auto" and "" stand for the device's choice)."""
    if dtype.lower() in ("", "auto"):
        return ""
    name = _DTYPES.get(dtype.lower())
    if name is None:
        known = ", ".join(sorted(_DTYPES))
        raise UserError(f"hf model: unknown dtype '{dtype}' (known: {known})")
    return name


def load_tokenizer(source: ModelSource, *, trust_remote_code: bool = False) -> Any:
    """The model's tokenizer, set up for left-padded batches (decoder-only generation)."""
    from transformers import AutoTokenizer

    if source.local:
        for name in ("tokenizer_config.json", "special_tokens_map.json", "chat_template.json"):
            if (Path(source.location) / name).is_file():
                read_json(Path(source.location) / name)
        _check_size(Path(source.location) / "tokenizer.json", 1 << 30, "tokenizer")
    try:
        with quiet_transformers():
            tokenizer = AutoTokenizer.from_pretrained(
                source.location, revision=source.revision, trust_remote_code=trust_remote_code,
                local_files_only=source.cache_only,
            )
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
    except UserError:
        raise
    except Exception as error:  # tokenizers, sentencepiece, json...: all mean "unusable"
        raise UserError(_load_failure(
            "tokenizer (tokenizer.json, tokenizer_config.json...)", source, error)) from None
    return tokenizer


def load_model(
    source: ModelSource, *, device: str, dtype: "torch.dtype", trust_remote_code: bool = False
) -> Any:
    """The causal LM on `device` in `dtype`, in eval mode (after `check_model_files`)."""
    from transformers import AutoModelForCausalLM

    check_model_files(source, device=device, dtype=dtype, trust_remote_code=trust_remote_code)
    try:
        with quiet_transformers():
            model, report = AutoModelForCausalLM.from_pretrained(
                source.location, revision=source.revision, dtype=dtype,
                device_map=device if device != "cpu" else None,
                trust_remote_code=trust_remote_code, local_files_only=source.cache_only,
                output_loading_info=True,
            )
        _refuse_missing_weights(source, report)
        if device == "cpu":
            model.to(device)
    except UserError:
        raise
    except Exception as error:  # pickles refused, corrupt files, shape mismatches...
        files = sorted(p.name for p in Path(source.location).glob("*")
                       if p.suffix in (".safetensors", ".bin", ".pt", ".pth")) \
            if source.local else []
        what = f"weights ({', '.join(files[:4])})" if files else "weights"
        if isinstance(error, pickle.UnpicklingError):
            raise UserError(
                f"hf model: refused the {what} of '{source.location}': a pickle that holds "
                "more than tensors (torch's weights_only loader refused it; Coral never "
                "runs pickled code)") from None
        raise UserError(_load_failure(what, source, error)) from None
    log.info("loaded %s on %s in %s", source.location, device, dtype)
    return model.eval()


def _refuse_missing_weights(source: ModelSource, report: Any) -> None:
    """A weight the files lack would be initialised at random (transformers' load report,
    which quiet_transformers keeps off the terminal, says so): a model with a layer dropped,
    or a configuration of another architecture, would generate noise and score as a model."""
    missing = sorted((report or {}).get("missing_keys") or ())
    if missing:
        raise UserError(
            f"hf model: the weights of '{source.location}' lack {len(missing)} tensor(s) its "
            f"config.json's model needs ({', '.join(missing[:3])}"
            f"{', ...' if len(missing) > 3 else ''}); they would be random")


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """No progress bars or load reports on the terminal while loading: a failure must be
    one line, and Coral reports what it loaded itself."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. torch's notes on a refused pickle
            yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def check_config(source: ModelSource) -> None:
    """config.json of a local model must be a JSON object of sane size (checked first, so
    that a broken one is named as such rather than as a tokenizer failure)."""
    if source.local:
        read_json(Path(source.location) / "config.json")


def check_model_files(source: ModelSource, *, device: str, dtype: "torch.dtype",
                      trust_remote_code: bool = False) -> None:
    """Refuse a model directory that would fail or exhaust memory, before loading it.

    config.json must be a JSON object of sane size; every safetensors file must have a
    well-formed header that fits the file; the model the configuration describes (built
    on the meta device: no memory) must match the tensor shapes the files hold and fit in
    the memory the device has.
    """
    shapes: dict[str, tuple[int, ...]] = {}
    check_config(source)
    if source.local:
        for path in sorted(Path(source.location).glob("*.safetensors")):
            shapes.update(_safetensors_shapes(path))
    meta = _meta_model(source, dtype, trust_remote_code)
    wrong = [(name, shapes[name], tuple(tensor.shape))
             for name, tensor in meta.state_dict().items()
             if name in shapes and shapes[name] != tuple(tensor.shape)]
    if wrong:
        name, found, wanted = wrong[0]
        raise UserError(
            f"hf model: {source.location}/config.json does not match the weights: tensor "
            f"{name} has shape {list(found)} in the files, the configuration implies "
            f"{list(wanted)} ({len(wrong)} tensor(s) differ)")
    tensors = list(meta.parameters()) + list(meta.buffers())  # tied weights counted once
    needed = sum(t.numel() * t.element_size() for t in tensors)
    available = available_memory(device)
    if available is not None and needed > available:
        raise UserError(
            f"hf model: {source.location}/config.json describes a model of "
            f"{needed / 2**30:.1f} GiB in {str(dtype).removeprefix('torch.')}, but {device} "
            f"has {available / 2**30:.1f} GiB available; refused before loading")


def _meta_model(source: ModelSource, dtype: "torch.dtype", trust_remote_code: bool) -> Any:
    """The model the configuration describes, with no storage (torch's meta device)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        with quiet_transformers():
            config = AutoConfig.from_pretrained(source.location, revision=source.revision,
                                                trust_remote_code=trust_remote_code,
                                                local_files_only=source.cache_only)
        with quiet_transformers(), torch.device("meta"):
            return AutoModelForCausalLM.from_config(config, dtype=dtype,
                                                    trust_remote_code=trust_remote_code)
    except UserError:
        raise
    except Exception as error:
        raise UserError(_load_failure("configuration (config.json)", source, error)) from None


def _safetensors_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Tensor shapes of a safetensors file, whose header is checked against the file."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            return {name: tuple(handle.get_slice(name).get_shape()) for name in handle.keys()}
    except Exception as error:  # SafetensorError: header too large, file not covered...
        raise UserError(f"hf model: {path}: not a valid safetensors file "
                        f"({one_line(str(error))})") from None


def available_memory(device: str) -> int | None:
    """Bytes free on `device` (MemAvailable for the CPU), or None where unknown."""
    if device.startswith("cuda"):
        import torch

        try:
            return int(torch.cuda.mem_get_info(torch.device(device))[0])
        except (RuntimeError, ValueError):
            return None
    if device != "cpu":
        return None
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def read_json(path: Path, limit: int = JSON_LIMIT) -> dict[str, Any]:
    """A JSON object from `path`, read under `limit` bytes; anything else is a UserError."""
    _check_size(path, limit, "file")  # the size in the message users already know
    text = read_bytes(path, limit=limit, what="hf model file")
    try:
        data = json_value(text, "content", finite=False)
    except DecodeError as error:
        raise UserError(f"hf model: {path} is not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise UserError(f"hf model: {path} must hold a JSON object, not {type(data).__name__}")
    return data


def _check_size(path: Path, limit: int, what: str) -> None:
    try:
        size = path.stat().st_size
    except OSError:
        return  # missing: the loader says what it needed
    if size > limit:
        raise UserError(f"hf model: {path} has {size} bytes, more than any {what} of this "
                        f"kind should ({limit}); refused")


def chat_template_file(source: ModelSource) -> str:
    """Where the tokenizer's chat template comes from, for messages."""
    if not source.local:
        return f"the tokenizer files of {source.location}"
    directory = Path(source.location)
    for name in ("chat_template.jinja", "chat_template.json", "tokenizer_config.json"):
        if (directory / name).is_file():
            return str(directory / name)
    return str(directory)


def adapter_base(adapter: Path) -> tuple[str | None, str | None]:
    """What an adapter says it was made for: (`base_model_name_or_path` of its
    adapter_config.json, the base model identity of Coral's `coral_adapter.json`)."""
    config = read_json(adapter / "adapter_config.json")
    named = config.get("base_model_name_or_path")
    identity = None
    record = adapter / "coral_adapter.json"
    if record.is_file():
        components = read_json(record).get("components")
        if isinstance(components, Mapping) and isinstance(components.get("base_model"), str):
            identity = components["base_model"]
    return (named if isinstance(named, str) and named else None), identity


def same_base(named: str, source: ModelSource) -> bool:
    """Whether an adapter's `base_model_name_or_path` names the model `source` loads:
    the same path or hub id, or the same final name (a hub id and a local copy of it)."""
    if named == source.location:
        return True
    try:
        if Path(named).expanduser().resolve() == Path(source.location).resolve():
            return True
    except (OSError, ValueError):
        pass
    tail = named.rstrip("/").rsplit("/", 1)[-1].lower()
    return bool(tail) and tail == source.location.rstrip("/").rsplit("/", 1)[-1].lower()


def _load_failure(what: str, source: ModelSource, error: BaseException) -> str:
    reason = one_line(str(error)) or type(error).__name__
    hint = "" if source.local else f"; {OFFLINE_HINT}"
    return (f"hf model: cannot load the {what} of '{source.location}': "
            f"{type(error).__name__}: {reason}{hint}")
