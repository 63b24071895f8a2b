"""SGLang tool-call detectors backed by the library's parser, one per dialect.

SGLang's serving layer asks the detector named by ``--tool-call-parser`` for
a request's constraint (:meth:`ConstrainedDetector.get_structural_tag`, and
:meth:`~ConstrainedDetector.get_auto_tool_call_structural_tag` under
``tool_choice`` auto) and hands what it returns to the grammar backend as a
structural tag; the detector then reads the output, whole or streamed. The
tag these detectors return is not XGrammar's: it carries the request's
tools and choices (:class:`ToolsTag`), which the plug-in's grammar backend
(``--grammar-backend constrained``) compiles into the library's constraint
in the model's own syntax, in ``auto`` as well as ``required`` and named
choices.

Output is read as the library reads it: types from the schema, strings
verbatim, a malformed call or one of an undeclared tool never returned as a
call (its text stays content). Reasoning is SGLang's reasoning parser's to
split off (``--reasoning-parser``): text reaching a detector is read with
no reasoning block, so, without a reasoning parser, a block stays in the
content as SGLang leaves it.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

from pydantic import BaseModel
from sglang.srt.function_call.base_format_detector import BaseFormatDetector
from sglang.srt.function_call.core_types import StreamingParseResult, StructureInfo, ToolCallItem
from sglang.srt.function_call.function_call_parser import FunctionCallParser

from ..dialects import DIALECTS, get_dialect
from ..output.parse import parse_tool_calls
from ..output.stream import Delta, ToolCallStreamParser
from ..runtime.engine import ToolsRequest, stream_pieces

TAG_TYPE: Literal["constrained_tools"] = "constrained_tools"
"""The ``type`` of a :class:`ToolsTag`, which tells the grammar backend it is its own."""


class ToolsTag(BaseModel):
    """What SGLang's serving layer carries from the detector to the grammar
    backend (it serializes the constraint with ``model_dump``): the
    request's :class:`~constrained.runtime.engine.ToolsRequest`."""

    type: Literal["constrained_tools"] = TAG_TYPE
    request: dict[str, Any]


