"""The JSON walk's skeletons (``constrained.runtime.json_walk``): two values
meet the same masks exactly when their skeletons lead to the same place,
so what the walk leaves out, and what it keeps, is checked here on the
walk alone (``tests/test_fuzz.py`` checks the masks against llguidance)."""

from __future__ import annotations

import json
import random

import pytest

from constrained.frames.toolset import normalize_tools
from constrained.grammar.syntax import JSON_SHAPE, WalkShape
from constrained.runtime.json_walk import BACK, MARK, JsonWalk, WalkMemo


def new_walk(parameters: dict, delimiter: int | None = None) -> JsonWalk:
    """A walk of JSON, or with ``delimiter`` of Gemma's shape (delimited strings, bare keys)."""
    tool = normalize_tools([{"type": "function", "function": {"name": "t", "parameters": parameters}}])[0]
    shape = JSON_SHAPE if delimiter is None else WalkShape(delimiter, bare_keys=True, ends_at_value=True)
    return JsonWalk(tool.root, tool.schema.definitions, WalkMemo(), shape)


def place(walk: JsonWalk, feeds: list[tuple[bytes, int | None]]) -> tuple[tuple[int, ...], bool, int | None]:
    """Where ``feeds`` (bytes and token, each) leave ``walk``'s skeleton (the
    entries from the start, with the walk's returns applied, as the mask
    cache follows them), whether the text stands in a free leaf, and the
    leaf's state."""
    path: tuple[int, ...] = ()
    kept: dict[int, tuple[int, ...]] = {}
    for data, token in feeds:
        walk.feed(data, token)
        for entry in walk.skeleton:
            if entry < MARK:
                path += (entry,)
            elif entry < BACK:
                kept[entry - MARK] = path
            else:
                path = kept[entry - BACK]
    return path, walk.in_leaf, walk.leaf_state


def walk_place(parameters: dict, text: str, cuts: int = 0, seed: int = 0) -> tuple[tuple[int, ...], bool, int | None]:
    """:func:`place` of ``text``, fed in ``cuts`` + 1 pieces cut at random places."""
    data = text.encode()
    places = sorted(random.Random(seed).sample(range(1, len(data)), cuts)) if cuts else []
    return place(new_walk(parameters), [(data[start:end], None) for start, end in zip([0, *places], [*places, len(data)])])


OBJECT = {"type": "object", "properties": {
    "city": {"type": "string"}, "n": {"type": "integer"}, "code": {"type": "string", "pattern": "^[A-Z]+$"},
    "unit": {"enum": ["c", "f"]}, "tags": {"type": "array", "items": {"type": "string"}},
    "pair": {"type": "array", "items": {"type": "integer"}, "maxItems": 4},
    "limits": {"type": "object", "additionalProperties": {"type": "integer"}},
    "pick": {"anyOf": [{"type": "object", "properties": {"a": {"type": "string"}}},
                       {"type": "object", "properties": {"b": {"type": "string"}}}]},
}}


def value_place(value: dict, cuts: int = 0, seed: int = 0) -> tuple[int, ...]:
    return walk_place(OBJECT, json.dumps(value), cuts, seed)[0]


@pytest.mark.parametrize(("first", "second"), [
    ({"city": "Paris", "n": 12}, {"city": "Rome of the \"ancients\"", "n": -345}),
    ({"code": "AB", "unit": "c"}, {"code": "XYZ", "unit": "f"}),
    ({"tags": ["a", "b"]}, {"tags": ["x", "y", "z", "w"]}),
    ({"limits": {"cpu": 1, "disk": 2}}, {"limits": {"memory": 16, "threads": 4, "files": 9}}),
])
def test_values_that_differ_only_where_no_mask_looks_end_in_one_place(first, second):
    assert value_place(first) == value_place(second)


@pytest.mark.parametrize(("first", "second"), [
    ({"pair": [1, 2]}, {"pair": [1, 2, 3]}),  # maxItems: the count decides whether "]" or "," may come
    ({"tags": ["a"]}, {"tags": ["a", "b"]}),  # past the first item, not before
    ({"limits": {"cpu": 1}}, {"limits": {"cpu": 1, "disk": 2}}),
    ({"pick": {"a": "x"}}, {"pick": {"b": "x"}}),  # a key that picks the option
    ({"city": "x", "n": 1}, {"n": 1, "city": "x"}),  # the keys written
])
def test_values_whose_difference_a_mask_may_see_end_in_different_places(first, second):
    assert value_place(first) != value_place(second)


def test_inside_a_constrained_string_the_text_is_kept_until_it_closes():
    open_a = walk_place(OBJECT, '{"code": "A')
    open_x = walk_place(OBJECT, '{"code": "X')
    assert open_a[0] != open_x[0] and not open_a[1]


@pytest.mark.parametrize("text", ['{"city": "caf', '{"city": "a\\"b', '{"n": 4', '{"tags": ["x", "y'])
def test_a_free_leaf_is_keyed_by_state_not_by_text(text):
    _, in_leaf, state = walk_place(OBJECT, text)
    assert in_leaf and state is not None
    other = text[:-1] + ("Z" if text[-1].isalpha() else "7")
    assert walk_place(OBJECT, other) == walk_place(OBJECT, text)


