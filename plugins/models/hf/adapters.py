"""Training a LoRA or DoRA adapter for a base model, cached by content (`train_adapter`).

This is the entry point the evolution search calls for each genome's heavy genes. The data
set renders each example (`TrainingExample.prompt`, in its evaluation prompt's shape, and
`answer`); here the prompt goes through `prompts.render_prompt`, the function `HFModel`
renders prompts with at generation time, and the loss is taken on the answer tokens only
(the answer, the chat template's closing of the assistant turn where there is one, and EOS).
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from coral_core.errors import UserError
from coral_core.types import AdapterGenes, TrainingExample

from coral_core.files.atomic import publish_dir
from coral_core.files.scratch import make_scratch, remove_tree
from coral_core.seeds import numpy_seed

from .adapter_cache import (
    cached_adapter, data_digest, default_cache_dir, key_components, key_digest, key_lock,
    model_identity,
)
from .loading import (
    ModelSource, chat_template_file, load_model, load_tokenizer, resolve_device, resolve_dtype,
    resolve_source,
)
from .prompts import (
    chat_template_of, check_supported, render_answer, render_prompt, wants_chat_template,
)

log = logging.getLogger(__name__)

RENDER_FORMAT = 2  # bump when how an example becomes tokens changes (it is in the key)
ADAPTER_KINDS = ("lora", "dora")


@dataclass(frozen=True)
class TrainingSettings:
    """Hyperparameters that change the trained adapter (all are part of the cache key).

    `steps` > 0 fixes the number of optimizer steps; otherwise `epochs` passes are made.
    """

    steps: int = 0
    epochs: float = 3.0
    learning_rate: float = 2e-4
    batch_size: int = 8
    max_length: int = 1024
    chat_template: bool | None = None
    render_format: int = RENDER_FORMAT


def train_adapter(
    base_model: str,
    genes: AdapterGenes,
    examples: Sequence[TrainingExample],
    *,
    steps: int = 0,
    epochs: float = 3.0,
    learning_rate: float = 2e-4,
    batch_size: int = 8,
    max_length: int = 1024,
    seed: int = 0,
    cache_dir: str | Path | None = None,
    chat_template: bool | None = None,
    revision: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> Path:
    """Train (or find in the cache) the adapter for these inputs; return its directory.

    The directory holds `adapter_model.safetensors`, `adapter_config.json` and
    `coral_adapter.json` (key components, per-step losses, versions). `on_step(step, loss)`
    is called during training only, never on a cache hit. `device`/`dtype` pick where to
    train and are not part of the key.
    """
    settings = TrainingSettings(
        steps, epochs, learning_rate, batch_size, max_length, chat_template, RENDER_FORMAT
    )
    plan = plan_training(base_model, genes, examples, settings, seed, revision)
    cache = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    key = plan.key
    with key_lock(cache, key):
        hit = cached_adapter(cache, key)
        if hit is not None:
            log.info("adapter cache hit %s", hit)
            return hit
        staging = Path(make_scratch(".staging-", str(cache)))  # a killed run's goes next time
        try:
            record = _train(plan, device, dtype, staging, on_step)
            record.update(key=key, components=plan.components)
            text = json.dumps(record, indent=2, sort_keys=True)
            (staging / "coral_adapter.json").write_text(text)
        except BaseException:
            remove_tree(staging)
            raise
        entry = publish_dir(staging, cache / key)
    log.info("trained adapter %s in %.1f s", entry, record["seconds"])
    return entry


@dataclass(frozen=True)
class TrainingPlan:
    """Everything one training run uses, with the cache key it is stored under."""

    source: ModelSource
    genes: AdapterGenes
    examples: tuple[TrainingExample, ...]
    settings: TrainingSettings
    seed: int
    components: dict[str, Any]
    key: str


def plan_training(
    base_model: str, genes: AdapterGenes, examples: Sequence[TrainingExample],
    settings: TrainingSettings, seed: int = 0, revision: str | None = None,
) -> TrainingPlan:
    """Validate the inputs and compute the cache key (reads the base model's files, no weights
    are loaded). A hub id is pinned to the commit it resolves to, which the key names."""
    if genes.kind.lower() not in ADAPTER_KINDS:
        raise UserError(f"adapter kind must be one of {ADAPTER_KINDS}, not '{genes.kind}'")
    if not examples:
        raise UserError("adapter training needs at least one training example")
    for example in examples:
        check_supported(example.prompt, f"hf:{base_model}")
    source = resolve_source(base_model, revision)
    identity = model_identity(source)
    if not source.local:
        source = ModelSource(source.location, False, identity.rsplit("@", 1)[1])
    components = key_components(identity, genes, data_digest(examples), asdict(settings), seed)
    return TrainingPlan(
        source, genes, tuple(examples), settings, seed, components, key_digest(components)
    )


def _train(
    plan: TrainingPlan, device: str | None, dtype: str | None, out: Path,
    on_step: Callable[[int, float], None] | None,
) -> dict[str, Any]:
    import peft
    import torch
    import transformers
    from peft import LoraConfig, get_peft_model
    from transformers import (
        DataCollatorForSeq2Seq, PrinterCallback, Trainer, TrainerCallback, TrainingArguments,
        set_seed,
    )

    source, genes, settings = plan.source, plan.genes, plan.settings
    seed = numpy_seed(plan.seed)  # set_seed seeds NumPy's legacy RNG: 32 bits
    started = time.perf_counter()
    set_seed(seed)  # LoRA init and dropout draw from the global RNGs
    where = resolve_device(device)
    precision = resolve_dtype(dtype, where)
    tokenizer = load_tokenizer(source)
    tokenizer.padding_side = "right"
    chat = wants_chat_template(tokenizer, settings.chat_template)
    if chat:  # rendered in a helper process under limits; name the file in errors
        chat_template_of(tokenizer, chat_template_file(source))
    try:
        rows = [tokenize_example(tokenizer, example, chat, settings.max_length,
                                 f"hf:{source.location}") for example in plan.examples]
    finally:
        if chat:
            chat_template_of(tokenizer).close()
    rows = [row for row in rows if row is not None]
    if not rows:
        raise UserError(f"no training example fits in max_length={settings.max_length} tokens")
    model = load_model(source, device=where, dtype=precision)
    model.config.use_cache = False
    config = LoraConfig(
        r=genes.rank, lora_alpha=genes.alpha, lora_dropout=genes.dropout,
        target_modules=sorted(set(genes.target_modules)), use_dora=genes.kind.lower() == "dora",
        task_type="CAUSAL_LM",
    )
    try:
        model = get_peft_model(model, config)
    except ValueError as error:  # e.g. a target module the model does not have
        raise UserError(f"cannot build the {genes.kind} adapter: {error}") from error

    losses: list[float] = []

    class RecordLoss(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))
                if on_step is not None:
                    on_step(state.global_step, losses[-1])

    with tempfile.TemporaryDirectory() as scratch:
        arguments = TrainingArguments(
            output_dir=scratch, max_steps=settings.steps if settings.steps > 0 else -1,
            num_train_epochs=settings.epochs, learning_rate=settings.learning_rate,
            per_device_train_batch_size=settings.batch_size, seed=seed, data_seed=seed,
            logging_steps=1, logging_strategy="steps", save_strategy="no", report_to="none",
            disable_tqdm=True, use_cpu=where == "cpu", bf16=precision == torch.bfloat16,
            fp16=precision == torch.float16, dataloader_num_workers=0,
            remove_unused_columns=False,
        )
        trainer = Trainer(
            model=model, args=arguments, train_dataset=rows, callbacks=[RecordLoss()],
            data_collator=DataCollatorForSeq2Seq(tokenizer, padding=True, label_pad_token_id=-100),
        )
        trainer.remove_callback(PrinterCallback)  # losses go to the record and `on_step`
        trainer.train()
    model.save_pretrained(out, safe_serialization=True)
    return {
        "losses": losses, "seconds": round(time.perf_counter() - started, 3),
        "examples": len(rows), "device": where, "dtype": str(precision).removeprefix("torch."),
        "versions": {
            "torch": torch.__version__, "transformers": transformers.__version__,
            "peft": peft.__version__,
        },
    }


def tokenize_example(
    tokenizer: Any, example: TrainingExample, chat: bool, max_length: int, model: str = "hf",
) -> dict[str, list[int]] | None:
    """input_ids/labels with the prompt labelled -100, so only the answer is learned.

    The prompt is rendered by `render_prompt` and tokenized alone, exactly as `HFModel`
    tokenizes it at generation time, and the answer (`render_answer`) apart: the model
    learns to continue the prompt. None when no answer token fits.
    """
    prompt_text, special = render_prompt(tokenizer, example.prompt, chat, model)
    answer_text = render_answer(tokenizer, example.prompt, example.answer, chat, model)
    prompt = tokenizer(prompt_text, add_special_tokens=special)["input_ids"]
    answer = tokenizer(answer_text, add_special_tokens=False)["input_ids"]
    eos = tokenizer.eos_token_id
    if eos is not None and eos not in answer:  # a chat template may end the turn with it
        answer.append(eos)
    ids = (prompt + answer)[:max_length]
    if len(ids) <= len(prompt):
        log.warning("training example %s does not fit in %d tokens", example.task_id, max_length)
        return None
    labels = [-100] * len(prompt) + ids[len(prompt):]
    return {"input_ids": ids, "attention_mask": [1] * len(ids), "labels": labels}
