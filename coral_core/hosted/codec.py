"""Values between the two processes of a hosted sandbox job, as plain JSON data.

Only data crosses: None, bool, int, float, complex, str, bytes, tuple, frozenset, range,
Fraction, Decimal, the builtin types themselves (`int`, `list`...), a dict's keys, values
and items views, MappingProxyType and ChainMap (each rebuilt as a real one over a new dict,
so it compares, orders and prints as the original) inline; list, dict,
set, bytearray, defaultdict, OrderedDict, Counter, deque and node.Node objects by reference
("o", key) with their contents in a table, so shared and cyclic structures (Node graphs,
Node's shared default lists, dicts keyed by tuples of Nodes) keep their identities.
Exact types only: a subclass could run its own code in the other process. Contents are
encoded and decoded with loops, not recursion, so a linked list of 100,000 Nodes crosses.
`Channel` carries them as lines of JSON, and `call` and `Encoder.reply` build the two
halves of a call. A user may carry more (HumanEval's handles: `other` on both sides), and
in a reply, a stand-in for what the caller's own objects now hold that is not data.

This file is not imported by Coral's own processes (but by tests): its text is loaded inside
the sandbox as a support module of both processes of a job, under the name its user picks
(`coral_testgen_codec` for test generation, `coral_hosted_codec` for HumanEval's checks).
"""

import builtins
import collections
import decimal
import fractions
import json
import os
import types

_FLAT = (None.__class__, bool, str)
_KINDS = {"l": list, "d": dict, "s": set, "B": bytearray, "dd": collections.defaultdict,
          "od": collections.OrderedDict, "C": collections.Counter, "q": collections.deque}
_CONTAINERS = frozenset(_KINDS.values())
_TYPES = {t.__name__: t for t in (int, float, complex, str, bytes, bool, list, dict, set,
                                  frozenset, tuple, bytearray, object)}
_VIEWS = {type({}.keys()): "k", type({}.values()): "v", type({}.items()): "i"}
MAX_DEPTH = 200  # of inline values (tuples within tuples); containers are not nested


class Unsendable(TypeError):
    """A value that cannot cross to the other process."""


def node_class():
    import sys

    module = sys.modules.get("node")
    found = getattr(module, "Node", None) if module is not None else None
    return found if isinstance(found, type) else None


