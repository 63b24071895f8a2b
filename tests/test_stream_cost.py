"""The stream parser's cost: a feed costs work proportional to its delta,
never to the text so far, and the stream still adds up to exactly what the
non-streaming parser gives.

Cost is asserted by counting characters, never by timing: the characters
the parser's dialect scans and reads partially, reads back from the text so
far, and has ``json.dumps`` write. Reading the whole text again at each feed
(the quadratic cost this guards against) counts ~n²/2 over a stream of n
one-character feeds; the bound below is linear in the text and the feeds.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from sample_tools import WRITE_FILE_WITH_MODE, added_up

from constrained import ToolCallStreamParser, parse_tool_calls, render_tool_calls
from constrained.dialects import DIALECTS

EDIT = {
    "name": "edit",
    "parameters": {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "edits": {
                "type": "array",
                "items": {"type": "object", "properties": {"old": {"type": "string"}, "new": {"type": "string"}}},
            },
        },
        "required": ["path", "edits"],
    },
}
TOOLS = [WRITE_FILE_WITH_MODE, EDIT]

# Source-code pieces and every dialect's markers less their last character:
# joined, they never complete a marker (each ends in '>', and no piece puts
# one right after a marker's name), so any value made of them is writable.
PIECES = [
    "<", "</", "</param", "</parameter", "<parameter=path", "<parameter=content", "</function", "<function=edit",
    "<tool_call", "</tool_call", "<arg_key", "</arg_key", "<arg_value", "</arg_value", '<|"|', "<|tool_call",
    "<tool_call|", "<escape", "<start_function_call", "<end_function_call", "<think", "</think", "```", "```py",
    '"', "'", "\\", "\\\\", "\\n", "\\u00e9", "\\ud83d", "\n", "\n\n", "\t", "    ", "é", "\U0001f600", "中文",
    "{", "}", "[", "]", ":", ",", " > ", "->", " >= ", "if (a < b) {", "return x;", "print(\"hi\")", "x = y\n",
]


def markup(size: int, seed: int) -> str:
    """About ``size`` characters of code-like text full of markup starts."""
    rng = random.Random(seed)
    parts: list[str] = []
    length = 0
    while length < size:
        parts.append(rng.choice(PIECES))
        length += len(parts[-1])
    return "".join(parts)


def write_file(content: str) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"path": "src/</param\\x.py", "content": content}}


def edit(size: int, seed: int) -> dict[str, Any]:
    edits = [{"old": markup(size, seed + i), "new": markup(size, seed + 10 + i)} for i in range(3)]
    return {"name": "edit", "arguments": {"path": "a<b.py", "edits": edits}}


def rendered(dialect: str, calls: list[dict[str, Any]], before: str = "", after: str = "") -> str:
    """The calls as the dialect writes them, between prose; each is read
    back exactly as given (so every value here is one the stream must
    stream). Where a turn is framed messages, the prose before is a message
    of its own and the prose after comes after the last call's closing."""
    markup = DIALECTS[dialect].markup
    if markup.messages is not None:
        before = markup.messages.preamble(before) if before else ""
        after = markup.close + after if after else ""
    text = before + render_tool_calls(calls, TOOLS, dialect) + after
    result = parse_tool_calls(text, TOOLS, dialect)
    assert result.errors == [], result.errors
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in result.tool_calls] == [
        (c["name"], c["arguments"]) for c in calls
    ]
    return text


def stream(dialect: str, text: str, step: int) -> tuple[ToolCallStreamParser, list[tuple[int, list[dict[str, Any]]]]]:
    """The parser fed ``text`` ``step`` characters at a time, and each feed's
    deltas with how much of the text had been fed."""
    parser = ToolCallStreamParser(TOOLS, dialect)
    fed = [(min(i + step, len(text)), parser.feed(text[i : i + step])) for i in range(0, len(text), step)]
    return parser, fed + [(len(text), parser.close())]


