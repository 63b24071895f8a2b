"""The tool compiler and the dialect grammars, through ``compile_tools`` and
``CompiledTools.check`` with real vocabularies: ``qwen3`` for qwen3_coder,
hermes, glm45 and glm47, ``gemma4`` and ``functiongemma`` for the Gemma
dialects (and ``qwen3.6`` for Qwen3.6's ids).

Most model outputs here are written by hand, byte for byte as
``docs/formats.md`` shows them, so the grammars are checked against the
formats and not only against the renderers.
"""

from __future__ import annotations

import functools
import itertools
import json
import time
from importlib.metadata import version
from typing import Any

import numpy as np
import pytest
from corpus import mcp_tools
from sample_tools import NEXT_MESSAGE, WRITE_FILE_WITH_OVERWRITE
from sample_tools import turn as turn_of

from constrained.compiler import CompiledTools, compile_tools
from constrained.dialects import DIALECTS, get_dialect
from constrained.dialects.dsml import DeepSeekV32
from constrained.errors import CompileError, UnknownDialectError
from constrained.output.parse import parse_tool_calls
from constrained.qa.conformance import Outcome, judge_call
from constrained.tokenizers import Tokenizer, load_tokenizer
from constrained.tools import load_tools

LLGUIDANCE_AT_LEAST_1_8 = tuple(int(p) for p in version("llguidance").split(".")[:2]) >= (1, 8)

TOKENIZER_OF = {name: dialect.default_tokenizer for name, dialect in DIALECTS.items()}
ALL_DIALECTS = tuple(TOKENIZER_OF)
QWEN_LIKE = ("qwen3_coder", "hermes", "glm45", "glm47")


@functools.cache
def tok(name: str) -> Tokenizer:
    return load_tokenizer(name)


def compiled(tools: Any, dialect: str, **options: Any) -> CompiledTools:
    return compile_tools(tools, dialect, tok(TOKENIZER_OF[dialect]), **options)


def function(name: str, properties: dict[str, Any], required: list[str] = (), **extra: Any) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties, "required": list(required), **extra}
    return {"type": "function", "function": {"name": name, "description": f"{name} tool", "parameters": parameters}}


def accepted(ct: CompiledTools, text: str) -> bool:
    return ct.check(text).accepted


def assert_accepted(ct: CompiledTools, text: str) -> None:
    result = ct.check(text)
    assert result.accepted, f"{ct.dialect}: rejected {text!r}: {result}"


def assert_rejected(ct: CompiledTools, text: str) -> None:
    result = ct.check(text)
    assert not result.accepted, f"{ct.dialect}: accepted {text!r}"


def token_starts(tokenizer: Tokenizer, ids: list[int]) -> list[int]:
    """Byte offset where each token starts, from the vocabulary's bytes."""
    starts, offset = [], 0
    for i in ids:
        starts.append(offset)
        offset += len(tokenizer.token_bytes(i))
    return starts


def allowed_next(ct: CompiledTools, prefix_ids: list[int]) -> list[int]:
    """Every token the constraint allows after ``prefix_ids``."""
    matcher = ct.matcher()
    assert matcher.validate_tokens(prefix_ids) == len(prefix_ids)
    assert matcher.consume_tokens(prefix_ids)
    words = np.frombuffer(matcher.compute_bitmask(), dtype=np.uint32)
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")
    return [int(i) for i in np.flatnonzero(bits[: ct.tokenizer.vocab_size])]


# -- the tools ------------------------------------------------------------------

GET_TIME = function("get_time", {"tz": {"type": "string"}}, ["tz"])
TOOLS = [WRITE_FILE_WITH_OVERWRITE, GET_TIME]

# write_file(path="notes/out.txt", content="line 1\nline 2", overwrite=True), by hand.
WRITE_CALL = {
    "qwen3_coder": (
        "<tool_call>\n<function=write_file>\n<parameter=path>\nnotes/out.txt\n</parameter>\n"
        "<parameter=content>\nline 1\nline 2\n</parameter>\n<parameter=overwrite>\ntrue\n</parameter>\n"
        "</function>\n</tool_call>"
    ),
    "hermes": (
        '<tool_call>\n{"name": "write_file", "arguments": {"path": "notes/out.txt", '
        '"content": "line 1\\nline 2", "overwrite": true}}\n</tool_call>'
    ),
    "glm45": (
        "<tool_call>write_file\n<arg_key>path</arg_key>\n<arg_value>notes/out.txt</arg_value>\n"
        "<arg_key>content</arg_key>\n<arg_value>line 1\nline 2</arg_value>\n"
        "<arg_key>overwrite</arg_key>\n<arg_value>true</arg_value>\n</tool_call>"
    ),
    "glm47": (
        "<tool_call>write_file<arg_key>path</arg_key><arg_value>notes/out.txt</arg_value>"
        "<arg_key>content</arg_key><arg_value>line 1\nline 2</arg_value>"
        "<arg_key>overwrite</arg_key><arg_value>true</arg_value></tool_call>"
    ),
    "gemma4": (
        '<|tool_call>call:write_file{content:<|"|>line 1\nline 2<|"|>,overwrite:true,'
        'path:<|"|>notes/out.txt<|"|>}<tool_call|>'
    ),
    "functiongemma": (
        "<start_function_call>call:write_file{content:<escape>line 1\nline 2<escape>,overwrite:true,"
        "path:<escape>notes/out.txt<escape>}<end_function_call>"
    ),
}


def dsml(text: str) -> dict[str, str]:
    """A DSML text as each DeepSeek version writes it (given as V3.2's)."""
    versions = {}
    for name, dialect in DIALECTS.items():
        if isinstance(dialect, DeepSeekV32):
            tags = dialect.tags
            versions[name] = (
                text.replace("｜DSML｜function_calls", "｜DSML｜" + tags.calls)
                .replace("｜DSML｜invoke", "｜DSML｜" + tags.invoke)
                .replace("｜DSML｜parameter", "｜DSML｜" + tags.parameter)
            )
    return versions


WRITE_CALL.update(dsml(
    '<｜DSML｜invoke name="write_file">\n<｜DSML｜parameter name="path" string="true">notes/out.txt</｜DSML｜parameter>\n'
    '<｜DSML｜parameter name="content" string="true">line 1\nline 2</｜DSML｜parameter>\n'
    '<｜DSML｜parameter name="overwrite" string="false">true</｜DSML｜parameter>\n</｜DSML｜invoke>'
))
WRITE_ARGUMENTS = '{"path": "notes/out.txt", "content": "line 1\\nline 2", "overwrite": true}'
WRITE_CALL["deepseek_v31"] = f"<｜tool▁call▁begin｜>write_file<｜tool▁sep｜>{WRITE_ARGUMENTS}<｜tool▁call▁end｜>"
WRITE_CALL["deepseek_r1"] = f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>write_file\n```json\n{WRITE_ARGUMENTS}\n```<｜tool▁call▁end｜>"
WRITE_CALL["kimi_k2"] = f"<|tool_call_begin|>functions.write_file:0<|tool_call_argument_begin|>{WRITE_ARGUMENTS}<|tool_call_end|>"
WRITE_CALL["minimax_m2"] = (
    '<invoke name="write_file">\n<parameter name="path">notes/out.txt</parameter>\n'
    '<parameter name="content">line 1\nline 2</parameter>\n<parameter name="overwrite">true</parameter>\n</invoke>'
)


def harmony(name: str, arguments: str) -> str:
    """A call message as gpt-oss writes it, up to the ``<|call|>`` that ends the turn."""
    return f"<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{arguments}"


