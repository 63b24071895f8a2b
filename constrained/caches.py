"""The package's in-process caches: every one bounded, safe under threads,
and forgotten together by :func:`clear_caches`.

Two shapes cover every cache in the package:

- :class:`LruCache`, for things that cost milliseconds to make (a
  normalized tool set, a compiled grammar, a vocabulary's masks): a read
  takes a lock and marks the entry as recently used; the least recently
  used entry goes when the cache is full. :meth:`LruCache.get_or_make`
  makes a missing value outside the lock, so two threads may both make it
  and the first one stored is kept and returned to both: callers see one
  value per key.
- :class:`Memo`, for tables read on every token (the JSON walk's steps, the
  frame tracker's openings): reads are a plain ``dict`` lookup on
  :attr:`Memo.table` with no lock (a lock would cost as much as the lookup
  it guards); writes go through :meth:`Memo.learn`, which takes the lock
  and forgets everything once the table is full. A memo only ever holds
  values that are the same whoever computes them, so a lost race costs
  time, never a result.

Keys are content (a tokenizer's fingerprint, a tool set's digest), never
``id()`` of an object the cache does not keep alive: an id is reused once
its object is gone.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
F = TypeVar("F", bound=Callable[..., object])

_caches: weakref.WeakSet[LruCache[object, object] | Memo[object, object]] = weakref.WeakSet()
_functions: list[Callable[[], None]] = []
_registry_lock = threading.Lock()


class LruCache(Generic[K, V]):
    """At most ``limit`` values by key, the least recently used forgotten first."""

    __slots__ = ("name", "limit", "_entries", "_lock", "__weakref__")

    def __init__(self, name: str, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"cache {name!r}: limit must be at least 1, not {limit}")
        self.name = name
        self.limit = limit
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()
        with _registry_lock:
            _caches.add(self)  # type: ignore[arg-type]

    def get(self, key: K) -> V | None:
        """The value kept for ``key``, or ``None``."""
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> V:
        """Keep ``value`` for ``key`` unless one is kept already; the kept one."""
        with self._lock:
            kept = self._entries.setdefault(key, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.limit:
                self._entries.popitem(last=False)
            return kept

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        """The value kept for ``key``, made by ``make()`` when there is none."""
        found = self.get(key)
        return found if found is not None else self.put(key, make())

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __repr__(self) -> str:
        return f"LruCache({self.name!r}, {len(self)}/{self.limit})"


class Memo(Generic[K, V]):
    """A table read without a lock on hot paths (:attr:`table`), written by
    :meth:`learn`, emptied whenever it reaches ``limit`` entries."""

    __slots__ = ("name", "limit", "table", "_lock", "__weakref__")

    def __init__(self, name: str, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"memo {name!r}: limit must be at least 1, not {limit}")
        self.name = name
        self.limit = limit
        self.table: dict[K, V] = {}
        self._lock = threading.Lock()
        with _registry_lock:
            _caches.add(self)  # type: ignore[arg-type]

    def learn(self, key: K, value: V) -> V:
        """Keep ``value`` for ``key`` (forgetting the rest first when full)."""
        with self._lock:
            if len(self.table) >= self.limit:
                self.table.clear()
            self.table[key] = value
        return value

    def clear(self) -> None:
        with self._lock:
            self.table.clear()

    def __len__(self) -> int:
        return len(self.table)

    def __repr__(self) -> str:
        return f"Memo({self.name!r}, {len(self)}/{self.limit})"


def cached(limit: int) -> Callable[[F], F]:
    """A function's results kept by its (hashable) arguments, at most
    ``limit`` of them: :func:`functools.lru_cache`, which is thread-safe,
    registered with :func:`clear_caches`."""

    def decorate(function: F) -> F:
        wrapped = functools.lru_cache(maxsize=limit)(function)
        with _registry_lock:
            _functions.append(wrapped.cache_clear)
        return wrapped  # type: ignore[return-value]

    return decorate


def clear_caches() -> None:
    """Forget everything this package keeps in memory: normalized tool sets,
    compiled grammars, mask caches and precomputed masks, loaded tokenizers,
    memos of the walks. Nothing on disk is touched, and constraints already
    made keep working (they hold what they use); the next compile or load
    rebuilds what it needs."""
    with _registry_lock:
        caches = list(_caches)
        functions = list(_functions)
    for cache in caches:
        cache.clear()
    for clear in functions:
        clear()
