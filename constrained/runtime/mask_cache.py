"""llguidance's masks kept per compiled tool set and reused where a state recurs.

llguidance's mask is a function of the tokens a sequence was fed: of its
parser state, and of the last token (it re-tokenizes forced bytes against
it). So the mask computed after one token history is the mask after the same
history in any sequence of the same grammar. :class:`MaskCache` keeps the
masks in a trie of token ids, one per :class:`~constrained.compiler.CompiledTools`,
shared by every constraint and every request made from it: the second call
of a tool set walks the markup its first call already masked.

Abstractions keep histories shareable across argument values. In a
raw-value dialect (the values the frame tracker follows), a top-level value
leaves no trace once its closing is complete when what follows it cannot
depend on its text: a value of any text (whose masks are precomputed rows),
or a typed value (number, enum, boolean, JSON) of a tool whose arguments are
one object, so no value picks among parameter sets. The grammar is then past
the value, and what comes next depends on the closing token, not on the
text. Such a value is one edge, labelled by its closing token, from the node
where it opened; a typed value's own masks hang off that node, keyed by its
tokens. A call's opening and closing tokens lead to one node each from the
root, whichever call and tool (the grammar stands in one place after each);
in Gemma's syntax the token that closes a call's arguments leads to one node
per tool from the call's opening, whichever members came before, and a
number written in its markup hangs off one node per member (when the
members come in a fixed order). Where they do, the markup after a value
hangs off one node per member and text since the value, whichever token
ended it.
Inside JSON (hermes arguments, JSON values of the raw-value dialects, and
Gemma's values in its own syntax) the nodes follow the value's skeleton
byte by byte, from the bytes of the token before it: its
text less that of its free leaves (strings and numbers no keyword
constrains), of closed leaves, and of array items and map members whose
count no longer matters (:mod:`.json_walk`). Nothing else is abstracted;
the fuzzer compares every cached mask with a plain llguidance matcher
(``--crosscheck``), and the tests do so in every dialect, for values that
pick a parameter set too.

Most masks at structural points are one forced token (llguidance allows only
the canonical tokenization of bytes the grammar forces); those are kept as
the token id and written by setting one bit. Most others, at choices among
keys, names or enum values, allow tokens in a few words of the row: those
are kept as the words and their values (:class:`SparseRow`), written over
the words the row held. The rest are kept as the packed row. A tool set
keeps at most ``max_bytes`` of rows (that of 128 packed rows by default: 2.4
MB for Qwen's vocabulary, 4 MB for Gemma's; the compile cache keeps up to 64
sets) and at most ``max_masks`` masks in all; when that much is held the
cache starts over. A row reused for the first time is also indexed by the tokens it
forbids, when they are few (a string's mask forbids only special tokens),
so the constraint's sparse apply can take it.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import numpy as np

from .frame_tracker import TrackerMemo
from .json_walk import WalkMemo
from .logits_mask import index_of
from .text_masks import ALL_ALLOWED

if TYPE_CHECKING:
    import torch

    from ..compiler import CompiledTools

_SPARSE_ROW_WORDS = 64
"""A row that allows tokens in at most this many words is kept as a
:class:`SparseRow` (12 bytes a word against 4 a word of the whole row)."""
_SPARSE_WORDS = 256
"""A kept row whose forbidden tokens lie in at most this many words also
keeps them as an index (the constraint's sparse apply on CPU)."""
BYTE_LABELS = 1 << 39
"""Labels from here on, past every token id, name one byte of a JSON
value's skeleton (``BYTE_LABELS + byte``, :attr:`JsonWalk.skeleton`)."""
LEAF_LABELS = 1 << 40
"""Labels from here on, past every token id, name a state of a free leaf's
text (``LEAF_LABELS + state``: :attr:`FrameTracker.number_state`,
:attr:`JsonWalk.leaf_state`)."""
NAMED_LABELS = 1 << 41
"""Labels from here on name what a call wrote, e.g. the member whose value
it closed (:meth:`MaskCache.label`)."""
OPENED_CALL = 1 << 42
"""The label of the node after a call's opening token, from the root, in
every call (:func:`constrained.runtime.cache_walk.call_marks`)."""
CLOSED_CALL = OPENED_CALL + 1
"""The label of the node after a call's closing token, from the root."""
_SAMPLE = 16
"""Every this many words are looked at first, to turn most rows down cheaply."""


class SparseRow:
    """A kept mask whose allowed tokens lie in few words of the row: the
    words' indices and values (every other word is zero)."""

    __slots__ = ("words", "values")

    def __init__(self, words: np.ndarray, values: np.ndarray) -> None:
        self.words = words
        self.values = values

    @property
    def nbytes(self) -> int:
        """The room it takes in the cache."""
        return int(self.words.nbytes + self.values.nbytes)


NOTHING = SparseRow(np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.uint32))
"""A row that allows no token: every word zero (a new bitmask's rows)."""


