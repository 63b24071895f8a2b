"""The :class:`Tokenizer` class, which every loader returns, and what the
loaders share: the ``tokenizers`` package import, a transformers tokenizer
over a backend, a tokenizer with its row count or EOS ids overridden."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import TokenizerError
from .table import TokenTable, fingerprint, token_table

if TYPE_CHECKING:  # pragma: no cover
    import llguidance
    import tokenizers


class Tokenizer:
    """A vocabulary with its encoder, as the constraint engine needs it.

    ``vocab_size`` is the model's embedding row count (the logits width), which
    may exceed the number of tokens the tokenizer defines (those extra rows are
    empty and never allowed). ``encode`` adds no BOS and turns every
    added-token string (``<tool_call>``, ``<|"|>``, ...) in the text into its
    single id, as models emit them. ``decode`` keeps special tokens as text.

    Build one with :func:`load_tokenizer`. Everything expensive (the
    ``tokenizers`` backend of a built-in, the llguidance tokenizer, the
    transformers tokenizer) is made on first use and kept; the object is safe
    to share between threads.
    """

    def __init__(
        self,
        *,
        name: str,
        vocab_size: int,
        eos_token_ids: Sequence[int],
        bos_token_id: int | None = None,
        backend: tokenizers.Tokenizer | None = None,
        backend_loader: Callable[[], tokenizers.Tokenizer] | None = None,
        table: TokenTable | None = None,
        hf: Any = None,
        hf_factory: Callable[[], Any] | None = None,
    ) -> None:
        if backend is None and backend_loader is None:
            raise TypeError("Tokenizer needs a backend or a backend_loader")
        self.name: str = name
        self.vocab_size: int = int(vocab_size)
        if self.vocab_size <= 0:
            raise TokenizerError(f"tokenizer {name!r}: vocab_size must be positive, got {vocab_size}")
        eos = tuple(dict.fromkeys(int(i) for i in eos_token_ids))
        bad = [i for i in eos if not 0 <= i < self.vocab_size]
        if bad:
            raise TokenizerError(
                f"tokenizer {name!r}: eos token ids {bad} outside the vocabulary (size {self.vocab_size})"
            )
        if not eos:
            raise TokenizerError(
                f"tokenizer {name!r}: no end-of-sequence token known; pass eos_token_ids=[...] to load_tokenizer"
            )
        self.eos_token_ids: tuple[int, ...] = eos
        self.bos_token_id: int | None = bos_token_id
        self._backend = backend
        self._backend_loader = backend_loader
        self._table = table
        self._hf = hf
        self._hf_factory = hf_factory
        self._lock = threading.RLock()
        self._ll: Any = None
        self._fingerprint: str | None = None
        self._specials: dict[str, int] | None = None

    # -- plain text <-> ids ------------------------------------------------

    @property
    def backend(self) -> tokenizers.Tokenizer:
        """The ``tokenizers.Tokenizer`` that encodes and decodes (a built-in's
        is read from the cache on first use)."""
        b = self._backend
        if b is None:
            with self._lock:
                if self._backend is None:
                    assert self._backend_loader is not None
                    self._backend = self._backend_loader()
                b = self._backend
        return b

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``: no BOS/EOS added, marker strings as single ids."""
        return self.backend.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``, special tokens included. Padding rows decode to ''."""
        return self.backend.decode([int(i) for i in ids], skip_special_tokens=False)

    def token_id(self, marker: str) -> int | None:
        """The id of ``marker`` if the text is exactly one token (a special
        marker or an ordinary token), else ``None``."""
        tid = self.special_tokens.get(marker)
        if tid is not None:
            return tid
        if not marker:
            return None
        ids = self.encode(marker)
        if len(ids) == 1 and self.decode(ids) == marker:
            return ids[0]
        return None

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes token ``token_id`` stands for (b'' for a padding row)."""
        return self.token_table[0][token_id]

    def is_special(self, token_id: int) -> bool:
        """Whether ``token_id`` is special for llguidance: a marker or control
        token that text lexemes never produce."""
        return token_id in self.token_table[1]

    def special_tokens_in(self, texts: Sequence[str]) -> list[str | None]:
        """For each text, the first special token its encoding holds, or
        ``None``. Text holding one cannot be written as text: encoding turns
        it into the token, which no text lexeme of a grammar matches."""
        table, special = self.token_table
        found: list[str | None] = []
        for encoding in self.backend.encode_batch(list(texts), add_special_tokens=False):
            first = next((token for token in encoding.ids if token in special), None)
            found.append(None if first is None else table[first].decode("utf-8", "replace"))
        return found

    @property
    def special_tokens(self) -> dict[str, int]:
        """Every special token, text -> id."""
        if self._specials is None:
            table, special = self.token_table
            self._specials = {table[i].decode("utf-8", "replace"): i for i in sorted(special)}
        return self._specials

    # -- derived objects -----------------------------------------------------

    @property
    def token_table(self) -> TokenTable:
        """Each id's bytes (``vocab_size`` entries) and the set of special ids."""
        t = self._table
        if t is None:
            with self._lock:
                if self._table is None:
                    self._table = token_table(self.backend, self.vocab_size)
                t = self._table
        return t

    @property
    def fingerprint(self) -> str:
        """SHA-256 (hex) of what a compiled constraint depends on: the row count,
        the EOS ids, and each id's bytes and special flag. Equal vocabularies
        loaded from different sources get equal fingerprints."""
        with self._lock:
            if self._fingerprint is None:
                table, special = self.token_table
                self._fingerprint = fingerprint(table, special, self.eos_token_ids)
            return self._fingerprint

    @property
    def ll_tokenizer(self) -> llguidance.LLTokenizer:
        """The ``llguidance.LLTokenizer`` (built on first use, about 1 s, then kept)."""
        with self._lock:
            if self._ll is None:
                self._ll = self._build_ll()
            ll: llguidance.LLTokenizer = self._ll
            return ll

    def _build_ll(self) -> llguidance.LLTokenizer:
        try:
            import llguidance
        except ImportError as e:  # pragma: no cover - llguidance is a dependency
            raise TokenizerError("llguidance is not installed: pip install llguidance") from e
        table, special = self.token_table
        wrapper = _LLWrapper(self, table, special)
        try:
            return llguidance.LLTokenizer(
                wrapper,  # type: ignore[arg-type]
                n_vocab=self.vocab_size,
                eos_token=list(self.eos_token_ids),
            )
        except TypeError:  # pragma: no cover - a llguidance that wants the real class
            return llguidance.LLTokenizer(
                llguidance.TokenizerWrapper(wrapper),
                n_vocab=self.vocab_size,
                eos_token=list(self.eos_token_ids),
            )

    @property
    def hf(self) -> Any:
        """A transformers fast tokenizer for this vocabulary (imports
        transformers on first use). For the built-in Gemma names it adds
        ``<bos>`` like Gemma's own tokenizer does; :meth:`encode` never does."""
        with self._lock:
            if self._hf is None:
                if self._hf_factory is None:
                    raise TokenizerError(f"tokenizer {self.name!r} has no transformers tokenizer")
                self._hf = self._hf_factory()
            return self._hf

    def __repr__(self) -> str:
        return (
            f"Tokenizer(name={self.name!r}, vocab_size={self.vocab_size}, "
            f"eos_token_ids={self.eos_token_ids})"
        )


_ENCODED = 16384
"""Texts whose tokens the llguidance tokenizer keeps (per tokenizer)."""


class _LLWrapper:
    """What ``llguidance.LLTokenizer`` reads from a Python tokenizer (the
    duck-typed form of ``llguidance.TokenizerWrapper``, without its probe
    call, so building the llguidance tokenizer does not load the backend)."""

    is_tokenizer_wrapper = True

    def __init__(self, tok: Tokenizer, table: list[bytes], special: frozenset[int]) -> None:
        self.eos_token_id = tok.eos_token_ids[0]
        self.bos_token_id = tok.bos_token_id
        self.tokens = table
        self.special_token_ids = sorted(special)
        self._tok = tok
        self._encode = functools.lru_cache(maxsize=_ENCODED)(self._encode_text)

    def __call__(self, s: str | bytes) -> list[int]:
        """llguidance calls this at every step the grammar forces bytes (the
        last token's bytes and the forced ones), mostly the same markup
        again: the answers are kept."""
        return list(self._encode(s))

    def _encode_text(self, s: str | bytes) -> tuple[int, ...]:
        if isinstance(s, bytes):
            s = s.decode("utf-8", "replace")
        return tuple(self._tok.backend.encode(s, add_special_tokens=False).ids)


def with_overrides(tok: Tokenizer, vocab_size: int | None, eos_token_ids: Sequence[int] | None) -> Tokenizer:
    """``tok`` with another embedding row count or other EOS ids. The backend
    and the transformers tokenizer are shared, and the token table too while
    the row count stays the same."""
    same_rows = vocab_size in (None, tok.vocab_size)
    return Tokenizer(
        name=tok.name,
        vocab_size=vocab_size or tok.vocab_size,
        eos_token_ids=eos_token_ids or tok.eos_token_ids,
        bos_token_id=tok.bos_token_id,
        backend_loader=lambda: tok.backend,
        table=tok._table if same_rows else None,
        hf=tok._hf,
        hf_factory=tok._hf_factory,
    )


def tokenizers_module() -> Any:
    """The ``tokenizers`` package, or a :class:`TokenizerError` saying how to install it."""
    try:
        import tokenizers
    except ImportError as e:  # pragma: no cover
        raise TokenizerError("the 'tokenizers' package is required: pip install tokenizers") from e
    return tokenizers


def transformers_tokenizer(backend: tokenizers.Tokenizer, special: Mapping[str, str], add_bos: bool) -> Any:
    """A transformers fast tokenizer over a copy of ``backend``, with the
    ``special`` token names (``eos_token``, ...); with ``add_bos`` it puts
    ``special["bos_token"]`` first, as Gemma's own tokenizer does."""
    try:
        from transformers import PreTrainedTokenizerFast
    except ImportError as e:
        raise TokenizerError("Tokenizer.hf needs the 'transformers' extra: pip install 'constrained[transformers]'") from e
    tk = tokenizers_module()
    copy = tk.Tokenizer.from_str(backend.to_str())
    if add_bos and special.get("bos_token"):
        from tokenizers import processors

        bos = special["bos_token"]
        copy.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, copy.token_to_id(bos))]
        )
    return PreTrainedTokenizerFast(tokenizer_object=copy, **dict(special))

