"""gpt-oss (OpenAI's Harmony format): a turn is a run of messages, each a
header, ``<|message|>`` and its text. Reasoning is a message on the
``analysis`` channel, the answer one on ``final``, and a call one on
``commentary`` whose header names the tool; the call's ``<|call|>`` ends the
turn, so a turn holds one call::

    <|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>

The grammar writes that: an optional reasoning message, then the answer
(``<|channel|>final<|message|>TEXT<|return|>``) or a call, optionally after
a preamble (``<|channel|>commentary<|message|>TEXT<|end|><|start|>assistant``).
The parser reads the messages whatever order their header's parts come in,
as models write them: the recipient first (``<|start|>assistant
to=functions.NAME<|channel|>commentary json<|message|>``, the form gpt-oss's
template gives earlier calls), ``json`` without ``<|constrain|>`` or no type
at all, and a call whose ``<|call|>`` the engine dropped as a stop token.
A call to a recipient outside ``functions`` (the built-in ``browser`` or
``python``) names no declared tool and is rejected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..frames.toolset import NormalizedTool
from ..grammar.emitter import ValueEmitter
from ..grammar.lark import literal
from ..grammar.syntax import JSON_SYNTAX
from .base import Dialect, Markers
from .deepseek import json_arguments, partial_arguments
from .description import CallMarkup, ChatFormat, Drift, MessageFraming, ReasoningMarkup
from .harmony_prompt import harmony_prompt
from .hermes import starts_of
from .segments import CallSegment, Malformed, Partial, Segment, Value

if TYPE_CHECKING:
    from ..options import Reasoning

START, END, MESSAGE, CHANNEL = "<|start|>", "<|end|>", "<|message|>", "<|channel|>"
CONSTRAIN, RETURN, CALL = "<|constrain|>", "<|return|>", "<|call|>"
HEAD = "commentary to=functions.{name} " + CONSTRAIN + "json" + MESSAGE
"""A call's header after its ``<|channel|>``, as the renderer writes it
(the format's documentation has it so; the grammar also lets the space
before ``<|constrain|>`` out, as the documentation's other examples and
XGrammar's structural tag write it)."""
_NAME_TEXT = r"[^\s<]+"
_NAME = re.compile(_NAME_TEXT)
_MARK = re.compile(r"<\|(?:start|channel|end|return|call)\|>")
"""The markers a message's text ends at (or a header starts at)."""
_ENDS = (END, RETURN, CALL)
_HEADER_STOP = re.compile(r"<\|(?:start|end|return|call)\|>")
"""The markers a header never holds (a recipient-first header holds ``<|channel|>``)."""
_HEADER_LIMIT = 512
"""The longest header: one that runs on (or holds a line break) before
its ``<|message|>`` is text, so a stray marker never holds the rest back."""
_ROLE = re.compile(r"<\|start\|>[^\s<]*")
_FOLLOWING = START + "assistant"
"""What starts the next assistant message of a turn."""
_RECIPIENT_FIRST = re.compile(r"\s*to=")
_RECIPIENT = re.compile(rf"(?:^|\s)to=(?P<to>{_NAME_TEXT})")
_CHANNEL = re.compile(rf"<\|channel\|>(?P<channel>{_NAME_TEXT})")
_OPENING = r"commentary to=functions\.(?P<name>[^\s<]+) ?<\|constrain\|>json<\|message\|>"
_HEAD = re.compile(_OPENING + r"\{")
_HEAD_SO_FAR = re.compile(
    rf"{starts_of('commentary to=functions.')}|commentary to=functions\.[^\s<]*"
    rf"(?:{starts_of(' ' + CONSTRAIN + 'json' + MESSAGE + '{')}|{starts_of(CONSTRAIN + 'json' + MESSAGE + '{')})?"
)
_ANALYSIS = CHANNEL + "analysis" + MESSAGE

_GRAMMAR = "\n".join(
    [
        "// gpt-oss's Harmony messages: fixed parts; tool_body is generated.",
        'reasoning: <|channel|> "analysis" <|message|> reasoning_rest',
        'reasoning_rest: THINK_TEXT? <|end|> <|start|> "assistant"',
        # No marker spelled out in text tokens (the parser reads text).
        r"THINK_TEXT: /(.|\n)+/ & ~/(?s:.*)<\|(start|end|channel|message|return|call|constrain)\|>(?s:.*)/",
        "text: TEXT",
        r"TEXT: /(.|\n)+/ & ~/(?s:.*)<\|(start|end|channel|message|return|call|constrain)\|>(?s:.*)/",
        "call: <|channel|> tool_body",
        'json_value: %json {"x-guidance": {"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "}}',
    ]
)


_MESSAGES = MessageFraming(
    answer=CHANNEL + "final" + MESSAGE,
    lead=(CHANNEL + "commentary" + MESSAGE, END + _FOLLOWING),
    markers=(START, END, RETURN),
    recipient="to=",
    following=_FOLLOWING,
)


class GptOss(Dialect):
    name = "gpt_oss"
    family = "gpt-oss (Harmony)"
    default_tokenizer = "o200k_harmony"
    value_syntax = JSON_SYNTAX
    markup = CallMarkup(
        turn_ends=(RETURN,),
        ends_after_calls=(CALL,),
        open=CHANNEL,
        close=CALL,
        separator="",
        other_tokens=(MESSAGE, CONSTRAIN, START, END),
        arguments_opening=re.compile(_OPENING.encode()),
        messages=_MESSAGES,
    )
    reasoning = ReasoningMarkup(tokens=(_ANALYSIS, END), interleaved=True)
    drift = Drift(reads_cut_off_call=True)  # (the engine drops the <|call|>: a stop token)
    chat = ChatFormat(turn="<|start|>{role}<|message|>{text}<|end|>")
    grammar_source = _GRAMMAR

    def call_body(self, tool: NormalizedTool, emitter: ValueEmitter, markers: Markers) -> str:
        head = f"{literal(f'commentary to=functions.{tool.name}')} \" \"? {CONSTRAIN} {literal('json')} {MESSAGE}"
        return f"{head} {emitter.value(tool.root)}"

    def render_call(self, tool: NormalizedTool, arguments: dict[str, Any], key_order: str) -> str:
        """The call as the model writes it, up to its ``<|call|>``: a stop
        token, which the output ends before."""
        ordered = json.dumps(self.arranged(tool, arguments, key_order), ensure_ascii=False)
        return f"{CHANNEL}{HEAD.format(name=tool.name)}{ordered}"

    def render_calls(self, calls: Sequence[tuple[NormalizedTool, dict[str, Any]]], key_order: str) -> str:
        """Each call a message of its own, the earlier ones closed by their
        ``<|call|>`` (a turn the model writes holds one call: its
        ``<|call|>`` stops the generation)."""
        return _MESSAGES.between_calls(self.markup).join(self.render_call(tool, arguments, key_order) for tool, arguments in calls)

    def name_problem(self, name: str) -> str | None:
        if len(name) > _HEADER_LIMIT - len(HEAD):
            return f"a tool name in a Harmony header is at most {_HEADER_LIMIT - len(HEAD)} characters"
        return None if _NAME.fullmatch(name) else "a tool name in a Harmony recipient may not hold whitespace or '<'"

    def parse_body(self, body: str) -> tuple[str, list[tuple[str, Value]]]:
        """A call message: its header (the recipient ``functions.NAME``, the
        channel and content type in any order), ``<|message|>`` and the
        JSON arguments (a ``<|call|>`` after them read as its closing)."""
        header, separator, arguments = body.partition(MESSAGE)
        recipient = _RECIPIENT.search(header)
        if recipient is None:
            raise Malformed("expected a recipient (to=functions.NAME) in the message's header")
        name = recipient.group("to").removeprefix("functions.")
        if not separator:
            raise Malformed("the call's header is not followed by <|message|> and the arguments", name)
        for end in _ENDS:
            arguments = arguments.removesuffix(end)
        return name, json_arguments(arguments, name)

    def partial_body(self, body: str, resume: Partial | None = None) -> Partial:
        return partial_arguments(body, resume, _HEAD, _HEAD_SO_FAR)

    def scan(
        self, text: str, start: int = 0, fenced: bool = False, after_call: bool = False
    ) -> Iterator[Segment | CallSegment]:
        """The output as messages: each header and end marker is ``markup``
        (never content), an ``analysis`` message's text is reasoning, a
        message with a recipient is a call (to its ``<|call|>``, or to the
        next message or the end of the text where that was dropped), any
        other message's text is content. Text outside a message is content
        too. Markers are special tokens, so code fences do not matter."""
        position = start
        if start == 0 and self.reasoning_opened:
            position = yield from _reasoning(text, 0, 0)
        elif start == 0 and _RECIPIENT_FIRST.match(text):
            position = yield from self._message(text, 0)
        while position < len(text):
            found = _MARK.search(text, position)
            at = len(text) if found is None else found.start()
            if at > position:
                yield Segment("text", text[position:at], position, at)
            if found is None:
                return
            if found.group() in _ENDS:
                yield Segment("markup", found.group(), at, found.end())
                position = found.end()
            elif found.group() == START:
                role = _ROLE.match(text, at)
                assert role is not None
                yield Segment("markup", role.group(), at, role.end())
                position = role.end()
                if _RECIPIENT_FIRST.match(text, position):
                    position = yield from self._message(text, position)
            else:
                position = yield from self._message(text, at)

    def _message(self, text: str, at: int) -> Generator[Segment | CallSegment, None, int]:
        """The message whose header starts at ``at``; returns where the scan
        goes on (for a message of content, where its text starts)."""
        stop = _HEADER_STOP.search(text, at)
        header_end = len(text) if stop is None else stop.start()
        body = text.find(MESSAGE, at, header_end)
        header = text[at : header_end if body < 0 else body]
        if len(header) > _HEADER_LIMIT or "\n" in header:  # not a header: the marker, then text
            marker = CHANNEL if text.startswith(CHANNEL, at) else ""
            if marker:
                yield Segment("markup", marker, at, at + len(marker))
            return at + len(marker)
        if _RECIPIENT.search(header):
            call = self._call(text, at, body, header_end)
            yield call
            return call.end
        if body < 0:
            yield Segment("markup", header, at, header_end)  # (a header being written, or cut short)
            return header_end
        content = body + len(MESSAGE)
        channel = _CHANNEL.search(header)
        if channel is not None and channel.group("channel") == "analysis":
            return (yield from _reasoning(text, at, content))
        yield Segment("markup", text[at:content], at, content)
        return content

    def _call(self, text: str, at: int, body: int, header_end: int) -> CallSegment:
        """The call whose header starts at ``at``: to the marker that ends
        its arguments (``<|call|>``, or an end marker models write instead,
        with it), else to the next message or the end of the text."""
        end = header_end
        if body >= 0:
            stop = _MARK.search(text, body)
            end = len(text) if stop is None else stop.end() if stop.group() in _ENDS else stop.start()
        inner = text[at + len(CHANNEL) if text.startswith(CHANNEL, at) else at : end]
        closed = inner.endswith(_ENDS)
        try:
            name, pairs = self.parse_body(inner)
        except Malformed as exc:
            cut_off = "" if closed else f"the call is not closed with {CALL!r}, and is incomplete without it: "
            return CallSegment(text[at:end], at, end, exc.name, error=cut_off + exc.reason)
        return CallSegment(text[at:end], at, end, name, tuple(pairs))

    def chat_prompt(
        self, messages: list[dict[str, Any]], tools: Sequence[NormalizedTool], reasoning: Reasoning = True
    ) -> str:
        """The conversation as gpt-oss's chat template writes it (see
        :func:`.harmony_prompt.harmony_prompt`)."""
        return harmony_prompt(self, messages, tools, reasoning)



def _reasoning(text: str, start: int, body: int) -> Generator[Segment, None, int]:
    """Reasoning at ``text[start:]`` whose text starts at ``body``: to its
    ``<|end|>`` (with it), else to the next marker or the end of the text;
    returns where it ends."""
    stop = _MARK.search(text, body)
    close = len(text) if stop is None else stop.start()
    end = stop.end() if stop is not None and stop.group() == END else close
    yield Segment("reasoning", text[body:close], start, end)
    return end
