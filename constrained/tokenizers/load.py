""":func:`load_tokenizer`: which loader a name, path or object goes to, and
the per-process cache in front of the built-ins and paths."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import TokenizerError
from .builtin import BUILTIN_NAMES, BUILTINS
from .cache import once_per_process
from .core import Tokenizer, with_overrides
from .huggingface import load_object, load_path


def load_tokenizer(
    name_or_path: Any,
    *,
    vocab_size: int | None = None,
    eos_token_ids: Sequence[int] | None = None,
) -> Tokenizer:
    """A :class:`Tokenizer` for a built-in name, a local Hugging Face tokenizer
    directory or ``tokenizer.json``, or a tokenizer object.

    ``vocab_size`` (embedding rows) and ``eos_token_ids`` override what is read
    from the source; for a directory they default to ``config.json``'s
    ``vocab_size`` and ``generation_config.json``'s ``eos_token_id``.
    Built-in names and paths are loaded once per process.
    """
    if isinstance(name_or_path, Tokenizer):
        if vocab_size is None and eos_token_ids is None:
            return name_or_path
        return with_overrides(name_or_path, vocab_size, eos_token_ids)
    if isinstance(name_or_path, (str, os.PathLike)):
        key: Any
        text = os.fspath(name_or_path)
        if not isinstance(text, str):
            text = os.fsdecode(text)
        builtin = BUILTINS.get(text.strip().lower())
        if builtin is not None:  # a built-in name always wins; write ./qwen3 for a folder named so
            key = ("builtin", builtin.name, vocab_size, tuple(eos_token_ids or ()))
            loader: Callable[[], Tokenizer] = lambda: builtin.load(vocab_size, eos_token_ids)  # noqa: E731
        else:
            path = Path(text).expanduser()
            if not path.exists():
                looks_like_path = os.sep in text or "/" in text or text.startswith((".", "~")) or text.endswith(".json")
                what = "no such file or directory" if looks_like_path else "not a built-in name, nor a file or directory"
                raise TokenizerError(
                    f"cannot load tokenizer {text!r}: {what}. Built-in names: {', '.join(BUILTIN_NAMES)}; "
                    "otherwise pass a local Hugging Face tokenizer directory, a tokenizer.json file, or a "
                    "tokenizer object (nothing is downloaded from a model hub)."
                )
            path = path.resolve()
            probe = path / "tokenizer.json" if path.is_dir() and (path / "tokenizer.json").exists() else path
            st = probe.stat()
            key = ("path", str(path), st.st_mtime_ns, st.st_size, vocab_size, tuple(eos_token_ids or ()))
            loader = lambda: load_path(path, vocab_size, eos_token_ids)  # noqa: E731
        return once_per_process(key, loader)
    return load_object(name_or_path, vocab_size, eos_token_ids)
