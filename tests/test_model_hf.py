"""The `hf` model and adapter training, on a tiny random Llama built locally (no download).

Random weights write gibberish, so the tests compare texts with each other (same seed,
other batch; adapter vs none) rather than with expected strings.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from coral_core.config.schema import OptionInvalid
from coral_core.errors import UserError
from coral_core.types import (
    AdapterGenes, GenerationRequest, Message, Prompt, SamplingParams, TrainingExample,
)
from coral_plugins.datasets.quixbugs import INSTRUCTIONS, QuixBugs, make_answer, make_prompt

from conftest import skip_without

skip_without("torch", "peft")

from coral_plugins.models import hf as hf_module  # noqa: E402
from coral_plugins.models.hf.model import HFModel  # noqa: E402
from coral_plugins.models.hf.adapters import (  # noqa: E402
    TrainingSettings, plan_training, tokenize_example, train_adapter,
)

from tiny_model import CHAT_TEMPLATE, shared_tiny_model  # noqa: E402

TEXT = "def gcd(a, b):\n    if b == 0:\n        return a\n"
PROMPT = Prompt(instruction=TEXT)
LONG_TEXT = "import os\nimport sys\n\n\nclass Walker:\n    def __init__(self, root):\n" * 3
LONG_PROMPT = Prompt(instruction=LONG_TEXT)
PROBLEMS = ("gcd", "bitcount", "pascal", "sqrt")
INLINE = {  # used where the QuixBugs checkout is not at hand
    "gcd": ("def gcd(a, b):\n    return gcd(a % b, b) if b else a\n",
            "def gcd(a, b):\n    return gcd(b, a % b) if b else a\n"),
    "bitcount": ("def bitcount(n):\n    c = 0\n    while n:\n        n ^= n - 1\n        c += 1\n"
                 "    return c\n",
                 "def bitcount(n):\n    c = 0\n    while n:\n        n &= n - 1\n        c += 1\n"
                 "    return c\n"),
}


def greedy(max_new_tokens: int = 12, **kw) -> SamplingParams:
    return SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens, **kw)


def sampled(seed: int, n: int = 1, **kw) -> SamplingParams:
    kw = {"max_new_tokens": 12, "top_p": 1.0, **kw}
    return SamplingParams(temperature=1.0, seed=seed, n=n, **kw)


def texts(generations) -> list[str]:
    return [g.text for g in generations]


@pytest.fixture(scope="session")
def tiny(tiny_models) -> Path:
    return shared_tiny_model(tiny_models)


@pytest.fixture(scope="session")
def tiny_chat(tiny, tmp_path_factory) -> Path:
    """The same weights and tokenizer, plus a chat template."""
    from transformers import AutoTokenizer

    directory = tmp_path_factory.mktemp("hf") / "tiny-chat"
    shutil.copytree(tiny, directory)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def model(tiny) -> HFModel:
    return HFModel(str(tiny), batch_size=4)


@pytest.fixture(scope="session")
def examples() -> list[TrainingExample]:
    """One example per problem (the first instruction variant), rendered by QuixBugs."""
    root = Path(os.environ.get("CORAL_DATA_DIR") or Path(__file__).parents[2] / "shared/datasets")
    if (root / "quixbugs" / "python_programs").is_dir():
        return QuixBugs(data_dir=str(root)).training_examples(PROBLEMS)[::len(INSTRUCTIONS)]
    return [
        TrainingExample(name, Prompt(instruction=make_prompt(name, bug, INSTRUCTIONS[0])),
                        answer=make_answer(fix), source=bug, solution=fix)
        for name, (bug, fix) in INLINE.items()
    ]


GENES = AdapterGenes(rank=4, alpha=8.0, dropout=0.0, target_modules=("q_proj", "v_proj"))
TRAINING = dict(steps=6, learning_rate=1e-2, batch_size=4, max_length=512, seed=3)


@pytest.fixture(scope="session")
def trained(tiny, examples, tmp_path_factory) -> tuple[Path, list[tuple[int, float]], Path]:
    cache = tmp_path_factory.mktemp("adapters")
    steps: list[tuple[int, float]] = []
    path = train_adapter(
        str(tiny), GENES, examples, cache_dir=cache,
        on_step=lambda step, loss: steps.append((step, loss)), **TRAINING,
    )
    return path, steps, cache


@pytest.fixture(scope="session")
def random_adapter(tiny, tmp_path_factory) -> Path:
    """An adapter with random (non-zero) B matrices, so that it surely changes outputs."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(11)
    base = AutoModelForCausalLM.from_pretrained(tiny)
    config = LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj", "o_proj"],
                        init_lora_weights=False, task_type="CAUSAL_LM")
    directory = tmp_path_factory.mktemp("hf") / "random-adapter"
    get_peft_model(base, config).save_pretrained(directory, safe_serialization=True)
    return directory


