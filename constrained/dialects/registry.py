"""The tool-call dialects, by name: every concrete :class:`Dialect` subclass
defined in this package's modules, found on first use.

Nothing lists the dialects by hand, so adding one is a module here and its
``.lark`` file (see ``grammars/README.md``); the compiler and parser look
dialects up here, the CLI and the tests enumerate :data:`DIALECTS`.
Discovery waits for the first look-up, so a module of this package may
itself look dialects up.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from collections.abc import Iterator, Mapping

from ..errors import UnknownDialectError
from .base import Dialect


class _Registry(Mapping[str, Dialect]):
    """One instance of each dialect, by name, in the order of their names."""

    def __init__(self) -> None:
        self._found: dict[str, Dialect] | None = None

    def _dialects(self) -> dict[str, Dialect]:
        # Two threads may both discover: they find the same dialects.
        if self._found is None:
            self._found = _discover()
        return self._found

    def __getitem__(self, name: str) -> Dialect:
        return self._dialects()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dialects())

    def __len__(self) -> int:
        return len(self._dialects())

    def __repr__(self) -> str:
        return f"DIALECTS({', '.join(self)})"


def _discover() -> dict[str, Dialect]:
    """An instance of every concrete :class:`Dialect` subclass that a module
    of this package defines."""
    found: dict[str, Dialect] = {}
    for module_info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        module = importlib.import_module(f"{__package__}.{module_info.name}")
        for cls in vars(module).values():
            if (
                inspect.isclass(cls)
                and issubclass(cls, Dialect)
                and cls.__module__ == module.__name__
                and not inspect.isabstract(cls)
            ):
                if cls.name in found:
                    other = type(found[cls.name]).__qualname__
                    raise TypeError(f"dialects {other} and {cls.__qualname__} are both called {cls.name!r}")
                found[cls.name] = cls()
    return dict(sorted(found.items()))


DIALECTS: Mapping[str, Dialect] = _Registry()


def get_dialect(name: str) -> Dialect:
    """The dialect called ``name`` (:class:`UnknownDialectError` lists the known ones)."""
    try:
        return DIALECTS[name]
    except KeyError:
        raise UnknownDialectError(
            f"unknown dialect {name!r}; expected one of {', '.join(sorted(DIALECTS))}"
        ) from None
