"""The `hf` model object: a transformers causal LM (`--model hf:PATH_OR_ID`) with peft adapters.

Each request's structured prompt is rendered by `prompts.render_prompt` (chat template
when the tokenizer has one), the same function adapter training uses.

Requests are batched with left padding; each row samples with its own knobs and seed (see
`sampling`), so a request's text does not depend on what shares its batch. A request's
`adapter` (a LoRA or DoRA directory) is loaded once into the same base model under a name
and switched on per batch; an LRU bounds how many stay loaded. Importing this module does
not import torch or transformers: the CLI must start fast.

The tokenizer, the chat template (one probe rendering) and the weights are read when the
model object is built, which Coral does before a run directory exists: a broken model
directory, tokenizer, chat template or adapter is refused with one line before anything is
written. An adapter whose base model is not this one is refused unless
`allow_base_mismatch` is set (the option is part of the run's stored configuration).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections import OrderedDict
from contextlib import contextmanager
from itertools import groupby
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from coral_core.config.schema import OptionInvalid
from coral_core.config.settings import DAY
from coral_core.errors import UserError
from coral_core.stops import cut_at_stop
from coral_core.types import Generation, GenerationRequest, Prompt
from coral_core.shown import one_line
from coral_core.fim.canary import SelfTest, check_mode, run_self_test
from coral_core.fim.templates import template_for

from .loading import (
    adapter_base, chat_template_file, check_config, check_device_name, check_dtype,
    load_model, load_tokenizer, quiet_transformers, read_json, resolve_device, resolve_dtype,
    resolve_source, same_base,
)
from .prompts import (
    TemplateLimits, chat_template_of, check_supported, render_prompt, resolve_fim,
    wants_chat_template,
)
from .sampling import RowSpec, build_sampler, build_stopper

log = logging.getLogger(__name__)
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")  # what peft reads


class HFModel:
    """A local or hub transformers model. Options (`[model.options]`):

    device: "auto" (CUDA where present, else CPU), "cpu", "cuda", "cuda:1", "mps".
    dtype: "auto" (bf16 on CUDA, float32 elsewhere), "bfloat16", "float16", "float32".
    batch_size: rows (samples) per forward batch.
    chat_template: None (use it when the tokenizer has one), True (insist) or False (never).
    max_adapters: how many adapters stay loaded (least recently used ones are unloaded).
    revision: hub branch, tag or commit; trust_remote_code: allow a model's own code.
    adapter: an adapter to check and load now (requests name their own adapters too).
    allow_base_mismatch: use adapters made for another base model (refused by default).
    template_timeout, template_max_chars: limits on rendering one prompt with the chat
    template (seconds; characters of rendered text).
    fim_template: the FIM family ("qwen", "deepseek", "starcoder", "codellama",
    "codegemma", "codestral") or a format with {prefix} and {suffix}; by default detected
    from the tokenizer's special tokens. Its sentinels must be single special tokens.
    fim_self_test: "warn" (default), "require" or "off": before the first infilling
    request, three trivial canaries are infilled greedily; a miss is logged, or refused.
    """

    supports_adapters = True  # a request's `adapter` is a peft LoRA/DoRA directory

    @staticmethod
    def train_adapter(*args: Any, **kwargs: Any) -> str:
        """Trains a peft adapter (or finds it in the cache): `adapters.train_adapter`,
        reached by a search through the model's registry entry, never by import."""
        from .adapters import train_adapter

        return str(train_adapter(*args, **kwargs))

    def __init__(
        self,
        target: str,
        *,
        device: str | None = None,
        dtype: str | None = None,
        batch_size: int = 8,
        chat_template: bool | None = None,
        max_adapters: int = 4,
        revision: str | None = None,
        trust_remote_code: bool = False,
        adapter: str | None = None,
        allow_base_mismatch: bool = False,
        template_timeout: float = 10.0,
        template_max_chars: int = 4_000_000,
        fim_template: str | None = None,
        fim_self_test: str = "warn",
    ) -> None:
        _check_values(batch_size, max_adapters, template_timeout, template_max_chars,
                      fim_self_test, fim_template, dtype)
        self.name = f"hf:{target}"
        self.source = resolve_source(target, revision)
        self.batch_size = batch_size
        self.max_adapters = max_adapters
        self.allow_base_mismatch = bool(allow_base_mismatch)
        self.template_limits = TemplateLimits(timeout=float(template_timeout),
                                              max_chars=template_max_chars)
        self._options = (device, dtype, chat_template, trust_remote_code)
        self.fim_option = fim_template or None
        self.fim_self_test_mode = check_mode(fim_self_test)
        self.fim_self_test: SelfTest | None = None  # set by the first infilling request
        self._self_testing = False  # the canaries' own generate() call must not recurse
        self._context_said = False  # whether a budget past the context was reported
        self._model: Any = None
        self._peft: Any = None  # the PeftModel wrapping `_model` once an adapter is loaded
        self._adapters: OrderedDict[str, str] = OrderedDict()  # adapter dir -> peft name
        self.base_loads = 0  # how often the base model was read (1 once built)
        self.adapter_loads = 0  # how often an adapter was read from disk
        self.base_mismatches: list[str] = []  # adapters used although made for another base
        self.load()
        if adapter:
            self._load_adapter(adapter)

    @staticmethod
    def check_options(target: str, options: Mapping[str, Any], here: bool = True) -> None:
        """What building the model would refuse in its options, judged without loading
        weights: by `--dry-run`, and for every search-space value (docs/plugins.md), so
        that no trial of a search fails on its model half-way through. Where the model is
        built `here`, the device is looked up and a `chat_template = true` or a
        `fim_template` is tried on the tokenizer (read once per model and revision); where
        it is not (Ray actors on a cluster's GPU machines), only what holds on every machine."""
        given = {k: v for k, v in options.items() if k in _CHECKED}
        _check_values(**{k: given.get(k, default) for k, default in _CHECKED.items()})
        device, revision = options.get("device"), options.get("revision")
        revision = revision if isinstance(revision, str) and revision else None
        if isinstance(device, str):
            check_device_name(device)
        if not here:
            return
        if isinstance(device, str) and device not in ("", "auto"):
            resolve_device(device)
        try:  # a path that is no model (a search's value too), said at model.spec
            resolve_source(target, None)
        except UserError as error:
            raise OptionInvalid(("model", "spec"), str(error)) from None
        if revision:  # a revision for a local folder: said at the options
            resolve_source(target, revision)
        chat, fim = options.get("chat_template"), options.get("fim_template")
        if chat is True or (isinstance(fim, str) and fim):
            trust = options.get("trust_remote_code") is True
            tokenizer = _tokenizer(target, revision, trust)
            wants_chat_template(tokenizer, chat if chat is True else None)
            if isinstance(fim, str) and fim:
                resolve_fim(tokenizer, fim, f"hf:{target}")

    @staticmethod
    def check_adapter(target: str, adapter: str, here: bool = True) -> None:
        """An adapter path that cannot be one (no adapter_config.json or no weights), judged
        without loading: a search over `model.adapter` failed at the trial that used it.
        Not judged on a machine that will not read it (`here` False: Ray actors do)."""
        if here:
            try:
                _adapter_files(adapter)
            except UserError as error:  # said at the file and line (or flag) that set it
                raise OptionInvalid(("model", "adapter"), str(error)) from None

    # -- loading ----------------------------------------------------------------------
    def load(self) -> None:
        """Read tokenizer and weights, and try the chat template (done when the object is
        built; again after `close()`)."""
        if self._model is not None:
            return
        device_option, dtype_option, chat_option, trust = self._options
        self.device = resolve_device(device_option)
        self.dtype = resolve_dtype(dtype_option, self.device)
        check_config(self.source)
        self.tokenizer = load_tokenizer(self.source, trust_remote_code=trust)
        self.chat = wants_chat_template(self.tokenizer, chat_option)
        self.fim, self.fim_stop_ids = resolve_fim(self.tokenizer, self.fim_option, self.name)
        if self.chat:  # one rendering now, so that a broken template fails before a run
            chat_template_of(self.tokenizer, chat_template_file(self.source),
                             self.template_limits)
            render_prompt(self.tokenizer, Prompt("Coral checks the chat template."), True,
                          self.name)
        self._model = load_model(
            self.source, device=self.device, dtype=self.dtype, trust_remote_code=trust
        )
        self.base_loads += 1
        rows = self._model.get_input_embeddings().num_embeddings
        if len(self.tokenizer) > rows:  # an id past the table fails mid-generation
            self._model = None
            raise UserError(f"hf model: the tokenizer of {self.name} has "
                            f"{len(self.tokenizer)} tokens, but the model's embedding has "
                            f"{rows} rows (a tokenizer of another model?)")
        self.eos_ids = _eos_ids(self._model, self.tokenizer) | self.fim_stop_ids

    def check_prompt(self, prompt: Prompt) -> None:
        """Refuse now, before the run directory exists, a kind of prompt this model cannot
        render (an infilling prompt for a tokenizer without FIM tokens), and under
        `fim_self_test = "require"` a template that fails the canaries (they ran at the
        first batch, inside the run)."""
        check_supported(prompt, self.name, self.fim)
        if prompt.kind == "infill" and self.fim_self_test_mode == "require":
            self._self_test()

    @property
    def base_model(self) -> Any:
        """The transformers model that every adapter is applied to (loaded once)."""
        self.load()
        return self._model

    @contextmanager
    def _using(self, adapter: str | None) -> Iterator[Any]:
        """The module to generate with: the base model, or it with `adapter` switched on."""
        if adapter is None:
            if self._peft is None:
                yield self._model
            else:
                with self._peft.disable_adapter():
                    yield self._peft
            return
        name = self._load_adapter(adapter)  # creates `_peft` on first use
        self._peft.set_adapter(name)
        yield self._peft

    def prepare_adapter(self, adapter: str) -> None:
        """Check and load `adapter` now (a run's configured adapter, before the run starts):
        a broken adapter, or one made for another base model, is a UserError here."""
        self._load_adapter(adapter)

    def _load_adapter(self, adapter: str) -> str:
        path = str(Path(adapter).expanduser().resolve())
        if path in self._adapters:
            self._adapters.move_to_end(path)
            return self._adapters[path]
        _adapter_files(adapter)
        self._check_adapter_base(Path(path))
        from peft import PeftModel, PeftType

        kind = read_json(Path(path) / "adapter_config.json").get("peft_type")
        if kind not in {member.value for member in PeftType}:  # else a bare KeyError
            raise UserError(f"hf model: adapter {adapter}: adapter_config.json's peft_type "
                            f"{one_line(repr(kind))} is not one peft knows (LORA, ...)")

        name = "adapter_" + hashlib.sha256(path.encode()).hexdigest()[:12]
        try:
            # low_cpu_mem_usage: build the adapter's tensors empty, since the file fills them
            with quiet_transformers():
                if self._peft is None:
                    self._peft = PeftModel.from_pretrained(
                        self._model, path, adapter_name=name, low_cpu_mem_usage=True
                    )
                    self._peft.eval()
                else:
                    self._peft.load_adapter(path, adapter_name=name, low_cpu_mem_usage=True)
        except Exception as error:  # peft, safetensors, torch: all mean "unusable adapter"
            raise UserError(f"hf model: cannot load adapter {adapter}: "
                            f"{type(error).__name__}: {one_line(str(error))}") from None
        self.adapter_loads += 1
        self._adapters[path] = name
        self._peft.set_adapter(name)  # never unload the active adapter
        while len(self._adapters) > self.max_adapters:
            old_path, old_name = self._adapters.popitem(last=False)
            self._peft.delete_adapter(old_name)
            log.debug("unloaded adapter %s", old_path)
        log.info("loaded adapter %s as %s", path, name)
        return name

    def _check_adapter_base(self, path: Path) -> None:
        """Refuse an adapter made for another base model (unless allowed, with a warning).

        Coral's own adapters name the base model's content digest (`coral_adapter.json`);
        others name a path or hub id in adapter_config.json, compared by path and name.
        """
        from .adapter_cache import model_identity

        named, identity = adapter_base(path)
        mismatch = ""
        if identity is not None:
            mine = model_identity(self.source)
            if identity != mine:
                mismatch = f"it was trained on {one_line(identity)}, this model is {mine}"
        elif named is not None and not same_base(named, self.source):
            mismatch = f"its adapter_config.json names base model {one_line(named)!r}"
        elif named is None:
            log.warning("adapter %s names no base model; it cannot be checked", path)
        if not mismatch:
            return
        if not self.allow_base_mismatch:
            raise UserError(f"hf model: adapter {path} was made for another base model than "
                            f"{self.source.location} ({mismatch}); set allow_base_mismatch = "
                            "true in [model.options] to use it anyway")
        log.warning("adapter %s was made for another base model (%s); used because "
                    "allow_base_mismatch is set", path, mismatch)
        self.base_mismatches.append(str(path))

    def close(self) -> None:
        """Drop the weights (the runner calls this when a run ends); `load()` reads them again."""
        self._model = self._peft = None
        self._adapters.clear()
        if getattr(self, "tokenizer", None) is not None and self.chat:
            chat_template_of(self.tokenizer).close()  # its helper process
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    @property
    def loaded_adapters(self) -> tuple[str, ...]:
        """Adapter directories currently loaded, least recently used first."""
        return tuple(self._adapters)

    # -- generation -------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Generation]]:
        """`request.params.n` generations per request, in request order."""
        for request in requests:  # refused before any weights are read
            check_supported(request.prompt, self.name, self.fim)
        self.load()
        if not self._self_testing and any(r.prompt.kind == "infill" for r in requests):
            self._self_test()
        results: list[list[Generation]] = [[] for _ in requests]
        encoded = [self._encode(request.prompt) for request in requests]
        rows = [(r, j) for r, request in enumerate(requests) for j in range(request.params.n)]
        adapter_of = [request.adapter or None for request in requests]
        by_adapter = sorted(rows, key=lambda row: adapter_of[row[0]] or "")
        done: dict[tuple[int, int], Generation] = {}
        for adapter, group in groupby(by_adapter, key=lambda row: adapter_of[row[0]]):
            ordered = sorted(group, key=lambda row: len(encoded[row[0]]))  # less padding
            with self._using(adapter) as module:
                for start in range(0, len(ordered), self.batch_size):
                    batch = ordered[start:start + self.batch_size]
                    outputs = self._generate_batch(module, requests, encoded, batch)
                    done.update(zip(batch, outputs))
        for r, j in rows:
            results[r].append(done[(r, j)])
        return results

    def _self_test(self) -> None:
        """The FIM canaries (plugins/datasets/fim/canary.py), once per model object."""
        if self.fim_self_test is None and self.fim_self_test_mode == "off":
            self.fim_self_test = SelfTest(self.fim.name, (), ())
        if self.fim_self_test is None:
            self._self_testing = True
            try:
                self.fim_self_test = run_self_test(self.generate, self.fim.name)
            finally:
                self._self_testing = False
            if self.fim_self_test.ok:
                log.info(self.fim_self_test.summary(self.name))
            elif self.fim_self_test_mode != "require":
                log.warning(self.fim_self_test.summary(self.name))
        if not self.fim_self_test.ok and self.fim_self_test_mode == "require":
            raise UserError(self.fim_self_test.summary(self.name)
                            + " (refused: fim_self_test = \"require\")")

    def _encode(self, prompt: Prompt) -> list[int]:
        """The prompt's token ids, as `prompts.render_prompt` renders it."""
        text, special = render_prompt(self.tokenizer, prompt, self.chat, self.name, self.fim)
        return self.tokenizer(text, add_special_tokens=special)["input_ids"]

    def _room(self, width: int, wanted: int) -> int:
        """New tokens a batch may make: `wanted`, or what is left of the model's context
        after a `width`-token prompt (past it a model's output is noise, and a budget of a
        million tokens ran for minutes), said once."""
        context = _context(self._model)
        if context is None or width + wanted <= context:
            return wanted
        room = max(context - width, 0)
        if not self._context_said:
            self._context_said = True
            log.warning("hf model: %s has %d positions: after a %d-token prompt, generation "
                        "stops at %d new tokens, not max_new_tokens %d", self.name, context,
                        width, room, wanted)
        return room

    def _generate_batch(
        self, module: Any, requests: Sequence[GenerationRequest],
        encoded: Sequence[list[int]], batch: Sequence[tuple[int, int]],
    ) -> list[Generation]:
        import torch
        from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

        specs = [_row_spec(requests[r], j) for r, j in batch]
        width = max(len(encoded[r]) for r, _ in batch)
        room = self._room(width, max(s.max_new_tokens for s in specs))
        if room == 0:  # the prompt fills the model's context: nothing can follow it
            return [Generation(text="", prompt_tokens=len(encoded[r]), completion_tokens=0,
                               seconds=0.0, finish_reason="length") for r, _ in batch]
        pad = self.tokenizer.pad_token_id
        ids = [[pad] * (width - len(encoded[r])) + encoded[r] for r, _ in batch]
        mask = [[0] * (width - len(encoded[r])) + [1] * len(encoded[r]) for r, _ in batch]
        input_ids = torch.tensor(ids, device=self.device)
        attention_mask = torch.tensor(mask, device=self.device)
        pad_lengths = [width - len(encoded[r]) for r, _ in batch]
        sampler = build_sampler(specs, pad_lengths, self.device)
        stopper = build_stopper(self.tokenizer, specs, width, self.eos_ids)
        config = GenerationConfig(
            do_sample=False, num_beams=1, temperature=1.0, top_p=1.0, top_k=50,
            repetition_penalty=1.0, max_new_tokens=room,
            pad_token_id=pad, eos_token_id=sorted(self.eos_ids),
        )
        started = time.perf_counter()
        with torch.inference_mode():
            output = module.generate(
                input_ids=input_ids, attention_mask=attention_mask, generation_config=config,
                logits_processor=LogitsProcessorList([sampler]),
                stopping_criteria=StoppingCriteriaList([stopper]),
            )
        seconds = (time.perf_counter() - started) / len(batch)
        generated = output[:, width:].tolist()
        results = []
        for i, spec in enumerate(specs):
            end = stopper.ended_at[i] or len(generated[i])
            text = self.tokenizer.decode(generated[i][:end], skip_special_tokens=True)
            text, _ = cut_at_stop(text, spec.stop)
            results.append(Generation(
                text=text, prompt_tokens=width - pad_lengths[i],
                completion_tokens=end, seconds=seconds, finish_reason=stopper.reasons[i],
            ))
        return results


