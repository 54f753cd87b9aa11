"""Build a tiny causal LM on local disk: no download, seconds on CPU.

A byte-level BPE tokenizer is trained with `tokenizers` on Python source that every
machine has (the standard library), and a 2-layer Llama with random weights is saved next
to it. Used by the model tests, the `transformers serve` fixture and benchmarks/models.py.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sysconfig
import tempfile
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def _corpus(limit_bytes: int = 2_000_000) -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts, total = [], 0
    for path in sorted(stdlib.glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="ignore")
        texts.append(text)
        total += len(text)
        if total > limit_bytes:
            break
    return texts


def build_tiny_model(
    directory: str | os.PathLike[str],
    *,
    vocab_size: int = 512,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 4,
    chat_template: bool = False,
    seed: int = 0,
) -> Path:
    """Write tokenizer + random-weight Llama to `directory` (reused if already there)."""
    directory = Path(directory)
    if (directory / "config.json").exists():
        return directory
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    special = ["<|endoftext|>", "<|pad|>", "<|user|>", "<|assistant|>", "<|system|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|endoftext|>", bos_token="<|endoftext|>",
        pad_token="<|pad|>", unk_token="<|endoftext|>",
    )
    if chat_template:
        fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(directory)

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(fast), hidden_size=hidden_size, intermediate_size=hidden_size * 2,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
        max_position_embeddings=2048, bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(directory, safe_serialization=True)
    (directory / "coral_tiny_model.json").write_text(json.dumps({"seed": seed}))
    return directory


if __name__ == "__main__":
    import sys

    print(build_tiny_model(sys.argv[1] if len(sys.argv) > 1 else "tiny-model"))


def build_tiny_fim_model(directory: str | os.PathLike[str], sentinels: tuple[str, ...],
                         seed: int = 0) -> Path:
    """The tiny model with a FIM family's sentinels added as special tokens (embeddings
    resized): an untrained model that Coral's FIM templates accept."""
    directory = Path(directory)
    if (directory / "coral_tiny_fim.json").exists():
        return directory
    from transformers import AutoModelForCausalLM, AutoTokenizer

    build_tiny_model(directory, seed=seed)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    tokenizer.add_special_tokens({"additional_special_tokens": list(sentinels)})
    model = AutoModelForCausalLM.from_pretrained(directory)
    model.resize_token_embeddings(len(tokenizer))
    tokenizer.save_pretrained(directory)
    model.save_pretrained(directory, safe_serialization=True)
    (directory / "coral_tiny_fim.json").write_text(json.dumps({"sentinels": sentinels}))
    return directory


def shared_tiny_model(cache_dir: str | os.PathLike[str], chat_template: bool = False) -> Path:
    """The tiny model (with or without its chat template), built once for every test that
    needs it and kept in `cache_dir` (pytest's cache) across sessions; its folder name holds
    a digest of this file, so a change here builds it afresh. Test processes running in
    parallel wait for one build (a lock file); a build is renamed into place whole, so an
    interrupted one is never reused. Tests must not change it: copy it to change it."""
    digest = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
    root = Path(cache_dir)
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"tiny-{'chat' if chat_template else 'base'}-{digest}"
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "coral_tiny_model.json").exists():
            scratch = Path(tempfile.mkdtemp(dir=root))
            build_tiny_model(scratch / "model", chat_template=chat_template)
            shutil.rmtree(target, ignore_errors=True)
            (scratch / "model").rename(target)
            shutil.rmtree(scratch, ignore_errors=True)
    return target