WRITE_CALL["gpt_oss"] = harmony("write_file", WRITE_ARGUMENTS)
# get_time(tz="UTC"), by hand.
TIME_CALL = {
    "qwen3_coder": "<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>\n</tool_call>",
    "hermes": '<tool_call>\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n</tool_call>',
    "glm45": "<tool_call>get_time\n<arg_key>tz</arg_key>\n<arg_value>UTC</arg_value>\n</tool_call>",
    "glm47": "<tool_call>get_time<arg_key>tz</arg_key><arg_value>UTC</arg_value></tool_call>",
    "gemma4": '<|tool_call>call:get_time{tz:<|"|>UTC<|"|>}<tool_call|>',
    "functiongemma": "<start_function_call>call:get_time{tz:<escape>UTC<escape>}<end_function_call>",
    **dsml('<｜DSML｜invoke name="get_time">\n<｜DSML｜parameter name="tz" string="true">UTC</｜DSML｜parameter>\n</｜DSML｜invoke>'),
    "deepseek_v31": '<｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{"tz": "UTC"}<｜tool▁call▁end｜>',
    "deepseek_r1": '<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{"tz": "UTC"}\n```<｜tool▁call▁end｜>',
    "kimi_k2": '<|tool_call_begin|>functions.get_time:0<|tool_call_argument_begin|>{"tz": "UTC"}<|tool_call_end|>',
    "gpt_oss": harmony("get_time", '{"tz": "UTC"}'),
    "minimax_m2": '<invoke name="get_time">\n<parameter name="tz">UTC</parameter>\n</invoke>',
}
# What opens a call as a special token (in DSML, the token every tag starts
# with), and what closes one.
TRIGGER = {name: dialect.markup.required_tokens[0] for name, dialect in DIALECTS.items()}
TRIGGER.update(dict.fromkeys(("deepseek_v31", "deepseek_r1"), "<｜tool▁calls▁begin｜>"))  # a block's opening token
TRIGGER["kimi_k2"] = "<|tool_calls_section_begin|>"
CALL_CLOSE = {name: dialect.markup.close for name, dialect in DIALECTS.items()}


def turn(dialect: str, *calls: str) -> str:
    """A turn's calls as ``dialect`` writes them (in a section, where it has
    one; each its own message, in a family that writes a turn as messages)."""
    return turn_of(dialect, list(calls))


PARALLEL = tuple(name for name in ALL_DIALECTS if name not in NEXT_MESSAGE)
"""Dialects whose turn may hold several calls (a Harmony call's <|call|> ends the turn)."""


def answer(dialect: str, text: str = "") -> str:
    """A plain answer: the text itself, or inside its message where the family frames one."""
    framing = DIALECTS[dialect].markup.messages
    return text if framing is None else framing.answer + text


def before_call(dialect: str, text: str, call: str) -> str:
    """Text, then a call: on lines of their own, or the text in a preamble message."""
    framing = DIALECTS[dialect].markup.messages
    return f"{text}\n{call}" if framing is None else framing.preamble(text) + call


# A reasoning block as each family writes it (FunctionGemma has none).
REASONING = {
    "qwen3_coder": "<think>\nThe user wants the notes saved.\n</think>\n\n",
    "hermes": "<think>\nThe user wants the notes saved.\n</think>\n\n",
    "glm45": "<think>The user wants the notes saved.</think>\n",
    "glm47": "<think>The user wants the notes saved.</think>",
    "gemma4": "<|channel>thought\nThe user wants the notes saved.<channel|>",
    **dict.fromkeys([*dsml(""), "deepseek_v31", "deepseek_r1", "kimi_k2"], "<think>The user wants the notes saved.</think>"),
    "minimax_m2": "<think>\nThe user wants the notes saved.\n</think>\n\n",
    "gpt_oss": "<|channel|>analysis<|message|>The user wants the notes saved.<|end|><|start|>assistant",
}
TEXT = "Sure, I will save the notes. Anything else?"


def test_hand_written_calls_are_what_the_renderers_write():
    """The bytes these tests write by hand are the dialects' own (FORMATS.md)."""
    for dialect in ALL_DIALECTS:
        ct = compiled(TOOLS, dialect)
        render = get_dialect(dialect).render_call
        args = {"path": "notes/out.txt", "content": "line 1\nline 2", "overwrite": True}
        assert render(ct.tools[0], args, "trained") == WRITE_CALL[dialect]
        assert render(ct.tools[1], {"tz": "UTC"}, "trained") == TIME_CALL[dialect]


# -- tool_choice --------------------------------------------------------------------


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_auto_allows_text_calls_and_reasoning(dialect):
    ct = compiled(TOOLS, dialect)
    call = turn(dialect, WRITE_CALL[dialect])
    both = turn(dialect, WRITE_CALL[dialect], TIME_CALL[dialect])
    assert_accepted(ct, answer(dialect, TEXT))
    assert_accepted(ct, answer(dialect))
    assert_accepted(ct, before_call(dialect, TEXT, call))
    assert_accepted(ct, call)
    assert ct.check(both).accepted == (dialect in PARALLEL)
    if dialect in REASONING:
        assert_accepted(ct, REASONING[dialect] + call)
        assert ct.check(REASONING[dialect] + both).accepted == (dialect in PARALLEL)
        assert_accepted(ct, REASONING[dialect] + answer(dialect, TEXT))
        # The boundary stays open: reasoning, then text, then a call.
        assert_accepted(ct, REASONING[dialect] + before_call(dialect, TEXT, call))
    # Nothing after the last call but the end of the turn.
    assert_rejected(ct, call + "\nDone.")


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_required_needs_a_call(dialect):
    ct = compiled(TOOLS, dialect, tool_choice="required")
    assert_rejected(ct, answer(dialect, TEXT))
    assert_rejected(ct, "")
    assert_accepted(ct, turn(dialect, WRITE_CALL[dialect]))
    assert_accepted(ct, turn(dialect, TIME_CALL[dialect]))
    assert ct.check(turn(dialect, WRITE_CALL[dialect], TIME_CALL[dialect])).accepted == (dialect in PARALLEL)
    if dialect in REASONING:
        assert_accepted(ct, REASONING[dialect] + turn(dialect, WRITE_CALL[dialect]))
        assert_rejected(ct, REASONING[dialect])
        assert_rejected(ct, REASONING[dialect] + answer(dialect, TEXT))


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_named_tool_choice_allows_only_that_tool(dialect):
    ct = compiled(TOOLS, dialect, tool_choice="get_time")
    time_call, write_call = turn(dialect, TIME_CALL[dialect]), turn(dialect, WRITE_CALL[dialect])
    assert_accepted(ct, time_call)
    assert_rejected(ct, write_call)
    assert_rejected(ct, answer(dialect, TEXT))
    if dialect in REASONING:
        assert_accepted(ct, REASONING[dialect] + time_call)
        assert_rejected(ct, REASONING[dialect] + write_call)
    other = compiled(TOOLS, dialect, tool_choice="write_file")
    assert_accepted(other, write_call)
    assert_rejected(other, time_call)


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_none_allows_text_and_never_the_trigger(dialect):
    ct = compiled(TOOLS, dialect, tool_choice="none")
    tokenizer = ct.tokenizer
    assert_accepted(ct, answer(dialect, TEXT))
    assert_accepted(ct, answer(dialect))
    if dialect in REASONING:
        assert_accepted(ct, REASONING[dialect] + answer(dialect, TEXT))
    # The trigger as its special token: rejected exactly there.
    header = answer(dialect)  # markup before the text, where the answer is a message
    text = answer(dialect, "I could call a tool: ") + turn(dialect, WRITE_CALL[dialect]).lstrip()
    result = ct.check(text)
    assert not result.accepted
    lead = text[: text.index(TRIGGER[dialect], len(header))]
    lead_ids = tokenizer.encode(lead)
    assert tokenizer.encode(text)[len(lead_ids)] == tokenizer.token_id(TRIGGER[dialect])
    assert (result.token_index, result.byte_offset) == (len(lead_ids), len(lead.encode()))
    # The trigger spelled as ordinary text tokens: rejected at the token that completes it.
    trigger = TRIGGER[dialect]
    ids = tokenizer.encode(lead + trigger[:4]) + tokenizer.encode(trigger[4:] + " now")
    assert tokenizer.decode(ids) == lead + trigger + " now"
    header_ids = len(tokenizer.encode(header))
    assert not any(tokenizer.is_special(i) for i in ids[header_ids:])
    completes = next(k for k in range(header_ids, len(ids)) if trigger in tokenizer.decode(ids[header_ids : k + 1]))
    assert ct.matcher().validate_tokens(ids) == completes
    # ... and the text before it is fine on its own.
    assert ct.matcher().validate_tokens(ids[:completes]) == completes


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_parallel_tool_calls_off_allows_one_call(dialect):
    one = compiled(TOOLS, dialect, parallel_tool_calls=False)
    two = turn(dialect, WRITE_CALL[dialect], TIME_CALL[dialect])
    assert_accepted(one, turn(dialect, WRITE_CALL[dialect]))
    assert_accepted(one, answer(dialect, TEXT))
    assert_rejected(one, two)
    assert_rejected(one, turn(dialect, WRITE_CALL[dialect], WRITE_CALL[dialect]))
    # The rejection is at the second call (or what leads to it), not at the end.
    result = one.check(two)
    assert result.byte_offset < len(two.encode())
    second = two.index(TIME_CALL[dialect]) - len(NEXT_MESSAGE.get(dialect, ""))
    assert result.byte_offset >= len(two[:second].encode()) - 2
    required = compiled(TOOLS, dialect, tool_choice="required", parallel_tool_calls=False)
    assert_accepted(required, turn(dialect, TIME_CALL[dialect]))
    assert_rejected(required, two)
    assert compiled(TOOLS, dialect, parallel_tool_calls=True).check(two).accepted == (dialect in PARALLEL)


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_turn_must_be_allowed_to_end_after_the_text(dialect):
    ct = compiled(TOOLS, dialect)
    tokenizer = ct.tokenizer
    call = turn(dialect, WRITE_CALL[dialect])
    close = CALL_CLOSE[dialect]
    # A call ends with its closing marker, or (a message's) before the closing that ends the turn.
    assert WRITE_CALL[dialect].endswith(close) != (dialect in NEXT_MESSAGE)
    cut = call[: call.rindex(close)] if close in call else call[:-1]
    # Cut before the closing marker, and in the middle of a value: every token
    # is allowed, but the turn cannot end there.
    for text in (cut, call[: call.index("line 2")], before_call(dialect, TEXT, cut)):
        result = ct.check(text)
        assert not result.accepted, text
        assert result.token_index == len(tokenizer.encode(text))
        assert result.byte_offset == len(text.encode("utf-8"))
    if dialect in REASONING:
        unclosed = REASONING[dialect].split("saved")[0]
        result = ct.check(unclosed)
        assert (result.accepted, result.token_index) == (False, len(tokenizer.encode(unclosed)))
    required = compiled(TOOLS, dialect, tool_choice="required")
    refused = required.check("")
    assert (refused.accepted, refused.token_index, refused.byte_offset) == (False, 0, 0)
    markup = get_dialect(dialect).markup
    if markup.section is None:
        assert markup.open in refused.allowed_markers  # what the output must start with
    else:  # the section's opening (or its lead, a few text tokens), or a reasoning block
        assert set(refused.allowed_markers) <= {markup.section.opening, *get_dialect(dialect).reasoning.tokens}
        assert 0 < (refused.allowed_tokens or 0) < 10


