"""`hf` models from hostile directories: every failure is one line naming the file and the
reason, before a run directory exists; chat templates render under time, memory and size
limits; an adapter made for another base model is refused unless allowed.

The directories are copies of the tiny local model (tests/tiny_model.py) with one thing
broken each. Nothing here downloads anything.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import shutil
import time
from pathlib import Path

import pytest

from coral_core.errors import UserError
from coral_core.types import GenerationRequest, Prompt, SamplingParams
from hostile_cli import base_env, run_measured

from conftest import skip_without

skip_without("torch", "peft")

from coral_plugins.models.hf.model import HFModel  # noqa: E402
from coral_plugins.models.hf.prompts import TemplateLimits, chat_template_of  # noqa: E402
from tiny_model import shared_tiny_model  # noqa: E402


class _Evil:
    """Unpickling this would run a shell command: torch's weights_only loader must refuse."""

    def __reduce__(self):
        return (os.system, ("touch /tmp/coral-pwned-by-pickle",))


@pytest.fixture(scope="module")
def tiny(tiny_models) -> Path:
    return shared_tiny_model(tiny_models, chat_template=True)


def _edit_json(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def _template(text: str):
    return lambda d: (d / "chat_template.jinja").write_text(text)


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _pickle_weights(d: Path) -> None:
    (d / "model.safetensors").unlink()
    with open(d / "pytorch_model.bin", "wb") as handle:
        pickle.dump({"model.embed_tokens.weight": _Evil()}, handle)


def _drop_embeddings(d: Path) -> None:
    from safetensors.torch import load_file, save_file

    weights = load_file(d / "model.safetensors")
    save_file({k: v for k, v in weights.items() if "embed" not in k and "lm_head" not in k},
              d / "model.safetensors")
    _edit_json(d / "config.json", vocab_size=10 ** 9)


def _drop_layer(d: Path) -> None:
    from safetensors.torch import load_file, save_file

    weights = load_file(d / "model.safetensors")
    save_file({k: v for k, v in weights.items() if ".layers.1." not in k},
              d / "model.safetensors")


def _shrink_embeddings(d: Path) -> None:
    """An embedding table smaller than the tokenizer (the tokenizer of another model)."""
    from safetensors.torch import load_file, save_file

    weights = load_file(d / "model.safetensors")
    rows = weights["model.embed_tokens.weight"].shape[0] // 2
    save_file({k: (v[:rows].contiguous() if "embed_tokens" in k or "lm_head" in k else v)
               for k, v in weights.items()}, d / "model.safetensors")
    _edit_json(d / "config.json", vocab_size=rows)


BREAKAGES = {
    "layer_missing": (_drop_layer, ("lack", "model.layers.1.", "they would be random")),
    "tokenizer_too_big": (_shrink_embeddings, ("tokens, but the model's embedding has",)),
    # name: (how to break a copy, words the one-line error must contain)
    "vocab_size": (lambda d: _edit_json(d / "config.json", vocab_size=10 ** 9),
                   ("config.json does not match the weights", "[1000000000, 64]")),
    "vocab_no_weights": (_drop_embeddings, ("config.json describes a model of", "available")),
    "pickle_weights": (_pickle_weights, ("pytorch_model.bin", "never runs pickled code")),
    "truncated_safetensors": (lambda d: _truncate(d / "model.safetensors"),
                              ("model.safetensors: not a valid safetensors file",)),
    "huge_header": (lambda d: (d / "model.safetensors").write_bytes(
        (1 << 40).to_bytes(8, "little") + b"{}"), ("model.safetensors", "header too large")),
    "config_not_json": (lambda d: (d / "config.json").write_text("{" * 100_000),
                        ("config.json is not valid JSON",)),
    "config_a_list": (lambda d: (d / "config.json").write_text("[1, 2]"),
                      ("config.json must hold a JSON object",)),
    "config_huge": (lambda d: (d / "config.json").write_text(
        '{"pad": "' + "x" * (17 << 20) + '"}'), ("config.json has", "refused")),
    "tokenizer_broken": (lambda d: (d / "tokenizer.json").write_text('{"model": 5}'),
                         ("cannot load the tokenizer (tokenizer.json",)),
    "template_raises": (_template("{{ raise_exception('no \x1b[2J way') }}"),
                        ("chat_template.jinja failed: TemplateError: no \\x1b[2J way",)),
    "template_escapes": (_template("{{ ''.__class__.__mro__[1].__subclasses__() }}"),
                         ("chat_template.jinja failed: SecurityError",)),
    "template_syntax": (_template("{% for %}"), ("chat_template.jinja failed",)),
    "template_loops": (_template("{% for i in range(100000) %}{% for j in range(100000) %}"
                                 "{% endfor %}{% endfor %}"),
                       ("chat_template.jinja did not finish rendering within 2 s",)),
    "template_huge_string": (_template("{{ 'A' * 10**9 * 8 }}"), ("chat_template.jinja",)),
    "template_doubling": (_template("{% set ns = namespace(s='A') %}{% for i in range(40) %}"
                                    "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}"),
                          ("chat_template.jinja",)),
    "template_long_output": (_template("{{ 'x' * 5000000 }}"),
                             ("rendered more than 4000000 characters",)),
}


@pytest.fixture
def broken(tiny, tmp_path, request) -> tuple[Path, tuple[str, ...]]:
    name = request.param
    directory = tmp_path / name
    shutil.copytree(tiny, directory)
    breaker, words = BREAKAGES[name]
    breaker(directory)
    return directory, words


@pytest.mark.parametrize("broken", sorted(BREAKAGES), indirect=True)
def test_a_broken_model_directory_is_one_line_naming_the_file(broken) -> None:
    directory, words = broken
    started = time.monotonic()
    with pytest.raises(UserError) as caught:
        HFModel(str(directory), template_timeout=2)
    message = str(caught.value)
    for word in words:
        assert word in message, message
    assert "\n" not in message and "\x1b" not in message and len(message) < 700
    assert time.monotonic() - started < 60
    assert not Path("/tmp/coral-pwned-by-pickle").exists()


def test_templates_render_as_transformers_does_and_the_helper_is_bounded(tiny) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    renderer = chat_template_of(tokenizer, "tiny/chat_template.jinja", TemplateLimits(timeout=5))
    for generation_prompt in (True, False):
        assert renderer.render(tokenizer, messages, generation_prompt) == \
            tokenizer.apply_chat_template(messages, tokenize=False,
                                          add_generation_prompt=generation_prompt)
    tokenizer.chat_template = "{{ 'A' * 10**9 * 8 }}"  # 8 GB, in the helper, not here
    started = time.monotonic()
    with pytest.raises(UserError, match="tiny/chat_template.jinja"):
        renderer.render(tokenizer, messages, True)
    assert time.monotonic() - started < 30
    tokenizer.chat_template = "{{ messages[0]['content'] }}"  # the helper comes back
    assert renderer.render(tokenizer, messages, True) == "Be brief."
    renderer.close()


def test_a_template_that_fails_only_on_some_prompts_is_one_line_at_generation(tiny,
                                                                              tmp_path) -> None:
    directory = tmp_path / "picky"
    shutil.copytree(tiny, directory)
    _template("{% if 'poison' in messages[0]['content'] %}{{ raise_exception('poisoned') }}"
              "{% endif %}{{ messages[0]['content'] }}")(directory)
    model = HFModel(str(directory))  # the probe passes
    with pytest.raises(UserError, match="chat_template.jinja failed: TemplateError: poisoned"):
        model.generate([GenerationRequest(Prompt("poison"), SamplingParams(max_new_tokens=2))])


# ----- adapters made for another base model -----

def _adapter(base: Path, where: Path) -> Path:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(5)
    model = AutoModelForCausalLM.from_pretrained(base)
    config = LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"], init_lora_weights=False,
                        task_type="CAUSAL_LM")
    get_peft_model(model, config).save_pretrained(where, safe_serialization=True)
    return where


