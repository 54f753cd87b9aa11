"""FIM templates per model family, and parsing a prompt already in a family's format.

A template renders a prefix/suffix pair into the text a model completes. Families:

- qwen (Qwen2.5-Coder): `<|fim_prefix|>{p}<|fim_suffix|>{s}<|fim_middle|>`
- deepseek (DeepSeek-Coder): `<｜fim▁begin｜>{p}<｜fim▁hole｜>{s}<｜fim▁end｜>`
- starcoder (StarCoder, StarCoder2, SantaCoder): `<fim_prefix>{p}<fim_suffix>{s}<fim_middle>`
- codellama (Code Llama): `<PRE> {p} <SUF>{s} <MID>`
- codegemma (CodeGemma): Qwen's sentinels, `<|file_separator|>` ends a file
- codestral (Codestral, suffix first): `[SUFFIX]{s}[PREFIX]{p}`
- custom: any format with `{prefix}` and `{suffix}`
  (e.g. `fim_template = "<A>{prefix}<B>{suffix}<C>"`)

This module is pure Python (no model libraries) so data sets, models and tests share it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from coral_core.errors import UserError


@dataclass(frozen=True)
class FimTemplate:
    name: str
    format: str  # with {prefix} and {suffix}
    sentinels: tuple[str, ...]  # the special tokens the format uses
    stops: tuple[str, ...] = ()  # tokens that end a completion (besides the model's EOS)

    def render(self, prefix: str, suffix: str) -> str:
        return _fill(self.format, prefix, suffix)

    def parse(self, text: str) -> tuple[str, str] | None:
        """(prefix, suffix) of a prompt written in this format, or None.

        The format is `head {A} middle {B} tail` ({A}, {B}: the first `{prefix}` and
        `{suffix}`, in either order). As the regex `head(.*)middle(.*)tail` matched whole,
        the first part is the longest that fits: the text starts with `head`, ends with
        `tail`, and the last `middle` between them splits it. String tests and one `rfind`,
        linear: the regex retried the second `.*` from every `middle` in the text, which
        was quadratic on a prompt repeating a sentinel."""
        parts = _split_format(self.format)
        if parts is None:
            return self._parse_regex(text)
        head, first, middle, tail = parts
        end = len(text) - len(tail)
        if not (text.startswith(head) and text.endswith(tail) and end >= len(head)):
            return None
        cut = text.rfind(middle, len(head), end)
        if cut < 0:
            return None
        one, two = text[len(head):cut], text[cut + len(middle):end]
        return (one, two) if first == "{prefix}" else (two, one)

    def _parse_regex(self, text: str) -> tuple[str, str] | None:
        """The regex reading, for a format without both placeholders (its one `.*` group is
        tried once from the end: linear)."""
        pattern = re.escape(self.format)
        pattern = pattern.replace(re.escape("{prefix}"), "(?P<prefix>.*)", 1)
        pattern = pattern.replace(re.escape("{suffix}"), "(?P<suffix>.*)", 1)
        match = re.fullmatch(pattern, text, flags=re.DOTALL)
        if not match:
            return None
        return match.group("prefix"), match.group("suffix")


def _split_format(fmt: str) -> tuple[str, str, str, str] | None:
    """(head, the first placeholder, middle, tail) around the first `{prefix}` and the first
    `{suffix}` of `fmt`, or None when it lacks one of them."""
    at = {name: fmt.find(name) for name in ("{prefix}", "{suffix}")}
    if min(at.values()) < 0:
        return None
    first, second = sorted(at, key=at.__getitem__)
    return (fmt[:at[first]], first, fmt[at[first] + len(first):at[second]],
            fmt[at[second] + len(second):])


def _fill(fmt: str, prefix: str, suffix: str) -> str:
    """`fmt` with {prefix} and {suffix} replaced once each (the code may contain braces)."""
    out, i = [], 0
    while i < len(fmt):
        if fmt.startswith("{prefix}", i):
            out.append(prefix)
            i += len("{prefix}")
        elif fmt.startswith("{suffix}", i):
            out.append(suffix)
            i += len("{suffix}")
        else:
            out.append(fmt[i])
            i += 1
    return "".join(out)


FAMILIES: dict[str, FimTemplate] = {
    "qwen": FimTemplate(
        "qwen", "<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>",
        ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
        ("<|endoftext|>", "<|fim_pad|>", "<|file_sep|>", "<|repo_name|>", "<|fim_prefix|>")),
    "deepseek": FimTemplate(
        "deepseek", "<｜fim▁begin｜>{prefix}<｜fim▁hole｜>{suffix}<｜fim▁end｜>",
        ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"),
        ("<｜end▁of▁sentence｜>", "<|EOT|>", "<｜fim▁begin｜>")),
    "starcoder": FimTemplate(
        "starcoder", "<fim_prefix>{prefix}<fim_suffix>{suffix}<fim_middle>",
        ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),
        ("<|endoftext|>", "<file_sep>", "<fim_pad>", "<fim_prefix>")),
    "codellama": FimTemplate(
        "codellama", "<PRE> {prefix} <SUF>{suffix} <MID>",
        ("<PRE>", "<SUF>", "<MID>"), ("<EOT>",)),
    "codegemma": FimTemplate(
        "codegemma", "<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>",
        ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
        ("<|file_separator|>", "<eos>", "<|fim_prefix|>")),
    "codestral": FimTemplate(
        "codestral", "[SUFFIX]{suffix}[PREFIX]{prefix}", ("[SUFFIX]", "[PREFIX]"),
        ("</s>", "[SUFFIX]")),
}

# Parsing order: a prompt matches the first family whose format it fits (qwen before
# codegemma: the two share sentinels and render identically).
PARSE_ORDER = ("qwen", "deepseek", "starcoder", "codellama", "codestral")


def template_for(option: str) -> FimTemplate:
    """The template a `fim_template` option names: a family, or a custom format."""
    if "{prefix}" in option and "{suffix}" in option:
        sentinels = tuple(s for s in re.split(r"\{prefix\}|\{suffix\}", option) if s.strip())
        # A format that cannot mark the gap ran without a word (a red-team pass): the
        # model saw prefix and suffix run together, or went on writing the suffix.
        if option.count("{prefix}") > 1 or option.count("{suffix}") > 1:
            raise UserError(f"fim_template = '{option}' must hold {{prefix}} and {{suffix}} "
                            "once each")
        between = re.search(r"\{(?:prefix|suffix)\}(.*)\{(?:prefix|suffix)\}", option, re.S)
        if not between.group(1).strip() or option.rstrip().endswith("{suffix}"):
            raise UserError(f"fim_template = '{option}' marks no gap: put a sentinel "
                            "between {prefix} and {suffix}, and one after the suffix (PSM: "
                            "'<PRE>{prefix}<SUF>{suffix}<MID>') unless the prefix comes last "
                            "(SPM: '<SUF>{suffix}<PRE>{prefix}')")
        return FimTemplate("custom", option, sentinels)
    if option not in FAMILIES:
        from coral_core.suggest import did_you_mean
        raise UserError(f"fim_template = '{option}' is not a known family"
                        f"{did_you_mean(option, FAMILIES)} (known: {', '.join(FAMILIES)}, "
                        "or a format with {prefix} and {suffix})")
    return FAMILIES[option]


def parse_any(text: str) -> tuple[str, str, str] | None:
    """(family, prefix, suffix) for a prompt in any family's format, else None."""
    for name in PARSE_ORDER:
        parsed = FAMILIES[name].parse(text)
        if parsed is not None:
            return (name, *parsed)
    return None