@pytest.mark.parametrize(
    ("dialect", "after_text", "after_calls"),
    [
        ("qwen3_coder", ["<|im_end|>"], ["<|im_end|>"]),
        ("hermes", ["<|im_end|>"], ["<|im_end|>"]),
        ("glm45", ["<|endoftext|>"], ["<|endoftext|>"]),
        ("gemma4", ["<turn|>", "<eos>"], ["<|tool_response>"]),
        ("functiongemma", ["<end_of_turn>", "<eos>"], ["<start_function_response>"]),
    ],
)
def test_turn_end_token_is_in_the_mask_exactly_where_the_turn_may_end(dialect, after_text, after_calls):
    ct = compiled(TOOLS, dialect)
    tokenizer = ct.tokenizer
    ends = {m: tokenizer.token_id(m) for m in set(after_text + after_calls)}
    assert None not in ends.values(), ends

    def ends_allowed(text: str) -> set[str]:
        allowed = set(allowed_next(ct, tokenizer.encode(text)))
        return {m for m, i in ends.items() if i in allowed}

    call = WRITE_CALL[dialect]
    assert set(after_text) <= ends_allowed(TEXT)
    assert set(after_text) <= ends_allowed("")
    assert set(after_calls) <= ends_allowed(call)
    assert set(after_calls) <= ends_allowed(turn(dialect, call, TIME_CALL[dialect]))
    for inside in (call[: call.index("notes")], call[: call.index("line 2") + 2], call[: -len(CALL_CLOSE[dialect])]):
        assert ends_allowed(inside) == set(), inside
    if dialect in REASONING:
        assert ends_allowed(REASONING[dialect].split("saved")[0]) == set()
        required = compiled(TOOLS, dialect, tool_choice="required")
        allowed = set(allowed_next(required, tokenizer.encode(REASONING[dialect])))
        assert not allowed & set(ends.values())
        assert tokenizer.encode(turn(dialect, TIME_CALL[dialect]))[0] in allowed


# -- where check says the output went wrong ---------------------------------------


def expected_rejection(tokenizer: Tokenizer, text: str, bad: int) -> tuple[int, int]:
    """The token holding byte ``bad`` (the first byte no valid output can
    have there) and the byte where that token starts."""
    ids = tokenizer.encode(text)
    starts = token_starts(tokenizer, ids)
    assert b"".join(tokenizer.token_bytes(i) for i in ids) == text.encode()
    index = max(k for k, start in enumerate(starts) if start <= bad)
    return index, starts[index]


def where(result) -> tuple[int | None, int | None]:
    """Where a rejected output was refused (and that it was)."""
    assert not result.accepted and result.to_json()["accepted"] is False
    return result.token_index, result.byte_offset


def test_check_reports_the_first_rejected_token_and_its_byte_offset():
    ct = compiled(TOOLS, "qwen3_coder")
    lead = "Grüße aus Köln — ich speichere die Notizen.\n"
    text = (
        lead + "<tool_call>\n<function=write_file>\n<parameter=path>\nnotes/ö.txt\n</parameter>\n"
        "<parameter=content>\nnaïve ☃\n</parameter>\n<parameter=overwrite>\nyes\n</parameter>\n"
        "</function>\n</tool_call>"
    )
    bad = text.encode().index(b"yes")
    assert bad != text.index("yes")  # bytes, not characters
    index, offset = expected_rejection(ct.tokenizer, text, bad)
    assert where(ct.check(text)) == (index, offset)
    refused = ct.check(text)  # where a boolean starts: a few tokens, no marker
    assert 0 < (refused.allowed_tokens or 0) < 100 and refused.allowed_markers == ()

    # A required key skipped: the first key must be path.
    text = lead + "<tool_call>\n<function=write_file>\n<parameter=content>\nx\n</parameter>\n"
    bad = len((lead + "<tool_call>\n<function=write_file>\n<parameter=").encode())
    index, offset = expected_rejection(ct.tokenizer, text, bad)
    assert where(ct.check(text)) == (index, offset)

    gemma = compiled(TOOLS, "gemma4")
    text = '¿Guardo las notas?<|tool_call>call:write_file{content:<|"|>naïve ☃<|"|>,overwrite:maybe}<tool_call|>'
    bad = text.encode().index(b"maybe")
    index, offset = expected_rejection(gemma.tokenizer, text, bad)
    assert where(gemma.check(text)) == (index, offset)


@pytest.mark.parametrize("dialect", ["qwen3_coder", "gemma4"])
def test_byte_offset_counts_bytes_when_a_token_splits_a_character(dialect):
    """'ꙭ' and 'ꙮ' (U+A66D, U+A66E) share their first two UTF-8 bytes, which
    both vocabularies write as tokens of their own: the rejected token starts
    in the middle of the character, and the offset must count its bytes."""
    ct = compiled([function("mark", {"glyph": {"enum": ["ꙭ", "ok"]}}, ["glyph"])], dialect)
    if dialect == "qwen3_coder":
        good = "<tool_call>\n<function=mark>\n<parameter=glyph>\nꙭ\n</parameter>\n</function>\n</tool_call>"
    else:
        good = '<|tool_call>call:mark{glyph:<|"|>ꙭ<|"|>}<tool_call|>'
    assert_accepted(ct, good)
    bad_text = good.replace("ꙭ", "ꙮ")
    bad = bad_text.encode().index("ꙮ".encode()) + 2  # the third byte differs
    index, offset = expected_rejection(ct.tokenizer, bad_text, bad)
    assert offset == bad  # the vocabulary splits the character there
    assert where(ct.check(bad_text)) == (index, offset)


# -- key order ----------------------------------------------------------------------

# Four keys, two required: name (string), count (integer) required; verbose, ratio optional.
SETTINGS_PROPERTIES = {
    "name": {"type": "string"},
    "count": {"type": "integer"},
    "verbose": {"type": "boolean"},
    "ratio": {"type": "number"},
}
SETTINGS_REQUIRED = ["name", "count"]
CONFIGURE = function("configure", SETTINGS_PROPERTIES, SETTINGS_REQUIRED)
CONFIGURE_NESTED = function(
    "configure",
    {"target": {"type": "string"}, "settings": {"type": "object", "properties": SETTINGS_PROPERTIES, "required": SETTINGS_REQUIRED}},
    ["target", "settings"],
)
KEYS = list(SETTINGS_PROPERTIES)
QWEN_VALUES = {"name": "alpha", "count": "3", "verbose": "true", "ratio": "0.5"}
JSON_VALUES = {"name": '"alpha"', "count": "3", "verbose": "true", "ratio": "0.5"}
GEMMA_VALUES = {"name": '<|"|>alpha<|"|>', "count": "3", "verbose": "true", "ratio": "0.5"}


