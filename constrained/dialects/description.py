"""A dialect described as data: the groups of settings a :class:`~.base.Dialect`
declares beside its hooks.

Each group is a frozen dataclass, so a dialect spells its markers once, a
family member varies one field with :func:`dataclasses.replace`, and the
registry can check a dialect whole when it is registered. The compiler,
parser, renderer and runtime read these groups, never a dialect's class.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import DialectError

KEY_ORDERS = ("schema", "alphabetical")
"""The key orders a chat template may render arguments in."""


@dataclass(frozen=True)
class TextCalls:
    """Calls the parser also reads without their opening marker (Qwen3-Coder
    writes a bare ``<function=``): under ``tool_choice="auto"`` the grammar
    lets a turn's first call be written so, right after the free text."""

    opening: str
    """The text such a call starts with (free text never holds it)."""
    rest: str
    """The ``.lark`` rule of the call after ``opening``."""
    later: str
    """The ``.lark`` rule of any later call, of either kind."""


@dataclass(frozen=True)
class CallSection:
    """Markers a turn's calls are written between, as a whole (DeepSeek's
    ``<｜DSML｜function_calls>``): the grammar writes ``lead``, ``opening``
    and ``inner`` before the first call and ``inner`` and ``closing`` after
    the last; the parser reads them as markup, not content (``lead`` and
    ``inner`` where they are there)."""

    opening: str
    closing: str
    lead: str = ""
    """Text the chat template writes before the opening (after any content)."""
    inner: str = ""
    """Text the chat template writes after the opening and before the closing."""

    def around(self, calls: str) -> str:
        """``calls`` (the calls' text) inside the section, as the template writes it."""
        return f"{self.lead}{self.opening}{self.inner}{calls}{self.inner}{self.closing}"


@dataclass(frozen=True)
class MessageFraming:
    """A family that writes a turn as messages, each with a header (gpt-oss's
    Harmony): the answer and any text before a call sit inside markup, and
    a call's closing ends the turn, so a turn holds one call."""

    answer: str
    """The header before the answer's text (the grammar writes it before ``text``)."""
    lead: tuple[str, str]
    """The markup around text before a call (a preamble message): its header
    and what ends it."""
    markers: tuple[str, ...]
    """The markers between and around messages besides the call's opening
    and closing: never content, and a call's arguments end at one."""
    recipient: str
    """What a header that names its recipient first starts with, at a
    message's start (the stream holds text back at a start of it, as at the
    markers)."""
    following: str
    """What starts the turn's next message after one has ended (the chat
    history writes each call of a turn as a message of its own)."""

    def preamble(self, text: str) -> str:
        """``text`` as the message before a call, up to the call's header."""
        return self.lead[0] + text + self.lead[1]

    def between_calls(self, markup: CallMarkup) -> str:
        """What the chat history writes between two calls of one turn: the
        first call's closing and the next message's start."""
        return markup.close + self.following

    def call_ends(self, markup: CallMarkup) -> tuple[str, ...]:
        """The markers a call's message ends at (with its closing, or before the next message)."""
        return (markup.close, markup.open, *self.markers)


@dataclass(frozen=True)
class CallMarkup:
    """How calls are marked in the output: what the grammar writes around
    each call and between calls, and what ends the turn."""

    turn_ends: tuple[str, ...]
    """Markers that end a turn of text; those the tokenizer has are allowed
    (at least one must be a single special token)."""
    ends_after_calls: tuple[str, ...]
    """Markers that end a turn after tool calls, likewise."""
    open: str = "<tool_call>"
    """The marker a call starts with (a single special token)."""
    close: str = "</tool_call>"
    """The marker a call ends with (a single special token)."""
    separator: str = "\n"
    """The text between two calls of one turn (the ``.lark`` file's rule
    ``call_separator``); empty where calls are adjacent."""
    other_tokens: tuple[str, ...] = ()
    """Further markers the grammar writes as single special tokens (Gemma's
    string delimiter): compiling fails where the tokenizer lacks one."""
    text_calls: TextCalls | None = None
    """Calls also read without their opening marker, or ``None``."""
    arguments_opening: re.Pattern[bytes] | None = None
    """In a dialect that writes a call's arguments as one JSON value: matches,
    in full, the call's markup from its opening token to where the arguments
    begin; group ``tool`` is the tool's name as a JSON string, or group
    ``name`` the name as it is written (the constraint follows the
    arguments from there)."""
    argument_key: str | None = None
    """Regex of an argument key written in the call's own markup (XML-style
    dialects); ``None``: arguments are one value, keys as the value syntax
    writes them."""

    section: CallSection | None = None
    """Markers around a turn's calls as a whole, or ``None``."""
    messages: MessageFraming | None = None
    """How the turn's messages are framed where the family writes a turn as
    messages, or ``None``; then the grammar's ``call`` rule stops before the
    closing marker, which ``end_after_calls`` writes."""
    markers_in_section: bool = False
    """Whether the call's opening and closing are plain text that only the
    section holds (MiniMax's ``<invoke name="``): the section's opening and
    closing are then the special tokens a tokenizer must have."""
    token_rules: tuple[tuple[str, str], ...] = ()
    """Special tokens the grammar names by a rule, as ``(rule, marker)``:
    tokens not spelled ``<...>``, which Lark cannot write as they are
    (DeepSeek's ``｜DSML｜``). The compiler appends each rule; a marker of
    the call markup that holds one is text around it."""

    def __post_init__(self) -> None:
        if self.markers_in_section and self.section is None:
            raise DialectError("markers_in_section: the call's markers are text inside a section, so a section is needed")

    @property
    def call_tokens(self) -> tuple[str, str]:
        """The markers that open and close the calls as special tokens: the
        call's own, or the section's where the call's are text inside it."""
        if self.section is not None and self.markers_in_section:
            return self.section.opening, self.section.closing
        return self.open, self.close

    @property
    def required_tokens(self) -> tuple[str, ...]:
        """Markers that must be single special tokens of the tokenizer: the
        call's opening and closing (the section's, where the call's are text
        inside it) unless they are text holding a named token, and every
        other and named token."""
        named = tuple(marker for _, marker in self.token_rules)
        own = tuple(m for m in self.call_tokens if not any(token in m for token in named))
        return (*own, *self.other_tokens, *named)

    def calls_text(self, calls: list[str]) -> str:
        """The text of a turn's calls (each call's text), as the template writes them."""
        joined = self.separator.join(calls)
        return joined if self.section is None else self.section.around(joined)


