"""Batched decoding with the `hf` model: throughput per batch size against batch size 1.

`HFModel` pads a batch on the left and samples each row with its own seed, so a request's
text should not depend on what shares its batch. This script generates the same seeded
requests (code prompts of different lengths, sampled at temperature 0.8, no stop
sequences) with several `batch_size` values on one loaded model, in one run, and prints for
each: new tokens per second, the ratio to batch size 1 measured in the same run, and how
many texts equal batch size 1's. The largest batch runs twice to show run-to-run
repeatability on the same device.

On the CPU (float32) the texts must all be equal; on a GPU in bf16 the shapes of the matrix
products change with the batch, so texts may differ from the first token whose logits
differ in the last bits (docs/models-hf.md, "Reproducibility").

Runs a tiny random Llama on the CPU, and where CUDA is present a random model shaped like
Qwen2.5-0.5B in bf16 (`--large-on-cpu`: that one on the CPU in float32). Usage:
python benchmarks/generation.py [--requests 64] [--max-new-tokens 128] [--batch-sizes 1,8,32,64]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from coral_core.types import GenerationRequest, Prompt, SamplingParams  # noqa: E402
from coral_plugins.models.hf.model import HFModel  # noqa: E402
from models import build_large  # noqa: E402
from tiny_model import build_tiny_model  # noqa: E402


def prompts(count: int) -> list[Prompt]:
    """The first 5..40 lines of standard-library modules: code prompts of varied length."""
    stdlib = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    out = []
    for i, path in enumerate(stdlib[:count]):
        lines = path.read_text(encoding="utf-8", errors="ignore").splitlines()
        out.append(Prompt(instruction="\n".join(lines[:5 + (i * 7) % 36]) + "\n"))
    return out


def measure(model: HFModel, requests: list[GenerationRequest], batch_size: int
            ) -> tuple[float, int, list[str]]:
    model.batch_size = batch_size
    model.generate(requests[:2])  # warm kernels and allocator for this shape, untimed
    _sync()
    started = time.perf_counter()
    generations = [row[0] for row in model.generate(requests)]
    _sync()
    seconds = time.perf_counter() - started
    tokens = sum(g.completion_tokens or 0 for g in generations)
    return seconds, tokens, [g.text for g in generations]


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--max-new-tokens", type=int, default=None,
                        help="default: 128 on a GPU, 32 on the CPU")
    parser.add_argument("--batch-sizes", default=None,
                        help="comma-separated; default 1,8,32,64 on a GPU, 1,4,16 on the CPU")
    parser.add_argument("--large-on-cpu", action="store_true",
                        help="without CUDA, use the 0.5B-shaped model on the CPU in float32")
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    sizes = [int(s) for s in (args.batch_sizes or ("1,8,32,64" if cuda else "1,4,16")).split(",")]
    max_new = args.max_new_tokens or (128 if cuda else 32)
    work = Path(tempfile.mkdtemp(prefix="coral-bench-generation-"))
    try:
        tiny = build_tiny_model(work / "tiny")
        if cuda or args.large_on_cpu:
            device = "cuda" if cuda else "cpu"
            model_dir = build_large(work / "large", tiny, device)
            where = (f"random Qwen2.5-0.5B-shaped model on {torch.cuda.get_device_name()}, bf16"
                     if cuda else "random Qwen2.5-0.5B-shaped model on CPU, float32")
        else:
            device, model_dir = "cpu", tiny
            where = "tiny random Llama (2 layers, hidden 64) on CPU, float32"
        model = HFModel(str(model_dir), device=device)
        requests = [GenerationRequest(p, SamplingParams(temperature=0.8, top_p=0.95, top_k=0,
                                                        max_new_tokens=max_new, stop=(), seed=i))
                    for i, p in enumerate(prompts(args.requests))]
        print(f"{where}; {len(requests)} requests, up to {max_new} new tokens each, "
              f"temperature 0.8, one seed per request")
        base_rate, base_texts = None, None
        for size in sizes:
            seconds, tokens, texts = measure(model, requests, size)
            rate = tokens / seconds
            base_rate = base_rate or rate
            base_texts = base_texts or texts
            same = sum(a == b for a, b in zip(texts, base_texts))
            print(f"  batch_size {size:3d}: {seconds:8.3f} s, {tokens:6d} tokens, "
                  f"{rate:9.1f} tokens/s, {rate / base_rate:5.1f}x batch 1; "
                  f"texts equal to batch 1's: {same}/{len(texts)}")
        _, _, again = measure(model, requests, sizes[-1])
        print(f"  batch_size {sizes[-1]} again: texts equal to its first run: "
              f"{sum(a == b for a, b in zip(again, texts))}/{len(texts)}")
        model.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