def qwen_configure(keys: list[str]) -> str:
    params = "".join(f"<parameter={k}>\n{QWEN_VALUES[k]}\n</parameter>\n" for k in keys)
    return f"<tool_call>\n<function=configure>\n{params}</function>\n</tool_call>"


def hermes_configure(keys: list[str]) -> str:
    settings = "{" + ", ".join(f'"{k}": {JSON_VALUES[k]}' for k in keys) + "}"
    return f'<tool_call>\n{{"name": "configure", "arguments": {{"target": "db", "settings": {settings}}}}}\n</tool_call>'


def gemma_configure(keys: list[str]) -> str:
    return "<|tool_call>call:configure{" + ",".join(f"{k}:{GEMMA_VALUES[k]}" for k in keys) + "}<tool_call|>"


def glm_configure(keys: list[str], newline: str = "\n") -> str:
    pairs = "".join(
        f"<arg_key>{k}</arg_key>{newline}<arg_value>{QWEN_VALUES[k]}</arg_value>{newline}" for k in keys
    )
    return f"<tool_call>configure{newline}{pairs}</tool_call>"


def functiongemma_configure(keys: list[str]) -> str:
    body = ",".join(f"{k}:{GEMMA_VALUES[k]}" for k in keys).replace('<|"|>', "<escape>")
    return "<start_function_call>call:configure{" + body + "}<end_function_call>"


KEY_ORDER_CASES = {
    "qwen3_coder": (CONFIGURE, qwen_configure),
    "hermes": (CONFIGURE_NESTED, hermes_configure),
    "gemma4": (CONFIGURE, gemma_configure),
    "glm45": (CONFIGURE, glm_configure),
    "glm47": (CONFIGURE, lambda keys: glm_configure(keys, "")),
    "functiongemma": (CONFIGURE, functiongemma_configure),
}


@pytest.mark.parametrize("dialect", list(KEY_ORDER_CASES))
def test_any_key_order_accepts_every_order_and_still_forces_required_keys(dialect):
    tool, write = KEY_ORDER_CASES[dialect]
    ct = compiled([tool], dialect, key_order="any")
    orders = list(itertools.permutations(KEYS))
    assert len(orders) == 24
    rejected = [order for order in orders if not accepted(ct, write(list(order)))]
    assert rejected == [], f"{dialect}: orders rejected: {rejected}"
    # Optional keys left out, in any order.
    for order in (["count", "name"], ["ratio", "count", "name"], ["name", "verbose", "count"]):
        assert_accepted(ct, write(order))
    # A required key missing, or a key repeated.
    for order in (
        ["name", "verbose", "ratio"],
        ["count", "ratio"],
        ["verbose"],
        [],
        ["name", "count", "name"],
        ["count", "count", "name"],
        ["name", "count", "verbose", "ratio", "verbose"],
        ["ratio", "ratio", "name", "count"],
    ):
        assert_rejected(ct, write(order))


@pytest.mark.parametrize("dialect", list(KEY_ORDER_CASES))
def test_default_key_order_is_strict(dialect):
    """Without key_order="any", one order only (and the missing-key and
    repeated-key rejections hold there too)."""
    tool, write = KEY_ORDER_CASES[dialect]
    ct = compiled([tool], dialect)
    trained = sorted(KEYS) if dialect in ("gemma4", "functiongemma") else KEYS
    assert_accepted(ct, write(trained))
    accepted_orders = [order for order in itertools.permutations(KEYS) if accepted(ct, write(list(order)))]
    assert accepted_orders == [tuple(trained)]
    assert_rejected(ct, write(["name", "name", "count"]))


def test_trained_key_order_is_alphabetical_for_gemma_and_schema_for_qwen():
    schema_order = ["name", "count", "verbose", "ratio"]
    alphabetical = ["count", "name", "ratio", "verbose"]
    gemma = compiled([CONFIGURE], "gemma4")
    assert_accepted(gemma, gemma_configure(alphabetical))
    assert_accepted(gemma, gemma_configure(["count", "name", "verbose"]))
    assert_rejected(gemma, gemma_configure(schema_order))
    assert_rejected(gemma, gemma_configure(["name", "count"]))
    assert compiled([CONFIGURE], "gemma4", key_order="alphabetical").grammar == gemma.grammar

    qwen = compiled([CONFIGURE], "qwen3_coder")
    assert_accepted(qwen, qwen_configure(schema_order))
    assert_accepted(qwen, qwen_configure(["name", "count", "ratio"]))
    assert_rejected(qwen, qwen_configure(alphabetical))
    assert_rejected(qwen, qwen_configure(["count", "name"]))
    assert compiled([CONFIGURE], "qwen3_coder", key_order="schema").grammar == qwen.grammar

    # The other order, asked for explicitly.
    gemma_schema = compiled([CONFIGURE], "gemma4", key_order="schema")
    assert_accepted(gemma_schema, gemma_configure(schema_order))
    assert_rejected(gemma_schema, gemma_configure(alphabetical))
    qwen_alpha = compiled([CONFIGURE], "qwen3_coder", key_order="alphabetical")
    assert_accepted(qwen_alpha, qwen_configure(alphabetical))
    assert_rejected(qwen_alpha, qwen_configure(schema_order))
    hermes_alpha = compiled([CONFIGURE_NESTED], "hermes", key_order="alphabetical")
    alpha_call = (
        '<tool_call>\n{"name": "configure", "arguments": {"settings": {"count": 3, "name": "alpha"}, '
        '"target": "db"}}\n</tool_call>'
    )
    assert_accepted(hermes_alpha, alpha_call)
    assert_rejected(compiled([CONFIGURE_NESTED], "hermes"), alpha_call)


def test_gemma_nested_objects_follow_the_trained_order_too():
    tool = function(
        "configure",
        {"settings": {"type": "object", "properties": SETTINGS_PROPERTIES, "required": SETTINGS_REQUIRED}},
        ["settings"],
    )
    ct = compiled([tool], "gemma4")
    inner = lambda keys: "{" + ",".join(f"{k}:{GEMMA_VALUES[k]}" for k in keys) + "}"
    assert_accepted(ct, f"<|tool_call>call:configure{{settings:{inner(sorted(KEYS))}}}<tool_call|>")
    assert_rejected(ct, f"<|tool_call>call:configure{{settings:{inner(KEYS)}}}<tool_call|>")


def test_any_key_order_beyond_eight_keys_falls_back_to_schema_order_with_a_warning():
    properties = {f"k{i}": {"type": "integer"} for i in range(9)}
    ct = compiled([function("wide", properties, ["k0"])], "qwen3_coder", key_order="any")
    assert [w.warning.keyword for w in ct.warnings] == ["key_order"], [str(w) for w in ct.warnings]
    assert ct.warnings[0].tool == "wide"
    call = lambda keys: (
        "<tool_call>\n<function=wide>\n"
        + "".join(f"<parameter={k}>\n1\n</parameter>\n" for k in keys)
        + "</function>\n</tool_call>"
    )
    assert_accepted(ct, call(["k0", "k3", "k8"]))
    assert_rejected(ct, call(["k3", "k0"]))
    assert_rejected(ct, call(["k3"]))
    assert compiled([function("narrow", {f"k{i}": {"type": "integer"} for i in range(8)}, ["k0"])], "qwen3_coder", key_order="any").warnings == ()


# -- qwen3_coder values ---------------------------------------------------------------

NOTE = function(
    "note",
    {"content": {"type": "string"}, "flag": {"type": "boolean"}, "nothing": {"type": "null"}},
    ["content"],
)


def qwen_note(content: str, rest: str = "") -> str:
    return (
        f"<tool_call>\n<function=note>\n<parameter=content>\n{content}\n</parameter>\n{rest}"
        "</function>\n</tool_call>"
    )