class Encoder:
    """Turns values into JSON data: `value(x)` inline, containers into `table` by key.

    `seed(obj, key)` makes an object already known to the other side (written by key only
    unless its contents are asked for); `other(x)` may turn an unknown type into data."""

    def __init__(self, prefix, other=None):
        self.prefix, self.other, self.node = prefix, other, node_class()
        self.memo, self.keep, self.table, self.pending = {}, [], {}, []
        self.stand_in = None  # while set (see reply): what is not data becomes its result

    def seed(self, obj, key):
        self.memo[id(obj)] = key
        self.keep.append(obj)

    def value(self, x, depth=0):
        kind = type(x)
        if kind in _FLAT:
            return x
        if kind is int:  # JSON's decimal digits stop at 4,300 (sys.int_max_str_digits)
            return x if x.bit_length() <= 12000 else ["I", format(x, "x")]
        if depth > MAX_DEPTH:
            raise Unsendable("a value nested too deeply")
        if kind is float:
            return ["f", repr(x)]
        if kind in _CONTAINERS or (kind is self.node and self.node is not None):
            return ["o", self.ref(x)]
        if kind is tuple:
            return ["t", [self.value(i, depth + 1) for i in x]]
        if kind is frozenset:
            return ["F", [self.value(i, depth + 1) for i in x]]
        if kind is bytes:
            return ["b", x.hex()]
        if kind is complex:
            return ["c", repr(x.real), repr(x.imag)]
        if kind is range:
            return ["r", self.value(x.start), self.value(x.stop), self.value(x.step)]
        if kind is type and _TYPES.get(x.__name__) is x:
            return ["T", x.__name__]
        if kind is fractions.Fraction:
            return ["Q", self.value(x.numerator), self.value(x.denominator)]
        if kind is decimal.Decimal:
            return ["D", str(x)]
        if kind in _VIEWS:
            return ["V", _VIEWS[kind], [self.value(i, depth + 1) for i in x]]
        if kind is types.MappingProxyType:
            return ["M", self.value(dict(x), depth + 1)]
        if kind is collections.ChainMap:
            return ["CM", [self.value(m, depth + 1) for m in x.maps]]
        if self.stand_in is not None:
            try:
                return self.other(x) if self.other is not None else self.stand_in(x)
            except Unsendable:
                return self.stand_in(x)
        if self.other is not None:
            return self.other(x)
        raise Unsendable("a %s" % kind.__name__)

    def ref(self, x):
        key = self.memo.get(id(x))
        if key is None:
            key = "%s%d" % (self.prefix, len(self.memo))
            self.seed(x, key)
            self.pending.append((key, x))
        return key

    def contents(self, x):
        kind = type(x)
        if kind is list:
            return ["l", [self.value(i) for i in x]]
        if kind in (dict, collections.OrderedDict, collections.Counter):
            tag = "d" if kind is dict else "od" if kind is collections.OrderedDict else "C"
            return [tag, self._pairs(x)]
        if kind is collections.defaultdict:
            return ["dd", [self.value(x.default_factory), self._pairs(x)]]
        if kind is set:
            return ["s", [self.value(i) for i in x]]
        if kind is collections.deque:
            return ["q", [x.maxlen, [self.value(i) for i in x]]]
        if kind is bytearray:
            return ["B", x.hex()]
        fields = []
        for name, item in vars(x).items():
            if type(name) is not str:
                raise Unsendable("a Node attribute that is not a string")
            fields.append([name, self.value(item)])
        return ["n", fields]

    def _pairs(self, x):
        return [[self.value(k), self.value(v)] for k, v in x.items()]

    def drain(self):
        """Encode every container reached so far (and those they reach): the table."""
        while self.pending:
            key, x = self.pending.pop()
            self.table[key] = self.contents(x)
        return self.table

    def reply(self, value, error, origin, incoming, describe, stand_in=None):
        """One call's answer: its value, or its exception's type, arguments (None where
        they are not data) and `describe(error)`, and in "t" the table with the contents
        of every argument the call changed (`origin`: the caller's objects by key,
        `incoming`: their contents as sent). Raises Unsendable for a value not data.
        `stand_in(x)`, where given, encodes what the arguments' new contents hold that is
        not data (a sentinel the program left in a list the test passed it): the caller
        must see that its object changed, and an answer refused for it failed a correct
        program (a red-team pass)."""
        for key, obj in origin.items():
            self.seed(obj, key)
        if error is None:
            answer = {"v": self.value(value)}
        else:
            try:
                arguments = self.value(tuple(error.args))
            except Exception:  # noqa: B902 - arguments that are not data, or no tuple
                arguments = None
            base = next((c.__name__ for c in type(error).__mro__ if _builtin_exception(c)),
                        "Exception")
            answer = {"x": [type(error).__name__, arguments, describe(error), base]}
        self.drain()  # the value's containers: data only
        self.stand_in, changed = stand_in, {}
        try:
            for key, obj in origin.items():
                contents = self.contents(obj)
                if contents != incoming.get(key):
                    changed[key] = contents
            table = self.drain()  # and what only the arguments reach
        finally:
            self.stand_in = None
        table.update(changed)
        answer["t"] = table
        return answer


# Taken when this module loads, before the program: a program may rebind them at its top
# level, honestly (`json.dumps = partial(json.dumps, indent=2)`), which must not break the
# lines between the two processes (a red-team pass).
_dumps, loads, _write, _read = json.dumps, json.loads, os.write, os.read


class Channel:
    """Lines of JSON between a job's two processes: `send` writes one whole line, `line`
    takes the next complete one from what has arrived (None: none has yet), `fill` reads
    what is there to read (False: the other process has closed its end)."""

    def __init__(self, read, write):
        self.read, self.write, self.buffer = read, write, bytearray()

    def send(self, kind, payload):
        data = (kind + _dumps(payload, separators=(",", ":")) + "\n").encode(
            "utf-8", "surrogatepass")
        while data:
            data = data[_write(self.write, data):]

    def line(self):
        end = self.buffer.find(b"\n")
        if end < 0:
            return None
        line = bytes(self.buffer[:end])
        del self.buffer[:end + 1]
        return line

    def fill(self):
        chunk = _read(self.read, 1 << 16)
        self.buffer += chunk
        return bool(chunk)


