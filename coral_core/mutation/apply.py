"""Every mutant's source from one parse of the module.

cosmic-ray's `mutate_code` parses the whole module (parso) for each mutant: 30-50 ms for a
500-line module, most of what a small mutant costs. Here the module is parsed once; each
operator's mutation positions are enumerated in the order cosmic-ray's walk counts them
(pre-order), and a mutant is made by mutating a copy of its node put in the node's place,
putting the node back, and splicing the copy's code into the source where the node's lies.
The node's parent must read as before (the whole tree, for an operator that is not
cosmic-ray's own); should an operator have changed anything but its copy, the tree is
parsed afresh and that mutant is made by `mutate_code` itself. tests/test_mutation_apply.py
requires the same text as `mutate_code` for every mutant of real modules.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Iterator


def _nodes(node: Any) -> Iterator[Any]:
    yield node
    for child in getattr(node, "children", ()):
        yield from _nodes(child)


class Mutator:
    """The mutants of one module's source, by operator and occurrence."""

    def __init__(self, source: str):
        self.source = source
        self._tree: Any = None
        self._positions: dict[str, list[tuple[Any, int]]] = {}
        self._starts: list[int] = []  # where each of parso's lines begins in the source
        self.fallbacks = 0  # mutants made by cosmic-ray's own mutate_code

    def _parsed(self) -> Any:
        if self._tree is None:
            import parso
            from parso.utils import split_lines

            self._tree = parso.parse(self.source)
            self._positions.clear()
            self._starts = [0]
            for line in split_lines(self.source, keepends=True):
                self._starts.append(self._starts[-1] + len(line))
        return self._tree

    def _offset(self, position: tuple[int, int]) -> int:
        line, column = position
        return self._starts[line - 1] + column

    def mutated(self, name: str, args: dict | None, occurrence: int) -> str | None:
        """The module's source with that mutant applied; None where the operator has no
        such occurrence (cosmic-ray's no-test). Raises what cosmic-ray's operator raises."""
        import cosmic_ray.plugins

        operator = cosmic_ray.plugins.get_operator(name)(**(args or {}))
        tree = self._parsed()
        key = json.dumps([name, args or {}], sort_keys=True, default=str)
        if key not in self._positions:
            self._positions[key] = [(node, index) for node in _nodes(tree)
                                    for index, _ in enumerate(operator.mutation_positions(node))]
        positions = self._positions[key]
        if occurrence >= len(positions):
            return None
        node, index = positions[occurrence]
        text = self._swap(node, operator, index)
        if text is None:  # the operator reached beyond its node
            from cosmic_ray.mutating import mutate_code

            self._tree = None
            self.fallbacks += 1
            return mutate_code(self.source, operator, occurrence)
        return text

    def _swap(self, node: Any, operator: Any, index: int) -> str | None:
        """The source with the node's text (its prefix included) replaced by the mutated
        copy's: reading the whole tree's code for every mutant (twice) made a 15,000-line
        module's 141,000 mutants take hours to prepare (a red-team pass). None when the
        mutation changed anything but the copy."""
        parent = node.parent
        node.parent = None  # the copy takes the node's subtree, not the whole tree
        try:
            twin = copy.deepcopy(node)
        finally:
            node.parent = parent
        start = self._offset(node.get_first_leaf().get_start_pos_of_prefix())
        end = self._offset(node.end_pos)
        if parent is None:  # the module itself
            new = operator.mutate(twin, index)
            return new.get_code() if new is not None else ""
        children = parent.children
        around = parent.get_code()
        at = next(i for i, child in enumerate(children) if child is node)
        twin.parent = parent
        parent.children = children[:at] + [twin] + children[at + 1:]
        try:
            new = operator.mutate(twin, index)
        finally:
            parent.children = children
            twin.parent = None
        if parent.get_code() != around or any(a is not b for a, b in zip(parent.children,
                                                                         children)):
            return None
        if not _own(operator) and node.get_root_node().get_code() != self.source:
            return None  # another's operator may reach anywhere: the whole tree is read
        code = new.get_code() if new is not None else ""
        return self.source[:start] + code + self.source[end:]


def _own(operator: Any) -> bool:
    """cosmic-ray's own operators change only the copy they are given (tests/
    test_mutation_apply.py holds them to mutate_code's text on real modules)."""
    return type(operator).__module__.startswith("cosmic_ray.operators.")