@pytest.mark.parametrize(
    "value",
    [
        "123",
        "true",
        "null",
        "[1, 2]",
        '{"a": 1}',
        "    return x\n",
        "",
        "\n\n",
        "if a < b: x = '</param'",
        # A line that begins with <parameter= may not (test_drift_raw); elsewhere it may.
        "x <parameter=flag>\ntrue",
        "closing tags inline: </parameter> </function> </tool_call",
        "x\n</parameter>y\n  </parameter>",
        "def f():\n    return {\n        'a': [1, 2],\n    }\n",
    ],
)
def test_qwen_string_values_are_raw_text(value):
    ct = compiled([NOTE], "qwen3_coder")
    assert_accepted(ct, qwen_note(value))


def test_qwen_string_value_ends_at_the_closing_line():
    """After ``\\n</parameter>\\n`` the value is over: the only text the
    grammar allows next is the next parameter or ``</function>``."""
    ct = compiled([NOTE], "qwen3_coder")
    tokenizer = ct.tokenizer
    prefix = "<tool_call>\n<function=note>\n<parameter=content>\nfoo\n</parameter>\n"
    allowed = allowed_next(ct, tokenizer.encode(prefix))
    assert allowed, "no token allowed after a complete parameter"
    continuations = [b"<parameter=flag>\n", b"<parameter=nothing>\n", b"</function>\n"]
    stray = [
        tokenizer.token_bytes(i)
        for i in allowed
        if not any(c.startswith(tokenizer.token_bytes(i)) or tokenizer.token_bytes(i).startswith(c) for c in continuations)
    ]
    assert stray == [], f"the string could go on with {stray[:20]}"
    # So a value holding the closing line is rejected right after it: where
    # the first "\n</parameter>\n" after the header ends (or, when the value
    # starts with "</parameter>\n", at that line's newline).
    header = "<tool_call>\n<function=note>\n<parameter=content>\n"
    for value, bad in (
        ("foo\n</parameter>\nbar", len(header + "foo\n</parameter>\n")),
        ("foo\n</parameter>\n", len(header + "foo\n</parameter>\n")),
        ("foo\n</parameter>\n<parameter=flag>\ntrue", None),
        ("</parameter>\nbar", len(header + "</parameter>")),
    ):
        text = qwen_note(value)
        assert text.startswith(header)
        result = ct.check(text)
        if bad is None:  # the text after the closing line reads as the next parameter
            assert result.accepted
            continue
        index, offset = expected_rejection(tokenizer, text, bad)
        assert where(result) == (index, offset), value
    # Before the closing line the text may still go on as part of the value.
    within = allowed_next(ct, tokenizer.encode(prefix[: -len("</parameter>\n")]))
    assert any(not tokenizer.token_bytes(i).startswith(b"<") for i in within)


def test_qwen_python_literals_only_at_the_top_level():
    tool = function(
        "toggle",
        {
            "flag": {"type": "boolean"},
            "nothing": {"type": "null"},
            "opts": {"type": "object", "properties": {"on": {"type": "boolean"}, "none": {"type": "null"}}},
            "flags": {"type": "array", "items": {"type": "boolean"}},
        },
        ["flag"],
    )
    ct = compiled([tool], "qwen3_coder")

    def call(**params: str) -> str:
        body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
        return f"<tool_call>\n<function=toggle>\n{body}</function>\n</tool_call>"

    for flag in ("true", "false", "True", "False"):
        assert_accepted(ct, call(flag=flag))
    for nothing in ("null", "None"):
        assert_accepted(ct, call(flag="true", nothing=nothing))
    for wrong in ("TRUE", "yes", "1", "None", '"true"'):
        assert_rejected(ct, call(flag=wrong))
    assert_rejected(ct, call(flag="true", nothing="False"))
    # Nested values are JSON: Python spellings are not.
    assert_accepted(ct, call(flag="true", opts='{"on": true, "none": null}', flags="[true, false]"))
    assert_rejected(ct, call(flag="true", opts='{"on": True}'))
    assert_rejected(ct, call(flag="true", opts='{"none": None}'))
    assert_rejected(ct, call(flag="true", flags="[True, false]"))
    assert_rejected(ct, call(flag="true", flags="[false, False]"))


GLM_JSON_VALUES = function(
    "store",
    {
        "paths": {"type": "array", "items": {"type": "string"}},
        "codes": {"type": "array", "items": {"type": "string", "pattern": "^a"}},
        "meta": {"type": "object", "additionalProperties": {"type": "integer"}},
        "blob": {"type": "object", "properties": {"any": {}}},
    },
)


@pytest.mark.parametrize(
    "key, value",
    [
        ("paths", '["a{}b"]'),
        ("codes", '["a{}"]'),
        ("meta", '{{"k{}": 1}}'),
        ("blob", '{{"any": ["{}"]}}'),
        ("blob", '{{"any": {{"k{}": null}}}}'),
    ],
)
@pytest.mark.parametrize("dialect", ["glm45", "glm47"])
def test_glm_json_values_never_hold_the_text_that_ends_them(dialect, key, value):
    """A GLM value runs to the first ``</arg_value>``, in both layouts (so
    the parser reads either, its newlines optional): a JSON string or key
    holding ``</arg_value>`` would end the value early, so the grammar keeps
    that text out of them; a near miss stays allowed. (glm45 used to allow
    it, its values ending at ``</arg_value>`` and the newline.)"""
    ct = compiled([GLM_JSON_VALUES], dialect)
    nl = "\n" if dialect == "glm45" else ""

    def call(text: str) -> str:
        return f"<tool_call>store{nl}<arg_key>{key}</arg_key>{nl}<arg_value>{text}</arg_value>{nl}</tool_call>"

    near_miss = call(value.format("</arg_valu>"))
    assert_accepted(ct, near_miss)
    assert parse_tool_calls(near_miss, [GLM_JSON_VALUES], dialect).errors == []
    assert_rejected(ct, call(value.format("</arg_value>")))


# -- the seed case: a typed key beside an open object ---------------------------------------

WEATHER = function(
    "get_weather",
    {"location": {"type": "string"}, "context": {"type": "object"}},
    ["location"],
)


@pytest.mark.parametrize("dialect", ["gemma4", "functiongemma"])
def test_open_object_beside_a_required_key(dialect):
    ct = compiled([WEATHER], dialect)
    q = '<|"|>' if dialect == "gemma4" else "<escape>"
    open_, close = ("<|tool_call>", "<tool_call|>") if dialect == "gemma4" else ("<start_function_call>", "<end_function_call>")

    def call(body: str) -> str:
        return f"{open_}call:get_weather{{{body}}}{close}".replace("Q", q)

    location = "location:QParisQ"
    assert_accepted(ct, call(location))
    assert_accepted(ct, call("context:{}," + location))
    contexts = [
        "{units:QmetricQ}",
        "{n:-1.5e3,ok:true,none:null,list:[]}",
        "{user:{name:QAnn {the} \"best\", ok?Q,prefs:{deep:{deeper:[[],{},[{}]]}}}}",
        "{tags:[QaQ,Qb,cQ,Q}{Q,Q]]Q,1,false,null,{k:[Q\"Q]}]}",
        "{note:Qline 1\nline 2, {x: [y]}\n\"quoted\"Q,$meta:{a_b.c-d:0}}",
    ]
    for context in contexts:
        assert_accepted(ct, call(f"context:{context},{location}"))
    # location is still forced, with its type.
    assert_rejected(ct, call("context:{units:QmetricQ}"))
    assert_rejected(ct, call(""))
    assert_rejected(ct, call("context:{units:QmetricQ},location:5"))
    assert_rejected(ct, call("location:Paris"))
    # A malformed context.
    for context in (
        "{a:{b:1}",
        "{a:1}}",
        "{a:[1,2}",
        "{a:[1,2]]}",
        "{a:}",
        "{a:1,}",
        "{:1}",
        "{a:'x'}",
        "{\"a\":1}",
        "{a=1}",
        "{a:Qunclosed}",
    ):
        assert_rejected(ct, call(f"context:{context},{location}"))
    # Nothing but declared keys at the top level.
    assert_rejected(ct, call(f"{location},units:QmetricQ"))


# -- the MCP corpus ---------------------------------------------------------------------

