"""What a dialect is: the bytes a model family writes for tool calls.

A dialect supplies the grammar file with its fixed parts, its markers and
formats as data (:mod:`.description`), how one call of a tool is written
(as Lark, from the tool's frames), how a call's text is read and how a call
is rendered as text. The compiler does the rest (tool_choice, parallel
calls, caching), so a new dialect is one class, one ``.lark`` file and one
registration.
"""

from __future__ import annotations

import copy
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from importlib import resources
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import ArgumentError, OptionError
from ..frames.accepts import member_frames, union_branch
from ..frames.model import ArrayFrame, Frame, FreeFrame, NormalizedSchema, ObjectFrame, UnionFrame
from ..frames.toolset import NormalizedTool
from ..grammar.emitter import ValueEmitter
from ..grammar.lark import literal
from ..grammar.syntax import ValueSyntax
from ..tokenizers import Tokenizer
from .description import CallMarkup, ChatFormat, Drift, ReasoningMarkup
from .segments import CallSegment, Partial, ReasoningBlock, Segment, Value, scan

if TYPE_CHECKING:
    from ..options import Reasoning
    from .raw_values import RawTextSyntax


_NAMED_TOKEN = re.compile(r"<[^<>\s]+>")
"""A special token Lark writes as it is spelled (else by its id)."""