@dataclass(frozen=True)
class ReasoningMarkup:
    """How the family marks reasoning, and how the parser reads it."""

    tokens: tuple[str, ...] = ()
    """The block's opening and closing markers (rule ``reasoning``), or
    none; without them in the vocabulary the block is left out."""
    label: str = ""
    """Text the family writes right after the opening and that is not
    reasoning (Gemma's ``thought\\n``): the grammar writes it, the parser
    reads it when it is there."""
    thinks_by_default: bool = True
    """Whether the family's chat template lets the model open a block when
    the request does not say (``enable_thinking``); a server allows the
    block only then."""
    prompt_opens: bool = False
    """Whether the family's thinking templates end the generation prompt
    inside the block (then ``chat_prompt`` does too)."""
    interleaved: bool = False
    """Whether the parser reads a complete block after some text (before a
    call) as reasoning too; the grammar writes one leading block."""
    lone_closing: bool = False
    """Whether the parser reads a closing marker with no block open as the
    end of an empty block (the marker is not content)."""

    def __post_init__(self) -> None:
        if len(self.tokens) not in (0, 2):
            raise DialectError(f"reasoning tokens are an opening and a closing marker, not {self.tokens!r}")


@dataclass(frozen=True)
class Drift:
    """What the parser reads beyond what the grammar writes, because the
    family's models write it."""

    bare_call_ends: tuple[str, ...] = ()
    """Where the scan also reads calls without the opening marker: the texts
    that may end such a call running to the end of the text (besides the
    opening marker); until one comes, the scan reads it the same, running on."""
    reads_cut_off_call: bool = False
    """Whether a last call cut off before the closing marker at the very end
    of the text is read when its body is complete (hermes: a whole JSON
    object says where it ends; elsewhere such a call stays malformed)."""
    python_literals: bool = False
    """Whether raw values may be ``True``/``False``/``None`` (the family's
    template writes them; the grammar lets them too)."""
    self_closing: re.Pattern[str] | None = None
    """Matches, right after a call's opening, the rest of a call written
    with no body and no closing marker (DeepSeek V4's zero-argument
    ``<｜DSML｜invoke name="NAME"/>``), group ``name`` the tool's name."""


@dataclass(frozen=True)
class ChatFormat:
    """The family's chat format, for prompts of a tokenizer without a chat
    template and for rendering earlier calls."""

    prefix: str = ""
    """Text a conversation starts with (a BOS marker)."""
    turn: str = "<|im_start|>{role}\n{text}<|im_end|>\n"
    """One turn, with ``{role}`` and ``{text}``."""
    roles: Mapping[str, str] = field(default_factory=dict)
    """Role names the family spells differently (``assistant`` -> ``model``)."""
    trained_key_order: str = "schema"
    """Key order the family's template renders arguments in: ``"schema"``
    or ``"alphabetical"``."""

    def __post_init__(self) -> None:
        if self.trained_key_order not in KEY_ORDERS:
            raise DialectError(f"trained_key_order {self.trained_key_order!r}: expected one of {', '.join(KEY_ORDERS)}")
        if "{role}" not in self.turn or "{text}" not in self.turn:
            raise DialectError(f"a chat turn holds {{role}} and {{text}}, not {self.turn!r}")
