"""The mask cache's own promises (``constrained.runtime.mask_cache``): a
forced token is kept as its id, a row as a copy or as the few words it
allows, a reused row is indexed by the tokens it forbids, and a full cache
starts over. That cached masks equal
llguidance's is checked where they are used (``tests/test_fuzz.py``)."""

from __future__ import annotations

import numpy as np

from constrained.runtime import mask_cache as mask_cache_module
from constrained.runtime.mask_cache import MaskCache, MaskNode, SparseRow, single_token, write_token

VOCAB = 100  # four words, the last one partly past the vocabulary


def packed(allowed: list[int], vocab: int = VOCAB) -> np.ndarray:
    bits = np.zeros((vocab + 31) // 32 * 32, dtype=bool)
    bits[allowed] = True
    return np.packbits(bits, bitorder="little").view(np.uint32).copy()


def test_one_allowed_token_is_kept_as_its_id():
    assert single_token(packed([70])) == 70
    assert single_token(packed([3, 70])) is None and single_token(packed([])) is None
    assert single_token(packed([64, 65])) is None  # two bits of one word
    cache, node, row = MaskCache(VOCAB), MaskNode(), packed([70])
    assert cache.store(node, row) == 70 and node.mask == 70 and cache.rows == 0
    out = packed(list(range(VOCAB)))
    assert cache.write(node, out) is None
    assert np.array_equal(out, packed([70]))


def test_a_row_is_kept_as_a_copy_and_indexed_by_what_it_forbids_when_reused():
    cache, node = MaskCache(VOCAB), MaskNode()
    allowed = [t for t in range(VOCAB) if t not in (5, 40, 99)]
    row = packed(allowed)
    assert cache.store(node, row) is None and cache.rows == 1
    row[:] = 0  # the constraint's buffer is overwritten next step; the kept copy is not
    out = np.zeros(4, dtype=np.uint32)
    forbidden = cache.write(node, out)
    assert np.array_equal(out, packed(allowed))
    assert forbidden is not None and forbidden.tolist() == [5, 40, 99]  # not the padding past the vocabulary
    assert (cache.hits, cache.misses) == (1, 1)


def test_a_full_cache_starts_over():
    def dense(token: int) -> np.ndarray:  # a packed row of 16 bytes, one per token
        return packed([t for t in range(VOCAB) if t != token])

    cache = MaskCache(VOCAB, max_bytes=32, max_masks=4)
    first = cache.root
    for token in (1, 2):
        cache.store(first.child(token), dense(token))
    assert cache.root is first and (cache.rows, cache.bytes) == (2, 32)
    cache.store(first.child(3), dense(3))  # a third row
    assert cache.root is not first and (cache.rows, cache.bytes, cache.masks) == (1, 16, 1)
    second = cache.root
    for token in range(4):
        cache.store(second.child(token), packed([token]))  # forced tokens count toward max_masks
    assert cache.root is not second


def test_equal_rows_are_kept_once():
    """A string's mask recurs at every string of a tool set: a row equal
    to one kept already is that array, and takes no more room."""
    cache = MaskCache(VOCAB)
    allowed = [t for t in range(VOCAB) if t not in (5, 40)]
    first, second, other = cache.root.child(1), cache.root.child(2), cache.root.child(3)
    cache.store(first, packed(allowed))
    cache.store(second, packed(allowed))
    cache.store(other, packed(allowed[1:]))
    assert second.mask is first.mask and other.mask is not first.mask
    assert (cache.rows, cache.bytes) == (3, 32)
    out = np.zeros(4, dtype=np.uint32)
    cache.write(second, out)
    assert np.array_equal(out, packed(allowed))


def test_a_row_that_allows_few_words_is_kept_as_those_words():
    """A choice among a few tokens (keys, names, enum values) is kept as
    the words it allows, 12 bytes a word, and written over what the row
    held: one token, another sparse row, or anything (the whole row)."""
    cache = MaskCache(VOCAB)
    cache.store(cache.root.child(0), packed([3, 4, 70]))  # 3 of 4 words: smaller as the row
    assert isinstance(cache.root.child(0).mask, np.ndarray)
    cache = MaskCache(1024)
    choice, other = cache.root.child(1), cache.root.child(2)
    assert cache.store(choice, packed([3, 4, 70], 1024)) is None
    assert isinstance(choice.mask, SparseRow) and choice.mask.words.tolist() == [0, 2]
    assert (cache.rows, cache.bytes) == (1, 2 * 12)
    cache.store(other, packed([35, 99], 1024))
    out = packed(list(range(1024)), 1024)
    cache.write(choice, out)  # held unknown: the whole row is cleared
    assert np.array_equal(out, packed([3, 4, 70], 1024))
    cache.write(other, out, choice.mask)  # only the words the row held are cleared
    assert np.array_equal(out, packed([35, 99], 1024))
    write_token(out, 64, other.mask)
    assert np.array_equal(out, packed([64], 1024))
    cache.write(choice, out, 64)
    assert np.array_equal(out, packed([3, 4, 70], 1024))
    out[5] = 7  # the caller says the row holds choice's mask: it is not written again
    cache.write(choice, out, choice.mask)
    assert out[5] == 7


def test_children_are_labelled_by_token_and_closing():
    node = MaskNode()
    assert node.child(7) is node.child(7)
    assert node.child(~7) is not node.child(7)  # the token that closed a raw value


def test_edge_names_are_bounded_and_their_numbers_never_reused(monkeypatch):
    """Edge names hold markup text a model wrote, so the cache keeps a
    bounded number of them; a name forgotten and met again gets a new
    number, so a node keyed by the old one can only be missed."""
    monkeypatch.setattr(mask_cache_module, "_NAMES", 4)
    cache = MaskCache(vocab_size=64)
    first = [cache.label(("markup", bytes([i]))) for i in range(4)]
    assert len(set(first)) == 4 and cache.label(("markup", b"\x00")) == first[0]
    later = [cache.label(("markup", bytes([i]))) for i in range(4, 8)]
    assert len(cache._labels) <= 4
    again = cache.label(("markup", b"\x00"))
    assert again not in first + later and len(set(later)) == 4 and min(later) > max(first)