# Relaxations expected when all 61 MCP tools compile: none. Every keyword
# those servers use (anyOf with null, $ref/$defs, additionalProperties,
# bounds, enums, minItems, format uri) is enforced exactly in every dialect.
MCP_RELAXATIONS = {dialect: 0 for dialect in ALL_DIALECTS}


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_every_mcp_tool_compiles(dialect):
    tools = mcp_tools()
    assert len(tools) == 61
    ct = compiled(tools, dialect)
    assert [t.name for t in ct.tools] == [t.name for t in tools]
    listing = "\n".join(str(w) for w in ct.warnings)
    assert len(ct.warnings) == MCP_RELAXATIONS[dialect], f"{dialect}: {len(ct.warnings)} relaxations:\n{listing}"
    # Each tool is reachable: its call opens in the grammar.
    tool_body = next(line for line in ct.grammar.splitlines() if line.startswith("tool_body:"))
    missing = [t.name for t in tools if json.dumps(t.name) not in tool_body and t.name not in tool_body]
    assert missing == []
    # And one call of a real server's tool goes through.
    fetch = {
        "qwen3_coder": "<tool_call>\n<function=fetch>\n<parameter=url>\nhttps://example.com/a?b=1\n</parameter>\n"
        "<parameter=max_length>\n2000\n</parameter>\n</function>\n</tool_call>",
        "hermes": '<tool_call>\n{"name": "fetch", "arguments": {"url": "https://example.com/a?b=1", "max_length": 2000}}\n</tool_call>',
        "glm45": "<tool_call>fetch\n<arg_key>url</arg_key>\n<arg_value>https://example.com/a?b=1</arg_value>\n"
        "<arg_key>max_length</arg_key>\n<arg_value>2000</arg_value>\n</tool_call>",
        "glm47": "<tool_call>fetch<arg_key>url</arg_key><arg_value>https://example.com/a?b=1</arg_value>"
        "<arg_key>max_length</arg_key><arg_value>2000</arg_value></tool_call>",
        "gemma4": '<|tool_call>call:fetch{max_length:2000,url:<|"|>https://example.com/a?b=1<|"|>}<tool_call|>',
        "functiongemma": "<start_function_call>call:fetch{max_length:2000,url:<escape>https://example.com/a?b=1<escape>}"
        "<end_function_call>",
        "deepseek_v31": '<｜tool▁call▁begin｜>fetch<｜tool▁sep｜>{"url": "https://example.com/a?b=1", "max_length": 2000}<｜tool▁call▁end｜>',
        "deepseek_r1": "<｜tool▁call▁begin｜>function<｜tool▁sep｜>fetch\n```json\n"
        '{"url": "https://example.com/a?b=1", "max_length": 2000}\n```<｜tool▁call▁end｜>',
        "kimi_k2": "<|tool_call_begin|>functions.fetch:0<|tool_call_argument_begin|>"
        '{"url": "https://example.com/a?b=1", "max_length": 2000}<|tool_call_end|>',
        "gpt_oss": harmony("fetch", '{"url": "https://example.com/a?b=1", "max_length": 2000}'),
        "minimax_m2": '<invoke name="fetch">\n<parameter name="url">https://example.com/a?b=1</parameter>\n'
        '<parameter name="max_length">2000</parameter>\n</invoke>',
        **dsml(
            '<｜DSML｜invoke name="fetch">\n<｜DSML｜parameter name="url" string="true">https://example.com/a?b=1</｜DSML｜parameter>\n'
            '<｜DSML｜parameter name="max_length" string="false">2000</｜DSML｜parameter>\n</｜DSML｜invoke>'
        ),
    }[dialect]
    fetch = turn(dialect, fetch)
    assert_accepted(ct, fetch)
    assert_rejected(ct, fetch.replace("2000", "0"))  # minimum 1


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_an_untranslatable_pattern_is_a_relaxation_not_a_failure(dialect):
    """A pattern with no exact translation (a lookahead) relaxes its string
    and is reported; the tool set still compiles and the rest is enforced."""
    tool = function("tag", {"label": {"type": "string", "pattern": "^(?!tmp).*$"}, "n": {"type": "integer"}}, ["label", "n"])
    ct = compiled([tool], dialect)
    assert [(w.tool, w.warning.keyword) for w in ct.warnings] == [("tag", "pattern")], [str(w) for w in ct.warnings]
    call = {
        "qwen3_coder": "<tool_call>\n<function=tag>\n<parameter=label>\nkeep\n</parameter>\n<parameter=n>\n2\n</parameter>\n</function>\n</tool_call>",
        "hermes": '<tool_call>\n{"name": "tag", "arguments": {"label": "keep", "n": 2}}\n</tool_call>',
        "glm45": "<tool_call>tag\n<arg_key>label</arg_key>\n<arg_value>keep</arg_value>\n<arg_key>n</arg_key>\n<arg_value>2</arg_value>\n</tool_call>",
        "glm47": "<tool_call>tag<arg_key>label</arg_key><arg_value>keep</arg_value><arg_key>n</arg_key><arg_value>2</arg_value></tool_call>",
        "gemma4": '<|tool_call>call:tag{label:<|"|>keep<|"|>,n:2}<tool_call|>',
        "functiongemma": "<start_function_call>call:tag{label:<escape>keep<escape>,n:2}<end_function_call>",
        "deepseek_v31": '<｜tool▁call▁begin｜>tag<｜tool▁sep｜>{"label": "keep", "n": 2}<｜tool▁call▁end｜>',
        "deepseek_r1": '<｜tool▁call▁begin｜>function<｜tool▁sep｜>tag\n```json\n{"label": "keep", "n": 2}\n```<｜tool▁call▁end｜>',
        "kimi_k2": '<|tool_call_begin|>functions.tag:0<|tool_call_argument_begin|>{"label": "keep", "n": 2}<|tool_call_end|>',
        "gpt_oss": harmony("tag", '{"label": "keep", "n": 2}'),
        "minimax_m2": '<invoke name="tag">\n<parameter name="label">keep</parameter>\n<parameter name="n">2</parameter>\n</invoke>',
        **dsml(
            '<｜DSML｜invoke name="tag">\n<｜DSML｜parameter name="label" string="true">keep</｜DSML｜parameter>\n'
            '<｜DSML｜parameter name="n" string="false">2</｜DSML｜parameter>\n</｜DSML｜invoke>'
        ),
    }[dialect]
    call = turn(dialect, call)
    assert_accepted(ct, call)
    assert_rejected(ct, call.replace(">2<", ">two<").replace("\n2\n", "\ntwo\n").replace(":2}", ":two}").replace(": 2}", ": two}"))


@pytest.mark.parametrize(
    "kind, step, multiple, other, exact",
    [
        ("integer", 5, "15", "7", True),
        ("integer", 86400, "172800", "86401", True),  # 864 units: trailing zeros cost nothing
        ("number", 0.01, "0.5", "0.015", True),
        ("number", 3, "-9", "4", True),
        # llguidance reads the float 0.07 as 7000000000000001 units and refused the whole grammar.
        ("number", 0.07, "0", "0.05", False),
        # llguidance rejected 0.015 (written with fewer decimals than the step) ...
        ("number", 0.0075, "0.015", "0.01", False),
        # ... and the exponent form json.dumps writes (3e-08).
        ("number", 1e-8, "3e-08", "1.5e-09", False),
        # An integer multiple of 0.123456789 is a multiple of 123456789: so many automaton states
        # that llguidance aborted the process (JSON-Schema-Test-Suite, multipleOf "float division = inf").
        ("integer", 0.123456789, "370370367", "5", False),
        ("integer", 1000003, "2000006", "5", False),  # a prime: seconds and hundreds of MB to build
    ],
)
def test_a_multiple_of_too_fine_for_the_automaton_is_a_relaxation(kind, step, multiple, other, exact):
    """A ``multipleOf`` llguidance cannot take (too many units, or a float it
    cannot read exactly) is left to the parser's validation and reported;
    others are enforced by the constraint."""
    # llguidance 1.7 (vLLM 0.32's pin) rejects every negative multiple: there a
    # multipleOf that admits negatives (none of these has a minimum) is left to the parser.
    exact = exact and LLGUIDANCE_AT_LEAST_1_8
    ct = compiled([function("m", {"x": {"type": kind, "multipleOf": step}}, ["x"])], "hermes", tool_choice="required")
    assert [w.warning.keyword for w in ct.warnings] == ([] if exact else ["multipleOf"])

    def call(value: str) -> str:
        return f'<tool_call>\n{{"name": "m", "arguments": {{"x": {value}}}}}\n</tool_call>'

    assert_accepted(ct, call(multiple))
    assert parse_tool_calls(call(multiple), ct.tools, "hermes").errors == []
    assert accepted(ct, call(other)) is not exact
    assert parse_tool_calls(call(other), ct.tools, "hermes").errors != []


