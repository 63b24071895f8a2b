"""Small hand-written tools, and helpers, shared by several test modules."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from constrained.compiler import CompiledTools
from constrained.dialects import DIALECTS
from constrained.dialects.raw_values import RawValueDialect
from constrained.runtime.mask_cache import mask_cache

RAW_DIALECTS = tuple(name for name, dialect in DIALECTS.items() if isinstance(dialect, RawValueDialect))
"""The dialects that write a top-level string as raw text (qwen3_coder, glm)."""


def unwarmed_cache(compiled: CompiledTools) -> CompiledTools:
    """``compiled`` with an empty mask cache that no constraint warms, so
    it holds what requests alone leave there."""
    object.__setattr__(compiled, "_masks", None)
    mask_cache(compiled).claim_warm_up()
    return compiled


NEXT_MESSAGE = {
    name: dialect.markup.messages.between_calls(dialect.markup)
    for name, dialect in DIALECTS.items()
    if dialect.markup.messages is not None
}
"""What a dialect whose call's closing ends the turn (it writes a turn as
messages) writes between two calls in the chat history: the first call's
closing and the next message's start."""


def turn(dialect: str, texts: list[str]) -> str:
    """A turn's calls (each call's text) as ``dialect`` writes them: in its
    section where it has one; each a message of its own where a turn holds
    one call (the grammar accepts each alone, the parser reads them all)."""
    if dialect in NEXT_MESSAGE:
        return NEXT_MESSAGE[dialect].join(texts)
    return DIALECTS[dialect].markup.calls_text(texts)


def reads_cut_off_call(dialect: str, prefix: str) -> bool:
    """Whether ``prefix`` ends in a call cut off before its closing marker
    that the dialect reads anyway (hermes: a whole JSON object after the
    last ``<tool_call>``)."""
    chosen = DIALECTS[dialect]
    start = prefix.rfind(chosen.markup.open)
    if not chosen.drift.reads_cut_off_call or start < 0 or chosen.markup.close in prefix[start:]:
        return False
    body = prefix[start + len(chosen.markup.open) :]
    head = chosen.markup.arguments_opening
    if chosen.markup.messages is not None and head is not None:  # the message's header before the arguments
        found = re.compile(head.pattern.decode()).match(body)
        body = body[found.end() :] if found else ""
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
        },
    },
}


def _write_file(**more: dict) -> dict:
    """The coding agent's ``write_file(path, content)`` in the plain function
    form, with ``more`` optional parameters after those two."""
    properties = {"path": {"type": "string"}, "content": {"type": "string"}, **more}
    return {"name": "write_file", "parameters": {"type": "object", "properties": properties, "required": ["path", "content"]}}


# One tool, four variants: each test module keeps the parameters its cases need.
WRITE_FILE = _write_file()
WRITE_FILE_WITH_MODE = _write_file(mode={"type": "integer"})
WRITE_FILE_WITH_BOUNDED_MODE = _write_file(mode={"type": "integer", "maximum": 511})
WRITE_FILE_WITH_OVERWRITE = _write_file(overwrite={"type": "boolean"})


def added_up(deltas: Iterable[dict[str, Any]]) -> tuple[str, list[tuple[str, str, str]]]:
    """What a stream's deltas add up to: the content, and each call's id,
    name and arguments, less the calls a ``tool_call_errors`` delta took back."""
    content, calls, failed = "", {}, set()
    for delta in deltas:
        content += delta.get("content", "")
        for call in delta.get("tool_calls", []):
            if "id" in call:
                calls[call["index"]] = [call["id"], call["function"]["name"], ""]
            calls[call["index"]][2] += call["function"]["arguments"]
        failed.update(error["index"] for error in delta.get("tool_call_errors", []))
    return content, [tuple(calls[i]) for i in sorted(calls) if i not in failed]

WEATHER_DAYS = {
    "name": "get_weather",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
        "required": ["city"],
    },
}
"""get_weather(city, days >= 1), a plain function (no ``type`` wrapper)."""


def assert_stream_reads_as_parse(tools: Any, dialect: str, text: str, seed: int, splits: int = 6) -> None:
    """Fed in ``splits`` random splits (pieces of 1-9 characters), the stream
    parser ends with what the parser reads from the whole text."""
    import random

    from constrained import ToolCallStreamParser, parse_tool_calls

    expected = parse_tool_calls(text, tools, dialect)
    rng = random.Random(seed)
    for _ in range(splits):
        stream = ToolCallStreamParser(tools, dialect)
        position = 0
        while position < len(text):
            step = rng.randint(1, 9)
            stream.feed(text[position : position + step])
            position += step
        stream.close()
        assert stream.result is not None and stream.result.content == expected.content
        assert [c["function"] for c in stream.result.tool_calls] == [c["function"] for c in expected.tool_calls]


def assert_masks_equal_llguidance(compiled: CompiledTools, tokens: list[int]) -> Any:
    """Feed ``tokens`` to a new constraint of ``compiled`` and to a plain
    llguidance matcher, asserting each mask the constraint gives (from its
    cache, precomputed rows or llguidance) equal to the matcher's and the
    token allowed; the constraint, for its counters."""
    import numpy as np
    import torch

    from constrained.runtime.constraint import ToolCallConstraint

    constraint = ToolCallConstraint(compiled)
    tok, vocab, reference = compiled.tokenizer, compiled.tokenizer.vocab_size, compiled.matcher()
    logits = torch.zeros(1, vocab)
    for token in tokens:
        logits.zero_()
        ours = torch.isfinite(constraint.mask_logits(logits))[0].numpy()
        words = np.zeros((vocab + 31) // 32, dtype=np.uint32)
        reference.unsafe_compute_mask_ptr(words.ctypes.data, words.nbytes)
        expected = np.unpackbits(words.view(np.uint8), bitorder="little")[:vocab].astype(bool)
        assert (ours == expected).all() and ours[token], tok.decode([token])
        constraint.consume([token])
        assert reference.consume_token(token)
    return constraint