class ConstrainedDetector(BaseFormatDetector):
    """Reads tool calls in :attr:`dialect` exactly and asks the plug-in's
    grammar backend for the library's constraint. ``only`` restricts the
    calls read to one tool (a named ``tool_choice``)."""

    dialect: ClassVar[str]

    def __init__(self, only: str | None = None) -> None:
        super().__init__()
        self.only = only
        self._stream: ToolCallStreamParser | None = None
        markup = get_dialect(self.dialect)
        self.bot_token, self.eot_token = markup.markup.open, markup.markup.close

    # -- the constraint --------------------------------------------------------------

    def get_structural_tag(
        self,
        tools: Any = None,
        tool_choice: Any = "auto",
        thinking_mode: bool = False,
        parallel_tool_calls: bool = True,
    ) -> ToolsTag:
        """The request's constraint (``thinking_mode`` is not read: the
        grammar backend reads reasoning from how the prompt ends). Tools are
        checked where they are compiled: a malformed one fails the request
        with its error there, where SGLang reports it to the client."""
        described = ToolsRequest(
            self.dialect,
            [openai_tool(tool) for tool in tools or ()],
            tool_choice=tool_choice_name(tool_choice),
            parallel_tool_calls=parallel_tool_calls is not False,
        )
        return ToolsTag(request=json.loads(described.to_json()))

    def get_auto_tool_call_structural_tag(
        self, tools: Any = None, thinking_mode: bool = False, parallel_tool_calls: bool = True
    ) -> ToolsTag:
        """``tool_choice`` auto is constrained too: text, or calls that
        follow their schemas."""
        return self.get_structural_tag(tools, "auto", thinking_mode, parallel_tool_calls)

    def get_required_tool_parser(self, tool_choice: Any) -> ConstrainedDetector | None:
        """Under a named choice, a detector that reads that tool's calls only."""
        name = tool_choice_name(tool_choice) if tool_choice is not None else "auto"
        if name in ("auto", "required", "none"):
            return None
        return type(self)(only=name)

    def structure_info(self) -> Any:
        """SGLang's generic structural tag (used only where a detector
        returns no tag of its own, which these never do)."""
        markup = get_dialect(self.dialect)
        return lambda name: StructureInfo(begin=markup.markup.open, end=markup.markup.close, trigger=markup.markup.open)

    # -- whole outputs ---------------------------------------------------------------

    def has_tool_call(self, text: str) -> bool:
        """Whether the library's parser finds a call in ``text``, well formed
        or not (a rejected one is returned to SGLang as content)."""
        result = parse_tool_calls(text, self._tools([]), self.dialect, reasoning=False)
        return bool(result.tool_calls or result.errors)

    def detect_and_parse(self, text: str, tools: Any) -> StreamingParseResult:
        result = parse_tool_calls(text, self._tools(tools), self.dialect, reasoning=False)
        indices = {openai_tool(tool)["function"]["name"]: index for index, tool in enumerate(tools or ())}
        calls = [
            ToolCallItem(
                tool_index=indices.get(call["function"]["name"], -1),
                name=call["function"]["name"],
                parameters=call["function"]["arguments"],
            )
            for call in result.tool_calls
        ]
        return StreamingParseResult(normal_text=result.content, calls=calls)

    # -- streaming -------------------------------------------------------------------

    def parse_streaming_increment(self, new_text: str, tools: Any) -> StreamingParseResult:
        if self._stream is None:
            self._stream = ToolCallStreamParser(self._tools(tools), self.dialect, reasoning=False)
        return _streaming_result(self._stream.feed(new_text))

    def finish(self, tools: Any) -> StreamingParseResult:
        """Settle the last call and send the text held back."""
        if self._stream is None or self._stream.result is not None:
            return StreamingParseResult()
        return _streaming_result(self._stream.close())

    def _tools(self, tools: Any) -> list[dict[str, Any]]:
        converted = [openai_tool(tool) for tool in tools or ()]
        if self.only is None:
            return converted
        return [tool for tool in converted if tool["function"]["name"] == self.only]


def _streaming_result(deltas: list[Delta]) -> StreamingParseResult:
    """The library's stream deltas as SGLang's (:func:`.stream_pieces`):
    call fragments indexed by the call's place in the output."""
    content, pieces = stream_pieces(deltas)
    calls = [
        ToolCallItem(
            tool_index=call["index"],
            name=call.get("function", {}).get("name"),
            parameters=call.get("function", {}).get("arguments", ""),
        )
        for call in pieces
    ]
    return StreamingParseResult(normal_text=content, calls=calls)


def openai_tool(tool: Any) -> dict[str, Any]:
    """An SGLang ``Tool`` (or an OpenAI tool dictionary) as the OpenAI
    function tool the library reads."""
    if isinstance(tool, dict):
        return tool
    function = tool.function
    described: dict[str, Any] = {"name": function.name}
    for key in ("description", "parameters", "strict"):
        value = getattr(function, key, None)
        if value is not None:
            described[key] = value
    return {"type": "function", "function": described}


def tool_choice_name(choice: Any) -> str:
    """``"auto"``, ``"required"``, ``"none"`` or the named tool's name."""
    if choice is None:
        return "auto"
    if isinstance(choice, str):
        return choice
    if isinstance(choice, dict):
        return str((choice.get("function") or choice).get("name", ""))
    return str(choice.function.name)


def register_detectors() -> tuple[str, ...]:
    """Add ``constrained_<dialect>`` for every dialect known now (the
    built-ins, the entry points', and those registered in code before this
    runs) to SGLang's table of tool-call detectors (which also gives
    ``--tool-call-parser`` its choices)."""
    names = []
    for dialect in DIALECTS:
        name = f"constrained_{dialect}"
        detector = type(f"Constrained{dialect.title().replace('_', '')}Detector", (ConstrainedDetector,), {"dialect": dialect})
        FunctionCallParser.ToolCallParserEnum[name] = detector
        names.append(name)
    return tuple(names)
