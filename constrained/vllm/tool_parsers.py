"""vLLM tool parsers backed by the library's parser, one per dialect.

vLLM builds a parser for every request (several times: to adjust the
request, to read the output, to stream), so a parser holds nothing costly:
the tools are read per request and compiling is cached by content.
``supports_required_and_named`` is off, so ``required`` and named tool
choices are read here in the dialect's own syntax, never by vLLM's JSON
fallback.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

from vllm.entrypoints.generate.base.protocol import (
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    ExtractedToolCallInformation,
    FunctionCall,
    ToolCall,
)
from vllm.sampling_params import StructuredOutputsParams
from vllm.tool_parsers import ToolParser, ToolParserManager
from vllm.tool_parsers.gptoss_tool_parser import GptOssToolParser

from ..dialects import DIALECTS, get_dialect
from ..errors import OptionError
from ..output.parse import parse_tool_calls
from ..output.stream import Delta, ToolCallStreamParser
from ..runtime.engine import EXTRA_ARGS_KEY, ToolsRequest, stream_pieces, template_reasoning
from ..tokenizers import load_tokenizer

logger = logging.getLogger(__name__)

ROUTE_VARIABLE = "CONSTRAINED_VLLM_ROUTE"
ROUTES = ("logits_processor", "structured_outputs")
"""How requests are constrained: by :class:`ToolCallLogitsProcessor` (the
default; the server needs ``--logits-processors``) or by vLLM's structured
outputs with the compiled grammar (guidance backend; works where custom
logits processors are refused, e.g. with speculative decoding)."""


def route() -> str:
    chosen = os.environ.get(ROUTE_VARIABLE, ROUTES[0]).strip().lower().replace("-", "_")
    if chosen not in ROUTES:
        raise OptionError(f"{ROUTE_VARIABLE}={chosen!r}: expected one of {', '.join(ROUTES)}", argument=ROUTE_VARIABLE)
    return chosen


class ConstrainedToolParser(ToolParser):
    """Reads tool calls in :attr:`dialect` exactly (types from the schema,
    strings verbatim) and fails closed: a call of an undeclared tool, or a
    malformed one, is never returned as a call (its text stays content)."""

    dialect: ClassVar[str]
    supports_required_and_named = False
    engine_based_streaming = True
    """So that vLLM calls :meth:`finish_streaming` when a stream ends."""

    def __init__(self, tokenizer: Any, tools: Any = None) -> None:
        super().__init__(tokenizer, tools)
        self._stream: ToolCallStreamParser | None = None

    # -- the request -----------------------------------------------------------------

    def adjust_request(self, request: Any) -> Any:
        """Check the request's tools (a malformed one is an error naming it,
        which vLLM answers with HTTP 400), keep special tokens in the output
        (the dialect's markers are special tokens), and attach the
        constraint by the configured :func:`route`."""
        if not request.tools or request.tool_choice == "none":
            return request
        described = self.tools_request(request)
        described.check()
        request.skip_special_tokens = False
        if route() == "structured_outputs":
            # vLLM applies the grammar after the reasoning its reasoning parser
            # finds; one that allows a block serves the outputs that start after it.
            if described.reasoning == "open":
                described = replace(described, reasoning=True)
            compiled = described.compile(load_tokenizer(_tokenizer_path(self.model_tokenizer)))
            request.structured_outputs = StructuredOutputsParams(grammar=compiled.grammar)
            request.response_format = None
        else:
            request.vllm_xargs = {**(request.vllm_xargs or {}), EXTRA_ARGS_KEY: described.to_json()}
        return request

    def tools_request(self, request: Any) -> ToolsRequest:
        """The request's tools and choices as the constraint takes them.
        Reasoning is what the chat template's generation prompt says, with
        the request's ``chat_template_kwargs`` (:func:`template_reasoning`):
        ``"open"`` when it ends inside a reasoning block, no block when it
        ends after an empty one; else a block is allowed when the request
        enables thinking, or, when it does not say, the family thinks by
        default."""
        tools = [tool.model_dump(exclude_none=True) for tool in request.tools or ()]
        template = getattr(request, "chat_template_kwargs", None) or {}
        dialect = get_dialect(self.dialect)
        reasoning = template_reasoning(self.model_tokenizer, dialect, getattr(request, "chat_template", None), template)
        if reasoning is None:
            reasoning = bool(template.get("enable_thinking", template.get("thinking", dialect.reasoning.thinks_by_default)))
        return ToolsRequest(
            self.dialect,
            tools,
            tool_choice=_tool_choice(request.tool_choice),
            parallel_tool_calls=request.parallel_tool_calls is not False,
            reasoning=reasoning,
        )

    def _tools_for(self, request: Any) -> list[dict[str, Any]]:
        """The tools a call may name: the named one under a named choice."""
        described = self.tools_request(request)
        if described.tool_choice in ("auto", "required"):
            return described.tools
        return [tool for tool in described.tools if _name(tool) == described.tool_choice]

    # -- whole outputs ---------------------------------------------------------------

    def extract_tool_calls(self, model_output: str, request: Any) -> ExtractedToolCallInformation:
        if request.tool_choice == "none":
            return ExtractedToolCallInformation(tools_called=False, tool_calls=[], content=model_output or None)
        result = parse_tool_calls(model_output, self._tools_for(request), self.dialect)
        for error in result.errors:
            logger.warning("rejected tool call (%s): %s", error.tool, error.reason)
        calls = [
            ToolCall(id=call["id"], function=FunctionCall(name=call["function"]["name"], arguments=call["function"]["arguments"]))
            for call in result.tool_calls
        ]
        return ExtractedToolCallInformation(tools_called=bool(calls), tool_calls=calls, content=result.content or None)

    # -- streaming -------------------------------------------------------------------

    def extract_tool_calls_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
        request: Any,
    ) -> DeltaMessage | None:
        """Feed the library's stream parser (only ``delta_text`` is read:
        the parser keeps the text itself)."""
        if request.tool_choice == "none":
            return DeltaMessage(content=delta_text) if delta_text else None
        if self._stream is None:
            self._stream = ToolCallStreamParser(self._tools_for(request), self.dialect)
        return _delta_message(self._stream.feed(delta_text))

    def finish_streaming(self) -> DeltaMessage | None:
        """Settle the last call and send the text held back (vLLM calls
        this at the end of a stream for a parser whose
        ``engine_based_streaming`` is set)."""
        if self._stream is None or self._stream.result is not None:
            return None
        return _delta_message(self._stream.close())


def _delta_message(deltas: list[Delta]) -> DeltaMessage | None:
    """The library's stream deltas as one vLLM delta (:func:`.stream_pieces`)."""
    content, pieces = stream_pieces(deltas)
    calls = [
        DeltaToolCall(
            index=call["index"],
            id=call.get("id"),
            type=call.get("type"),
            function=DeltaFunctionCall(name=call.get("function", {}).get("name"), arguments=call.get("function", {}).get("arguments")),
        )
        for call in pieces
    ]
    if not content and not calls:
        return None
    return DeltaMessage(content=content or None, tool_calls=calls)


