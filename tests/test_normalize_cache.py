"""Tools given as JSON are normalized once per content in a process
(``normalize_tool_set``): a server's check, each parse, the stream parser
and the compile of a request share one reading, the cache stays bounded,
and nothing a caller does to its dicts afterwards reaches it."""

from __future__ import annotations

import copy
import json
import traceback

import pytest
from sample_tools import WEATHER

import constrained.compiler as compiler_module
from constrained import ToolCallStreamParser, compile_tools, parse_tool_calls
from constrained.errors import SchemaError
from constrained.frames import toolset
from constrained.frames.model import IntegerFrame, StringFrame
from constrained.frames.toolset import clear_normalize_cache, normalize_tool_set
from constrained.runtime.engine import ToolsRequest
from constrained.tools import load_tools

LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look a word up.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    },
}
TOOLS = [WEATHER, LOOKUP]
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def fresh(tools=TOOLS):
    """An equal list of new dicts, as the next request brings."""
    return json.loads(json.dumps(tools))


@pytest.fixture
def normalized(monkeypatch):
    """The names of the tools normalized since the test began, in order."""
    compiler_module.clear_compile_cache()
    names: list[str] = []
    normalize_tool = toolset.normalize_tool

    def counting(tool, **kwargs):
        names.append(tool.name)
        return normalize_tool(tool, **kwargs)

    monkeypatch.setattr(toolset, "normalize_tool", counting)
    yield names
    compiler_module.clear_compile_cache()


def test_a_request_normalizes_its_tools_once(normalized):
    request = ToolsRequest(dialect="hermes", tools=fresh())
    request.check()
    assert normalized == ["get_weather", "lookup"]
    parsed = parse_tool_calls(CALL, fresh(), "hermes")
    assert len(parsed.tool_calls) == 1 and not parsed.errors
    stream = ToolCallStreamParser(fresh(), "hermes")
    stream.feed(CALL)
    stream.close()
    assert stream.result == parsed
    compiled = request.compile("qwen3")
    assert compiled.check(CALL).accepted
    assert compile_tools(fresh(), "hermes", "qwen3") is compiled
    assert normalized == ["get_weather", "lookup"]


def test_other_content_is_normalized_again(normalized):
    first = normalize_tool_set(fresh())
    assert normalize_tool_set(fresh()) is first
    changed = fresh()
    changed[1]["function"]["description"] = "Look a word up in the dictionary."
    assert normalize_tool_set(changed) is not first
    assert normalize_tool_set(fresh(), strict=False) is not first
    reordered = fresh()
    properties = reordered[0]["function"]["parameters"]["properties"]
    reordered[0]["function"]["parameters"]["properties"] = dict(reversed(properties.items()))
    assert [key for key, _ in normalize_tool_set(reordered).tools[0].root.properties] == ["unit", "city"]
    assert normalized == ["get_weather", "lookup"] * 4


def test_the_cache_is_bounded_and_keeps_the_recent_sets(normalized):
    def single(index: int) -> list[dict]:
        tool = fresh([LOOKUP])
        tool[0]["function"]["name"] = f"lookup_{index}"
        return tool

    normalize_tool_set(single(0))
    for index in range(1, toolset._cache.limit + 5):
        normalize_tool_set(single(index))
        normalize_tool_set(single(0))  # kept in use: never the oldest
        assert len(toolset._cache) <= toolset._cache.limit
    assert normalized.count("lookup_0") == 1
    normalize_tool_set(single(1))
    assert normalized.count("lookup_1") == 2  # the oldest, dropped
    clear_normalize_cache()
    normalize_tool_set(single(0))
    assert normalized.count("lookup_0") == 2


def test_changing_the_given_dicts_afterwards_changes_nothing_kept(normalized):
    given = fresh()
    first = normalize_tool_set(given)
    given[0]["function"]["parameters"]["properties"]["city"]["type"] = "integer"
    given[1]["function"]["name"] = "renamed"
    again = normalize_tool_set(fresh())
    assert again is first
    (weather, lookup) = again.tools
    assert isinstance(weather.root.property("city"), StringFrame)
    assert weather.parameters == WEATHER["function"]["parameters"] and lookup.name == "lookup"
    changed = normalize_tool_set(given)
    assert isinstance(changed.tools[0].root.property("city"), IntegerFrame)
    assert parse_tool_calls(CALL, fresh(), "hermes").tool_calls


def test_tools_that_are_no_json_are_normalized_as_before(normalized):
    loaded = load_tools(fresh())
    assert normalize_tool_set(loaded).tools == normalize_tool_set(fresh()).tools
    normalize_tool_set(loaded)
    assert normalized == ["get_weather", "lookup"] * 3


BROKEN = {"name": "broken", "parameters": {"type": "object", "properties": {"x": {"type": "strnig"}}}}


def test_a_kept_error_is_raised_as_a_new_exception_each_time(normalized):
    def raised() -> SchemaError:
        with pytest.raises(SchemaError) as caught:
            normalize_tool_set(fresh([BROKEN, LOOKUP])).raise_first()
        return caught.value

    first, second = raised(), raised()
    assert first is not second
    assert (str(first), first.tool, first.path, first.reason) == (str(second), second.tool, second.path, second.reason)
    assert len(traceback.extract_tb(first.__traceback__)) == len(traceback.extract_tb(second.__traceback__))
    request = ToolsRequest(dialect="hermes", tools=fresh([BROKEN, LOOKUP]))
    depths = []
    for _ in range(3):
        with pytest.raises(SchemaError) as caught:
            request.check()
        depths.append(len(traceback.extract_tb(caught.value.__traceback__)))
    assert depths == depths[:1] * 3
    assert normalized == ["broken", "lookup"]


def test_a_server_sized_set_is_kept_too(normalized):
    many = [copy.deepcopy(LOOKUP) for _ in range(100)]
    for index, tool in enumerate(many):
        tool["function"]["name"] = f"lookup_{index}"
    assert len(normalize_tool_set(fresh(many)).tools) == 100
    assert parse_tool_calls(CALL, fresh(many), "hermes").errors
    assert len(normalized) == 100
