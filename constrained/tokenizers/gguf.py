"""A reader of GGUF metadata (v2/v3): the key/value header only, which holds
a model's vocabulary, so a tokenizer can be read from a GGUF without reading
its tensors. The file may come split into parts."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import TokenizerError

# GGUF value type codes of the scalar types -> their struct formats (8 is a
# string, 9 an array).
_GGUF_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class ChainedReader:
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