@pytest.mark.parametrize("step", [1, 3, 7])
@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_long_values_full_of_markup_stream_as_the_parser_reads_them(dialect, step):
    calls = [write_file(markup(6000, 1)), edit(300, 2), write_file(markup(700, 3))]
    text = rendered(dialect, calls, before="Writing <b>it</b> now ```\n", after="\nDone: <tool")
    expected = parse_tool_calls(text, TOOLS, dialect)
    parser, fed = stream(dialect, text, step)
    content, streamed = added_up(delta for _, deltas in fed for delta in deltas)
    assert content == expected.content
    assert streamed == [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in expected.tool_calls]
    assert parser.result == expected
    # The long string streams as it comes: nearly all of it is sent before
    # the feed that brings the end of its call.
    end = text.index(DIALECTS[dialect].markup.close) + len(DIALECTS[dialect].markup.close)
    early = "".join(
        call["function"]["arguments"]
        for fed_to, deltas in fed
        if fed_to < end
        for delta in deltas
        for call in delta.get("tool_calls", [])
        if call["index"] == 0
    )
    assert expected.tool_calls[0]["function"]["arguments"].startswith(early)
    assert len(early) > 0.95 * len(expected.tool_calls[0]["function"]["arguments"])


def counted_work(dialect: str, text: str, step: int) -> tuple[int, int]:
    """The characters the stream parser's string work touches streaming
    ``text`` ``step`` characters at a time (and closing), and the number
    of feeds."""
    parser = ToolCallStreamParser(TOOLS, dialect)
    work = [0]

    def counting(function: Any, size: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            result = function(*args, **kwargs)
            work[0] += size(args, result)
            return result

        return counted

    reader = parser._reader
    feeds = 0
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reader, "scan", counting(reader.scan, lambda args, _: len(args[0])))
        patch.setattr(reader, "partial_body", counting(reader.partial_body, lambda args, _: len(args[0])))
        patch.setattr(parser._text, "read", counting(parser._text.read, lambda _, result: len(result)))
        patch.setattr(json, "dumps", counting(json.dumps, lambda _, result: len(result)))
        for i in range(0, len(text), step):
            parser.feed(text[i : i + step])
            feeds += 1
        parser.close()
    assert parser.result == parse_tool_calls(text, TOOLS, dialect)
    return work[0], feeds


def shapes(dialect: str, size: int) -> dict[str, str]:
    """Outputs whose length is mostly one part that grows feed by feed."""
    chosen = DIALECTS[dialect]
    small = rendered(dialect, [write_file("x = 1\n")])
    texts = {
        "string value": rendered(dialect, [write_file(markup(size, 5))], before="Writing it.\n"),
        "nested value": rendered(dialect, [edit(size // 6, 6)]),
        "prose": "Some prose, <b>markup</b> and `code`, no call.\n" * (size // 46),
        "marker in prose": f"Say {chosen.markup.open} is a tag.\n" + "More prose, no call.\n" * (size // 21),
        "many calls": (small + "\n") * (size // (len(small) + 1)),
    }
    block = chosen.reasoning_block()
    if block is not None:
        texts["reasoning"] = f"{block.opening}{block.label}{markup(size, 7)}{block.closing}\nDone."
        if block.interleaved:  # a later block, after some text
            texts["later reasoning"] = f"Let me look.{block.opening}{markup(size, 9)}{block.closing}Done."
    if chosen.drift.bare_call_ends:  # a call whose opening marker the model left out
        texts["bare call"] = rendered(dialect, [write_file(markup(size, 8))])[len(chosen.markup.open) :]
    return texts


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_a_200_kb_value_costs_work_linear_in_its_length(dialect):
    text = shapes(dialect, 200_000)["string value"]
    work, feeds = counted_work(dialect, text, 3)
    assert work >= len(text)  # the counters see the parser's work
    assert work <= 12 * len(text) + 64 * feeds


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_every_shape_of_output_costs_work_linear_in_its_length(dialect):
    for shape, text in shapes(dialect, 30_000).items():
        work, feeds = counted_work(dialect, text, 1)
        assert len(text) <= work <= 12 * len(text) + 64 * feeds, shape
