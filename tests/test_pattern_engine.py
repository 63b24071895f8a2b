"""Pattern matching in linear time (``constrained.schema.patterns``):
every pattern of the corpus and a set of hand-written tricky ones gets the
verdict Python's ``re`` (or the ``regex`` module, for what ``re`` cannot
read) gave, on the corpus instances and on generated strings (Unicode
digits, letters and spaces, lone surrogates, text the pattern itself
spells); a pattern that backtracks forever no longer holds up the parser."""

from __future__ import annotations

import json
import logging
import re
import warnings
from collections.abc import Iterator
from typing import Any

import corpus
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from constrained import ToolCallStreamParser, parse_tool_calls
from constrained.schema import patterns
from constrained.schema.json_values import pattern_matches
from constrained.schema.keywords import walk_schemas
from constrained.schema.patterns import pattern_matcher, python_pattern


def schema_patterns(schema: Any) -> Iterator[str]:
    """Every ``pattern`` and ``patternProperties`` key in ``schema``."""
    if not isinstance(schema, dict):
        return
    for node in walk_schemas(schema, possible=True):
        if isinstance(node.get("pattern"), str):
            yield node["pattern"]
        if isinstance(node.get("patternProperties"), dict):
            yield from node["patternProperties"]


def strings_in(value: Any) -> Iterator[str]:
    """Every string in a JSON value: its string values and its keys."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings_in(item)


def corpus_patterns() -> dict[str, set[str]]:
    """Every pattern of the corpus, with the strings of the instances its
    schema's suite gives (none for tool definitions)."""
    found: dict[str, set[str]] = {}
    for group in corpus.jsts_groups(optional=True) + corpus.maskbench_groups():
        instances = {text for test in group.tests for text in strings_in(test.data)}
        for pattern in schema_patterns(group.schema):
            found.setdefault(pattern, set()).update(instances)
    for tool in corpus.mcp_tools():
        for pattern in schema_patterns(tool.parameters):
            found.setdefault(pattern, set())
    for function in corpus.bfcl_functions():
        for pattern in schema_patterns(function.get("parameters")):
            found.setdefault(pattern, set())
    return found


CORPUS = corpus_patterns()

# Where RE2 and re part: Unicode classes, case folding, anchors, and what
# only a backtracking engine can say.
TRICKY = [
    r"^\d+$", r"\D", r"^\w+$", r"\W", r"\s", r"^\S+$", r"^[\d\s]+$", r"[^\w\s]", r"[\D]", r"[^\D]", r"\W\w",
    r"^[\w.-]+@[\w-]+\.\w{2,}$", r"^.$", r"(?s)^.$", r"(?s:a.b)c.d", r"[\s\S]", "a.c",
    r"a$", r"^a$", r"a$|b", r"(a$)", "a$\n", r"(?:a$)?b", r"a\Z", r"\Aa", r"^$", r"$", r"x$y", r"a$$", r"^",
    r"(?m)^b$", r"(?m:^a)", r"(?m)a$\n^b",
    r"(?i)straße", r"(?i)^[a-z]+$", r"(?i)k", "(?i)\u017f", r"(?i)[^k]", "(?i)\u0130", r"(?i:a)B", r"(?i)\w",
    r"(?i)a(?-i:b)", r"(?i)[\u0100-\u017f]", r"(?i)(a)\1",
    r"(?a)^\w+$", r"(?a)\d", r"(?a:\s)", r"(?a)\bx",
    r"a(?=b)", r"a(?!b)", r"(?<=a)b", r"(?<!a)b", r"^(?=.*\d)(?=.*[a-z]).{8,}$", r"^(?!\s)",
    r"(a|b)\1", r"(?P<x>\w)(?P=x)", r"(?<x>a)\k<x>", r"(a)?(?(1)b|c)", r"^(?<year>\d{4})-\k<year>$",
    r"\b", r"\B", r"\bfoo\b", r"\Bo\B", r"^\b",
    r"^a{2,3}$", r"a{1001}", r"^x{0,1000}$", r"^(ab){2}$", r"^a{,3}$", r"a{3}?", r"^a+?b$", r"a*?$",
    r"\u00e9", r"\x41", r"\/\-", r"[\u0400-\u04FF]+", r"[^\x00-\x7F]", r"[\uD800-\uDFFF]", r"\uD83D\uDE00",
    "\U0001F600", r"^[\U0001F300-\U0001FAFF]+$", r"^[^\x00-\uFFFF]$",
    "", "|", "()", "a|", "(?:)", r"(?x) a b # a comment",
    r"\p{L}", r"^\p{Lu}+$", r"\P{N}", r"^\p{Letter}+\d$", r"^\cC$",
    r"^(a+)+$", r"(x+x+)+y", r"[[:alpha:]]+", r"[a-z[]", r"^[a-z--c]$", r"^[a&&b]$",
]

PATTERNS = {**CORPUS, **{pattern: CORPUS.get(pattern, set()) for pattern in TRICKY}}
EXPONENTIAL = {r"^(a+)+$", r"(x+x+)+y"}
"""Patterns whose old verdict takes exponential time on generated strings."""

SAMPLES = [
    "", "a", "ab", "aa", "b", "B", "k", "K", "\u212a", "s", "S", "\u017f", "SS", "STRASSE", "straße", "i", "I", "\u0130",
    "\u0131", "x", "foo", " foo ", "foo_bar", "a\n", "\na", "a\nb", "a\n\n", "\n", "\r\n", "é", "e\u0301", "\u00a0",
    "\u2028", "\u3000", "\x1c", "\x85", "١٢٣", "\u0966", "\U0001d7ce", "\U00011f50", "²", "Ⅻ", "\u00aa", "_", "-", ".",
    "abc12345", "2024-2024", "2024-2025", "\ud800", "a\udfffb", "\U0001F600", "\ud83d\ude00", "a" * 20, "xxxxy",
]

