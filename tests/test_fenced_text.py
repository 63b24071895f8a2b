"""Code fences in the text before a call: the parser reads a call marker
after an odd number of fence lines as text in a code block, so the grammar
lets a call follow the text only where its fence lines pair up. Both must
agree on any text, or a constrained output would hold a call the parser
rejects: after a reasoning block the text goes on the closing's line, and
a fence line needs a line of its own. Where the family writes the text
before a call as a message of its own (gpt-oss's preamble), the message's
end closes any code block in it: a call follows any text."""

from __future__ import annotations

import random
from typing import Any

import pytest
from sample_tools import assert_stream_reads_as_parse

from constrained.compiler import CompiledTools, compile_tools
from constrained.dialects import DIALECTS, get_dialect
from constrained.output.parse import parse_tool_calls

TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The time in a zone.",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
    },
}
PIECES = ("```", "```json", "``", "`", " ", "\t", "\n", "\n", "x")
"""What the random texts are made of: fences, near-fences and line starts."""


def _compiled(name: str, **options: Any) -> CompiledTools:
    return compile_tools([TOOL], name, get_dialect(name).default_tokenizer, **options)


def _call(compiled: CompiledTools) -> str:
    """One call of ``get_time`` in the turn's markup (section included)."""
    dialect = get_dialect(compiled.dialect)
    return dialect.markup.calls_text([dialect.render_call(compiled.tools[0], {"tz": "UTC"}, "trained")])


def _framed(name: str) -> bool:
    return get_dialect(name).markup.messages is not None


def _before(name: str, text: str, call: str) -> str:
    """``text``, then ``call``: directly, or in a preamble message where the family frames text."""
    framing = get_dialect(name).markup.messages
    return text + call if framing is None else framing.preamble(text) + call


def _reasoning(name: str, opened_by_prompt: bool) -> str:
    """A reasoning block ending on the line the text goes on (or, framed, where the next message starts)."""
    dialect = get_dialect(name)
    opening, closing = dialect.reasoning.tokens
    if dialect.markup.messages is not None:
        closing = dialect.markup.messages.lead[1]  # the message's end and the next one's start
    return ("" if opened_by_prompt else opening + dialect.reasoning.label) + "Check the zone." + closing


def _agree(compiled: CompiledTools, text: str) -> bool:
    """The grammar accepts ``text`` exactly when the parser reads one
    valid call from it, and the stream parser reads it as the parser does."""
    accepted = compiled.check(text).accepted
    read = parse_tool_calls(text, compiled, compiled.dialect)
    called = len(read.tool_calls) == 1 and not read.errors
    assert accepted == called, (compiled.dialect, text, accepted, read.to_json())
    assert_stream_reads_as_parse(compiled, compiled.dialect, text, seed=len(text), splits=2)
    return accepted


REASONING_DIALECTS = [name for name, d in DIALECTS.items() if d.reasoning.tokens]


@pytest.mark.parametrize("name", list(DIALECTS))
def test_a_call_after_closed_fences_is_a_call_and_after_an_open_one_is_refused(name):
    compiled = _compiled(name)
    call = _call(compiled)
    assert _agree(compiled, _before(name, "Here is the code:\n```python\nprint(1)\n```\n", call))
    assert _agree(compiled, _before(name, "Use ```inline``` spans freely.\n", call))  # not a fence line
    assert _agree(compiled, _before(name, "```\n```", call))  # the closing fence's line holds the call
    assert _agree(compiled, _before(name, "Here is the code:\n```python\nprint(1)\n", call)) == _framed(name)
    assert _agree(compiled, _before(name, "  ```\nindented fences count\n", call)) == _framed(name)
    answer = "" if get_dialect(name).markup.messages is None else get_dialect(name).markup.messages.answer
    assert compiled.check(answer + "Here is the code:\n```python\nprint(1)\n").accepted  # text alone may leave one open


@pytest.mark.parametrize("name", REASONING_DIALECTS)
@pytest.mark.parametrize("opened_by_prompt", [False, True])
def test_after_reasoning_the_text_goes_on_the_closings_line(name, opened_by_prompt):
    compiled = _compiled(name, reasoning="open" if opened_by_prompt else True)
    call, reasoning = _call(compiled), _reasoning(name, opened_by_prompt)
    assert _agree(compiled, reasoning + _before(name, "```\n", call))  # no fence: it is on the closing's line
    assert _agree(compiled, reasoning + _before(name, "\n```\n", call)) == _framed(name)
    assert _agree(compiled, reasoning + _before(name, "\n```\n```\n", call))


@pytest.mark.parametrize("name", list(DIALECTS))
def test_grammar_and_parser_agree_on_random_fenced_text(name):
    rng = random.Random(name)
    variants = [(_compiled(name), "")]
    if name in REASONING_DIALECTS:
        variants += [(_compiled(name), _reasoning(name, False)), (_compiled(name, reasoning="open"), _reasoning(name, True))]
    outcomes = set()
    for compiled, lead in variants:
        call = _call(compiled)
        for _ in range(40):
            text = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 10)))
            outcomes.add(_agree(compiled, lead + _before(name, text, call)))
    assert outcomes == ({True} if _framed(name) else {True, False})  # both sides of the rule were reached


def test_a_bare_call_follows_the_same_rule():
    compiled = _compiled("qwen3_coder")
    bare = "<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>"
    assert _agree(compiled, "```sh\ndate\n```\n" + bare)
    assert not _agree(compiled, "```sh\ndate\n" + bare)
    assert not _agree(compiled, _reasoning("qwen3_coder", False) + "\n```\n" + bare)
    assert _agree(compiled, _reasoning("qwen3_coder", False) + "```\n" + bare)
