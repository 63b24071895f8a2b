"""The string formats enforced during generation."""

from __future__ import annotations

import re

import pytest

from constrained.compiler import compile_tools
from constrained.frames.model import SUPPORTED_FORMATS
from constrained.schema.formats import CHECKED_AFTER_GENERATION, FORMAT_PATTERNS, format_matches
from constrained.schema.validation import validator_for

EXAMPLES = {
    # No leap seconds: the parser's jsonschema checker rejects them all.
    "date-time": (["2024-02-29T23:59:59Z", "1990-12-31t15:59:50.123-08:00"], ["2023-02-29T00:00:00Z", "2024-01-01 00:00:00Z", "2024-01-01T24:00:00Z", "1998-12-31T22:59:60Z"]),
    "date": (["2000-02-29", "2023-12-31"], ["1900-02-29", "2024-04-31", "2024-13-01", "06/19/1963"]),
    "time": (["08:30:06Z", "23:59:59+01:00"], ["08:30:06 PST", "8:30:06Z", "08:30:06", "23:59:60+01:00"]),
    "uuid": (["2EB8AA08-AA98-11EA-B4AA-73B441D16380"], ["2eb8aa08-aa98-11ea-b4aa-73b441d1638", "2eb8aa08aa9811eab4aa73b441d16380"]),
    "email": (
        ["joe.bloggs@example.com", "te~st@example.com", '"joe..bl@gs"@example.com', '"a\\"b"@x.org', "joe@[127.0.0.1]", "joe@[IPv6:::1]"],
        ["2962", "a@", "@example.com", "test.@example.com", ".test@example.com", "te..st@example.com", 'a"b@x.org',
         '"a"b"@x.org', "joe@[127.0.0.300]", "joe@[::1]", '"Winston Smith" <winston.smith@recdep.minitrue>'],
    ),
    "uri": (["http://foo.bar/?baz=qux#quux", "urn:isbn:0451450523"], ["//foo.bar/", "not a uri", " http://x", "http://example.com/%", "http://example.com/%zz"]),
    "ipv4": (["192.168.0.1", "0.0.0.0"], ["127.0.0.0.1", "256.256.256.256", "1.2.3"]),
    "ipv6": (["::1", "2001:db8::8a2e:370:7334", "::ffff:192.168.0.1"], ["12345::", "1:2:3:4:5:6:7:8:9", ":::"]),
    "hostname": (["www.example.com", "xn--4gbwdl.xn--wgbh1c"], ["-a-host-name-that-starts-with--", "not_a_valid_host_name", "a" * 64]),
    "duration": (["P4DT12H30M5S", "P2W", "PT36H", "P1Y2M"], ["P", "PT", "P1YT", "P2D1Y", "P1Y2W", "PT0.5S", "P1Y2D", "PT1H2S"]),
    "uri-reference": (["//foo.bar/?baz=qux#quux", "/abc", "abc", "", "?q=1", "./this:that"], ["1:b", "/[::1]", "/%zz", "//a@b@c/", "\\\\x"]),
    "iri": (["http://\u0192\u00f8\u00f8.\u00df\u00e5r/?\u2202=x", "http://[V1.fe]", "urn:x:y"], ["/abc", "\u00e2\u03c0", "http://1:2:3"]),
    "iri-reference": (["/\u00e2\u03c0\u03c0", "#\u0192r\u00e4g", "//h/p"], ["#fr\\ag", "a b"]),
    "uri-template": (["http://x/{term:1}/{term}", "", "{+var}", "{x,y}", "{a.b}", "a'b", "{v:1000}"], ["{}", "{a,,b}", "{v:0}", "{a..b}", "{v:01}", "foo}bar", "a b"]),
    "json-pointer": (["", "/", "/foo/0", "/a~1b", "/foo\x00bar\n"], ["#", "/~2", "/~", "a/a"]),
    "relative-json-pointer": (["0", "100", "0#", "2/0/baz/1/zip", "0//"], ["", "01/a", "-1", "\u0661/foo", "1#/a", "0/~2"]),
}


def test_every_supported_format_has_a_pattern_and_examples():
    assert set(FORMAT_PATTERNS) == SUPPORTED_FORMATS == set(EXAMPLES)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_format_examples(name):
    valid, invalid = EXAMPLES[name]
    for text in valid:
        assert format_matches(name, text), text
    for text in invalid:
        assert not format_matches(name, text), text


@pytest.mark.parametrize("name", sorted(FORMAT_PATTERNS))
def test_patterns_use_no_lookaround_or_backreferences(name):
    # The token automaton supports neither; the same pattern feeds both sides.
    pattern = FORMAT_PATTERNS[name]
    assert "(?" not in pattern
    assert re.search(r"\\[1-9]", pattern) is None


# Past the pattern: what the parser's validation adds (FORMAT_CHECKS).
CHECKED_AFTER = {
    "hostname": (
        ["www.example.com", "a" * 63 + ".com", "xn--9n2bp8q.xn--9t4b11yi5a", "XN--4gbwdl.xn--wgbh1c", "a--b.com"],
        ["a" * 63 + "." + "b" * 63 + "." + "c" * 63 + "." + "d" * 61 + ".e", "xn--X", "xn--hello-txk", "xn--vek",
         "XN--aa---o47jg78q", "ab--c.com"],
    ),
    "idn-hostname": (
        ["\uc2e4\ub840.\ud14c\uc2a4\ud2b8", "a\u3002b", "l\u00b7l", "xn--ihqwcrb4cv8a8dqg056pqjye", "hostname"],
        ["", "example.", "a..b", "\u3002example", "xn--X", "xn--example-", "-hello", "a\u00b7l", "0a.\u05d0", "a" * 64],
    ),
}


@pytest.mark.parametrize("name", sorted(CHECKED_AFTER))
def test_the_parsers_validation_checks_formats_as_json_schema_defines_them(name):
    valid, invalid = CHECKED_AFTER[name]
    validator = validator_for({"type": "string", "format": name})
    assert [text for text in valid if not validator.is_valid(text)] == []
    assert [text for text in invalid if validator.is_valid(text)] == []
    assert validator_for({"format": name}).is_valid(12), "formats apply to strings only"


def test_what_a_pattern_leaves_to_validation_is_a_relaxation_the_compiler_reports():
    tool = {"name": "ping", "parameters": {"type": "object", "properties": {"host": {"type": "string", "format": "hostname"}}}}
    compiled = compile_tools([tool], "hermes", "qwen3")
    (warning,) = compiled.warnings
    assert (warning.warning.path, warning.warning.keyword) == ("/properties/host", "format")
    assert CHECKED_AFTER_GENERATION["hostname"] in warning.warning.message
    # The pattern's part holds during generation: an invalid label is refused.
    call = '<tool_call>\n{"name": "ping", "arguments": {"host": "%s"}}\n</tool_call>'
    assert compiled.check(call % "xn--X").accepted
    assert not compiled.check(call % "-bad").accepted