def _tool_choice(choice: Any) -> str:
    """``"auto"``, ``"required"`` or the named tool's name."""
    if choice is None or choice == "auto":
        return "auto"
    if isinstance(choice, str):
        return choice
    function = getattr(choice, "function", None)
    return str(getattr(function, "name", None) or getattr(choice, "name", ""))


def _name(tool: dict[str, Any]) -> Any:
    return (tool.get("function") or {}).get("name", tool.get("name"))


def _tokenizer_path(tokenizer: Any) -> str:
    """Where the served model's tokenizer lives, to load it as ours."""
    path = getattr(tokenizer, "name_or_path", None) or getattr(getattr(tokenizer, "tokenizer", None), "name_or_path", None)
    if not path:
        raise OptionError("cannot tell where the served tokenizer lives (no name_or_path)", argument="tokenizer")
    return str(path)


class ConstrainedHarmonyToolParser(ConstrainedToolParser, GptOssToolParser):
    """gpt-oss's parser. For a model whose type is ``gpt_oss`` vLLM reads
    the output itself: its ``HarmonyParser`` reads the Harmony messages from
    the tokens and takes only a tool parser of the ``GptOssToolParser``
    class, whose part is the request. So this one is of that class: it
    attaches the constraint (and no structural tag of vLLM's), and vLLM
    reads the calls. Served any other way, it reads them as every
    dialect's parser does."""

    dialect = "gpt_oss"
    structural_tag_model = None


ENGINE_READ = {ConstrainedHarmonyToolParser.dialect: ConstrainedHarmonyToolParser}
"""Dialects whose outputs vLLM reads itself, and the parser class it takes there."""


def register_tool_parsers() -> tuple[str, ...]:
    """Register ``constrained_<dialect>`` for every dialect known now (the
    built-ins, the entry points', and those registered in code before this
    runs: one registered later gets no parser)."""
    names = []
    for dialect in DIALECTS:
        name = f"constrained_{dialect}"
        parser = ENGINE_READ.get(dialect) or type(
            f"Constrained{dialect.title().replace('_', '')}ToolParser", (ConstrainedToolParser,), {"dialect": dialect}
        )
        ToolParserManager.register_module(name=name, module=parser)
        names.append(name)
    return tuple(names)
