"""How an `hf` model renders a structured `Prompt` into the text it reads.

One rendering for generation (`HFModel`) and for adapter training (`adapters`), so that an
adapter learns on exactly the text it will be prompted with:

- an instruction: with a chat template, one user turn followed by the assistant turn's
  opening (the template carries any BOS token); without one, the instruction text
  itself, tokenized with the tokenizer's special tokens (BOS).
- chat messages: the chat template renders the turns. Without a template, a chat of one
  user turn is rendered as an instruction; any other chat is refused with a UserError,
  since joining turns into text would be a prompt format the model never saw.
- a prefix/suffix pair (infilling): the model family's FIM template (`fim_template` option,
  else detected from the tokenizer's special tokens; see
  `coral_core.fim.templates`), whose sentinels must be single special tokens
  of the tokenizer (checked once, refused in one line otherwise).

A chat template is a Jinja program that comes with the model, from the internet. Jinja's
sandbox keeps it from reaching Python internals, but not from looping for hours or
building a string of gigabytes. So templates render in a helper process (`ChatTemplate`,
one per tokenizer, started on first use) with transformers' own renderer, the one
`apply_chat_template` calls, under a memory limit (RLIMIT_AS), a deadline (the helper is
killed when it passes) and a cap on the rendered length. Any failure is a one-line
UserError that names the template's file.
"""

from __future__ import annotations

import json
import os
import resource
import select
import subprocess  # nosec B404 - runs this interpreter with a fixed argument list
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Sequence

from coral_core.errors import UserError
from coral_core.shown import one_line
from coral_core.types import Message, Prompt

_FRAME = 4  # bytes of the big-endian length before each message between the processes
STARTUP_SECONDS = 120  # for the helper's imports, on a loaded machine
# Address space the template helper may add to what it starts with. Deliberately not
# `execution.memory_mb`, the limit of a scored candidate: the helper renders the model's own
# chat template (model input, not candidate code), on top of the transformers it imports.
TEMPLATE_MEMORY_BYTES = 1 << 30


def wants_chat_template(tokenizer: Any, option: bool | None) -> bool:
    """`None` uses the chat template when the tokenizer has one; True insists on it."""
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if option is None:
        return has_template
    if option and not has_template:
        raise UserError("hf model: chat_template = true, but the tokenizer has no chat template")
    return bool(option)


def check_supported(prompt: Prompt, model: str = "hf", fim: Any = None) -> None:
    """Refuse, before anything is loaded, a prompt shape the model cannot render."""
    if prompt.kind == "infill" and fim is None:
        raise UserError(
            f"model {model} has no FIM template: its tokenizer carries no known family's "
            "FIM tokens (set [model.options] fim_template = \"qwen\" | \"deepseek\" | "
            "\"starcoder\" | \"codellama\" | \"codegemma\" | \"codestral\")"
        )


def resolve_fim(tokenizer: Any, option: str | None, model: str = "hf") -> Any:
    """The FIM template for this tokenizer and the ids of its stop tokens, or (None, set())
    when the tokenizer has no known family's tokens and no `fim_template` was given.
    A template whose sentinels are not single special tokens is refused in one line."""
    from coral_core.fim.templates import (
        check_sentinels, detect_family, template_for)
    name = option or detect_family(tokenizer)
    if not name:
        return None, set()
    template = template_for(name)
    return template, check_sentinels(tokenizer, template, model)


def render_prompt(tokenizer: Any, prompt: Prompt, chat: bool,
                  model: str = "hf", fim: Any = None) -> tuple[str, bool]:
    """The text to tokenize and whether the tokenizer should add its special tokens.

    `chat` says whether to use the chat template (see `wants_chat_template`); `model`
    names the model in error messages; `fim` is the FIM template for infilling prompts
    (see `resolve_fim`; no chat template is used for them).
    """
    check_supported(prompt, model, fim)
    if prompt.kind == "infill":
        return fim.render(prompt.prefix or "", prompt.suffix or ""), True
    messages = prompt.as_messages()
    if chat:
        text = chat_template_of(tokenizer).render(tokenizer, _turns(messages), True)
        return text, False
    if len(messages) == 1 and messages[0].role == "user":
        return messages[0].content, True
    raise UserError(
        f"model {model}: the prompt is a chat of {len(messages)} turns, but the model is used "
        "without a chat template (the tokenizer has none, or chat_template = false)"
    )