def exception(x, decoder, program_error, known=None):
    """The exception that a call's answer `x` ([name, args, message, the nearest builtin
    class the program's exception derives from]) stands for on this side: the builtin of
    that name; else the class of that name in `known` (the benchmark's own definitions:
    a test's `except NegError` catches the NegError the prompt defines); else
    `program_error`, made a subclass of that builtin base too, so that `except ValueError`
    catches a program's own ValueError subclass as it does upstream (a red-team set's
    honest programs failed both ways)."""
    name, args, message, *rest = x
    if type(name) is not str or type(message) is not str:
        raise ValueError("a malformed exception")
    found = getattr(builtins, name, None)
    if not _builtin_exception(found):
        found = (known or {}).get(name)
        if not (isinstance(found, type) and issubclass(found, BaseException)):
            found = None
    if found is not None:
        try:
            return found(*decoder.value(args)) if args is not None else found(message)
        except Exception:  # noqa: B902 - arguments its constructor refuses
            try:
                return found(message)
            except Exception:  # noqa: B902 - a constructor that takes no message
                pass
    text = "%s: %s" % (name[:100], message[:300])
    base = getattr(builtins, rest[0], None) if rest and type(rest[0]) is str else None
    if _builtin_exception(base) and not issubclass(program_error, base):
        try:
            return type(name[:100], (program_error, base), {})(text)
        except TypeError:  # a base whose layout or constructor will not mix
            pass
    return program_error(text)


def _builtin_exception(found):
    return isinstance(found, type) and issubclass(found, BaseException) \
        and found.__module__ == "builtins"


def call(target, args, kwargs, other=None):
    """(the request of a call of `target`, the caller's objects it sent by key: a call's
    answer reports what the call changed in them). Raises Unsendable for an argument that
    is not data (`other(x)` may encode one, as Encoder's)."""
    encoder = Encoder("", other)
    data = [encoder.value(a) for a in args]
    named = [[k, encoder.value(v)] for k, v in kwargs.items()]
    request = {"f": target, "a": data, "k": named, "t": encoder.drain()}
    return request, {encoder.memo[id(o)]: o for o in encoder.keep}


def encode(values, prefix="", other=None):
    """(data, table, encoder) for a list of values."""
    encoder = Encoder(prefix, other)
    data = [encoder.value(v) for v in values]
    return data, encoder.drain(), encoder


