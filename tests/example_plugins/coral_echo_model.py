"""A deterministic test model: the buggy program from the prompt, marked with its seed.

`delay` (seconds per request) lets a test kill a run part-way.
"""
import random
import re
import time

from coral_core.hookspecs import hookimpl
from coral_core.types import Generation


class EchoModel:
    name = "echo"

    def __init__(self, target="", delay=0.0):
        self.delay = float(delay)

    def generate(self, requests):
        results = []
        for request in requests:
            time.sleep(self.delay)
            text = request.prompt.instruction
            code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
            rng = random.Random(request.params.seed)
            variant = rng.randint(0, 9)
            if variant == 0:
                code = "def broken(:\n"
            results.append([Generation(code + f"\n# variant {variant}\n```\n",
                                       prompt_tokens=len(text),
                                       completion_tokens=len(code), seconds=self.delay)])
        return results


@hookimpl
def coral_register_models(register):
    register("echo", EchoModel)
