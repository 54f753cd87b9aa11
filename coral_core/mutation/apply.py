"""Every mutant's source from one parse of the module.

cosmic-ray's `mutate_code` parses the whole module (parso) for each mutant: 30-50 ms for a
500-line module, most of what a small mutant costs. Here the module is parsed once; each
operator's mutation positions are enumerated in the order cosmic-ray's walk counts them
(pre-order), and a mutant is made by mutating a copy of its node put in the node's place,
reading the module's code, and putting the node back. After each mutant the tree must read
as the module again; should an operator have changed it anywhere else, the tree is parsed
afresh and that mutant is made by `mutate_code` itself. tests/test_mutation_apply.py
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
        self.fallbacks = 0  # mutants made by cosmic-ray's own mutate_code

    def _parsed(self) -> Any:
        if self._tree is None:
            import parso

            self._tree = parso.parse(self.source)
            self._positions.clear()
        return self._tree

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
        text = self._swap(tree, node, operator, index)
        if tree.get_code() != self.source:  # the operator reached beyond its node
            from cosmic_ray.mutating import mutate_code

            self._tree = None
            self.fallbacks += 1
            return mutate_code(self.source, operator, occurrence)
        return text

    @staticmethod
    def _swap(tree: Any, node: Any, operator: Any, index: int) -> str:
        parent = node.parent
        node.parent = None  # the copy takes the node's subtree, not the whole tree
        try:
            twin = copy.deepcopy(node)
        finally:
            node.parent = parent
        if parent is None:  # the module itself
            new = operator.mutate(twin, index)
            return new.get_code() if new is not None else ""
        children = parent.children
        at = next(i for i, child in enumerate(children) if child is node)
        twin.parent = parent
        parent.children = children[:at] + [twin] + children[at + 1:]
        try:
            new = operator.mutate(twin, index)
            parent.children = children[:at] + ([new] if new is not None else []) \
                + children[at + 1:]
            return tree.get_code()
        finally:
            parent.children = children