class Decoder:
    """Turns data back into values. `objects` maps keys to objects that exist already (the
    tests' own, whose new contents the table may hold: they are updated in place)."""

    def __init__(self, table, objects=None, other=None):
        if type(table) is not dict:
            raise Unsendable("a malformed table")
        self.table, self.objects, self.other = table, dict(objects or {}), other
        self.node = node_class()
        for key, entry in table.items():
            if not (type(entry) is list and len(entry) == 2 and type(entry[0]) is str):
                raise Unsendable("a malformed table entry")
            if key not in self.objects:
                self.objects[key] = self._empty(*entry)
        for key, (kind, data) in table.items():
            try:
                self._fill(self.objects[key], kind, data)
            except (ValueError, ArithmeticError, TypeError) as error:  # {[1]: 2}, bad hex
                if isinstance(error, Unsendable):
                    raise
                raise Unsendable("a malformed table entry") from None

    def _empty(self, kind, data):
        if kind == "n" and self.node is not None:
            return self.node.__new__(self.node)
        if kind == "q":
            maxlen = data[0] if _pair(data) else "?"
            if maxlen is not None and (type(maxlen) is not int or maxlen < 0):
                raise Unsendable("a malformed deque")
            return collections.deque(maxlen=maxlen)
        if kind not in _KINDS:
            raise Unsendable("an unknown kind of object")
        return _KINDS[kind]()

    def _fill(self, obj, kind, data):
        if type(obj) is not _KINDS.get(kind, self.node):
            raise Unsendable("an object whose kind changed")
        if kind == "B":
            obj[:] = bytes.fromhex(_text(data))
            return
        if type(data) is not list:
            raise Unsendable("malformed contents")
        if kind in ("dd", "q"):
            if not _pair(data) or type(data[1]) is not list:
                raise Unsendable("malformed contents")
            if kind == "dd":
                factory = self.value(data[0])
                if factory is not None and not callable(factory):
                    raise Unsendable("a malformed defaultdict")
                obj.default_factory = factory
            data = data[1]
        if kind in ("l", "s", "q"):
            items = [self.value(i) for i in data]
            obj.clear()
            if kind == "s":
                obj.update(items)
            else:
                obj.extend(items)
        elif kind != "n":
            pairs = [(self.value(p[0]), self.value(p[1])) for p in data if _pair(p)]
            if len(pairs) != len(data):
                raise Unsendable("a malformed dict")
            obj.clear()
            for key, value in pairs:  # (Counter.update would add counts)
                obj[key] = value
        else:
            fields = {}
            for pair in data:
                if not (_pair(pair) and type(pair[0]) is str and pair[0].isidentifier()
                        and not pair[0].startswith("__")):
                    raise Unsendable("a malformed Node")
                fields[pair[0]] = self.value(pair[1])
            attributes = vars(obj)
            attributes.clear()
            attributes.update(fields)

    def value(self, x, depth=0):
        kind = type(x)
        if kind in _FLAT or kind is int:
            return x
        if kind is not list or not x or type(x[0]) is not str or depth > MAX_DEPTH:
            raise Unsendable("a malformed value")
        try:
            return self._tagged(x[0], x[1:], depth)
        except (ValueError, ArithmeticError, TypeError) as error:  # Fraction(1, 0), range(step 0)
            if isinstance(error, Unsendable):
                raise
            raise Unsendable("a malformed value") from None

    def _ints(self, rest, depth):
        ints = [self.value(i, depth + 1) for i in rest]
        if not all(type(i) is int for i in ints):
            raise Unsendable("a malformed value")
        return ints

    def _tagged(self, tag, rest, depth):
        if tag == "o" and len(rest) == 1 and type(rest[0]) is str and rest[0] in self.objects:
            return self.objects[rest[0]]
        if tag in ("t", "F") and len(rest) == 1 and type(rest[0]) is list:
            items = [self.value(i, depth + 1) for i in rest[0]]
            return tuple(items) if tag == "t" else frozenset(items)
        if tag == "f" and len(rest) == 1:
            return float(_text(rest[0]))
        if tag == "b" and len(rest) == 1:
            return bytes.fromhex(_text(rest[0]))
        if tag == "c" and len(rest) == 2:
            return complex(float(_text(rest[0])), float(_text(rest[1])))
        if tag == "I" and len(rest) == 1:
            return int(_text(rest[0]), 16)
        if tag == "r" and len(rest) == 3:
            return range(*self._ints(rest, depth))
        if tag == "Q" and len(rest) == 2:
            return fractions.Fraction(*self._ints(rest, depth))
        if tag == "T" and len(rest) == 1 and rest[0] in _TYPES:
            return _TYPES[rest[0]]
        if tag == "D" and len(rest) == 1:
            return decimal.Decimal(_text(rest[0]))
        if tag == "V" and len(rest) == 2 and rest[0] in ("k", "v", "i") \
                and type(rest[1]) is list:
            return _view(rest[0], [self.value(i, depth + 1) for i in rest[1]])
        if tag == "M" and len(rest) == 1:
            mapping = self.value(rest[0], depth + 1)
            if type(mapping) is not dict:
                raise Unsendable("a malformed mappingproxy")
            return types.MappingProxyType(mapping)
        if tag == "CM" and len(rest) == 1 and type(rest[0]) is list:
            maps = [self.value(m, depth + 1) for m in rest[0]]
            if not all(type(m) in _MAPPINGS for m in maps):
                raise Unsendable("a malformed ChainMap")
            return collections.ChainMap(*maps)
        if self.other is not None:
            return self.other(tag, rest)
        raise Unsendable("a malformed value")


_MAPPINGS = (dict, collections.OrderedDict, collections.Counter, collections.defaultdict)


def _view(kind, items):
    """A real view of a new dict holding `items`, in their order."""
    if kind == "k":
        return dict.fromkeys(items).keys()
    if kind == "v":
        return dict(enumerate(items)).values()
    if not all(type(pair) is tuple and len(pair) == 2 for pair in items):
        raise Unsendable("a malformed items view")
    return dict(items).items()


def _text(x):
    if type(x) is not str or len(x) > 1 << 24:
        raise Unsendable("malformed text")
    return x


def _pair(x):
    return type(x) is list and len(x) == 2
