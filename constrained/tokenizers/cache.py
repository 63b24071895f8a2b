"""Where derived files are kept, and the two caches of tokenizers.

On disk, under ``$CONSTRAINED_CACHE`` (default ``~/.cache/constrained``)
``/tokenizers``, each built-in vocabulary keeps its derived
``tokenizer.json`` (8-15 MB) and its token table (1.5-3 MB), named by a key
of the builder version, the source and the ``tokenizers`` major version, so a
changed source or builder is rebuilt rather than misread. In the process,
the last loaded built-ins and paths are kept, so each is loaded once.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..caches import LruCache
from .core import Tokenizer, tokenizers_module

# Bump when a builder changes what it writes: old cache files are then ignored.
_BUILDER_VERSION = 1


CACHE_SUBFOLDERS = ("tokenizers", "models", "vllm")
"""The cache root's folders: built-in tokenizers (:func:`cache_dir`), the
converted default model (``constrained.runtime.models.models_dir``), and
vLLM's own caches for a server ``constrained.vllm.launch`` starts (unless
``VLLM_CACHE_ROOT`` is set)."""


def cache_root() -> Path:
    """The one folder every file this package writes goes under (derived
    tokenizers, the converted default model; nothing else is written, and
    nothing outside it): ``$CONSTRAINED_CACHE`` or ``~/.cache/constrained``.
    Deleting it is safe; the files are rebuilt on next use."""
    root = os.environ.get("CONSTRAINED_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "constrained"


def cache_dir() -> Path:
    """Where derived tokenizer files are kept: ``<cache root>/tokenizers``."""
    return cache_root() / "tokenizers"


def builtin_paths(name: str, source_id: Any) -> tuple[Path, Path]:
    """The cached ``tokenizer.json`` and token table of built-in ``name``
    built from the source ``source_id`` describes."""
    key = hashlib.sha256(
        json.dumps([_BUILDER_VERSION, name, source_id, tokenizers_module().__version__.split(".")[0]]).encode()
    ).hexdigest()[:16]
    return cache_dir() / f"{name}-{key}.json", cache_dir() / f"{name}-{key}.table"


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the whole new
    one; an unwritable cache is not an error."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError:
        pass  # an unwritable cache only costs a rebuild next time


_loaded: LruCache[Any, Tokenizer] = LruCache("loaded tokenizers", 8)
"""By what was loaded: a built-in's name or a path with its modification
time and size, and the overrides."""
_loading = tuple(threading.Lock() for _ in range(8))
"""Held while a tokenizer loads, one lock per hash of its key: a load takes
up to seconds, so threads that ask for one tokenizer at once wait for the
first one's load rather than each loading it."""


def once_per_process(key: Any, loader: Callable[[], Tokenizer]) -> Tokenizer:
    """The tokenizer kept under ``key``, loaded by ``loader`` the first time.
    One thread loads; others asking for the same key wait for it."""
    tok = _loaded.get(key)
    if tok is None:
        with _loading[hash(key) % len(_loading)]:
            tok = _loaded.get_or_make(key, loader)
    return tok