def render_answer(tokenizer: Any, prompt: Prompt, answer: str, chat: bool,
                  model: str = "hf") -> str:
    """The text that follows `render_prompt(...)` when the model writes `answer`: the
    answer itself, or with a chat template the assistant turn as the template closes it."""
    if not chat:
        return answer
    prompt_text, _ = render_prompt(tokenizer, prompt, chat, model)
    full = chat_template_of(tokenizer).render(
        tokenizer, _turns(prompt.as_messages()) + [{"role": "assistant", "content": answer}],
        False)
    return full[len(prompt_text):] if full.startswith(prompt_text) else answer


def _turns(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": message.role, "content": message.content} for message in messages]


# ----- rendering chat templates under limits -----

@dataclass(frozen=True)
class TemplateLimits:
    """What rendering one prompt with a chat template may cost."""

    timeout: float = 10.0  # seconds per rendering (the helper is killed after it)
    max_chars: int = 4_000_000  # characters of rendered text
    memory_bytes: int = TEMPLATE_MEMORY_BYTES


class ChatTemplate:
    """Renders a tokenizer's chat template in a helper process under `TemplateLimits`.

    Renders exactly what `tokenizer.apply_chat_template(..., tokenize=False)` would: the
    same template (`get_chat_template()`), the same special-token variables and the same
    transformers function. `where` names the template's file in error messages.
    """

    def __init__(self, where: str, limits: TemplateLimits = TemplateLimits()) -> None:
        self.where = where
        self.limits = limits
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize | None = None

    def render(self, tokenizer: Any, messages: list[dict[str, str]],
               add_generation_prompt: bool) -> str:
        try:
            template = tokenizer.get_chat_template()
        except (ValueError, TypeError) as error:
            raise UserError(f"hf model: the chat template in {self.where} is unusable: "
                            f"{one_line(str(error))}") from None
        request = {
            "template": template, "messages": messages,
            "add_generation_prompt": add_generation_prompt,
            "variables": {k: v for k, v in dict(tokenizer.special_tokens_map).items()
                          if isinstance(v, str)},
            "max_chars": self.limits.max_chars,
        }
        with self._lock:
            reply = self._exchange(json.dumps(request).encode())
        if "error" in reply:
            raise UserError(f"hf model: the chat template in {self.where} failed: "
                            f"{one_line(str(reply['error']))}")
        return str(reply["text"])

    def _exchange(self, payload: bytes) -> dict[str, Any]:
        process = self._helper()
        try:
            return _ask(process, payload, time.monotonic() + self.limits.timeout,
                        4 * self.limits.max_chars + 4096)
        except TimeoutError:
            self.close()
            raise UserError(f"hf model: the chat template in {self.where} did not finish "
                            f"rendering within {self.limits.timeout:g} s") from None
        except (OSError, ValueError, _HelperFailed) as error:
            self.close()
            raise UserError(f"hf model: rendering the chat template in {self.where} "
                            f"failed: the helper {one_line(str(error)) or 'stopped'}") from None

    def _helper(self) -> subprocess.Popen[bytes]:
        """The running helper, started (and waited for: its imports take a second or
        more, which the rendering deadline does not count) when there is none."""
        if self._process is not None and self._process.poll() is None:
            return self._process
        env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
               "CORAL_TEMPLATE_MEMORY": str(self.limits.memory_bytes)}
        process = subprocess.Popen(  # nosec B603 - this interpreter, fixed code
            [sys.executable, "-c", "from coral_plugins.models.hf.prompts import "
             "serve_templates; serve_templates()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, close_fds=True)
        self._finalizer = weakref.finalize(self, _stop, process)
        try:
            assert process.stdout is not None
            size = int.from_bytes(_read(process.stdout.fileno(), _FRAME,
                                        time.monotonic() + STARTUP_SECONDS), "big")
            _read(process.stdout.fileno(), size, time.monotonic() + STARTUP_SECONDS)
        except (TimeoutError, OSError, _HelperFailed):
            _stop(process)
            raise UserError("hf model: the chat template helper process did not start "
                            f"within {STARTUP_SECONDS} s") from None
        self._process = process
        return process

    def close(self) -> None:
        """Stop the helper (a later rendering starts a new one)."""
        process, self._process = self._process, None
        if process is not None:
            _stop(process)


class _HelperFailed(Exception):
    pass


def _ask(process: subprocess.Popen[bytes], payload: bytes, deadline: float,
         most: int) -> dict[str, Any]:
    """Send one framed request and read the framed reply (at most `most` bytes)."""
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(len(payload).to_bytes(_FRAME, "big") + payload)
    process.stdin.flush()
    size = int.from_bytes(_read(process.stdout.fileno(), _FRAME, deadline), "big")
    if size > most:
        raise _HelperFailed("sent an oversized reply")
    reply = json.loads(_read(process.stdout.fileno(), size, deadline))
    if not isinstance(reply, dict):
        raise _HelperFailed("sent a malformed reply")
    return reply


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
    process.wait()
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass


def _read(fd: int, size: int, deadline: float) -> bytes:
    """Exactly `size` bytes from `fd` before `deadline` (TimeoutError otherwise)."""
    data = bytearray()
    while len(data) < size:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, min(size - len(data), 1 << 20))
        if not chunk:
            raise _HelperFailed("exited")
        data += chunk
    return bytes(data)


_templates: "weakref.WeakKeyDictionary[Any, ChatTemplate]" = weakref.WeakKeyDictionary()
_templates_lock = threading.Lock()


def chat_template_of(tokenizer: Any, where: str | None = None,
                     limits: TemplateLimits | None = None) -> ChatTemplate:
    """The `ChatTemplate` renderer of `tokenizer` (made on first use; `where` and `limits`
    replace its settings when given)."""
    with _templates_lock:
        renderer = _templates.get(tokenizer)
        if renderer is None:
            name = where or f"{getattr(tokenizer, 'name_or_path', '') or 'the tokenizer'}"
            renderer = _templates[tokenizer] = ChatTemplate(name, limits or TemplateLimits())
        else:
            if where is not None:
                renderer.where = where
            if limits is not None and limits != renderer.limits:
                renderer.close()
                renderer.limits = limits
        return renderer


def serve_templates() -> None:
    """The helper's loop: read a request, render it, answer; exit at end of input.

    The address-space limit is set after the imports, on top of what they took.
    """
    from transformers.utils.chat_template_utils import render_jinja_template

    extra = int(os.environ.get("CORAL_TEMPLATE_MEMORY", str(TEMPLATE_MEMORY_BYTES)))
    with open("/proc/self/statm") as statm:
        current = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (current + extra, current + extra))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    ready = json.dumps({"ready": True}).encode()
    stdout.write(len(ready).to_bytes(_FRAME, "big") + ready)
    stdout.flush()
    while True:
        header = stdin.read(_FRAME)
        if len(header) < _FRAME:
            return
        request = json.loads(stdin.read(int.from_bytes(header, "big")))
        try:
            rendered, _ = render_jinja_template(
                conversations=[request["messages"]], chat_template=request["template"],
                add_generation_prompt=request["add_generation_prompt"],
                **request["variables"])
            text = rendered[0]
            reply: dict[str, Any] = (
                {"text": text} if len(text) <= request["max_chars"] else
                {"error": f"it rendered more than {request['max_chars']} characters"})
        except MemoryError:
            reply = {"error": "it needed more memory than the limit"}
        except Exception as error:  # the template's own failure, reported to the parent
            reply = {"error": f"{type(error).__name__}: {error}"}
        try:
            payload = json.dumps(reply).encode()
        except MemoryError:
            payload = json.dumps({"error": "it needed more memory than the limit"}).encode()
        stdout.write(len(payload).to_bytes(_FRAME, "big") + payload)
        stdout.flush()