@pytest.mark.parametrize("kind", ["integer", "number"])
def test_a_multiple_of_over_non_negative_values_is_enforced_by_every_llguidance(kind):
    """With a non-negative minimum, llguidance 1.7's rejection of negative
    multiples costs nothing: the step is enforced on 1.7 and 1.9 alike."""
    schema = {"x": {"type": kind, "multipleOf": 3, "minimum": 0}}
    ct = compiled([function("m", schema, ["x"])], "hermes", tool_choice="required")
    assert ct.warnings == ()

    def call(value: str) -> str:
        return f'<tool_call>\n{{"name": "m", "arguments": {{"x": {value}}}}}\n</tool_call>'

    assert_accepted(ct, call("9"))
    assert_rejected(ct, call("4"))
    assert_rejected(ct, call("-3"))


def test_a_multiple_of_admitting_negatives_is_relaxed_only_where_llguidance_rejects_them():
    ct = compiled([function("m", {"x": {"type": "integer", "multipleOf": 3}}, ["x"])], "hermes", tool_choice="required")
    call = '<tool_call>\n{"name": "m", "arguments": {"x": -9}}\n</tool_call>'
    assert_accepted(ct, call)
    assert [w.warning.keyword for w in ct.warnings] == ([] if LLGUIDANCE_AT_LEAST_1_8 else ["multipleOf"])


# Found by bench/conformance.py; each instance is rendered in the dialect,
# checked, parsed back and compared (constrained.qa.conformance).
GRAMMAR_CONFORMANCE_CASES = [
    # An integral number in an enum or const has two spellings (JSON Schema: -2 == -2.0).
    ({"x": {"const": -2.0}}, [({"x": -2}, Outcome.ACCEPTED), ({"x": -2.0}, Outcome.ACCEPTED), ({"x": 2}, Outcome.REJECTED)]),
    ({"x": {"enum": [1, [3.0]]}}, [({"x": 1.0}, Outcome.ACCEPTED), ({"x": [3]}, Outcome.ACCEPTED), ({"x": 3}, Outcome.REJECTED)]),
    # hermes took llguidance's formats, which ignore leap years and IPv4-suffixed IPv6.
    ({"x": {"type": "string", "format": "date"}}, [({"x": "2021-02-29"}, Outcome.REJECTED), ({"x": "2020-02-29"}, Outcome.ACCEPTED)]),
    ({"x": {"type": "string", "format": "ipv6"}}, [({"x": "::ffff:192.168.0.1"}, Outcome.ACCEPTED), ({"x": "1::2::3"}, Outcome.REJECTED)]),
    # ECMA's \s holds U+3000 (hermes read patterns with Rust's \s; [\s] missed it everywhere).
    ({"x": {"type": "string", "pattern": "^[\\s]$"}}, [({"x": "\u3000"}, Outcome.ACCEPTED), ({"x": "a"}, Outcome.REJECTED)]),
    ({"x": {"type": "string", "pattern": "^\\S$"}}, [({"x": "\ufeff"}, Outcome.REJECTED), ({"x": "a"}, Outcome.ACCEPTED)]),
]


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
@pytest.mark.parametrize("properties, instances", GRAMMAR_CONFORMANCE_CASES)
def test_grammar_conformance_cases(dialect, properties, instances):
    ct = compiled([function("f", properties, list(properties))], dialect, tool_choice="required")
    for arguments, outcome in instances:
        verdict = judge_call(ct, "f", arguments, outcome is Outcome.ACCEPTED)
        assert verdict.outcome is outcome and verdict.exact, (arguments, verdict)


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_bounds_llguidance_cannot_read_are_a_relaxation(dialect):
    """llguidance turns integer bounds from about 2**62 on into no regex and
    refused the whole grammar (or, past 2**63, into a wrong bound: maximum
    1e300 rejected 10**299); such a bound is relaxed, the other kept."""
    properties = {"x": {"type": "integer", "minimum": -(2**63), "maximum": 5}, "y": {"type": "integer", "maximum": 1e300}}
    ct = compiled([function("f", properties, ["x"])], dialect, tool_choice="required")
    assert sorted((w.warning.keyword, w.warning.path) for w in ct.warnings) == [
        ("maximum", "/properties/y"), ("minimum", "/properties/x")]
    assert judge_call(ct, "f", {"x": 5, "y": 10**299}, True).outcome is Outcome.ACCEPTED
    assert judge_call(ct, "f", {"x": 6}, False).outcome is Outcome.REJECTED


def test_overlapping_pattern_properties_are_a_relaxation():
    """A key matching two patterns must satisfy both schemas; the grammar
    holds it to one, so it says so."""
    schema = {"type": "object", "patternProperties": {"a*": {"type": "integer"}, "aaa*": {"maximum": 20}}}
    ct = compile_tools([{"name": "f", "parameters": schema}], "hermes", tok("qwen3"), tool_choice="required", strict=False)
    assert [w.warning.keyword for w in ct.warnings] == ["patternProperties"]
    assert judge_call(ct, "f", {"aaaa": 31}, False).outcome is Outcome.REJECTED_BY_VALIDATION


# -- bad input ------------------------------------------------------------------------------


def test_unknown_dialect_lists_the_known_ones():
    with pytest.raises(UnknownDialectError) as e:
        compile_tools(TOOLS, "llama3_json", tok("qwen3"))
    for name in DIALECTS:
        assert name in str(e.value)
    assert "llama3_json" in str(e.value)
    assert set(DIALECTS) == set(ALL_DIALECTS)


@pytest.mark.parametrize(
    ("dialect", "tokenizer", "marker"),
    [
        ("qwen3_coder", "gemma4", "<tool_call>"),
        ("hermes", "functiongemma", "<tool_call>"),
        ("glm45", "gemma4", "<tool_call>"),
        ("gemma4", "qwen3", "<|tool_call>"),
        ("gemma4", "functiongemma", "<|tool_call>"),
        ("functiongemma", "gemma4", "<start_function_call>"),
    ],
)
def test_a_tokenizer_without_the_dialects_marker_is_named(dialect, tokenizer, marker):
    with pytest.raises(CompileError) as e:
        compile_tools(TOOLS, dialect, tok(tokenizer))
    assert marker in str(e.value)
    assert dialect in str(e.value)


def test_bad_options_are_compile_errors():
    qwen = tok("qwen3")
    with pytest.raises(CompileError, match="required"):
        compile_tools([], "qwen3_coder", qwen, tool_choice="required")
    with pytest.raises(CompileError) as e:
        compile_tools(TOOLS, "qwen3_coder", qwen, tool_choice="read_file")
    assert "read_file" in str(e.value) and "write_file" in str(e.value)
    with pytest.raises(CompileError):
        compile_tools([], "gemma4", tok("gemma4"), tool_choice="get_time")
    with pytest.raises(CompileError) as e:
        compile_tools(TOOLS, "qwen3_coder", qwen, key_order="random")
    assert "random" in str(e.value) and "any" in str(e.value)
    # No tools and auto: text only.
    ct = compile_tools([], "qwen3_coder", qwen)
    assert_accepted(ct, TEXT)
    assert_rejected(ct, TIME_CALL["qwen3_coder"])


# -- cache and artifacts --------------------------------------------------------------


def test_compiling_again_hits_the_cache():
    properties = {f"field_{i}": {"type": "array", "items": {"type": "integer", "minimum": i}} for i in range(40)}
    tools = [function(f"bulk_{j}", properties, ["field_0"]) for j in range(5)]
    start = time.perf_counter()
    first = compile_tools(tools, "qwen3_coder", tok("qwen3"))
    cold = time.perf_counter() - start
    start = time.perf_counter()
    again = compile_tools(json.loads(json.dumps(tools)), "qwen3_coder", tok("qwen3"))
    warm = time.perf_counter() - start
    print(f"compile: cold {cold * 1000:.1f} ms, cached {warm * 1000:.2f} ms")
    assert again is first
    # Same tools, written in another accepted form, and the tokenizer by name.
    bare = [t["function"] for t in tools]
    assert compile_tools(bare, "qwen3_coder", tok("qwen3")) is first
    assert compile_tools(tools, "qwen3_coder", "qwen3") is first
    # Other options: another object.
    assert compile_tools(tools, "qwen3_coder", tok("qwen3"), key_order="any") is not first


