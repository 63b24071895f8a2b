"""The exception tree drawn in ``constrained/errors.py``'s docstring is the
classes' own: every error class is in it, under each class it derives from,
with the built-in exception it also is."""

from __future__ import annotations

import builtins
import inspect
import re

from constrained import errors

NODE = re.compile(r"^(?P<indent>[ │├└─]*)(?P<name>[A-Z]\w+)(?: \((?P<builtin>\w+)\))?")


def drawn() -> list[tuple[str, str | None, str | None]]:
    """(class, its parent in the drawing, the built-in named beside it)."""
    lines = [line[4:] for line in (errors.__doc__ or "").splitlines() if line.startswith("    ") and line.strip()]
    nodes, parents = [], {}
    for line in lines:
        match = NODE.match(line)
        assert match, line
        depth = len(match["indent"]) // 3
        parents[depth] = match["name"]
        nodes.append((match["name"], parents.get(depth - 1), match["builtin"]))
    return nodes


def test_the_drawn_tree_is_the_class_tree():
    nodes = drawn()
    classes = {
        name: cls for name, cls in inspect.getmembers(errors, inspect.isclass) if issubclass(cls, errors.ConstrainedError)
    }
    assert {name for name, _, _ in nodes} == set(classes)
    for name, parent, builtin in nodes:
        cls = classes[name]
        if parent is not None:
            assert classes[parent] in cls.__bases__, (name, parent)
        if builtin is not None:
            assert issubclass(cls, getattr(builtins, builtin)), (name, builtin)
    for name, cls in classes.items():  # every base that is an error of ours is drawn as a parent
        drawn_parents = {parent for node, parent, _ in nodes if node == name}
        assert {b.__name__ for b in cls.__bases__ if issubclass(b, errors.ConstrainedError)} <= drawn_parents | {None}, name
