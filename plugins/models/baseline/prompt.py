"""Finding the program to repair in a request's prompt.

The baseline sees only what a model sees: the structured `Prompt`. A bug-fixing task
shows the program in a fenced code block of its instruction (QuixBugs: after
"Buggy Code:"), or of a chat turn. An infilling prompt holds no program to repair.
"""

from __future__ import annotations

import re

from coral_core import parsing
from coral_core.errors import UserError
from coral_core.types import Prompt

_BLOCK = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_MARKER = re.compile(r"buggy code\s*:?\s*$", re.IGNORECASE)
_PYTHON = ("", "python", "py", "python3")


def program_in(prompt: Prompt) -> str:
    """The program to repair: in the instruction, or in the chat's turns (the last user
    turn that holds one first), the fenced block after "Buggy Code:" if there is one, else
    the first closed fenced Python block that parses. (A prompt's final, open fence is
    where the answer goes, and is not a block.)"""
    if prompt.kind == "infill":
        raise UserError(
            "baseline: it repairs the program shown in a prompt and cannot fill in the "
            "middle of one (use an hf: or openai: model for infilling tasks)"
        )
    if prompt.kind == "instruction":
        texts = [prompt.instruction]
    else:
        turns = list(reversed(prompt.messages))
        texts = ([m.content for m in turns if m.role == "user"]
                 + [m.content for m in turns if m.role != "user"])
    for text in texts:
        found = _program_in_text(text)
        if found is not None:
            return found
    raise UserError(
        "baseline: the prompt holds no ```python code block with a program to repair "
        "(the baseline repairs the program shown in the prompt)"
    )


def _program_in_text(text: str) -> str | None:
    blocks: list[tuple[bool, str]] = []
    for match in _BLOCK.finditer(text):
        language, body = match.group(1).lower(), match.group(2).strip("\n")
        if language not in _PYTHON or not body.strip():
            continue
        before = text[:match.start()].rstrip().rsplit("\n", 1)[-1]
        blocks.append((bool(_MARKER.search(before)), body))
    for _, body in sorted(blocks, key=lambda block: not block[0]):
        try:
            parsing.parse(body)
        except (SyntaxError, ValueError):
            continue
        return body
    return None