UNICODE = st.characters(codec=None, categories=["Nd", "No", "Nl", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Zs", "Zl", "Zp"])
CONTROL = st.sampled_from("\t\n\v\f\r\x1c\x1d\x1e\x1f\x85\x00 _-.@/:")
SURROGATE = st.characters(categories=["Cs"])


def texts(pattern: str) -> st.SearchStrategy[str]:
    """Strings near ``pattern``: of its own characters (either case),
    Unicode digits, letters, marks and spaces, controls and lone
    surrogates, and strings ``re`` says match, with text around them."""
    own = sorted({c for char in pattern for c in (char, char.lower(), char.upper()) if len(c) == 1})
    alphabet = st.one_of(UNICODE, CONTROL, SURROGATE, st.characters(), *([st.sampled_from(own)] if own else []))
    text = st.text(alphabet, max_size=12)
    reading = python_pattern(pattern)
    if not isinstance(reading, re.Pattern):
        return text
    matching = st.from_regex(reading, alphabet=st.characters(exclude_categories=()))
    return st.one_of(text, st.tuples(text, matching, text).map("".join))


def old_verdict(pattern: str, text: str) -> bool:
    """What the pattern said before: re's reading, else regex's, else a match."""
    reading = python_pattern(pattern)
    return reading is None or reading.search(text) is not None


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_same_verdicts_on_instances_and_samples(pattern):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for text in sorted(PATTERNS[pattern]) + SAMPLES:
            assert pattern_matches(pattern, text) is old_verdict(pattern, text), text


@pytest.mark.filterwarnings("ignore:Possible:FutureWarning")  # hypothesis reading the pattern
@pytest.mark.parametrize("pattern", sorted(set(PATTERNS) - EXPONENTIAL))
def test_same_verdicts_on_generated_strings(pattern):
    @settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
    @given(texts(pattern))
    def check(text):
        assert pattern_matches(pattern, text) is old_verdict(pattern, text)

    check()


def test_every_corpus_pattern_re_reads_runs_in_linear_time():
    read_by_re = [pattern for pattern in CORPUS if isinstance(python_pattern(pattern), re.Pattern)]
    assert len(read_by_re) > 100
    assert [pattern for pattern in read_by_re if pattern_matcher(pattern).linear is None] == []


@pytest.mark.parametrize(
    "pattern, linear",
    [
        (r"^\d+$", True),
        (r"(?i)^[a-z]+$", True),
        (r"^a$", True),
        (r"(?m)^a$", True),
        (r"a$\n", False),  # re's $ before the final newline, something after it
        (r"\bfoo\b", False),
        (r"a(?=b)", False),
        (r"(a)\1", False),
        (r"a{1001}", False),  # past RE2's counts
        (r"^\p{L}+$", False),  # the regex module's reading
    ],
)
def test_where_each_engine_runs(pattern, linear):
    matcher = pattern_matcher(pattern)
    assert (matcher.linear is not None) is linear
    assert matcher.backtracking is not None


def test_a_lone_surrogate_is_matched_by_the_backtracking_engine():
    matcher = pattern_matcher(r"^\w\W$")
    assert matcher.linear is not None
    assert matcher.matches("a\ud800") and not matcher.matches("\ud800a")


def test_past_its_time_a_value_is_taken_to_match_with_a_warning(monkeypatch, caplog):
    pattern = r"^(a|a)+(?<!b)$"
    monkeypatch.setattr(patterns, "MATCH_TIMEOUT_S", 0.05)
    assert pattern_matcher(pattern).linear is None
    assert not pattern_matches(pattern, "a" * 10 + "!")
    with caplog.at_level(logging.WARNING, logger=patterns.__name__):
        assert pattern_matches(pattern, "a" * 40 + "!")
    assert [record.getMessage() for record in caplog.records if pattern in record.getMessage()]


def tool(parameters: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": "f", "parameters": parameters}}]


def hermes(arguments: dict[str, Any]) -> str:
    return f'<tool_call>\n{json.dumps({"name": "f", "arguments": arguments})}\n</tool_call>'


NESTED = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}, "required": ["s"]}
KEYED = {"type": "object", "patternProperties": {"^(a+)+$": {"type": "integer"}}, "additionalProperties": False}


@pytest.mark.parametrize(
    "parameters, arguments",
    [(NESTED, lambda text: {"s": text}), (KEYED, lambda text: {text: 1})],
    ids=["pattern", "patternProperties"],
)
def test_a_backtracking_pattern_does_not_hold_up_the_parser(parameters, arguments):
    # Python's re takes about a second for 25 "a" and doubles with each one more.
    tools = tool(parameters)
    refused = parse_tool_calls(hermes(arguments("a" * 5000 + "!")), tools, "hermes")
    assert refused.tool_calls == [] and len(refused.errors) == 1
    accepted = parse_tool_calls(hermes(arguments("a" * 5000)), tools, "hermes")
    assert accepted.errors == [] and len(accepted.tool_calls) == 1
    stream = ToolCallStreamParser(tools, "hermes")
    stream.feed(hermes(arguments("a" * 5000 + "!")))
    stream.close()
    assert stream.result is not None and stream.result.tool_calls == [] and len(stream.result.errors) == 1