class Markers:
    """How a marker is written in the grammar for one tokenizer: as its
    special token when the vocabulary has one, else as plain text."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    def is_token(self, marker: str) -> bool:
        token = self.tokenizer.token_id(marker)
        return token is not None and self.tokenizer.is_special(token)

    def __call__(self, marker: str) -> str:
        """Lark for ``marker``: its special token (by id where Lark cannot
        spell the token as it is), else the literal text."""
        if not self.is_token(marker):
            return literal(marker)
        return marker if _NAMED_TOKEN.fullmatch(marker) else f"<[{self.tokenizer.token_id(marker)}]>"

    def tokens_in(self, text: str) -> list[str]:
        """The special tokens of the tokenizer that ``text`` holds, spelled ``<...>``."""
        return [piece for piece in _NAMED_TOKEN.findall(text) if self.is_token(piece)]

    def holds_tokens(self, marker: str) -> bool:
        """Whether ``marker`` is a special token, or text around special
        tokens whose every ``<...>`` piece is one (Harmony's
        ``<|channel|>analysis<|message|>``)."""
        pieces = _NAMED_TOKEN.findall(marker)
        return self.is_token(marker) or (bool(pieces) and all(map(self.is_token, pieces)))

    def written(self, text: str) -> str:
        """Lark for ``text``: the special tokens it holds as tokens, the rest as literals."""
        return self.spelled(text, self.tokens_in(text))

    def spelled(self, text: str, tokens: Iterable[str]) -> str:
        """Lark for ``text`` that holds some of ``tokens`` (markers): each as
        :meth:`__call__` writes it, the text around them as literals."""
        found = [re.escape(token) for token in tokens if token in text]
        if not found:
            return literal(text)
        parts = re.split(f"({'|'.join(found)})", text)
        return " ".join(self(part) if index % 2 else literal(part) for index, part in enumerate(parts) if part)


class Dialect(ABC):
    """One tool-call syntax: its identity, its groups of settings
    (:mod:`.description`), its value syntax and grammar, and the hooks that
    cannot be data. Register an instance with
    :func:`~constrained.dialects.registry.register_dialect`."""

    name: ClassVar[str]
    """The name the compiler, parser, CLI and serving plug-ins know it by."""
    family: ClassVar[str]
    """The models that write this syntax, for help texts."""
    default_tokenizer: ClassVar[str] = "qwen3"
    """The built-in tokenizer that has this dialect's markers."""
    value_syntax: ClassVar[ValueSyntax]
    """How values are written inside calls."""
    grammar_source: ClassVar[str | Traversable | None] = None
    """The grammar's fixed parts: Lark text, or a ``.lark`` file; ``None``
    for a built-in dialect (``grammars/<name>.lark`` of the package)."""
    markup: ClassVar[CallMarkup]
    """How calls are marked and turns end."""
    reasoning: ClassVar[ReasoningMarkup] = ReasoningMarkup()
    """How reasoning is marked (by default: it is not)."""
    drift: ClassVar[Drift] = Drift()
    """What the parser reads beyond the grammar (by default: nothing)."""
    chat: ClassVar[ChatFormat] = ChatFormat()
    """The family's chat format."""
    reasoning_opened: bool = False
    """Whether the text this dialect reads starts inside a reasoning block
    the prompt opened (see :meth:`reading`)."""

    def chat_prompt(
        self, messages: list[dict[str, Any]], tools: Sequence[NormalizedTool], reasoning: Reasoning = True
    ) -> str:
        """A prompt in the family's own turn format, for a model whose
        tokenizer has no chat template: the tool declarations as the system
        turn, the messages (an assistant's earlier ``tool_calls`` written
        after its content as the model writes them), and the opening of the
        assistant's turn, then the reasoning opening where the family's
        thinking template writes it (``reasoning.prompt_opens``, with
        ``reasoning`` on) or ``reasoning`` is ``"open"``."""
        system = [{"role": "system", "content": self.declare_tools(tools)}] if tools else []
        by_name = {tool.name: tool for tool in tools}
        chat = self.chat
        text = chat.prefix
        for message in system + list(messages):
            role = str(message.get("role", "user"))
            content = message.get("content")
            body = "" if content is None else content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
            body += "".join(self._history_call(call, by_name) for call in message.get("tool_calls") or ())
            text += chat.turn.format(role=chat.roles.get(role, role), text=body)
        opening = chat.turn.split("{text}")[0]
        text += opening.format(role=chat.roles.get("assistant", "assistant"))
        block = self.reasoning_block()
        if block is not None and (reasoning == "open" or (reasoning is True and self.reasoning.prompt_opens)):
            text += block.opening + (block.label or "\n")
        return text

    def _history_call(self, call: Mapping[str, Any], tools: Mapping[str, NormalizedTool]) -> str:
        """An earlier call of the conversation (OpenAI ``tool_calls`` entry,
        arguments as a dict or JSON text), written as the model writes calls."""
        return self.render_call(*history_call(call, tools), self.chat.trained_key_order)

    def declare_tools(self, tools: Sequence[NormalizedTool]) -> str:
        """The tools as the system turn declares them: OpenAI function
        definitions, one JSON object per line."""
        lines = [json.dumps({"type": "function", "function": openai_function(t)}, ensure_ascii=False) for t in tools]
        return "You can call these tools:\n" + "\n".join(lines)

    def values_syntax(self, markers: Markers) -> ValueSyntax:
        """How values are written in calls for this tokenizer
        (:attr:`value_syntax` unless the markers change it)."""
        return self.value_syntax

    def name_problem(self, name: str) -> str | None:
        """Why a tool called ``name`` cannot be written and read back in
        this dialect's calls, or ``None``."""
        return None

    def key_problem(self, key: str, top_level: bool) -> str | None:
        """Why a declared key cannot be written and read back (an argument's
        key when ``top_level``, else a key inside a value), or ``None``."""
        return None

    def text_problem(self, text: str, top_level: bool) -> str | None:
        """Why an enum or const string cannot be written and read back (a
        whole argument when ``top_level``, else a string inside a value), or ``None``."""
        return None

    def value_problem(self, tool: NormalizedTool, text: str) -> str | None:
        """Why ``text`` cannot be the whole value of an argument of ``tool``,
        or ``None``: as :meth:`text_problem` judges one, unless the dialect
        knows the tool's own limits."""
        return self.text_problem(text, top_level=True)

    def grammar(self) -> str:
        """The fixed parts: :attr:`grammar_source`'s text, or for a built-in
        dialect ``grammars/<name>.lark``."""
        source = self.grammar_source
        if isinstance(source, str):
            return source
        if source is None:
            source = resources.files("constrained.grammars").joinpath(f"{self.name}.lark")
        return source.read_text(encoding="utf-8")

    def chat_template(self) -> str | None:
        """A Jinja chat template that renders conversations as
        :meth:`chat_prompt` does, for exporting a model, or ``None`` where
        the dialect has none."""
        return None

    @abstractmethod
    def call_body(self, tool: NormalizedTool, emitter: ValueEmitter, markers: Markers) -> str:
        """Lark for one call of ``tool`` between the fixed call markers."""

    @abstractmethod
    def parse_body(self, body: str) -> tuple[str, list[tuple[str, Value]]]:
        """The tool name and argument pairs of one call, from the text between
        the call's opening and closing markers (raises :class:`Malformed`)."""

    def partial_body(self, body: str, resume: Partial | None = None) -> Partial:
        """What an unfinished call's body shows so far, for streaming. By
        default nothing: the call is reported once it is complete.

        With ``resume``, a reading of a shorter text of this body that has
        a name, ``body`` is the text from its :attr:`~Partial.resume_at` on:
        the reading goes on from there with its name and pairs, and gives
        what reading the whole body would (offsets count from the start of
        ``body``). Streaming so reads each complete pair once."""
        return Partial()

    def for_tools(self, tools: Mapping[str, NormalizedTool]) -> Dialect:
        """This dialect reading the calls of ``tools`` (by name) in
        :meth:`scan`, :meth:`parse_body` and :meth:`partial_body`. Itself
        unless its syntax needs the schema to read a call (Gemma's declared
        keys holding ``:``)."""
        return self

    def raw_text_syntax(self, markers: Markers) -> RawTextSyntax | None:
        """How this dialect's raw-text values open and close (for the
        precomputed raw-text masks), or ``None``: values are not raw text."""
        return None

    def reasoning_block(self) -> ReasoningBlock | None:
        """How reasoning is marked in this dialect's output, or ``None``."""
        marks = self.reasoning
        if not marks.tokens:
            return None
        opening, closing = marks.tokens
        return ReasoningBlock(
            opening,
            closing,
            label=marks.label,
            opened=self.reasoning_opened,
            interleaved=marks.interleaved,
            lone_closing=marks.lone_closing,
        )

    def reading(self, reasoning: Reasoning) -> Dialect:
        """This dialect reading output generated with ``reasoning`` (see
        :class:`~constrained.options.CompileOptions`): a copy that reads the
        text as starting inside a reasoning block when it is ``"open"``."""
        opened = reasoning == "open"
        if opened == self.reasoning_opened:
            return self
        if opened and self.reasoning_block() is None:
            raise OptionError(f'reasoning="open": dialect {self.name!r} has no reasoning block', argument="reasoning")
        bound = copy.copy(self)
        bound.reasoning_opened = opened
        return bound

    def prompt_reasoning(self, prompt: str) -> Reasoning | None:
        """What a rendered prompt's tail says about reasoning: ``"open"``
        when it ends inside a reasoning block (the opening, its label and
        whitespace after the last closing), ``False`` when it ends with a
        closed block (a template with thinking off writes an empty one), or
        ``None`` when it says nothing."""
        block = self.reasoning_block()
        if block is None:
            return None
        tail = prompt.rstrip()
        label = block.label.strip()
        if tail.endswith(block.opening) or (label and tail.endswith(block.opening + label)):
            return "open"
        if tail.endswith(block.closing):
            return False
        return None

    def scan(
        self, text: str, start: int = 0, fenced: bool = False, after_call: bool = False
    ) -> Iterator[Segment | CallSegment]:
        """Model text as reasoning, plain text and call segments (from
        ``start``, in the fence state ``fenced``, right after a call when
        ``after_call``: see :func:`.segments.scan`)."""
        return scan(
            text,
            call_open=self.markup.open,
            call_close=self.markup.close,
            parse_body=self.parse_body,
            reasoning=self.reasoning_block(),
            cut_off_call=self.drift.reads_cut_off_call,
            start=start,
            fenced=fenced,
            section=self.markup.section,
            after_call=after_call,
            self_closing=self.drift.self_closing,
        )

    @abstractmethod
    def render_call(self, tool: NormalizedTool, arguments: dict[str, Any], key_order: str) -> str:
        """The text of one call, as the family's chat template writes it."""

    def render_calls(self, calls: Sequence[tuple[NormalizedTool, dict[str, Any]]], key_order: str) -> str:
        """The text of a turn's calls (tool, arguments), in their section
        where the dialect has one."""
        return self.markup.calls_text([self.render_call(tool, arguments, key_order) for tool, arguments in calls])

    @staticmethod
    def argument_objects(tool: NormalizedTool) -> tuple[ObjectFrame, ...]:
        """The object frames a call's arguments may take (several when the
        parameters are a union of parameter sets)."""
        root = tool.schema.resolve(tool.root)
        options = root.options if isinstance(root, UnionFrame) else (root,)
        objects = tuple(tool.schema.resolve(option) for option in options)
        assert all(isinstance(o, ObjectFrame) for o in objects), "normalize_tool guarantees object parameters"
        return objects  # type: ignore[return-value]

    def arranged(self, tool: NormalizedTool, arguments: dict[str, Any], key_order: str) -> dict[str, Any]:
        """``arguments`` with the keys of every object, nested ones too, in the
        order the grammar expects for ``key_order``."""
        order = self.chat.trained_key_order if key_order in ("trained", "any") else key_order
        return arrange(arguments, tool.root, tool.schema, order)


