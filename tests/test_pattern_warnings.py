"""Patterns Python's ``re`` warns about ("FutureWarning: Possible nested set")
compile and parse without a warning on the user's stderr, and
mean what ECMA 262 and ``re`` mean: a ``[`` in a class is a member, so
``[[:alpha:]]`` is the class ``[[:alph]`` followed by ``]`` (no POSIX class),
in the constraint (Rust's regex syntax reads it otherwise), in the parser's
validation, and in the ``regex`` module that reads what ``re`` cannot."""

from __future__ import annotations

import re
import warnings

import pytest

from constrained import compile_tools, parse_tool_calls
from constrained.dialects import get_dialect
from constrained.grammar.regex import ecma_to_rust
from constrained.schema.json_values import pattern_matches
from constrained.schema.patterns import compile_quietly, literal_class_brackets, python_pattern

DIALECTS = [("hermes", "qwen3"), ("qwen3_coder", "qwen3"), ("gemma4", "gemma4")]

# pattern -> (strings it matches, strings it does not), by ECMA 262 (and re)
PATTERNS = {
    "[[:alpha:]]+": ([":]", "a]", "x[]y", "::]]"], ["abc", "a", "]", "", "[["]),
    "[a-z[]": (["[", "q", "A[", "zz"], ["A", "]", "", "-"]),
    "^[a-z&&[^aeiou]]+$": (["a]", "&]]", "^]", "[]"], ["b", "ab", "&&", "x", "&[]"]),
    "^[a~~b]$": (["a", "~", "b"], ["ab", "c", "~~"]),
    "^[a||b]$": (["a", "|", "b"], ["ab", "c"]),
    # A range from "-" to "c" after a-z; the constraint relaxes it ("--" is a set difference in Rust).
    "^[a-z--c]$": (["x", "-", "[", "b"], ["&", "~", "xx"]),
}


def re_reading(pattern: str, text: str) -> bool:
    """What Python's re makes of ``pattern`` (warnings hidden here)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return re.search(pattern, text) is not None


def fresh() -> None:
    """Forget compiled patterns, so a warning would be raised again."""
    re.purge()
    python_pattern.cache_clear()


@pytest.mark.parametrize("pattern", PATTERNS)
def test_expected_strings_are_re_and_ecma_readings(pattern):
    matching, other = PATTERNS[pattern]
    assert all(re_reading(pattern, text) for text in matching)
    assert not any(re_reading(pattern, text) for text in other)


@pytest.mark.parametrize("dialect, tokenizer", DIALECTS)
@pytest.mark.parametrize("pattern", PATTERNS)
def test_compile_and_parse_without_warnings(dialect, tokenizer, pattern):
    matching, other = PATTERNS[pattern]
    tools = [
        {
            "name": "f",
            "parameters": {
                "type": "object",
                "properties": {"s": {"type": "string", "pattern": pattern}},
                "required": ["s"],
            },
        }
    ]
    fresh()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled = compile_tools(tools, dialect=dialect, tokenizer=tokenizer)
        (tool,) = compiled.tools
        relaxed = {w.warning.keyword for w in compiled.warnings}
        for text, valid in [(t, True) for t in matching] + [(t, False) for t in other]:
            call = get_dialect(dialect).render_call(tool, {"s": text}, compiled.key_order)
            parsed = parse_tool_calls(call, compiled.tools, dialect)
            assert (not parsed.errors and len(parsed.tool_calls) == 1) is valid, (text, parsed.errors)
            accepted = compiled.check(call).accepted
            if relaxed:
                assert accepted or not valid, text  # a superset
            else:
                assert accepted is valid, text
    assert relaxed == ({"pattern"} if "--" in pattern else set())


@pytest.mark.parametrize("pattern", PATTERNS)
def test_validation_reads_as_re_did(pattern):
    matching, other = PATTERNS[pattern]
    fresh()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for text in matching + other:
            assert pattern_matches(pattern, text) is re_reading(pattern, text), text


@pytest.mark.parametrize("pattern", ["[[:alpha:]]", "[a-z[]", "[a&&b]", "[a-z--c]", "[a~~b]", "[a||b]"])
def test_compile_quietly_is_re_compile_without_the_warning(pattern):
    fresh()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = compile_quietly(pattern)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert quiet.pattern == re.compile(pattern).pattern


def test_rust_reads_a_bracket_in_a_class_as_itself():
    assert ecma_to_rust("[[:alpha:]]+") == r"(?s:.*)(?:[\[:alpha:]]+)(?s:.*)"
    assert ecma_to_rust("^[a-z[]$") == r"(?:[a-z\[])"
    assert ecma_to_rust("^[a&&b~~c]$") == r"(?:[a\&\&b\~\~c])"
    assert ecma_to_rust("^[a-z--c]$") is None


@pytest.mark.parametrize(
    "pattern, expected",
    [
        ("[[:alpha:]]", r"[\[:alpha:]]"),
        ("[]a]", r"[\]a]"),
        ("[^]a]", r"[^\]a]"),
        (r"\[[a\]b]]", r"\[[a\]b]]"),
        ("[a][[]", r"[a][\[]"),
        ("a[b-c]d", "a[b-c]d"),
    ],
)
def test_literal_class_brackets(pattern, expected):
    assert literal_class_brackets(pattern) == expected
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert re.compile(pattern).pattern  # re reads both...
    for text in ["[", "]", ":", "a", "b", "ab]", "[a]", "d", "abd", "a[", "a[[", "[]"]:
        assert re_reading(pattern, text) == re_reading(expected, text), text  # ...alike


def test_the_regex_module_reads_no_posix_class():
    # re cannot read \p{L}; the regex module can, and would read [[:alpha:]] as POSIX.
    fresh()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pattern_matches(r"^\p{L}[[:alpha:]]$", "a:]")
        assert not pattern_matches(r"^\p{L}[[:alpha:]]$", "ab")


@pytest.mark.parametrize("inner", ["http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-07/schema#"])
def test_a_subschema_with_its_own_dialect_is_validated_alike(inner):
    # jsonschema validates a subschema that declares $schema with its stock
    # class: re for patterns (and its warning), floats for multipleOf, and a
    # reference that does not resolve raising.
    parameters = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "s": {"$schema": inner, "type": "string", "pattern": "[[:alpha:]]+"},
            "n": {"$schema": inner, "multipleOf": 0.01},
            "r": {"$schema": inner, "$ref": "https://example.com/elsewhere"},
        },
        "required": ["s"],
    }
    compiled = compile_tools([{"name": "f", "parameters": parameters}], dialect="hermes", tokenizer="qwen3")
    (tool,) = compiled.tools
    cases = [({"s": ":]", "n": 0.07, "r": 1}, True), ({"s": "abc"}, False), ({"s": ":]", "n": 0.071}, False)]
    fresh()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for arguments, valid in cases:
            call = get_dialect("hermes").render_call(tool, arguments, compiled.key_order)
            parsed = parse_tool_calls(call, compiled.tools, "hermes")
            assert (not parsed.errors) is valid, (arguments, parsed.errors)
