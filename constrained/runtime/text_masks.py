"""Precomputed masks for raw-text value frames (qwen3_coder, glm strings).

Inside a top-level string value of any content, the allowed tokens depend
only on the tokenizer, the closing sequence and how much of the closing the
text ends with (a KMP state), so they are computed once per tokenizer and
closing and reused by every tool and request. This is where a lexer-driven
mask is slowest: llguidance walks the whole token trie there (about 200 us
for Qwen's 151,936 tokens), a copy of a precomputed row takes about 1 us.
The rows equal llguidance's masks token for token; the tests compare them
over whole vocabularies. :mod:`.frame_tracker` says when a row applies.

A raw value may not hold its tool's guards either (the start of an
argument's markup, :class:`~constrained.dialects.raw_values.RawValueDialect`):
:class:`ValueGuards` knows, from how much of a guard the text ends with,
the few tokens that would complete one, and the row leaves them out.
"""

from __future__ import annotations

import bisect
import itertools
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..caches import LruCache
from .logits_mask import index_of

if TYPE_CHECKING:
    import torch

    from ..tokenizers import Tokenizer

ALL_ALLOWED = np.uint32(0xFFFFFFFF)
"""A packed mask word that allows each of its 32 tokens."""


@dataclass
class TextFrameMasks:
    """The masks of one closing sequence over one vocabulary.

    ``inside[j]``: tokens that keep the text inside the value from KMP state
    ``j`` (valid UTF-8 from a character boundary, no special token, the
    closing not completed). ``completing[j]``: tokens that complete the
    closing with their last byte. ``crossing[j]``: tokens that complete it
    earlier, so their tail must suit what follows the value (checked per
    step). A special-token closing has one state and completes by its id;
    a closing that ends in a special token's text completes by that token.
    ``written[j]``: the row a step from state ``j`` starts from (``inside[j]``,
    plus the closing token when it is a special token, always allowed), one
    array per state so a row known to hold it is not written again.
    """

    close: bytes
    close_token: int | None
    inside: np.ndarray
    completing: list[list[int]]
    crossing: list[list[int]]
    transitions: list[list[int]] = field(repr=False)
    neutral: bytes = field(default=b"", repr=False)
    """Per token: 1 when it holds no byte of the closing (from any state it
    leads to state 0), so the tracker skips its bytes."""
    trailing: bytes = field(default=b"", repr=False)
    """Per token: continuation bytes its last character still needs (255:
    the token is continuation bytes only, so it depends on what came before)."""
    steps: dict[tuple[int, int], int] = field(default_factory=dict, repr=False)
    """KMP state after a token from a state, filled as tokens are seen."""
    vocab_size: int = 0
    written: list[np.ndarray] = field(default_factory=list, repr=False)
    _exceptions: list[tuple[np.ndarray, np.ndarray] | None] = field(default_factory=list, repr=False)
    """Per state: the words of ``written`` that are not all ones and their
    values, where they are few (else None: the row is copied)."""
    _forbidden: dict[int, torch.Tensor] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        rows = self.inside.copy()
        if self.close_token is not None:
            rows[:, self.close_token >> 5] |= np.uint32(1 << (self.close_token & 31))
        self.written = list(rows)
        for row in self.written:
            words = np.flatnonzero(row != ALL_ALLOWED)
            self._exceptions.append((words, row[words]) if len(words) <= len(row) // 8 else None)

    def write(self, row: np.ndarray, state: int) -> None:
        """Write ``written[state]`` into ``row``: where few of its words
        forbid tokens (the special ones), every word set and then those,
        which spares reading a whole row from memory; else a copy."""
        exceptions = self._exceptions[state]
        if exceptions is None:
            np.copyto(row, self.written[state])
            return
        row.fill(ALL_ALLOWED)
        row[exceptions[0]] = exceptions[1]

    def forbidden(self, state: int) -> torch.Tensor:
        """The tokens ``inside[state]`` forbids (a closing token is allowed),
        as a CPU index tensor for the constraint's sparse apply; made on
        first use."""
        if state not in self._forbidden:
            bits = np.unpackbits(self.inside[state].view(np.uint8), bitorder="little")[: self.vocab_size]
            if self.close_token is not None:
                bits[self.close_token] = 1
            self._forbidden[state] = index_of(np.flatnonzero(bits == 0).astype(np.int64))
        return self._forbidden[state]

    @classmethod
    def build(cls, tok: Tokenizer, close: str, close_token: int | None) -> TextFrameMasks:
        table, special = tok.token_table
        words = (tok.vocab_size + 31) // 32
        pattern = b"" if close_token is not None else close.encode("utf-8")
        text_ok = np.zeros(words * 32, dtype=bool)
        neutral, trailing = bytearray(len(table)), bytearray(b"\xff" * len(table))
        for token, data in enumerate(table):
            if data and token not in special:
                # Tokens invalid at a character boundary still follow a split character.
                trailing[token] = _trailing_need(data)
                neutral[token] = len(data.translate(None, pattern)) == len(data)
                text_ok[token] = _utf8_prefix(data)
        if close_token is not None:
            inside = np.packbits(text_ok, bitorder="little").view(np.uint32).reshape(1, words)
            return cls(b"", close_token, inside.copy(), [[close_token]], [[]], [[0] * 256], bytes(neutral),
                       bytes(trailing), vocab_size=tok.vocab_size)
        transitions = kmp_transitions(pattern)
        states = len(pattern)
        last = pattern[-1:]
        allowed = np.repeat(text_ok[None, :], states, axis=0)
        completing: list[list[int]] = [[] for _ in range(states)]
        crossing: list[list[int]] = [[] for _ in range(states)]
        # A special token whose text ends the closing completes it too (DSML's
        # "</｜DSML｜": text, then the token; the text never spells the token).
        ending = {token for token in special if table[token] and len(table[token]) < states and pattern.endswith(table[token])}
        for token, data in enumerate(table):
            # Only a token holding the closing's last byte can complete it.
            if not (text_ok[token] or token in ending) or last not in data:
                continue
            for start in range(states):
                end = _completes_at(transitions, start, data, states)
                if end is None:
                    continue
                allowed[start, token] = False
                (completing if end == len(data) else crossing)[start].append(token)
        inside = np.packbits(allowed, axis=1, bitorder="little").view(np.uint32)
        return cls(pattern, None, np.ascontiguousarray(inside), completing, crossing, transitions,
                   bytes(neutral), bytes(trailing), vocab_size=tok.vocab_size)


def kmp_transitions(pattern: bytes) -> list[list[int]]:
    """``t[j][b]``: how much of ``pattern`` the text ends with after byte
    ``b``, from state ``j`` (``len(pattern)``: the pattern just completed)."""
    n = len(pattern)
    table = [[0] * 256 for _ in range(n)]
    fallback = 0
    for j in range(n):
        if j > 0:
            table[j] = list(table[fallback])
        table[j][pattern[j]] = j + 1
        if j > 0:
            fallback = table[fallback][pattern[j]]
    return table


def _completes_at(transitions: list[list[int]], state: int, data: bytes, done: int) -> int | None:
    for position, byte in enumerate(data):
        state = transitions[state][byte]
        if state == done:
            return position + 1
    return None


def _utf8_prefix(data: bytes) -> bool:
    """Whether ``data`` is valid UTF-8, possibly ending inside a character
    that some continuation completes validly."""
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError as error:
        if error.reason != "unexpected end of data":
            return False
        tail = data[error.start :]
    need = utf8_length(tail[0]) - len(tail)
    return any(
        _decodes(tail + bytes([second]) + b"\x80" * (need - 1)) for second in range(0x80, 0xC0)
    )


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _trailing_need(data: bytes) -> int:
    """Continuation bytes the last character of ``data`` still needs, from a
    character boundary (255 when ``data`` is only continuation bytes)."""
    for back, byte in enumerate(reversed(data[-4:])):
        if byte < 0x80:
            return 0
        if byte >= 0xC0:
            return max(utf8_length(byte) - 1 - back, 0)
    return 255


def utf8_length(byte: int) -> int:
    """How many bytes the UTF-8 character that ``byte`` leads takes."""
    return 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4


class ValueGuards:
    """The guards of raw values over one vocabulary: texts a value may not
    hold (after ``lead``, the text before every value). The
    state is the longest tail of the value's text that is a proper start of
    a guard; from it, :meth:`bad` gives the tokens that would complete one
    before the value's closing (computed once per state and closing state)."""

    def __init__(self, tok: Tokenizer, masks: TextFrameMasks, guards: tuple[bytes, ...], lead: bytes) -> None:
        self.masks = masks
        self.guards = guards
        self.starts = {guard[:size] for guard in guards for size in range(1, len(guard))}
        self.longest = max(len(guard) for guard in guards)
        self.firsts = bytes(sorted({guard[0] for guard in guards}))
        self.search = re.compile(b"|".join(re.escape(guard) for guard in guards))
        self.initial = self.advance(b"", lead)
        self._vocabulary = _vocabulary(tok)
        self._bad: dict[tuple[bytes, int], np.ndarray] = {}
        self._whole = self._vocabulary.containing(self.search, min(len(guard) for guard in guards))

    def advance(self, tail: bytes, data: bytes) -> bytes:
        """The state after ``data`` (value text) from ``tail``."""
        if not tail and len(data.translate(None, self.firsts)) == len(data):  # no guard begins in it
            return b""
        text = tail + data
        for start in range(max(0, len(text) - self.longest + 1), len(text)):
            if text[start:] in self.starts:
                return text[start:]
        return b""

    def bad(self, tail: bytes, kmp: int) -> np.ndarray:
        """The text tokens that, from ``tail`` and closing state ``kmp``,
        complete a guard before they complete the closing. A guard so
        completed lies in the token whole, or begins in ``tail`` and the
        token starts with the rest of it: only those tokens are tried."""
        key = (tail, kmp)
        if key not in self._bad:
            table = self._vocabulary.table
            candidates = set(self._whole)
            for start in range(len(tail)):
                for guard in self.guards:
                    if guard.startswith(tail[start:]):
                        candidates.update(self._vocabulary.starting_with(guard[len(tail) - start :]))
            masks, done = self.masks, len(self.masks.close)
            found = []
            for token in sorted(candidates):
                data = table[token]
                end = _completes_at(masks.transitions, kmp, data, done) if masks.close else None
                if self.search.search(tail + data[: end or len(data)]):
                    found.append(token)
            self._bad[key] = np.array(found, dtype=np.int64)
        return self._bad[key]


class _Vocabulary:
    """A vocabulary's text tokens, sorted by their bytes (for the tokens
    that start with some text) and by the bytes they hold."""

    def __init__(self, tok: Tokenizer) -> None:
        table, special = tok.token_table
        self.table = table
        self.sorted = sorted((data, token) for token, data in enumerate(table) if data and token not in special)
        self.keys = [data for data, _ in self.sorted]
        self._long: dict[int, tuple[bytes, list[int], list[int]]] = {}

    def starting_with(self, prefix: bytes) -> list[int]:
        first = bisect.bisect_left(self.keys, prefix)
        last = first
        while last < len(self.keys) and self.keys[last].startswith(prefix):
            last += 1
        return [token for _, token in self.sorted[first:last]]

    def containing(self, pattern: re.Pattern[bytes], shortest: int) -> list[int]:
        """The tokens in which ``pattern`` (of no NUL byte, matching at least
        ``shortest`` bytes) finds a match: one regex scan over the tokens
        long enough, joined by NUL bytes."""
        blob, starts, tokens = self.long_tokens(shortest)
        return sorted({tokens[bisect.bisect_right(starts, match.start()) - 1] for match in pattern.finditer(blob)})

    def long_tokens(self, shortest: int) -> tuple[bytes, list[int], list[int]]:
        """The tokens of at least ``shortest`` bytes, joined by NUL bytes, with
        where each starts in the join and their ids (made once per length)."""
        if shortest not in self._long:
            long = [(data, token) for data, token in self.sorted if len(data) >= shortest]
            starts = list(itertools.accumulate((len(data) + 1 for data, _ in long), initial=0))
            self._long[shortest] = (b"\0".join(data for data, _ in long), starts, [token for _, token in long])
        return self._long[shortest]


_vocabularies: LruCache[str, _Vocabulary] = LruCache("sorted vocabularies", 8)
"""Sorted text tokens by tokenizer fingerprint."""
_guard_sets: LruCache[tuple[str, str, int | None, tuple[bytes, ...], bytes], ValueGuards] = LruCache(
    "raw value guards", 512
)
"""Guard sets (one per tool's set of keys, with the states seen)."""
_masks: LruCache[tuple[str, str, int | None], TextFrameMasks] = LruCache("raw text masks", 64)
"""Masks by tokenizer fingerprint and closing."""
_building = threading.Lock()
"""Held while masks are built: a build takes 0.3 s, so threads that need
the same masks at once wait for the first one's rather than each building
them."""


def _vocabulary(tok: Tokenizer) -> _Vocabulary:
    return _vocabularies.get_or_make(tok.fingerprint, lambda: _Vocabulary(tok))


def value_guards(tok: Tokenizer, masks: TextFrameMasks, guards: tuple[bytes, ...], lead: bytes) -> ValueGuards | None:
    """The :class:`ValueGuards` of ``guards`` (``None`` without any), one per
    vocabulary, closing and guards (the most recently used are kept)."""
    if not guards:
        return None
    key = (tok.fingerprint, masks.close.decode("utf-8", "replace"), masks.close_token, guards, lead)
    return _guard_sets.get_or_make(key, lambda: ValueGuards(tok, masks, guards, lead))


def text_frame_masks(tok: Tokenizer, close: str, close_token: int | None) -> TextFrameMasks:
    """The masks for ``close`` over ``tok``, built once per process (about
    0.3 s for a 150k vocabulary)."""
    key = (tok.fingerprint, close, close_token)
    found = _masks.get(key)
    if found is None:
        with _building:
            found = _masks.get_or_make(key, lambda: TextFrameMasks.build(tok, close, close_token))
    return found