@pytest.mark.parametrize("data", [b'{"city": "a\\', b'{"city": "a\\u00', '{"city": "é'.encode()[:-1]])
def test_inside_an_escape_or_a_character_a_free_string_has_no_shared_state(data):
    walk = new_walk(OBJECT)
    walk.feed(data)
    assert walk.in_leaf and walk.leaf_state is None


@pytest.mark.parametrize("seed", range(6))
def test_the_place_does_not_depend_on_how_the_text_was_cut(seed):
    value = {"city": "Zürich \"old town\"", "n": 12, "code": "AB", "unit": "f", "tags": ["a", "b", "c"],
             "pair": [1, 2], "limits": {"x": 1, "y": 22}, "pick": {"a": "q"}}
    assert value_place(value, cuts=8, seed=seed) == value_place(value)


DELIMITER = 7
"""A stand-in id for Gemma's string delimiter token in these walks."""


def gemma_place(parameters: dict, pieces: list[str | None]) -> tuple[tuple[int, ...], bool, int | None]:
    """:func:`place` in Gemma's syntax: ``pieces`` are text, None the
    delimiter token."""
    feeds = [(b'<|"|>', DELIMITER) if piece is None else (piece.encode(), None) for piece in pieces]
    return place(new_walk(parameters, DELIMITER), feeds)


def test_gemma_strings_between_delimiter_tokens_are_free_leaves_and_keys_are_bare():
    """Gemma writes strings between delimiter tokens (a quote inside is
    text) and bare keys; a map's keys are free leaves. A string with no text
    yet has a state of its own (its text is optional in the grammar)."""
    first = gemma_place(OBJECT, ["{city:", None, 'say "hi"', None, ",limits:{cpu:1,disk:2}}"])
    second = gemma_place(OBJECT, ["{city:", None, "x", None, ",limits:{memory:16,threads:4,files:9}}"])
    assert first == second
    assert gemma_place(OBJECT, ["{city:", None, "Par"])[1]
    empty, text = gemma_place(OBJECT, ["{city:", None]), gemma_place(OBJECT, ["{city:", None, "P"])
    assert empty[0] == text[0] and empty[2] != text[2]  # no text yet is a state of its own


def test_a_gemma_object_with_a_colon_in_a_declared_key_keeps_its_text():
    """A bare key ends at its first ':', so where a declared key holds one
    the walk cannot tell the keys apart: nothing in the object is left out."""
    parameters = {"type": "object", "properties": {"a:b": {"type": "string"}, "a": {"type": "string"}}}
    assert gemma_place(parameters, ["{a:", None, "x", None, "}"]) != gemma_place(parameters, ["{a:", None, "y", None, "}"])


def test_a_step_fed_as_bytes_is_learned_and_lands_where_the_bytes_lead():
    """A value that begins inside a token is fed as bytes, not a token:
    its step is kept by the bytes, and a walk that meets them again from
    the same state looks it up and stands where a fresh walk stands."""
    tool = normalize_tools([{"type": "function", "function": {"name": "t", "parameters": OBJECT}}])[0]
    memo = WalkMemo()
    pieces = [(b'{"ci', None), (b'ty": "Paris", "tags": [', None), (b'"a"]}', None)]
    first = place(JsonWalk(tool.root, tool.schema.definitions, memo), pieces)
    learned = [key for key in memo.steps.table if isinstance(key[1], bytes)]
    assert len(learned) == len(pieces)
    again = place(JsonWalk(tool.root, tool.schema.definitions, memo), pieces)
    assert again == first == place(new_walk(OBJECT), pieces)
    assert len(memo.steps) == len(pieces)  # nothing new learned the second time


def test_a_value_syntax_must_declare_its_walk_shape():
    """A syntax that does not say how the walk follows its values (or why it cannot) is no syntax."""
    from constrained.grammar.syntax import JsonSyntax, ValueSyntax

    class Undeclared(ValueSyntax):
        key = any_key = string_literal = JsonSyntax.key  # type: ignore[assignment]
        string = JsonSyntax.string  # type: ignore[assignment]

    with pytest.raises(TypeError, match="walk_shape"):
        Undeclared(", ", ", ", "json_value", "x")  # type: ignore[abstract]


def test_a_syntax_the_walk_cannot_follow_is_reported_by_the_constraint():
    """GLM's strings keep its closing out of their text: the walk declines, and the constraint says why."""
    from constrained import compile_tools
    from constrained.runtime.constraint import ToolCallConstraint

    compiled = compile_tools([{"type": "function", "function": {"name": "t", "parameters": OBJECT}}], "glm47", "qwen3")
    state = ToolCallConstraint(compiled).cache_state
    assert state.startswith("on, values keyed by their tokens") and "closing marker" in state
    assert ToolCallConstraint(compiled, cache_masks=False).cache_state == "off"