# -- plugin surface -------------------------------------------------------------------

def test_import_does_not_load_torch_and_registers_hf():
    code = ("import sys, coral_plugins.models.hf as m; "
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules; "
            "seen = []; m.coral_register_models(lambda *a: seen.append(a)); print(seen)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "('hf', Lazy('coral_plugins.models.hf.model:HFModel'))" in out.stdout
    assert HFModel.supports_adapters is True


def test_bad_paths_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="no such model directory"):
        HFModel(str(tmp_path / "missing"))
    with pytest.raises(UserError, match="not a Hugging Face model directory"):
        HFModel(str(tmp_path))
    with pytest.raises(UserError):
        HFModel("not a hub id!")
    with pytest.raises(UserError, match="batch_size"):
        HFModel(str(tmp_path), batch_size=0)


def test_bad_adapter_and_options_are_user_errors(model, tiny, tmp_path):
    with pytest.raises(UserError, match="not a peft adapter"):
        model.generate([GenerationRequest(PROMPT, greedy(), adapter=str(tmp_path))])
    infill = GenerationRequest(Prompt(prefix="def f(x):\n", suffix="\n"), greedy())
    with pytest.raises(UserError, match=f"model hf:{tiny} has no FIM template"):
        model.generate([GenerationRequest(PROMPT, greedy()), infill])
    assert model.base_loads == 1, "refused without reloading anything"
    with pytest.raises(UserError, match="unknown dtype"):
        HFModel(str(tiny), dtype="float7").load()
    with pytest.raises(UserError, match="no chat template"):
        HFModel(str(tiny), chat_template=True).load()


@pytest.mark.parametrize("option, words", [
    ("batch_size=0", "batch_size must be at least 1"),
    ("dtype=float7", "unknown dtype 'float7'"), ("fim_self_test=bogus", "fim_self_test"),
    ("fim_template=qwem", "did you mean 'qwen'"), ("template_timeout=0", "template_timeout"),
    # a red-team pass: each of these passed --dry-run, and in a search failed its trial
    # half-way through, leaving a run no resume could finish (the last with a traceback)
    ("template_timeout=1e10", "at most 86400 seconds"), ("device=meta", "meta holds no"),
    ("device=cuda:-1", "is not a device"), ("chat_template=true", "no chat template"),
    ("revision=v2", "is a local directory"),
    ("fim_template=<X>{prefix}<Y>{suffix}<Z>", "needs '<X>' as one special token")])
