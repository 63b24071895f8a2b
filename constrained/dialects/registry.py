"""The tool-call dialects, by name: the built-ins, those other packages ship
through the ``constrained.dialects`` entry point group, and those
registered in code with :func:`register_dialect`.

The first look-up loads the built-ins (every concrete :class:`Dialect`
subclass this package's modules define), then the entry points; the
compiler, parser, renderer, CLI and serving plug-ins all look dialects up
here, so a registered dialect is known everywhere at once. Loading waits
for the first look-up, so a module of this package may itself look
dialects up.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import threading
from collections.abc import Iterator, Mapping
from importlib import metadata
from pathlib import Path

from ..errors import DialectError, DuplicateDialectError, UnknownDialectError
from .base import Dialect
from .contract import check_dialect

ENTRY_POINT_GROUP = "constrained.dialects"
"""The entry point group through which a package ships dialects: each entry
names a :class:`Dialect` instance or subclass (``mine = my_pkg.dialect:Mine``)."""


class _Registry(Mapping[str, Dialect]):
    """One instance of each dialect, by name, in the order of their names."""

    def __init__(self) -> None:
        self._dialects: dict[str, Dialect] = {}
        self._loaded = False
        self._lock = threading.RLock()

    def _all(self) -> dict[str, Dialect]:
        if not self._loaded:
            with self._lock:
                if not self._loaded:
                    for dialect in (*_builtins(), *_entry_point_dialects()):
                        self._add(dialect)
                    self._loaded = True
        return self._dialects

    def add(self, dialect: object) -> Dialect:
        """Register ``dialect`` after the built-ins and entry points."""
        with self._lock:
            self._all()
            return self._add(dialect)

    def _add(self, dialect: object) -> Dialect:
        checked = check_dialect(dialect)
        known = self._dialects.get(checked.name)
        if known is checked:
            return checked
        if known is not None:
            raise DuplicateDialectError(
                f"dialect {checked.name!r} is registered already ({type(known).__module__}.{type(known).__qualname__}); "
                f"give {type(checked).__qualname__} another name"
            )
        self._dialects = dict(sorted({**self._dialects, checked.name: checked}.items()))
        return checked

    def __getitem__(self, name: str) -> Dialect:
        return self._all()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def __repr__(self) -> str:
        return f"DIALECTS({', '.join(self)})"


def _builtins() -> list[Dialect]:
    """An instance of every concrete :class:`Dialect` subclass that a module
    of this package defines."""
    found = []
    for module_info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        module = importlib.import_module(f"{__package__}.{module_info.name}")
        found += [
            cls()
            for cls in vars(module).values()
            if inspect.isclass(cls)
            and issubclass(cls, Dialect)
            and cls.__module__ == module.__name__
            and not inspect.isabstract(cls)
        ]
    return found


def _entry_point_dialects() -> list[object]:
    """What each entry point of :data:`ENTRY_POINT_GROUP` names (a class
    made an instance)."""
    found = []
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = entry.load()
        except Exception as exc:  # a broken plug-in is named, whatever it raised
            raise DialectError(f"entry point {entry.name} = {entry.value} ({ENTRY_POINT_GROUP}) failed to load: {exc}") from exc
        is_class = inspect.isclass(loaded) and issubclass(loaded, Dialect) and not inspect.isabstract(loaded)
        found.append(loaded() if is_class else loaded)
    return found


_REGISTRY = _Registry()
DIALECTS: Mapping[str, Dialect] = _REGISTRY


def register_dialect(dialect: Dialect) -> Dialect:
    """Make ``dialect`` known by its name to the compiler, parser, renderer,
    CLI and serving plug-ins (a serving plug-in names its parsers when it
    loads: register before, or ship the dialect through the entry point
    group :data:`ENTRY_POINT_GROUP`). Registering the same object again does
    nothing. Raises :class:`~constrained.errors.DialectError` naming what the
    dialect lacks (a group, a hook, a grammar rule the compiler needs) and
    :class:`~constrained.errors.DuplicateDialectError` when another dialect
    has its name. Returns ``dialect``."""
    return _REGISTRY.add(dialect)


def get_dialect(name: str) -> Dialect:
    """The dialect called ``name`` (:class:`UnknownDialectError` lists the known ones)."""
    try:
        return DIALECTS[name]
    except KeyError:
        raise UnknownDialectError(
            f"unknown dialect {name!r}; expected one of {', '.join(sorted(DIALECTS))}"
        ) from None