def test_an_adapter_for_another_base_is_refused_unless_allowed(tiny, tmp_path,
                                                               caplog) -> None:
    other = tmp_path / "another-model"
    shutil.copytree(tiny, other)
    foreign = _adapter(other, tmp_path / "foreign-adapter")
    own = _adapter(tiny, tmp_path / "own-adapter")
    with pytest.raises(UserError) as caught:
        HFModel(str(tiny), adapter=str(foreign))
    assert "made for another base model" in str(caught.value)
    assert "another-model" in str(caught.value) and "allow_base_mismatch" in str(caught.value)

    model = HFModel(str(tiny), adapter=str(own))  # its own base: accepted
    assert model.loaded_adapters == (str(own),) and model.base_mismatches == []
    request = GenerationRequest(Prompt("x"), SamplingParams(max_new_tokens=2),
                                adapter=str(foreign))
    with pytest.raises(UserError, match="made for another base model"):
        model.generate([request])  # per-request adapters are checked too

    caplog.set_level(logging.WARNING)
    allowed = HFModel(str(tiny), adapter=str(foreign), allow_base_mismatch=True)
    assert allowed.base_mismatches == [str(foreign)]
    assert "allow_base_mismatch is set" in caplog.text

    record = own / "coral_adapter.json"  # Coral's adapters name the base model's digest
    record.write_text(json.dumps({"components": {"base_model": "local-sha256:" + "0" * 64}}))
    with pytest.raises(UserError, match="it was trained on local-sha256:0000"):
        HFModel(str(tiny), adapter=str(own))


