"""Regexes the grammar builds from text (``constrained.grammar.regex``)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constrained.grammar.regex import without_text

CLOSING = "</arg_value>"


@pytest.mark.slow
@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(["<", "/", "a", "r", "g", "_", "v", "l", "u", "e", ">", "\n", "x", CLOSING[:-1]]), max_size=12))
def test_without_text_matches_exactly_the_strings_that_avoid_it(pieces):
    text = "".join(pieces)
    assert bool(re.fullmatch(without_text(CLOSING), text)) == (CLOSING not in text)


TAGS = ("</parameter>", "</invoke>", "</p>")


@pytest.mark.slow
@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(["<", "/", "p", "a", "r", "m", "e", "t", "i", "n", "v", "o", "k", ">", "x", *(t[:-1] for t in TAGS)]),
                max_size=12))
def test_without_several_texts_matches_exactly_the_strings_that_avoid_them_all(pieces):
    """Texts sharing their first character and more (a trie of their rests)."""
    text = "".join(pieces)
    assert bool(re.fullmatch(without_text(*TAGS), text)) == (not any(tag in text for tag in TAGS))


@pytest.mark.parametrize("texts", [(), ("",), ("<a", "b"), ("<a<",)])
def test_without_text_refuses_texts_it_cannot_keep_out_exactly(texts):
    with pytest.raises(ValueError):
        without_text(*texts)


@pytest.mark.parametrize("text", ["</arg_value>", "a-b]c", "^x&&~y"])
def test_without_text_escapes_what_the_regex_syntax_reserves(text):
    pattern = without_text(text)
    assert not re.fullmatch(pattern, f"pre{text}post")
    assert re.fullmatch(pattern, f"pre{text[:-1]}post")


@pytest.mark.parametrize("text", ["", "abca", "<</x>"])
def test_without_text_refuses_text_whose_first_character_recurs(text):
    with pytest.raises(ValueError, match="first character"):
        without_text(text)
