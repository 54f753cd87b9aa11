"""How an `hf` model renders a structured `Prompt` into the text it reads.

One rendering for generation (`HFModel`) and for adapter training (`adapters`), so that an
adapter learns on exactly the text it will be prompted with:

- an instruction: with a chat template, one user turn followed by the assistant turn's
  opening (the template carries any BOS token); without one, the instruction text
  itself, tokenized with the tokenizer's special tokens (BOS).
- chat messages: the chat template renders the turns. Without a template, a chat of one
  user turn is rendered as an instruction; any other chat is refused with a UserError,
  since joining turns into text would be a prompt format the model never saw.
- a prefix/suffix pair (infilling): refused with a UserError for now (FIM templates per
  model family come later).
"""

from __future__ import annotations

from typing import Any, Sequence

from coral_core.errors import UserError
from coral_core.types import Message, Prompt


def wants_chat_template(tokenizer: Any, option: bool | None) -> bool:
    """`None` uses the chat template when the tokenizer has one; True insists on it."""
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if option is None:
        return has_template
    if option and not has_template:
        raise UserError("hf model: chat_template = true, but the tokenizer has no chat template")
    return bool(option)


def check_supported(prompt: Prompt, model: str = "hf") -> None:
    """Refuse, before anything is loaded, a prompt shape no hf model can render yet."""
    if prompt.kind == "infill":
        raise UserError(
            f"model {model} has no FIM template yet: infilling (prefix/suffix) prompts "
            "are not supported by hf models"
        )


def render_prompt(tokenizer: Any, prompt: Prompt, chat: bool,
                  model: str = "hf") -> tuple[str, bool]:
    """The text to tokenize and whether the tokenizer should add its special tokens.

    `chat` says whether to use the chat template (see `wants_chat_template`); `model`
    names the model in error messages.
    """
    check_supported(prompt, model)
    messages = prompt.as_messages()
    if chat:
        text = tokenizer.apply_chat_template(
            _turns(messages), tokenize=False, add_generation_prompt=True
        )
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
    full = tokenizer.apply_chat_template(
        _turns(prompt.as_messages()) + [{"role": "assistant", "content": answer}],
        tokenize=False,
    )
    return full[len(prompt_text):] if full.startswith(prompt_text) else answer


def _turns(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": message.role, "content": message.content} for message in messages]