def _retype(adapter: Path) -> None:
    _edit_json(adapter / "adapter_config.json", peft_type="BOGUS")


ADAPTER_BREAKAGES = {
    "config": (lambda a: (a / "adapter_config.json").write_text("{not json"),
               "adapter_config.json is not valid JSON"),
    "weights": (lambda a: _truncate(a / "adapter_model.safetensors"), "cannot load adapter"),
    # peft read the folder as a Hub id, and said so; a bare KeyError
    "no_weights": (lambda a: (a / "adapter_model.safetensors").unlink(),
                   "has no weights (no adapter_model.safetensors or adapter_model.bin)"),
    "peft_type": (_retype, "peft_type 'BOGUS' is not one peft knows"),
}


@pytest.mark.parametrize("breakage", sorted(ADAPTER_BREAKAGES))
def test_a_broken_adapter_is_one_line(tiny, tmp_path, breakage: str) -> None:
    adapter = _adapter(tiny, tmp_path / "adapter")
    breaker, words = ADAPTER_BREAKAGES[breakage]
    breaker(adapter)
    with pytest.raises(UserError) as caught:
        HFModel(str(tiny), adapter=str(adapter))
    assert words in str(caught.value) and "\n" not in str(caught.value)


# ----- end to end: refused before the run directory exists -----

@pytest.mark.parametrize("broken", ["pickle_weights", "vocab_size", "template_raises",
                                    "template_loops"], indirect=True)
def test_coral_run_refuses_before_the_run_directory(broken, tmp_path, data_dir) -> None:
    directory, words = broken
    config = tmp_path / "hf.toml"
    config.write_text("[model.options]\ntemplate_timeout = 2\n[run]\nsamples = 1\n")
    run_dir = tmp_path / "run"
    result = run_measured("run", "--plugin", "quixbugs", "--config", str(config),
                          "--model", f"hf:{directory}", "--data-dir", str(data_dir),
                          "--out", str(run_dir), env=base_env(HF_HUB_OFFLINE="1"))
    assert result.returncode == 2, result.stderr
    assert len(result.error_lines) == 1 and result.error_lines[0].startswith("coral: error: ")
    assert words[0] in result.stderr, result.stderr
    assert not run_dir.exists()
    assert result.seconds < 120 and result.peak_mib < 2048, result