class MaskNode:
    """A token history (from the start of the output, or from the opening
    of a raw value) and, once computed, llguidance's mask after it."""

    __slots__ = ("children", "mask", "forbidden", "checked", "goes_on", "crossings")

    def __init__(self) -> None:
        self.children: dict[int, MaskNode] = {}
        self.mask: int | SparseRow | np.ndarray | None = None
        """The one allowed token, the row's allowed words, or the packed row
        (``uint32`` words)."""
        self.forbidden: torch.Tensor | None = None
        """For a row: the tokens it forbids, when they are few (else None)."""
        self.checked = False  # a row was looked at for the forms above
        self.goes_on: bool | None = None
        """Whether the mask allows a token other than the end tokens, once asked."""
        self.crossings: dict[int, tuple[np.ndarray, np.ndarray]] | None = None
        """Where a value of any text opened (or at its member's node, where
        the member alone decides what follows it): per state of its closing, the
        tokens the grammar allows that end the value and go on (mask words
        and their bits, :func:`token_words`), once asked
        (:meth:`~constrained.runtime.cache_walk.CacheWalk.crossing`)."""

    def child(self, label: int) -> MaskNode:
        """The node one token further (``label``: the token id, or
        ``~token`` for the token that closed a raw value)."""
        node = self.children.get(label)
        if node is None:
            node = self.children.setdefault(label, MaskNode())
        return node


_NAMES = 1 << 14
"""Edge names a mask cache keeps numbers for at once."""