def _token_id(tokenizer: Any, token: str) -> int | None:
    """The id of `token` when the tokenizer encodes it as exactly one token."""
    for candidate in (token, "▁" + token):
        ids = tokenizer.convert_tokens_to_ids([candidate])
        if ids and ids[0] is not None and ids[0] != tokenizer.unk_token_id:
            return int(ids[0])
    return None


def detect_family(tokenizer: Any) -> str | None:
    """The family whose sentinels the tokenizer has as tokens (None when none fits)."""
    vocab_special = set(getattr(tokenizer, "all_special_tokens", ()) or ())
    added = set(getattr(tokenizer, "get_added_vocab", lambda: {})() or {})
    known = vocab_special | added
    for name in ("deepseek", "starcoder", "codestral", "codellama"):
        if all(s in known or "▁" + s in known for s in FAMILIES[name].sentinels):
            return name
    if all(s in known for s in FAMILIES["qwen"].sentinels):
        return "codegemma" if "<|file_separator|>" in known else "qwen"
    return None


def check_sentinels(tokenizer: Any, template: FimTemplate, model: str = "hf") -> set[int]:
    """Refuse a template whose sentinels are not single special tokens of the tokenizer;
    return the ids of the template's stop tokens that the tokenizer has."""
    special = set(getattr(tokenizer, "all_special_tokens", ()) or ()) | set(
        getattr(tokenizer, "get_added_vocab", lambda: {})() or {})
    for sentinel in template.sentinels:
        token = sentinel.strip()
        ids = tokenizer(token, add_special_tokens=False)["input_ids"]
        if (token not in special and "▁" + token not in special) or len(ids) != 1:
            why = ("has no such special token" if token not in special
                   and "▁" + token not in special else f"splits it into {len(ids)} tokens")
            raise UserError(
                f"model {model}: FIM template '{template.name}' needs '{token}' as one special "
                f"token, but the tokenizer {why} (set [model.options] fim_template to the "
                "model's family)")
    stop_ids = set()
    for stop in template.stops:
        if stop in special:
            found = _token_id(tokenizer, stop)
            if found is not None:
                stop_ids.add(found)
    return stop_ids
