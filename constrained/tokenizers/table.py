"""The token table: each id's bytes and the set of special ids, which is how
llguidance sees a vocabulary; its fingerprint; and the binary form the disk
cache keeps it in, so a cached built-in loads without its ``tokenizers``
backend.

A token is *special* when its added-token entry says ``special``, or when it
is an added token shaped ``<...>`` (llguidance's own rule, which makes Qwen's
``<tool_call>``/``<think>`` special although their ``tokenizer.json`` marks
them not special) unless it is a plain HTML tag such as Gemma's ``<table>``,
``<b>``, ``</div>`` user-defined text pieces, which stay ordinary text.
Padding rows past the tokenizer's last token are empty (``b''``).
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
import sys
from array import array
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..errors import TokenizerError

if TYPE_CHECKING:  # pragma: no cover
    import tokenizers

#: Each id's bytes (one entry per embedding row) and the set of special ids.
TokenTable = tuple[list[bytes], frozenset[int]]

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


def bytes_to_unicode() -> dict[int, str]:
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


def _decoder_kind(backend: tokenizers.Tokenizer) -> tuple[str, str]:
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


def token_table(backend: tokenizers.Tokenizer, vocab_size: int) -> TokenTable:
    """Each id's bytes (padded with b'' up to ``vocab_size``) and the special ids."""
    kind, space = _decoder_kind(backend)
    table: list[bytes] = [b""] * vocab_size
    added = backend.get_added_tokens_decoder()
    special: set[int] = set()
    if kind == "byte_level":
        inv = {c: b for b, c in bytes_to_unicode().items()}
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


def fingerprint(table: Sequence[bytes], special: Iterable[int], eos: Sequence[int]) -> str:
    """SHA-256 (hex) of the row count, the EOS ids, and each id's bytes and
    special flag: what a compiled constraint depends on."""
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


def pack_table(table: Sequence[bytes], special: Iterable[int]) -> bytes:
    """The binary form of a token table: magic, counts, special ids, lengths, bytes."""
    spec = sorted(special)
    return b"".join([
        _TABLE_MAGIC,
        struct.pack("<II", len(table), len(spec)),
        _u32(spec),
        _u32(len(b) for b in table),
        b"".join(table),
    ])


def unpack_table(data: bytes) -> TokenTable:
    """The token table :func:`pack_table` wrote; ``ValueError`` when ``data``
    is not one or is cut short."""
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