def test_option_values_are_judged_by_dry_run_without_loading(tiny, tmp_path, option, words):
    """HFModel.check_options: the values building the model refuses, refused by --dry-run
    (which builds nothing) and for a search-space value, each said where it was set."""
    coral = str(Path(sys.executable).with_name("coral"))
    cli = subprocess.run([coral, "run", "--plugin", "quixbugs", "--model", f"hf:{tiny}",
                          "--model-arg", option, "--dry-run", "--out", str(tmp_path / "r")],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 2 and not cli.stdout, cli.stdout
    assert cli.stderr.count("\n") == 1 and words in cli.stderr, cli.stderr
    assert "--model-arg" in cli.stderr
    key, value = option.split("=", 1)
    literal = value if value.replace("e", "").isdigit() or value == "true" \
        else json.dumps(value)
    config = tmp_path / "search.toml"
    config.write_text(f'[model]\nspec = "hf:{tiny}"\n[search]\nstrategy = "grid"\n'
                      f'[search.space]\n"model.options.{key}" = [{literal}]\n')
    cli = subprocess.run([coral, "run", "--plugin", "quixbugs", "--config", str(config),
                          "--dry-run", "--out", str(tmp_path / "r")],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 2 and "[search.space]" in cli.stderr and words in cli.stderr, \
        cli.stderr
    assert "(line" not in cli.stderr  # the value's fault, not the line of the base file
    HFModel.check_options(str(tiny), {"batch_size": 2, "dtype": "auto", "fim_template": ""})


def test_a_ray_dry_run_leaves_the_machine_checks_to_the_machines_that_build_the_model(
        tiny, tmp_path):
    """Ray builds models in its actors, on the cluster's GPU machines: a driver without a
    GPU (a login node) refused `device = "cuda"` and an adapter only the cluster has (a
    reviewer's pass). What holds on every machine is still refused there."""
    coral = str(Path(sys.executable).with_name("coral"))
    base = [coral, "run", "--plugin", "quixbugs", "--model", f"hf:{tiny}", "--dry-run",
            "--out", str(tmp_path / "r")]
    config = tmp_path / "adapter.toml"
    config.write_text(f'[model]\nadapter = "{tmp_path / "on-the-cluster"}"\n')
    machine = ["--model-arg", "device=cuda:3", "--model-arg", "chat_template=true",
               "--config", str(config)]
    cluster = ["--executor", "ray", "--ray-address", "head.example:6379"]
    # a Ray of Coral's own builds the models on this machine: judged here, as locally
    for executor, code in ((["--executor", "local"], 2), (["--executor", "ray"], 2),
                           (cluster, 0)):
        cli = subprocess.run([*base, *machine, *executor],
                             capture_output=True, text=True, timeout=120)
        assert cli.returncode == code, (executor, cli.stderr)
        assert not code or "cuda:3" in cli.stderr or "not a peft adapter" in cli.stderr, \
            cli.stderr  # a machine check, whichever comes first
    for option, words in (("device=meta", "meta holds no"), ("device=cuda:x", "not a device"),
                          ("batch_size=0", "at least 1")):
        cli = subprocess.run([*base, "--model-arg", option, *cluster],
                             capture_output=True, text=True, timeout=120)
        assert cli.returncode == 2 and words in cli.stderr, (option, cli.stderr)
    HFModel.check_options(str(tiny), {"device": "cuda:7", "revision": "v2"}, here=False)
    HFModel.check_adapter(str(tiny), str(tmp_path / "nowhere"), here=False)
    with pytest.raises(OptionInvalid) as refused:
        HFModel.check_adapter(str(tiny), str(tmp_path / "nowhere"))
    assert refused.value.path == ("model", "adapter")
    # raised in a Ray actor, the refusal crosses a pickle whole
    copy = pickle.loads(pickle.dumps(refused.value))
    assert (copy.path, str(copy)) == (refused.value.path, str(refused.value))


def test_an_adapter_and_a_huge_integer_are_refused_before_the_run(tiny, tmp_path):
    """A red-team pass: a search over `model.adapter` failed at the trial of a path that
    is no adapter; `--model-arg batch_size=10**23` ran, and wrote a config.toml that
    Coral could not read back, so the run could not be resumed."""
    coral = str(Path(sys.executable).with_name("coral"))
    config = tmp_path / "search.toml"
    config.write_text(f'[model]\nspec = "hf:{tiny}"\n[search]\nstrategy = "grid"\n'
                      f'[search.space]\n"model.adapter" = ["", "{tmp_path}"]\n')
    huge = ["--model-arg", f"batch_size={10 ** 23}"]
    for extra in (["--config", str(config)], huge):
        cli = subprocess.run([coral, "run", "--plugin", "quixbugs", "--model", f"hf:{tiny}",
                              *extra, "--out", str(tmp_path / "r")],
                             capture_output=True, text=True, timeout=120)
        assert cli.returncode == 2 and cli.stderr.count("\n") == 1, cli.stderr
        assert ("not a peft adapter" in cli.stderr) != ("64 bits" in cli.stderr), cli.stderr
        assert not (tmp_path / "r").exists()


def test_a_search_over_models_refuses_a_missing_model_folder_before_the_run(tmp_path):
    """A bad-input pass: `"model.spec" = ["baseline", "hf:/nonexistent"]` ran its first
    trial, then failed at the second, leaving a run directory whose report read "best
    finished trial 0"; `--model hf:/nonexistent` alone was refused before any folder."""
    coral = str(Path(sys.executable).with_name("coral"))
    missing = tmp_path / "no-such-model"
    config = tmp_path / "search.toml"
    config.write_text('[run]\nsamples = 1\n[dataset]\nproblems = ["kheapsort"]\n'
                      '[search]\nstrategy = "grid"\n[search.space]\n'
                      f'"model.spec" = ["baseline", "hf:{missing}"]\n')
    for dry in ([], ["--dry-run"]):
        cli = subprocess.run([coral, "run", "--plugin", "quixbugs", "--config", str(config),
                              "--out", str(tmp_path / "r"), *dry],
                             capture_output=True, text=True, timeout=120)
        assert cli.returncode == 2 and cli.stderr.count("\n") == 1, cli.stderr
        assert "no such model directory" in cli.stderr and "[search.space]" in cli.stderr
        assert not (tmp_path / "r").exists()
    HFModel.check_options(str(missing), {}, here=False)  # a cluster's machine judges it
    base = tmp_path / "base.toml"  # said at model.spec, not at the options beside it
    base.write_text(f'[model]\nspec = "hf:{missing}"\n[model.options]\ndtype = "float32"\n')
    cli = subprocess.run([coral, "run", "--plugin", "quixbugs", "--config", str(base),
                          "--dry-run"], capture_output=True, text=True, timeout=120)
    assert cli.returncode == 2 and f"{base} (line 2): hf model: no such model" in cli.stderr, \
        cli.stderr


def test_an_infilling_run_without_fim_tokens_is_refused_before_its_folder(tiny, tmp_path):
    """The model is built before the run directory; a kind of prompt it cannot render is
    refused then (check_prompt), not at the first batch of a run no resume could finish."""
    coral = str(Path(sys.executable).with_name("coral"))
    for extra in ((), ("--model-arg", "fim_template=starcoder")):
        out = tmp_path / f"run{len(extra)}"
        cli = subprocess.run([coral, "run", "--plugin", "fim", "--model", f"hf:{tiny}",
                              "--limit", "1", "--samples", "1", *extra, "--out", str(out)],
                             capture_output=True, text=True, timeout=120)
        assert cli.returncode == 2 and len(cli.stderr.strip().splitlines()) == 1, cli.stderr
        assert "FIM template" in cli.stderr and not out.exists()
    assert HFModel(str(tiny)).check_prompt(PROMPT) is None  # a plain prompt it renders
    # fim_self_test = "require": the canaries run then too (a red-team run failed them at
    # its first batch, leaving a run directory no resume could finish)
    out = tmp_path / "strict"
    cli = subprocess.run([coral, "run", "--plugin", "fim", "--model", f"hf:{tiny}",
                          "--limit", "1", "--samples", "1", "--model-arg",
                          "fim_template=<|user|>{prefix}<|assistant|>{suffix}<|system|>",
                          "--model-arg", "fim_self_test=require", "--out", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert cli.returncode == 2 and len(cli.stderr.strip().splitlines()) == 1, cli.stderr
    assert "refused: fim_self_test" in cli.stderr and not out.exists()


def test_hub_ids_resolve_through_the_cache_offline(tiny, model, tmp_path):
    """A hub id loads from the Hugging Face cache, and the cache key names its commit."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--coral--tiny"
    shutil.copytree(tiny, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    code = (
        "import json; from coral_core.types import *; "
        "from coral_plugins.models.hf.model import HFModel; "
        "from coral_plugins.models.hf.adapters import plan_training, TrainingSettings; "
        "plan = plan_training('coral/tiny', AdapterGenes(), "
        "[TrainingExample('t', Prompt('i'), 'y')], TrainingSettings()); "
        f"request = GenerationRequest(Prompt({TEXT!r}), SamplingParams(temperature=0.0, "
        "max_new_tokens=10)); "
        "text = HFModel('coral/tiny').generate([request])[0][0].text; "
        "print(json.dumps([plan.components['base_model'], plan.source.revision, text]))"
    )
    env = {**os.environ, "HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    identity, revision, text = json.loads(out.stdout.strip().splitlines()[-1])
    assert identity == f"hub:coral/tiny@{commit}" and revision == commit
    assert text == model.generate([GenerationRequest(PROMPT, greedy(10))])[0][0].text
    env["HF_HOME"] = str(tmp_path / "empty")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode != 0 and "UserError: hf model: cannot resolve 'coral/tiny'" in out.stderr

    # a hub that does not answer, without HF_HUB_OFFLINE: the cache serves, with no retries
    env = {k: v for k, v in env.items() if k != "HF_HUB_OFFLINE"}
    env.update(HF_HOME=str(tmp_path), HF_ENDPOINT="http://127.0.0.1:9")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])[2] == text
    env["HF_HOME"] = str(tmp_path / "empty")
    cli = subprocess.run([str(Path(sys.executable).with_name("coral")), "run", "--plugin",
                          "quixbugs", "--model", "hf:coral/tiny", "--limit", "1", "--samples",
                          "1", "--out", str(tmp_path / "run")], capture_output=True, text=True,
                         env=env, timeout=120)
    assert cli.returncode == 2 and len(cli.stderr.strip().splitlines()) == 1, cli.stderr
    assert "coral/tiny" in cli.stderr and not (tmp_path / "run").exists()


# -- generation -----------------------------------------------------------------------

def test_n_samples_per_request_in_order_with_counts(model):
    requests = [GenerationRequest(PROMPT, sampled(1, n=3)),
                GenerationRequest(LONG_PROMPT, greedy(7)),
                GenerationRequest(PROMPT, sampled(2, n=2, max_new_tokens=5))]
    results = model.generate(requests)
    assert [len(r) for r in results] == [3, 1, 2]
    prompt_tokens = [len(model.tokenizer(p)["input_ids"]) for p in (TEXT, LONG_TEXT, TEXT)]
    for request, result, expected_prompt in zip(requests, results, prompt_tokens):
        for generation in result:
            assert generation.prompt_tokens == expected_prompt
            assert 0 < generation.completion_tokens <= request.params.max_new_tokens
            assert generation.finish_reason in ("stop", "length")
            assert generation.seconds > 0
    assert results[1][0].finish_reason == "length" and results[1][0].completion_tokens == 7


def test_sample_zero_of_n_is_the_single_sample_and_seeds_matter(model):
    """Sample j of a request draws with its own seed, sample_seed(seed, j): sample 0 of n is
    the one sample of n = 1, whatever else is asked; another seed gives other texts of the
    same length (no stop string, so every text runs to max_new_tokens)."""
    many, one, other = model.generate([GenerationRequest(PROMPT, sampled(2, n=3)),
                                       GenerationRequest(PROMPT, sampled(2)),
                                       GenerationRequest(PROMPT, sampled(5, n=3))])
    assert many[0].text == one[0].text
    assert len(set(texts(many))) == 3
    lengths = {g.completion_tokens for g in many + other if g.finish_reason == "length"}
    assert lengths == {12}
    same_length = [(a.text, b.text) for a, b in zip(many, other)
                   if a.completion_tokens == b.completion_tokens == 12]
    assert same_length and all(a != b for a, b in same_length)


def test_left_padding_gives_the_unbatched_result(model):
    assert model.tokenizer.padding_side == "left"
    alone = model.generate([GenerationRequest(PROMPT, greedy(16))])[0][0]
    padded = model.generate([GenerationRequest(LONG_PROMPT, greedy(16)),
                             GenerationRequest(PROMPT, greedy(16))])[1][0]
    assert padded.text == alone.text and padded.prompt_tokens == alone.prompt_tokens


def test_greedy_matches_transformers_and_repeats(model):
    first = model.generate([GenerationRequest(PROMPT, greedy(10, n=2))])[0]
    again = model.generate([GenerationRequest(PROMPT, greedy(10))])[0]
    assert first[0].text == first[1].text == again[0].text
    ids = model.tokenizer(TEXT, return_tensors="pt")
    reference = model.base_model.generate(**ids, do_sample=False, max_new_tokens=10,
                                          pad_token_id=model.tokenizer.pad_token_id)
    expected = model.tokenizer.decode(reference[0, ids["input_ids"].shape[1]:],
                                      skip_special_tokens=True)
    assert first[0].text == expected


def test_a_vanishing_temperature_decodes_greedily(model):
    """A red-team pass: at temperature 1e-300 (0 in float32) every sample was empty; at
    1e-38 the scaled scores were infinite. Below 1e-30 a row decodes as temperature 0."""
    reference = model.generate([GenerationRequest(PROMPT, greedy(10))])[0][0].text
    assert reference
    tiny = [GenerationRequest(PROMPT, SamplingParams(temperature=t, seed=3, max_new_tokens=10))
            for t in (1e-300, 1e-38, 1e-31)]
    for result in model.generate(tiny):
        assert result[0].text == reference


def test_same_seed_same_text_whatever_shares_the_batch(model, tiny):
    target = GenerationRequest(PROMPT, sampled(7, n=2, top_k=40, top_p=0.9,
                                               repetition_penalty=1.2))
    alone = texts(model.generate([target])[0])
    others = [GenerationRequest(LONG_PROMPT, sampled(1, n=3)),
              GenerationRequest(Prompt("x = 1\n"), greedy(20, repetition_penalty=1.3))]
    crowded = model.generate([others[0], target, others[1]])[1]
    assert texts(crowded) == alone
    one_per_batch = HFModel(str(tiny), batch_size=1).generate([others[1], target])[1]
    assert texts(one_per_batch) == alone
    assert alone[0] != alone[1]  # the two samples of one request differ


def test_different_seeds_give_different_texts(model):
    results = model.generate([GenerationRequest(PROMPT, sampled(seed)) for seed in range(4)])
    assert len({r[0].text for r in results}) == 4


def test_top_k_and_top_p_limit_the_choice(model):
    reference = model.generate([GenerationRequest(PROMPT, greedy(10))])[0][0].text
    narrow = [GenerationRequest(PROMPT, sampled(seed, top_k=1, max_new_tokens=10))
              for seed in range(3)]
    nucleus = [GenerationRequest(PROMPT, sampled(seed, top_p=1e-6, max_new_tokens=10))
               for seed in range(3)]
    for result in model.generate(narrow + nucleus):
        assert result[0].text == reference


def test_repetition_penalty_changes_greedy_text(model):
    plain, penalised = model.generate([
        GenerationRequest(PROMPT, greedy(24)),
        GenerationRequest(PROMPT, greedy(24, repetition_penalty=3.0)),
    ])
    assert plain[0].text != penalised[0].text


def test_stop_sequences_cut_the_text_and_end_the_row(model):
    full = model.generate([GenerationRequest(PROMPT, greedy(24))])[0][0]
    stop = full.text[8:10]
    cut = full.text.index(stop)
    stopped = model.generate([GenerationRequest(PROMPT, greedy(24, stop=("@@never@@", stop)))])
    generation = stopped[0][0]
    assert generation.text == full.text[:cut]
    assert generation.finish_reason == "stop"
    assert generation.completion_tokens < full.completion_tokens


def test_chat_template_is_applied_when_present(tiny_chat, model):
    chat = HFModel(str(tiny_chat), batch_size=2)
    rendered = chat.generate([GenerationRequest(PROMPT, greedy(10))])[0][0]
    tokenizer = chat.tokenizer
    wrapped = tokenizer.apply_chat_template([{"role": "user", "content": TEXT}],
                                            tokenize=False, add_generation_prompt=True)
    assert wrapped == f"<|user|>\n{TEXT}\n<|assistant|>\n"
    assert rendered.prompt_tokens == len(tokenizer(wrapped, add_special_tokens=False)["input_ids"])
    raw = HFModel(str(tiny_chat), chat_template=False)  # same weights, template off
    by_hand = raw.generate([GenerationRequest(Prompt(wrapped), greedy(10))])[0][0]
    plain = raw.generate([GenerationRequest(PROMPT, greedy(10))])[0][0]
    assert plain.prompt_tokens < rendered.prompt_tokens
    assert plain.text == model.generate([GenerationRequest(PROMPT, greedy(10))])[0][0].text
    assert (by_hand.prompt_tokens, by_hand.text) == (rendered.prompt_tokens, rendered.text)


CHAT = Prompt(messages=(Message("system", "You fix bugs."), Message("user", TEXT)))


def test_chat_messages_go_through_the_template_or_are_refused(tiny_chat, model):
    chat = HFModel(str(tiny_chat), batch_size=2)
    rendered = chat.generate([GenerationRequest(CHAT, greedy(10))])[0][0]
    by_hand = HFModel(str(tiny_chat), chat_template=False).generate([GenerationRequest(
        Prompt(f"<|system|>\nYou fix bugs.\n<|user|>\n{TEXT}\n<|assistant|>\n"), greedy(10))])
    assert (rendered.prompt_tokens, rendered.text) == (by_hand[0][0].prompt_tokens,
                                                       by_hand[0][0].text)
    one_turn = Prompt(messages=(Message("user", TEXT),))
    assert texts(model.generate([GenerationRequest(one_turn, greedy(10))])[0]) == texts(
        model.generate([GenerationRequest(PROMPT, greedy(10))])[0])
    with pytest.raises(UserError, match="chat of 2 turns, but the model is used without a chat"):
        model.generate([GenerationRequest(CHAT, greedy(10))])


# -- adapters -------------------------------------------------------------------------

def test_adapters_switch_without_reloading_the_base_model(tiny, trained, random_adapter):
    adapter_a, adapter_b = str(trained[0]), str(random_adapter)
    model = HFModel(str(tiny))
    base = model.base_model
    plain = GenerationRequest(PROMPT, greedy(16))
    with_a, with_b = replace(plain, adapter=adapter_a), replace(plain, adapter=adapter_b)
    sequence = [model.generate([request])[0][0].text
                for request in (plain, with_a, with_b, with_a, plain)]
    assert sequence[1] != sequence[0] and sequence[2] not in (sequence[0], sequence[1])
    assert sequence[3] == sequence[1] and sequence[4] == sequence[0]
    assert model.base_loads == 1 and model.adapter_loads == 2 and model.base_model is base
    mixed = model.generate([with_b, plain, with_a])
    assert [r[0].text for r in mixed] == [sequence[2], sequence[0], sequence[1]]
    assert model.adapter_loads == 2


def test_adapter_lru_unloads_the_least_recently_used(tiny, trained, random_adapter):
    model = HFModel(str(tiny), max_adapters=1)
    a = GenerationRequest(PROMPT, greedy(8), adapter=str(trained[0]))
    b = replace(a, adapter=str(random_adapter))
    first = model.generate([a])[0][0].text
    model.generate([b])
    assert model.loaded_adapters == (str(random_adapter),)
    assert model.generate([a])[0][0].text == first
    assert model.adapter_loads == 3 and model.base_loads == 1


# -- training and the adapter cache ---------------------------------------------------

def test_training_lowers_the_loss_and_saves_safetensors(trained):
    path, steps, _ = trained
    assert [step for step, _ in steps] == list(range(1, TRAINING["steps"] + 1))
    losses = [loss for _, loss in steps]
    assert losses[-1] < losses[0]
    assert (path / "adapter_model.safetensors").is_file()
    assert not (path / "adapter_model.bin").exists()
    config = json.loads((path / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and not config["use_dora"] and config["r"] == 4
    record = json.loads((path / "coral_adapter.json").read_text())
    assert record["losses"] == losses and record["key"] == path.name


@pytest.mark.parametrize("chat", [False, True])
def test_training_tokenizes_the_prompt_exactly_as_generation_does(chat, tiny_chat, examples):
    model = HFModel(str(tiny_chat), chat_template=chat)
    model.load()
    for example in examples:
        row = tokenize_example(model.tokenizer, example, chat, 4096)
        prompt_length = row["labels"].count(-100)
        assert row["input_ids"][:prompt_length] == model._encode(example.prompt)


@pytest.mark.parametrize("chat", [False, True])
def test_only_answer_tokens_carry_labels(chat, tiny_chat, examples):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_chat)
    row = tokenize_example(tokenizer, examples[0], chat, 4096)
    prompt_length = row["labels"].count(-100)
    assert row["labels"][:prompt_length] == [-100] * prompt_length
    assert row["labels"][prompt_length:] == row["input_ids"][prompt_length:]
    prompt = tokenizer.decode(row["input_ids"][:prompt_length])
    answer = tokenizer.decode(row["input_ids"][prompt_length:])
    instruction = examples[0].prompt.instruction
    assert instruction.startswith("Fix the bug in this Python function from gcd:\n\n")
    assert instruction.endswith("\n```\n\nProvide the corrected Python code:\n```python\n")
    assert prompt == (f"<|user|>\n{instruction}\n<|assistant|>\n" if chat else instruction)
    assert examples[0].answer.endswith("\n```") and examples[0].answer.startswith("def gcd(")
    assert answer == examples[0].answer + ("\n" if chat else "") + "<|endoftext|>"
    short = tokenize_example(tokenizer, examples[0], chat, prompt_length + 3)
    assert short["labels"].count(-100) == prompt_length
    assert len(short["labels"]) == prompt_length + 3
    assert tokenize_example(tokenizer, examples[0], chat, prompt_length) is None


def test_second_call_is_a_cache_hit(tiny, examples, trained):
    path, _, cache = trained
    stamp = (path / "coral_adapter.json").stat().st_mtime_ns
    calls = []
    again = train_adapter(str(tiny), GENES, examples, cache_dir=cache,
                          on_step=lambda *a: calls.append(a), **TRAINING)
    assert again == path and calls == []  # no training step ran: the cache answered
    assert (path / "coral_adapter.json").stat().st_mtime_ns == stamp
    assert [p.name for p in cache.iterdir() if not p.name.startswith(".")] == [path.name]


def test_training_is_deterministic_for_a_seed(tiny, examples, trained, tmp_path):
    again = train_adapter(str(tiny), GENES, examples, cache_dir=tmp_path, **TRAINING)
    assert again.name == trained[0].name
    assert ((again / "adapter_model.safetensors").read_bytes()
            == (trained[0] / "adapter_model.safetensors").read_bytes())


def test_every_key_component_changes_the_key(tiny, examples, tmp_path):
    settings = TrainingSettings(steps=6, learning_rate=1e-2, batch_size=4, max_length=512)

    def key(base=str(tiny), genes=GENES, data=examples, hyper=settings, seed=3) -> str:
        return plan_training(base, genes, data, hyper, seed).key

    copy = tmp_path / "copy"
    shutil.copytree(tiny, copy)
    assert key(base=str(copy)) == key()  # content-addressed: the path does not matter
    assert key(genes=replace(GENES, target_modules=("v_proj", "q_proj"))) == key()
    changed = tmp_path / "changed"
    shutil.copytree(tiny, changed)
    config = json.loads((changed / "config.json").read_text())
    (changed / "config.json").write_text(json.dumps({**config, "rms_norm_eps": 1e-5}))
    edited = [replace(examples[0], answer=examples[0].answer + "\n# fixed")] + examples[1:]
    reworded = [replace(examples[0], prompt=Prompt(examples[0].prompt.instruction + " "))
                ] + examples[1:]
    # what training does not read is not in the key
    unread = [replace(e, task_id=e.task_id + "-x", source="", solution="") for e in examples]
    assert key(data=unread) == key()
    variants = [
        key(base=str(changed)),
        key(genes=replace(GENES, rank=8)), key(genes=replace(GENES, alpha=4.0)),
        key(genes=replace(GENES, dropout=0.1)), key(genes=replace(GENES, kind="dora")),
        key(genes=replace(GENES, target_modules=("q_proj", "k_proj", "v_proj"))),
        key(data=edited), key(data=reworded), key(data=list(reversed(examples))),
        key(data=examples[:-1]),
        key(hyper=replace(settings, steps=7)), key(hyper=replace(settings, epochs=1.0)),
        key(hyper=replace(settings, learning_rate=2e-2)),
        key(hyper=replace(settings, batch_size=2)), key(hyper=replace(settings, max_length=256)),
        key(hyper=replace(settings, chat_template=False)),
        key(hyper=replace(settings, render_format=settings.render_format + 1)),
        key(seed=4),
    ]
    assert len(set(variants + [key()])) == len(variants) + 1


def test_dora_trains_and_changes_generations(tiny, examples, tmp_path, model):
    genes = replace(GENES, kind="dora", target_modules=("q_proj", "v_proj", "o_proj"))
    losses: list[float] = []
    path = train_adapter(str(tiny), genes, examples, cache_dir=tmp_path,
                         on_step=lambda step, loss: losses.append(loss),
                         **{**TRAINING, "steps": 4, "learning_rate": 5e-2})
    assert json.loads((path / "adapter_config.json").read_text())["use_dora"] is True
    assert losses[-1] < losses[0]
    request = GenerationRequest(PROMPT, greedy(16))
    with_dora = model.generate([replace(request, adapter=str(path))])[0][0].text
    assert with_dora != model.generate([request])[0][0].text


def test_bad_training_inputs_are_user_errors(tiny, examples, tmp_path):
    with pytest.raises(UserError, match="kind"):
        train_adapter(str(tiny), replace(GENES, kind="ia3"), examples, cache_dir=tmp_path)
    with pytest.raises(UserError, match="at least one"):
        train_adapter(str(tiny), GENES, [], cache_dir=tmp_path)
    infill = TrainingExample("f", Prompt(prefix="def f(x):\n", suffix="\n"), "    return x")
    with pytest.raises(UserError, match="no FIM template"):
        train_adapter(str(tiny), GENES, examples + [infill], cache_dir=tmp_path)
    with pytest.raises(UserError, match="adapter"):
        train_adapter(str(tiny), replace(GENES, target_modules=("no_such_proj",)), examples,
                      cache_dir=tmp_path, steps=1)
    assert [p for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == []


def test_module_exposes_the_registration_hook():
    assert hasattr(hf_module.coral_register_models, "coral_impl")


@pytest.mark.parametrize("device, words", [
    ("meta", "meta holds no weights"),
    ("tpu", "is not a device"),
    ("cuda:0x", "is not a device"),
])
def test_a_device_that_cannot_hold_the_model_is_one_line(device, words):
    """`device = "meta"` loaded and then failed mid-run; "tpu" read as a loading failure."""
    from coral_plugins.models.hf.loading import resolve_device

    assert resolve_device("cpu") == resolve_device("cpu:0") == "cpu"
    with pytest.raises(UserError, match=words):
        resolve_device(device)


def test_a_budget_past_the_models_context_stops_at_the_context(tiny, tmp_path, caplog):
    """A budget of a million tokens ran for minutes past the model's positions (and its
    output there is noise): generation stops where the context ends, said once."""
    short = tmp_path / "short"
    shutil.copytree(tiny, short)
    config = json.loads((short / "config.json").read_text())
    config["max_position_embeddings"] = 96
    (short / "config.json").write_text(json.dumps(config))
    model = HFModel(str(short), batch_size=2)
    prompt_tokens = len(model._encode(PROMPT))
    with caplog.at_level("WARNING"):
        out = model.generate([GenerationRequest(PROMPT, greedy(1_000_000))])[0][0]
    assert out.completion_tokens <= 96 - prompt_tokens and out.finish_reason in ("length", "stop")
    assert sum("positions" in r.getMessage() for r in caplog.records) == 1
    crowded = Prompt(instruction="x " * 200)  # more tokens than the context holds
    assert model.generate([GenerationRequest(crowded, greedy(8))])[0][0].completion_tokens == 0