_CHECKED = {"batch_size": 8, "max_adapters": 4, "template_timeout": 10.0,
            "template_max_chars": 4_000_000, "fim_self_test": "warn", "fim_template": None,
            "dtype": None}  # the options _check_values judges, with their defaults


def _check_values(batch_size: Any, max_adapters: Any, template_timeout: Any,
                  template_max_chars: Any, fim_self_test: Any, fim_template: Any,
                  dtype: Any) -> None:
    """Option values out of bounds (a value of the wrong type is left to the type check,
    which names the type)."""
    def number(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    def refuse(name: str, why: str) -> OptionInvalid:  # said at the key's line
        return OptionInvalid(("model", "options", name), f"hf model: {name} {why}")

    for name, value in (("batch_size", batch_size), ("max_adapters", max_adapters)):
        if number(value) and value < 1:
            raise refuse(name, f"must be at least 1, not {value!r}")
    for name, value in (("template_timeout", template_timeout),
                        ("template_max_chars", template_max_chars)):
        if number(value) and not value > 0:
            raise refuse(name, f"must be > 0, not {value!r}")
    if number(template_timeout) and not template_timeout <= DAY:
        # a larger wait overflowed select() at the first prompt, with a traceback
        raise refuse("template_timeout", f"must be at most {DAY} seconds (a day), not "
                     f"{template_timeout!r}")
    if isinstance(fim_self_test, str):
        check_mode(fim_self_test)
    if isinstance(fim_template, str) and fim_template:
        template_for(fim_template)
    if isinstance(dtype, str):
        check_dtype(dtype)


def _adapter_files(adapter: str) -> None:
    path = Path(adapter).expanduser().resolve()
    if not (path / "adapter_config.json").is_file():
        raise UserError(f"hf model: {adapter} is not a peft adapter (no adapter_config.json)")
    if not any((path / name).is_file() for name in ADAPTER_WEIGHTS):
        # else peft takes the folder for a Hub id and says so
        raise UserError(f"hf model: adapter {adapter} has no weights (no "
                        f"{' or '.join(ADAPTER_WEIGHTS)})")


@functools.lru_cache(maxsize=8)
def _tokenizer(target: str, revision: str | None, trust: bool) -> Any:
    return load_tokenizer(resolve_source(target, revision), trust_remote_code=trust)


def _context(model: Any) -> int | None:
    """The positions the model was made for (None where its configuration does not say)."""
    found = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return found if isinstance(found, int) and not isinstance(found, bool) and found > 0 \
        else None


def _row_spec(request: GenerationRequest, sample_index: int) -> RowSpec:
    p = request.params
    return RowSpec(
        temperature=p.temperature, top_p=p.top_p, top_k=p.top_k,
        repetition_penalty=p.repetition_penalty, max_new_tokens=p.max_new_tokens,
        stop=tuple(p.stop), seed=p.seed, sample_index=sample_index,
    )


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    """EOS ids of the generation config (may be several, e.g. end-of-turn) and tokenizer."""
    found = model.generation_config.eos_token_id
    ids = set(found if isinstance(found, list) else [] if found is None else [found])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return ids
