"""Switching among K adapters: one base model with adapter loads vs a base-model reload each.

`HFModel` loads each adapter once into the same base model and switches by name; the naive
alternative builds a fresh model (base weights + adapter) for every adapter. Both ways run
the same K generations in one process, after one untimed load that warms the page cache,
so the difference is the cost of reading and placing the base weights. A third pass over
the same adapters shows the cost once they are all loaded (LRU hits: no loads at all).

Runs a tiny random Llama on the CPU, and where CUDA is present also a random model shaped
like Qwen2.5-0.5B (494M parameters) in bf16 (`--large-on-cpu` runs that one on the CPU in
float32 where there is no GPU). Usage: python benchmarks/models.py [--k 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from coral_core.types import GenerationRequest, Prompt, SamplingParams  # noqa: E402
from coral_plugins.models.hf.model import HFModel  # noqa: E402
from tiny_model import build_tiny_model  # noqa: E402

PROMPT = Prompt(instruction="def gcd(a, b):\n    if b == 0:\n        return a\n")
ALL_PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass(frozen=True)
class Timing:
    reload_seconds: float
    reload_base_loads: int
    adapter_seconds: float
    base_load_seconds: float
    adapter_loads: int
    revisit_seconds: float
    revisit_loads: int


def make_adapters(model_dir: Path, out: Path, k: int, rank: int) -> list[Path]:
    """K LoRA adapters with random (non-zero) weights on every projection."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    config = LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=ALL_PROJECTIONS,
                        task_type="CAUSAL_LM")
    model = get_peft_model(base, config)
    paths = []
    for i in range(k):
        generator = torch.Generator().manual_seed(i)
        with torch.no_grad():
            for name, weight in model.named_parameters():
                if "lora_" in name:
                    weight.normal_(0.0, 0.02, generator=generator)
        paths.append(out / f"adapter_{i}")
        model.save_pretrained(paths[-1], safe_serialization=True)
    return paths


def _free() -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def time_switching(
    model_dir: Path, adapters: list[Path], device: str, max_new: int, repeat: int
) -> Timing:
    """Each way `repeat` times; the fastest round of each is kept (the least disturbed)."""
    params = SamplingParams(temperature=0.0, max_new_tokens=max_new)
    requests = [GenerationRequest(PROMPT, params, adapter=str(path)) for path in adapters]
    options = dict(device=device, max_adapters=len(adapters))
    HFModel(str(model_dir), **options).generate(requests[:1])  # warm caches, untimed
    _free()
    rounds = [_round(model_dir, requests, options) for _ in range(repeat)]
    return Timing(*(min(values) if isinstance(values[0], float) else values[0]
                    for values in zip(*rounds)))


def _round(model_dir: Path, requests: list[GenerationRequest], options: dict) -> tuple:
    reload_seconds, reloads = 0.0, 0
    for request in requests:
        started = time.perf_counter()
        fresh = HFModel(str(model_dir), **options)
        fresh.generate([request])
        reload_seconds += time.perf_counter() - started
        reloads += fresh.base_loads
        del fresh
        _free()  # untimed: the other way frees nothing either

    started = time.perf_counter()
    model = HFModel(str(model_dir), **options)  # the base model loads when it is built
    base_load = time.perf_counter() - started
    started = time.perf_counter()
    for request in requests:
        model.generate([request])
    adapter_seconds = time.perf_counter() - started
    loads = model.adapter_loads
    started = time.perf_counter()
    for request in requests:
        model.generate([request])
    revisit = time.perf_counter() - started
    assert model.base_loads == 1 and model.adapter_loads == loads == len(requests)
    del model
    _free()
    return reload_seconds, reloads, adapter_seconds, base_load, loads, revisit, 0


def report(title: str, k: int, timing: Timing) -> None:
    print(title)
    print(f"  reload base + adapter per switch:  {timing.reload_seconds:8.3f} s for {k} switches "
          f"({timing.reload_seconds / k:.3f} s each; {timing.reload_base_loads} base loads)")
    print(f"  one base, load adapter per switch: {timing.adapter_seconds:8.3f} s for {k} switches "
          f"({timing.adapter_seconds / k:.3f} s each; {timing.adapter_loads} adapter loads, "
          f"1 base load of {timing.base_load_seconds:.3f} s before)")
    print(f"  switching back, adapters loaded:   {timing.revisit_seconds:8.3f} s for {k} switches "
          f"({timing.revisit_loads} loads)")
    ratio = timing.reload_seconds / timing.adapter_seconds
    print(f"  ratio reload / adapter load: {ratio:.1f}x "
          f"(counting the one base load too: "
          f"{timing.reload_seconds / (timing.adapter_seconds + timing.base_load_seconds):.1f}x)")
    reload_cost = (timing.reload_seconds - timing.revisit_seconds) / k
    adapter_cost = (timing.adapter_seconds - timing.revisit_seconds) / k
    print(f"  cost of a switch beyond generating: reload {reload_cost:.3f} s, "
          f"adapter load {adapter_cost:.3f} s ({reload_cost / max(adapter_cost, 1e-9):.1f}x)")


def build_large(directory: Path, tokenizer_dir: Path, device: str) -> Path:
    """A random model shaped like Qwen2.5-0.5B, saved in bf16 (tokenizer from the tiny one)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    tokenizer.save_pretrained(directory)
    config = Qwen2Config(
        vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
        num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
        rope_theta=1_000_000.0, tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    params = sum(p.numel() for p in model.parameters())
    model.save_pretrained(directory, safe_serialization=True)
    print(f"built a random Qwen2-shaped model: {params / 1e6:.0f}M parameters, bf16")
    del model
    _free()
    return directory


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=4, help="adapters to switch among")
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the fastest is shown")
    parser.add_argument("--large-on-cpu", action="store_true",
                        help="without CUDA, run the 0.5B comparison on the CPU in float32")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="coral-bench-models-"))
    try:
        tiny = build_tiny_model(work / "tiny")
        adapters = make_adapters(tiny, work / "tiny-adapters", args.k, rank=8)
        timing = time_switching(tiny, adapters, "cpu", args.max_new_tokens, args.repeat)
        report(f"tiny random Llama (2 layers, hidden 64) on CPU, float32, K={args.k}, "
               f"{args.max_new_tokens} new tokens per switch", args.k, timing)
        if torch.cuda.is_available():
            device, where = "cuda", f"{torch.cuda.get_device_name()}, bf16"
        elif args.large_on_cpu:
            device, where = "cpu", "CPU, float32"
        else:
            print("no CUDA device: the 0.5B bf16 comparison is skipped "
                  "(run this script on a GPU machine, or pass --large-on-cpu)")
            return
        large = build_large(work / "large", tiny, device)
        adapters = make_adapters(large, work / "large-adapters", args.k, rank=16)
        timing = time_switching(large, adapters, device, args.max_new_tokens, args.repeat)
        report(f"random Qwen2.5-0.5B-shaped model on {where}, K={args.k}, "
               f"{args.max_new_tokens} new tokens per switch", args.k, timing)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
