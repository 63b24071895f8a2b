"""The mask cache's own promises (``constrained.runtime.mask_cache``): a
forced token is kept as its id, a row as a copy, a reused row is indexed by
the tokens it forbids, and a full cache starts over. That cached masks equal
llguidance's is checked where they are used (``tests/test_fuzz.py``)."""

from __future__ import annotations

import numpy as np

from constrained.runtime.mask_cache import MaskCache, MaskNode, single_token

VOCAB = 100  # four words, the last one partly past the vocabulary


def packed(allowed: list[int]) -> np.ndarray:
    bits = np.zeros(128, dtype=bool)
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
    cache = MaskCache(VOCAB, max_rows=2, max_masks=4)
    first = cache.root
    for token in (1, 2):
        cache.store(first.child(token), packed([1, 2, 3]))
    assert cache.root is first and cache.rows == 2
    cache.store(first.child(3), packed([1, 2, 3]))  # a third row
    assert cache.root is not first and (cache.rows, cache.masks) == (1, 1)
    second = cache.root
    for token in range(4):
        cache.store(second.child(token), packed([token]))  # forced tokens count toward max_masks
    assert cache.root is not second


def test_children_are_labelled_by_token_and_closing():
    node = MaskNode()
    assert node.child(7) is node.child(7)
    assert node.child(~7) is not node.child(7)  # the token that closed a raw value
