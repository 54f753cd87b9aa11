"""Loading a Hugging Face causal LM: where it comes from, on which device, in which dtype.

Shared by inference (`model.py`), adapter training (`adapters.py`) and the benchmarks, so
that all three read a model and pick a device the same way (`prompts` renders prompts).
torch and transformers are imported inside the functions: importing this module stays cheap.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coral_core.errors import UserError

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_DTYPES = {
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "fp16": "float16", "half": "float16",
    "float32": "float32", "fp32": "float32", "float": "float32",
}
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


def resolve_source(target: str, revision: str | None = None) -> ModelSource:
    """Tell a local model directory from a hub id, failing early on a path that is no model."""
    if not target:
        raise UserError("hf model: give a local model directory or a hub id, as hf:PATH_OR_ID")
    path = Path(target).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise UserError(
                f"hf model: {path} is not a Hugging Face model directory (no config.json)"
            )
        return ModelSource(str(path.resolve()), local=True, revision=None)
    if target.startswith((".", "/", "~")) or not _HUB_ID.match(target):
        raise UserError(f"hf model: no such model directory: {target}")
    return ModelSource(target, local=False, revision=revision)


def resolve_device(device: str | None) -> str:
    """`None`/"auto" picks CUDA where present, else the CPU."""
    import torch

    if device in (None, "", "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"hf model: device '{device}' asked for, but CUDA is not available")
    return str(device)


def resolve_dtype(dtype: str | None, device: str) -> "torch.dtype":
    """`None`/"auto": bfloat16 on CUDA (float16 where bf16 is unsupported), float32 elsewhere."""
    import torch

    if dtype in (None, "", "auto"):
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    name = _DTYPES.get(str(dtype).lower())
    if name is None:
        known = ", ".join(sorted(_DTYPES))
        raise UserError(f"hf model: unknown dtype '{dtype}' (known: {known})")
    return getattr(torch, name)


def load_tokenizer(source: ModelSource, *, trust_remote_code: bool = False) -> Any:
    """The model's tokenizer, set up for left-padded batches (decoder-only generation)."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(
            source.location, revision=source.revision, trust_remote_code=trust_remote_code
        )
    except (OSError, ValueError) as error:
        raise UserError(_load_failure("tokenizer", source, error)) from error
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(
    source: ModelSource, *, device: str, dtype: "torch.dtype", trust_remote_code: bool = False
) -> Any:
    """The causal LM on `device` in `dtype`, in eval mode."""
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(
            source.location, revision=source.revision, dtype=dtype,
            device_map=device if device != "cpu" else None,
            trust_remote_code=trust_remote_code,
        )
    except (OSError, ValueError) as error:
        raise UserError(_load_failure("model", source, error)) from error
    if device == "cpu":
        model.to(device)
    log.info("loaded %s on %s in %s", source.location, device, dtype)
    return model.eval()


def _load_failure(what: str, source: ModelSource, error: Exception) -> str:
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    hint = "" if source.local else f"; {OFFLINE_HINT}"
    return f"hf model: cannot load the {what} of '{source.location}': {first_line}{hint}"