def test_the_same_tool_objects_skip_writing_a_content_key(monkeypatch):
    """Loaded tools given again as the same objects come from the cache by
    identity, without normalizing them or writing their schemas out; equal
    objects that are not the same find it by content; clearing forgets both."""
    import constrained.compiler as compiler_module

    loaded = load_tools([function("lookup", {"q": {"type": "string"}}, ["q"]), function("other", {}, [])])
    first = compile_tools(loaded, "hermes", tok("qwen3"))
    equal = load_tools([function("lookup", {"q": {"type": "string"}}, ["q"]), function("other", {}, [])])
    assert compile_tools(equal, "hermes", tok("qwen3")) is first

    def refuse(*args, **kwargs):
        raise AssertionError("keyed by content")

    with monkeypatch.context() as patched:
        patched.setattr(compiler_module, "canonical_json", refuse)
        patched.setattr(compiler_module, "normalize_tool_set", refuse)
        assert compile_tools(loaded, "hermes", tok("qwen3")) is first
    assert compile_tools(list(reversed(loaded)), "hermes", tok("qwen3")) is not first  # another order
    compiler_module.clear_compile_cache()
    assert compile_tools(loaded, "hermes", tok("qwen3")) is not first


def test_repeated_json_tools_skip_normalization(monkeypatch):
    """Tools given again as equal JSON (a server's next request) come from
    the cache without being normalized again; a changed schema does not."""
    tools = [function("lookup", {"q": {"type": "string"}, "n": {"type": "integer"}}, ["q"])]
    first = compile_tools(tools, "hermes", tok("qwen3"), strict=False)
    import constrained.compiler as compiler_module

    def refuse(*args, **kwargs):
        raise AssertionError("normalized again")

    monkeypatch.setattr(compiler_module, "normalize_tool_set", refuse)
    assert compile_tools(json.loads(json.dumps(tools)), "hermes", tok("qwen3"), strict=False) is first
    changed = json.loads(json.dumps(tools))
    changed[0]["function"]["parameters"]["properties"]["n"]["minimum"] = 1
    with pytest.raises(AssertionError, match="normalized again"):
        compile_tools(changed, "hermes", tok("qwen3"), strict=False)
    with pytest.raises(AssertionError, match="normalized again"):
        compile_tools(tools, "hermes", tok("qwen3"), strict=True)


def test_options_and_inputs_change_the_fingerprint():
    base = compiled(TOOLS, "qwen3_coder")
    variants = {
        "tool_choice=required": compiled(TOOLS, "qwen3_coder", tool_choice="required"),
        "tool_choice=none": compiled(TOOLS, "qwen3_coder", tool_choice="none"),
        "tool_choice=get_time": compiled(TOOLS, "qwen3_coder", tool_choice="get_time"),
        "parallel off": compiled(TOOLS, "qwen3_coder", parallel_tool_calls=False),
        "key_order=any": compiled(TOOLS, "qwen3_coder", key_order="any"),
        "key_order=alphabetical": compiled(TOOLS, "qwen3_coder", key_order="alphabetical"),
        "dialect=hermes": compiled(TOOLS, "hermes"),
        "tokenizer=qwen3.6": compile_tools(TOOLS, "qwen3_coder", tok("qwen3.6")),
        "one tool": compiled([WRITE_FILE_WITH_OVERWRITE], "qwen3_coder"),
        "another schema": compiled([WRITE_FILE_WITH_OVERWRITE, function("get_time", {"tz": {"type": "integer"}}, ["tz"])], "qwen3_coder"),
    }
    prints = {name: ct.fingerprint for name, ct in variants.items()}
    assert base.fingerprint not in prints.values()
    assert len(set(prints.values())) == len(prints), prints
    for name, ct in variants.items():
        assert ct is not base, name
    assert len(base.fingerprint) == 64 and int(base.fingerprint, 16) >= 0


@pytest.mark.parametrize("dialect", ["qwen3_coder", "gemma4"])
def test_save_and_load_round_trip(dialect, tmp_path):
    tools = TOOLS + [
        function(
            "tag",
            {"labels": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "n": {"not": {"type": "string"}}},
            ["labels"],
        )
    ]
    ct = compiled(tools, dialect, tool_choice="required", parallel_tool_calls=False, key_order="any")
    assert len(ct.warnings) >= 2  # uniqueItems and not: relaxed, reported
    path = tmp_path / "tools.compiled.json"
    ct.save(path)
    loaded = CompiledTools.load(path, tok(TOKENIZER_OF[dialect]))
    assert loaded is not ct
    assert loaded.grammar == ct.grammar
    assert loaded.fingerprint == ct.fingerprint
    assert loaded.warnings == ct.warnings
    assert (loaded.dialect, loaded.tool_choice, loaded.parallel_tool_calls, loaded.key_order) == (
        dialect,
        "required",
        False,
        "any",
    )
    assert [(t.name, t.description, t.parameters) for t in loaded.tools] == [
        (t.name, t.description, t.parameters) for t in ct.tools
    ]
    assert [t.schema.to_json() for t in loaded.tools] == [t.schema.to_json() for t in ct.tools]
    texts = [
        WRITE_CALL[dialect],
        TIME_CALL[dialect],
        turn(dialect, WRITE_CALL[dialect], TIME_CALL[dialect]),
        TEXT,
        REASONING[dialect] + TIME_CALL[dialect],
        WRITE_CALL[dialect][:-5],
        TEXT + TIME_CALL[dialect],
    ]
    assert [loaded.check(t) for t in texts] == [ct.check(t) for t in texts]
    assert [ct.check(t).accepted for t in texts] == [True, True, False, False, True, False, False]
    # Loading by the built-in name works too.
    assert CompiledTools.load(path, TOKENIZER_OF[dialect]).fingerprint == ct.fingerprint


def test_loading_what_is_not_an_artifact_fails(tmp_path):
    path = tmp_path / "old.json"
    compiled(TOOLS, "qwen3_coder").save(path)
    data = json.loads(path.read_text())
    data["format"] = 999
    path.write_text(json.dumps(data))
    with pytest.raises(CompileError):
        CompiledTools.load(path, tok("qwen3"))


def test_loading_with_another_vocabulary_fails(tmp_path):
    path = tmp_path / "qwen.json"
    compiled(TOOLS, "qwen3_coder").save(path)
    with pytest.raises(CompileError):
        CompiledTools.load(path, tok("qwen3.6"))
    with pytest.raises(CompileError):
        CompiledTools.load(path, tok("gemma4"))
    gemma_path = tmp_path / "gemma.json"
    compiled(TOOLS, "gemma4").save(gemma_path)
    with pytest.raises(CompileError):
        CompiledTools.load(gemma_path, tok("functiongemma"))


# -- Qwen3.6 ---------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", ["qwen3_coder", "hermes"])
def test_qwen3_6_vocabulary_uses_its_own_marker_ids(dialect):
    qwen36 = tok("qwen3.6")
    ct = compile_tools(TOOLS, dialect, qwen36)
    assert qwen36.token_id("<tool_call>") == 248058
    ids = qwen36.encode(WRITE_CALL[dialect])
    assert ids[0] == 248058 and ids[-1] == 248059
    assert 151657 not in ids
    reasoning = REASONING[dialect]
    assert qwen36.encode(reasoning)[0] == 248068
    assert_accepted(ct, WRITE_CALL[dialect])
    assert_accepted(ct, reasoning + WRITE_CALL[dialect] + "\n" + TIME_CALL[dialect])
    assert_accepted(ct, TEXT)
    assert_rejected(ct, WRITE_CALL[dialect].replace("notes/out.txt", "x", 1).replace("write_file", "read_file"))
    assert ct.fingerprint != compiled(TOOLS, dialect).fingerprint
    named = compile_tools(TOOLS, dialect, qwen36, tool_choice="get_time")
    assert_accepted(named, TIME_CALL[dialect])
    assert_rejected(named, WRITE_CALL[dialect])


def test_schemas_sharing_sub_schemas_compile_without_blowing_up():
    """MaskBench Handwritten---mod309 shares definitions many levels deep: the
    normalizer shares their frames, and nothing downstream may write them out
    once per use (that grows exponentially)."""
    from corpus import CORPUS

    schema = json.loads((CORPUS / "maskbench" / "Handwritten---mod309.json").read_text())["schema"]
    for dialect in sorted(DIALECTS):
        compiled = compile_tools([{"name": "f", "parameters": schema}], dialect, TOKENIZER_OF[dialect], strict=False)
        assert len(compiled.grammar) < 200_000, dialect
