"""The tokens that carry a compiled grammar's structure, for the steered
sampler of :mod:`constrained.qa.fuzz`: the vocabulary's special and short
punctuation tokens, the token sequences of the grammar's string literals,
and the closings that end a value of any text.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..caches import LruCache
from ..compiler import CompiledTools
from ..dialects import get_dialect
from ..dialects.base import Markers

if TYPE_CHECKING:
    from ..tokenizers import Tokenizer


@dataclass(frozen=True)
class StructureTokens:
    """The tokens that carry a grammar's structure: special tokens, short
    punctuation and whitespace tokens, the token sequences of the grammar's
    literals (markup, key and tool names, ``true``/``false``/``null``, enum
    values), and of the closings that end a value of any text (a JSON
    string's ``"``, the dialect's raw-value closing)."""

    specials: np.ndarray
    punctuation: np.ndarray
    literals: tuple[tuple[int, ...], ...]
    weights: np.ndarray
    """Per literal: how often the grammar uses it (markup repeats, names do not)."""
    closings: tuple[tuple[int, ...], ...]

    @property
    def literal_firsts(self) -> np.ndarray:
        return _firsts(self.literals)

    @property
    def closing_firsts(self) -> np.ndarray:
        return _firsts(self.closings)


def _firsts(sequences: tuple[tuple[int, ...], ...]) -> np.ndarray:
    return np.array([sequence[0] for sequence in sequences], dtype=np.int64)


_LARK_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_PUNCTUATION = frozenset(b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ \t\n\r")


def grammar_literals(grammar: str) -> list[str]:
    """The text of every string literal in a Lark grammar, in order (regexes,
    ``%json`` schemas and comments skipped)."""
    found: list[str] = []
    for line in grammar.splitlines():
        position = 0
        while position < len(line):
            if line[position] == '"':
                match = _LARK_STRING.match(line, position)
                if match is None:
                    break
                try:
                    found.append(json.loads(match.group()))
                except ValueError:
                    pass
                position = match.end()
            elif line.startswith("//", position):
                break
            elif line[position] == "<":  # a special token, such as <|"|>
                end = line.find(">", position)
                position = end + 1 if end >= 0 else len(line)
            elif line[position] == "/":
                position = _regex_end(line, position + 1)
            elif line.startswith("%json", position):
                position = _json_end(line, position + len("%json"))
            else:
                position += 1
    return found


def _regex_end(line: str, position: int) -> int:
    while position < len(line) and line[position] != "/":
        position += 2 if line[position] == "\\" else 1
    return position + 1


def _json_end(line: str, position: int) -> int:
    start = len(line) - len(line[position:].lstrip())
    try:
        return json.JSONDecoder().raw_decode(line, start)[1]
    except ValueError:
        return len(line)


_vocabulary_structure: LruCache[str, tuple[np.ndarray, np.ndarray]] = LruCache("fuzz vocabulary structure", 8)
"""By tokenizer fingerprint."""
_structures: LruCache[str, StructureTokens] = LruCache("fuzz structure tokens", 64)
"""By compiled set fingerprint."""


def _vocabulary_tokens(tok: Tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """The special tokens and the punctuation/whitespace tokens of at most
    two bytes of ``tok``, once per vocabulary."""
    return _vocabulary_structure.get_or_make(tok.fingerprint, lambda: _structural_tokens(tok))


def _structural_tokens(tok: Tokenizer) -> tuple[np.ndarray, np.ndarray]:
    table, special = tok.token_table
    punctuation = [
        token
        for token, data in enumerate(table)
        if 0 < len(data) <= 2 and token not in special and all(byte in _PUNCTUATION for byte in data)
    ]
    return np.array(sorted(special), dtype=np.int64), np.array(punctuation, dtype=np.int64)


def structure_tokens(compiled: CompiledTools) -> StructureTokens:
    """The :class:`StructureTokens` of ``compiled`` (kept for the last few
    compiled tool sets)."""
    return _structures.get_or_make(compiled.fingerprint, lambda: _structure_of(compiled))


def _structure_of(compiled: CompiledTools) -> StructureTokens:
    tok = compiled.tokenizer
    specials, punctuation = _vocabulary_tokens(tok)
    uses: Counter[tuple[int, ...]] = Counter(
        tuple(tok.encode(text)) for text in grammar_literals(compiled.grammar) if text
    )
    closings = ['"']
    dialect = get_dialect(compiled.dialect)
    syntax = dialect.raw_text_syntax(Markers(tok))
    if syntax is not None and not syntax.close_is_token:
        closings.append(syntax.close)
    return StructureTokens(
        specials=specials,
        punctuation=punctuation,
        literals=tuple(uses),
        weights=np.array(list(uses.values()), dtype=np.float64),
        closings=tuple(dict.fromkeys(tuple(tok.encode(text)) for text in closings)),
    )