class MaskCache:
    """The masks of one compiled tool set, keyed by token history.

    ``hits`` and ``misses`` count lookups at nodes (steps inside raw values
    are not looked up: their masks are precomputed rows).
    """

    def __init__(self, vocab_size: int, max_bytes: int | None = None, max_masks: int = 1 << 14) -> None:
        self.vocab_size = vocab_size
        self.max_bytes = max_bytes if max_bytes is not None else 128 * 4 * ((vocab_size + 31) // 32)
        self.max_masks = max_masks
        self.root = MaskNode()
        self.rows = 0  # rows held, packed or sparse
        self.bytes = 0  # their size
        # The nodes that keep each distinct packed row, by a sample of its words.
        self._distinct: dict[bytes, list[MaskNode]] = {}
        self.masks = 0  # masks held, rows and single tokens
        self.hits = 0
        self.misses = 0
        self._labels: dict[Hashable, int] = {}
        self._next_label = NAMED_LABELS
        self.walks = WalkMemo()
        """What the JSON walks of the tool set's requests learned (kept when the masks start over)."""
        self.trackers = TrackerMemo()
        """What the frame trackers of its requests looked up and learned (kept too)."""
        self._warmed = False
        self._lock = threading.Lock()

    def claim_warm_up(self) -> bool:
        """Whether the caller is the one to warm this cache (the first to
        ask; every later call, from any thread, is told no)."""
        with self._lock:
            claimed, self._warmed = not self._warmed, True
        return claimed

    def label(self, name: Hashable) -> int:
        """The label of an edge named ``name`` (such as the member, tool and
        key, whose value a call closed, from the node where the call
        opened): past every token id and leaf state (:data:`NAMED_LABELS`),
        one per name for the cache's life."""
        label = self._labels.get(name)
        if label is None:
            with self._lock:
                label = self._labels.get(name)
                if label is None:
                    if len(self._labels) >= _NAMES:
                        # Names hold markup text a model wrote: forget them, never their numbers,
                        # so a node keyed by a forgotten name's number is only missed, never mistaken.
                        self._labels.clear()
                    label = self._labels[name] = self._next_label
                    self._next_label += 1
        return label

    def write(self, node: MaskNode, row: np.ndarray, held: object = None) -> torch.Tensor | None:
        """Write ``node``'s mask into ``row``; return the tokens it forbids
        when they are few and known (for the sparse apply), else None.
        ``held``: what ``row`` is known to hold (a kept mask: its token or
        its row, the same object), so a row is not copied over itself and a
        token clears only the word of the one it replaces."""
        mask = node.mask
        self.hits += 1
        if isinstance(mask, int):
            write_token(row, mask, held)
            return None
        if isinstance(mask, SparseRow):
            if held is not mask:
                _clear(row, held)
                row[mask.words] = mask.values
            return None
        assert mask is not None
        if held is not mask:
            np.copyto(row, mask)
        if not node.checked:
            self._check(node, mask)
        return node.forbidden

    def store(self, node: MaskNode, row: np.ndarray) -> int | None:
        """Keep llguidance's mask ``row`` (just computed) at ``node``;
        return the one token it allows, if so."""
        count = np.count_nonzero(row)
        if count > _SPARSE_ROW_WORDS or 3 * count > len(row):  # not smaller sparse
            self._hold_row(node, row)
            return None
        words = np.flatnonzero(row)
        token = single_token(row, words)
        if token is not None:
            self._hold(node, token)
            return token
        sparse = SparseRow(words, row[words])
        self._hold(node, sparse, sparse.nbytes)
        return None

    def _hold_row(self, node: MaskNode, row: np.ndarray) -> None:
        """Keep the packed ``row`` at ``node``: the array another node keeps
        when their rows are equal (a string's rows recur at every string
        of a tool set, so they take room once), else a copy."""
        fingerprint = row[::_SAMPLE].tobytes()
        for other in self._distinct.get(fingerprint, ()):
            kept = other.mask
            if isinstance(kept, np.ndarray) and np.array_equal(kept, row):
                self._hold(node, kept, 0)
                node.checked, node.forbidden = other.checked, other.forbidden
                return
        self._hold(node, row.copy(), row.nbytes)
        self._distinct.setdefault(fingerprint, []).append(node)

    def keep_token(self, node: MaskNode, token: int) -> None:
        """Keep ``token`` as ``node``'s mask, the one token it allows."""
        self._hold(node, token)

    def _hold(self, node: MaskNode, mask: int | SparseRow | np.ndarray, size: int | None = None) -> None:
        """Keep ``mask`` at ``node``: a token (``size`` None) or a row taking
        ``size`` more bytes."""
        self.misses += 1
        with self._lock:
            if self.masks >= self.max_masks or (size is not None and self.bytes + size > self.max_bytes):
                self.root, self.rows, self.bytes, self.masks = MaskNode(), 0, 0, 0
                self._distinct = {}
            self.masks += 1
            if size is not None:
                self.rows += 1
                self.bytes += size
        node.mask = mask

    def index_rows(self) -> None:
        """Index every kept row not yet reused by the tokens it forbids now
        (as its first reuse would; about 12 us a row), so a compile thread
        can take that off the first requests' steps."""
        nodes = [self.root]
        while nodes:
            node = nodes.pop()
            nodes.extend(node.children.values())
            if isinstance(node.mask, np.ndarray) and not node.checked:
                self._check(node, node.mask)

    def _check(self, node: MaskNode, row: np.ndarray) -> None:
        """On the first reuse of a row: keep its forbidden tokens as an
        index when they lie in few words (a string value's mask forbids
        only the special tokens)."""
        node.checked = True
        if np.count_nonzero(row[::_SAMPLE] != ALL_ALLOWED) > _SPARSE_WORDS // _SAMPLE:
            return  # one word in 16 already forbids too much: most masks at choices
        partial = np.flatnonzero(row != ALL_ALLOWED)
        if len(partial) > _SPARSE_WORDS:
            return
        clear = np.flatnonzero(np.unpackbits(row[partial].view(np.uint8), bitorder="little") == 0)
        tokens = partial[clear >> 5] * 32 + (clear & 31)
        node.forbidden = index_of(tokens[tokens < self.vocab_size])


def write_token(row: np.ndarray, token: int, held: object = None) -> None:
    """Make the packed mask ``row`` allow ``token`` alone; ``held``: what
    the row holds now, when known (:func:`_clear`)."""
    _clear(row, held)
    row[token >> 5] = 1 << (token & 31)


def _clear(row: np.ndarray, held: object) -> None:
    """Zero the packed mask ``row``; ``held``: what it holds now, when known
    (a kept mask: the one token it allows or its :class:`SparseRow`), so
    only those words are zeroed instead of the whole row; :data:`NOTHING`:
    none (an empty fancy index costs microseconds in a cold first step)."""
    if held is NOTHING:
        return
    if isinstance(held, int):
        row[held >> 5] = 0
    elif isinstance(held, SparseRow):
        row[held.words] = 0
    else:
        row.fill(0)


def token_words(tokens: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The packed mask words that hold ``tokens`` and the bits that allow
    them in each, so a row allows them with one ``row[words] |= bits``."""
    ids = np.array(tokens, dtype=np.int64)
    words, slots = np.unique(ids >> 5, return_inverse=True)
    bits = np.zeros(len(words), dtype=np.uint32)
    np.bitwise_or.at(bits, slots, (np.int64(1) << (ids & 31)).astype(np.uint32))
    return words, bits


def allows_other_than(mask: int | SparseRow | np.ndarray, tokens: frozenset[int]) -> bool:
    """Whether the kept ``mask`` allows a token not in ``tokens`` (a few)."""
    if isinstance(mask, int):
        return mask not in tokens
    if isinstance(mask, SparseRow):
        words, values = mask.words, mask.values
    else:
        words = np.flatnonzero(mask)
        values = mask[words]
    listed: dict[int, int] = {}  # the words that hold tokens of ``tokens``, and their bits
    for token in tokens:
        listed[token >> 5] = listed.get(token >> 5, 0) | 1 << (token & 31)
    if len(words) > len(listed):
        return True  # a word without a listed token allows something
    return any(value & ~listed.get(word, 0) for word, value in zip(words.tolist(), values.tolist()))


def single_token(row: np.ndarray, words: np.ndarray | None = None) -> int | None:
    """The one token a packed mask allows, or None (none or several);
    ``words``: the row's nonzero words, when known."""
    if (np.count_nonzero(row) if words is None else len(words)) != 1:
        return None
    index = int(row.argmax() if words is None else words[0])
    word = int(row[index])
    return index * 32 + word.bit_length() - 1 if word & (word - 1) == 0 else None


_caches_lock = threading.Lock()


def mask_cache(compiled: CompiledTools) -> MaskCache:
    """The :class:`MaskCache` of ``compiled``, made on first use and kept
    with it (so it lives as long as the compiled set, e.g. in the compile
    cache)."""
    cache: Any = compiled._masks
    if cache is None:
        with _caches_lock:
            if compiled._masks is None:
                object.__setattr__(compiled, "_masks", MaskCache(compiled.tokenizer.vocab_size))
            cache = compiled._masks
    return cache  # type: ignore[no-any-return]
