"""The program under test as the tests' process sees it: a module of call proxies.

Loaded as the support module `coral_testgen_proxy` in both processes; `install` acts only
in the tests' process. There the program module is a plain module whose functions are
`ProgramFunction`s: calling one sends the arguments to the program's process and returns
what the program returned (or raises what it raised, by builtin exception type). No code,
source, line number or frame of the program exists in this process, so nothing but calling
it can tell one version of the program from another.
"""

import json
import sys
import types

import coral_testgen_codec as codec

CHANNEL = []
_EXPIRED = []


class ProgramError(Exception):
    """The program raised an exception of a type of its own (its name and message)."""


class Channel(codec.Channel):
    """Lines of JSON on the pipes to and from the program's process."""

    def receive(self):
        while True:
            line = self.line()
            if line is not None:
                return json.loads(line)
            if not self.fill():
                raise ConnectionError("the program's process has gone")


def _exchange(kind, body, sent):
    channel = CHANNEL[0]
    channel.send(kind, body)
    reply = channel.receive()
    if reply.get("expired"):
        raise _EXPIRED[0]()
    decoder = codec.Decoder(reply.get("t", {}), sent, other=_handles(sent))
    if "x" in reply:
        raise codec.exception(reply["x"], decoder, ProgramError)
    return decoder.value(reply["v"])


def _handles(sent):
    """Iterators and callables the program returned stay in its process: handles here."""
    def other(tag, rest):
        if len(rest) == 1 and type(rest[0]) is int:
            if tag == "g":
                return ProgramIterator(rest[0], sent)
            if tag == "k":
                return ProgramFunction(rest[0])
        raise codec.Unsendable("a malformed value")
    return other


class ProgramFunction:
    """Calls the program's function `name` (or a callable it returned, by its handle)
    in the program's process."""

    def __init__(self, name):
        self.name = name

    def __call__(self, *args, **kwargs):
        try:
            request, sent = codec.call(self.name, args, kwargs)
        except (codec.Unsendable, RecursionError) as error:
            raise TypeError("coral: %s cannot be passed to the program under test (only "
                            "plain data and node.Node objects can)" % error) from None
        return _exchange("C", request, sent)

    def __repr__(self):
        return "<function %s of the program under test>" % (self.name,)


class ProgramIterator:
    """A generator or iterator the program returned: each step runs in its process."""

    def __init__(self, handle, sent):
        self.handle, self.sent = handle, sent

    def __iter__(self):
        return self

    def __next__(self):
        return _exchange("G", {"g": self.handle}, self.sent)


def install(name, fds, expired):
    """Receive the program's public names and put a module of proxies in sys.modules; when
    the program failed to load, leave it out (importing it fails, as loading did)."""
    CHANNEL.append(Channel(*fds))
    _EXPIRED.append(expired)
    hello = CHANNEL[0].receive()
    if "error" in hello:
        return
    module = types.ModuleType(name)
    for function in hello["names"]:
        setattr(module, function, ProgramFunction(function))
    decoder = codec.Decoder(hello["t"])
    for key, data in hello["values"]:
        setattr(module, key, decoder.value(data))
    sys.modules[name] = module