def openai_function(tool: NormalizedTool) -> dict[str, Any]:
    """The OpenAI ``function`` object of a tool, as given."""
    if tool.description:
        return {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return {"name": tool.name, "parameters": tool.parameters}


def arrange(value: Any, frame: Frame, schema: NormalizedSchema, order: str) -> Any:
    """``value`` with each object's declared keys in ``order`` ("schema" or
    "alphabetical") and its other keys after them, as given; a union follows
    its first option that accepts the value."""
    frame = schema.resolve(frame)
    if isinstance(frame, UnionFrame):
        chosen = union_branch(frame, value, schema.definitions)
        return value if chosen is None else arrange(value, chosen, schema, order)
    if isinstance(frame, ObjectFrame) and isinstance(value, dict):
        declared = [name for name, _ in frame.properties]
        if order == "alphabetical":
            declared.sort()
        keys = [k for k in declared if k in value] + [k for k in value if k not in declared]
        return {k: arrange(value[k], (member_frames(frame, k) or [FreeFrame()])[0], schema, order) for k in keys}
    if isinstance(frame, ArrayFrame) and isinstance(value, list):
        prefix = frame.prefix_items
        return [
            arrange(item, prefix[i] if i < len(prefix) else frame.items or FreeFrame(), schema, order)
            for i, item in enumerate(value)
        ]
    return value


def last_answer(messages: Sequence[Mapping[str, Any]]) -> int:
    """The index of the conversation's last plain assistant answer (no
    calls), or -1: templates keep the reasoning of the turns after it."""
    return max((i for i, m in enumerate(messages) if m.get("role") == "assistant" and not m.get("tool_calls")), default=-1)


def history_call(call: Mapping[str, Any], tools: Mapping[str, NormalizedTool]) -> tuple[NormalizedTool, dict[str, Any]]:
    """The tool and arguments of an earlier call of the conversation (OpenAI
    ``tool_calls`` entry, arguments as a dict or JSON text)."""
    function = call.get("function", call)
    name, arguments = function.get("name"), function.get("arguments", {})
    if name not in tools:
        raise ArgumentError(f"the conversation calls tool {name!r}, which is not among the tools", argument="messages")
    return tools[name], json.loads(arguments) if isinstance(arguments, str) else arguments
