"""Where JSON text stands inside a value of known frames, so the mask cache
can key the text by what the masks depend on.

A *free leaf* is a string whose frame sets no length, pattern or format, a
number whose frame sets no bound or step, the key of a map, or any string
or number inside a value of any JSON: llguidance's lexer stands in the same
place after ``"ab`` as after ``"xyz``, after ``12`` as after ``345``, so
the masks inside such a leaf, and those after it, do not depend on its
text. Other leaves (enums, constrained strings and numbers, literals) are
followed by their text while open, and once closed by their place alone.
:class:`JsonWalk` follows the bytes of one JSON value through its frames (as
``json.dumps`` writes it; a declared key picks its member's frame, a
union's option is the one its first byte allows) and gives the value's
*skeleton*: its text as the masks see it (:attr:`JsonWalk.skeleton`).
Gemma's value syntax is followed the same way: strings between delimiter
tokens, with no escapes, and bare keys.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..dialects import get_dialect
from ..dialects.base import Markers
from ..frames.model import (
    ArrayFrame,
    BooleanFrame,
    EnumFrame,
    Frame,
    FreeFrame,
    IntegerFrame,
    NullFrame,
    NumberFrame,
    ObjectFrame,
    StringFrame,
    UnionFrame,
    resolve_frame,
)
from ..dialects.gemma import GemmaSyntax
from ..grammar.syntax import JsonSyntax

if TYPE_CHECKING:
    from ..compiler import CompiledTools


def _number_steps(fraction: bool) -> dict[tuple[int, int], int]:
    """The automaton of a JSON number's text (RFC 8259; an integer has no
    fraction or exponent): state 0 is the start, and ``steps[state, byte]``
    the state after ``byte``, absent where the byte cannot follow. States
    2, 3, 5 and 8 are complete numbers."""
    digits, nonzero = b"0123456789", b"123456789"
    steps = {(0, ord("-")): 1, (0, ord("0")): 2, (1, ord("0")): 2}
    steps.update({(state, byte): 3 for state in (0, 1) for byte in nonzero})
    steps.update({(3, byte): 3 for byte in digits})
    if fraction:
        steps.update({(state, ord(".")): 4 for state in (2, 3)})
        steps.update({(state, byte): 6 for state in (2, 3, 5) for byte in b"eE"})
        steps.update({(state, byte): 5 for state in (4, 5) for byte in digits})
        steps.update({(6, ord("+")): 7, (6, ord("-")): 7})
        steps.update({(state, byte): 8 for state in (6, 7, 8) for byte in digits})
    return steps


INTEGER_STEPS, NUMBER_STEPS = _number_steps(False), _number_steps(True)

MARKUP_LIMIT = 4096
"""The most bytes of call markup a tracker holds before a value opens; past
it, the text is no markup the grammar writes, and the tracker lets it go."""

STRING_STATE, KEY_STATE, EMPTY_KEY_STATE, EMPTY_STRING_STATE = 16, 17, 18, 19
""":attr:`JsonWalk.leaf_state` of a free string at a character boundary
outside an escape (past the number automaton's states), of a free key
there, of a free key with no text yet, and of a free string with none."""
FREE_STRING, FREE_NUMBER, CLOSED_LEAF, FREE_KEY = range(4)
"""Bytes of :attr:`JsonWalk.skeleton` that no JSON text holds outside a
string: a free string's text, a free number's, another leaf's once it is
closed, a free key's."""
QUOTE = 256
"""In :attr:`JsonWalk.skeleton`, the string delimiter token of a syntax that
has one (Gemma's ``<|"|>``)."""
MARK, BACK = 512, 1024
"""Entries of :attr:`JsonWalk.skeleton` past every byte: ``MARK + slot``
keeps the place the skeleton has reached in ``slot``, ``BACK + slot``
returns to the place kept there. Slot 0 is the open leaf's text (kept
where it begins, returned to when it is closed, then :data:`CLOSED_LEAF`);
slot ``1 + depth`` the items of an array, or the members of a map, at that
depth (kept after the comma of the first one whose index no longer matters,
returned to after each later comma)."""

# What the walk expects next (_NAME: inside a bare key, in Gemma's syntax).
_VALUE, _STRING, _NUMBER, _LITERAL, _AFTER, _KEY, _COLON, _DONE, _LOST, _NAME = range(10)
_NAME_START = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_$")
_SPACE = frozenset(b" \t\n\r")
_DIGITS = frozenset(b"-0123456789")
_LITERALS = {ord("t"): b"rue", ord("f"): b"alse", ord("n"): b"ull"}


_MEMO_STEPS = 1 << 13
"""The most steps a :class:`WalkMemo` keeps (a few hundred bytes each)."""


class WalkMemo:
    """What the JSON walks of one tool set learn, shared by its requests:
    a number for each frame they met, with the definitions its references
    name (a walk's state holds numbers, cheap to compare), and each step:
    from a state, by a token (or bytes), to a state and a skeleton. A step is one
    lookup once it is known."""

    def __init__(self) -> None:
        self._frames: list[tuple[Frame, Mapping[str, Frame]]] = []
        # By the ids of the frame and its definitions: both are kept, so the ids stay theirs.
        self._numbers: dict[tuple[int, int], int] = {}
        self.steps: dict[tuple[tuple[Any, ...], int | bytes], tuple[tuple[Any, ...], tuple[int, ...], int | None]] = {}
        self._lock = threading.Lock()

    def number(self, frame: Frame | None, definitions: Mapping[str, Frame]) -> int:
        """``frame``'s number, read with ``definitions`` (-1 for None: not known)."""
        if frame is None:
            return -1
        key = (id(frame), id(definitions))
        number = self._numbers.get(key)
        if number is None:
            with self._lock:
                number = self._numbers.get(key)
                if number is None:
                    self._frames.append((frame, definitions))
                    number = self._numbers[key] = len(self._frames) - 1
        return number

    def frame(self, number: int) -> Frame | None:
        return self._frames[number][0] if number >= 0 else None


class JsonWalk:
    """Follows the bytes of one JSON value of ``frame`` (``None``: not
    known, so nothing in it is free).

    After each :meth:`feed`: :attr:`skeleton`, the bytes fed as the masks
    see them; :attr:`in_leaf` (the text stands inside a free leaf) and
    :attr:`leaf_state` (its state there, when the masks are one per state:
    else None). In the skeleton a free leaf's text is one byte
    (:data:`FREE_STRING` after a string's opening quote, :data:`FREE_NUMBER`):
    no mask depends on it. The text of another leaf of a known frame (a
    constrained string or number, an enum, a literal) is there while the
    leaf is open, and once it is closed the skeleton goes back to where it
    began and stands for it as :data:`CLOSED_LEAF`: what follows a leaf
    depends on its frame, not on its text. In an array whose items are not
    counted (no ``maxItems``), past its first items (``prefixItems``,
    ``minItems``) each comma brings the skeleton back to where the first
    such comma left it: what follows does not depend on how many items came
    before. So does each comma of a map (an object that declares no key,
    every key's value of one frame, or any JSON object), whose keys are
    free leaves too. Two values whose skeletons agree so far have the same masks
    wherever the walk says so.
    Text of a value whose frame is not known (an option of a union two
    options may begin alike, an object that a key of a pattern holds) stays
    whole, and text the walk cannot follow (which the grammar would not
    accept) too."""

    def __init__(self, frame: Frame | None, definitions: Mapping[str, Frame], memo: WalkMemo,
                 delimiter: int | None = None) -> None:
        self._definitions = definitions
        self._memo = memo
        # Gemma's syntax: strings between ``delimiter`` tokens (no escapes), bare keys.
        self._delimiter = delimiter
        self._quote = ord('"') if delimiter is None else QUOTE
        # Where the walk stands, as one tuple (the key of the memo's steps):
        # (what it expects, the frame of the value expected or open, the open
        # containers innermost last as (frame, is an object, members or items
        # so far: capped where the count no longer matters), the open string
        # or number is free, its text is left out once it is closed, a
        # string's escape (0, after a backslash 1, in \\u 2-5: hex digits
        # read + 2), the UTF-8 continuation bytes its last character still
        # needs, the key read so far (while a key is open; a free key's text
        # is not kept), the string has no text yet, the number's state in
        # its automaton, the number is an integer, what the open literal
        # still needs). Frames are the memo's numbers for them (-1: not known).
        self._state: tuple[Any, ...] = (_VALUE, memo.number(frame, definitions), (), False, False, 0, 0, None, False, None,
                                        False, b"")
        self.skeleton: tuple[int, ...] = ()
        self.ended: int | None = None
        """After :meth:`feed`: where in the bytes fed the value ended (the
        rest is not the walk's), or None."""
        self.first_fed: int | None = None
        """How many bytes the first :meth:`feed` held: the end of the token
        in which the value began."""

    def snapshot(self) -> tuple[object, ...]:
        return self._state, self.skeleton, self.ended

    def restore(self, snapshot: tuple[object, ...]) -> None:
        self._state, self.skeleton, self.ended = snapshot  # type: ignore[assignment]

    @property
    def in_leaf(self) -> bool:
        state = self._state
        return bool(state[3]) and state[0] in (_STRING, _NUMBER, _NAME)

    @property
    def keeps_text(self) -> bool:
        """Whether the text stands where the skeleton keeps what is written:
        inside a leaf that is not free, or past what the walk could follow."""
        state = self._state
        return state[0] == _LOST or (state[0] in (_STRING, _NUMBER, _NAME, _LITERAL) and not state[3])

    @property
    def leaf_state(self) -> int | None:
        mode, _, _, free, _, escape, need, key, empty, number = self._state[:10]
        if not free:
            return None
        if mode == _NUMBER:
            return number  # type: ignore[no-any-return]
        if mode == _NAME:
            return KEY_STATE
        if mode == _STRING and escape == 0 and need == 0:
            if key is None:
                return EMPTY_STRING_STATE if empty else STRING_STATE
            return EMPTY_KEY_STATE if empty else KEY_STATE
        return None

    def feed(self, data: bytes, token: int | None = None) -> None:
        """Advance past ``data`` (the bytes of ``token``, when it is given).
        The step is looked up in the memo by the token, else by the bytes
        (a value that begins inside a token), and kept there."""
        steps = self._memo.steps
        before = self._state
        if self.first_fed is None:
            self.first_fed = len(data)
        key = (before, token if token is not None else data)
        known = steps.get(key)
        if known is not None:
            self._state, self.skeleton, self.ended = known
            return
        (self._mode, self._frame, self._stack, self._free, self._closable, self._escape, self._need, self._key,
         self._empty, self._number, self._integer, self._literal) = before
        out: list[int] = []
        self.ended = None
        for position, byte in enumerate((QUOTE,) if token is not None and token == self._delimiter else data):
            if self._mode == _DONE and self._delimiter is not None:  # a value in the markup: the rest is markup
                self.ended = position
                break
            self._step(byte, out)
        else:
            if self._mode == _DONE and self._delimiter is not None:
                self.ended = len(data)
        self._state = (self._mode, self._frame, self._stack, self._free, self._closable, self._escape, self._need,
                       self._key, self._empty, self._number, self._integer, self._literal)
        self.skeleton = tuple(out)
        if len(steps) < _MEMO_STEPS:
            steps[key] = self._state, self.skeleton, self.ended

    def _step(self, byte: int, out: list[int]) -> None:
        """Advance one byte, writing what the skeleton keeps of it to ``out``."""
        mode = self._mode
        if mode == _STRING:
            closable = self._closable
            if self._string_byte(byte):
                if closable:
                    out += (BACK, CLOSED_LEAF)
                out.append(byte)
            elif not self._free:
                out.append(byte)
            return
        if mode == _NUMBER:
            state = (INTEGER_STEPS if self._integer else NUMBER_STEPS).get((self._number, byte))  # type: ignore[arg-type]
            if state is None:
                if self._closable:
                    out += (BACK, CLOSED_LEAF)
                self._end_value()
                self._step(byte, out)  # the byte after the number
                return
            self._number = state
            if not self._free:
                out.append(byte)
            return
        if mode == _VALUE and byte not in _SPACE:
            self._open_value(byte, out)
            return
        if mode == _NAME:
            self._name_byte(byte, out)
            return
        out.append(byte)
        if mode == _LITERAL:
            if not self._literal or byte != self._literal[0]:
                self._mode = _LOST
                return
            self._literal = self._literal[1:]
            if not self._literal:
                if self._closable:
                    out += (BACK, CLOSED_LEAF)
                self._end_value()
        elif byte in _SPACE and mode in (_VALUE, _AFTER, _KEY, _COLON):
            return
        elif mode == _KEY:
            if self._delimiter is not None and byte in _NAME_START:  # a bare key
                self._mode, self._empty = _NAME, False
                self._free = _is_map(self._memo.frame(self._stack[-1][0]))
                self._key = b"" if self._free else bytes((byte,))
                out[-1] = FREE_KEY if self._free else byte
            elif byte == ord('"') and self._delimiter is None:
                self._mode, self._key, self._escape, self._need, self._empty = _STRING, b"", 0, 0, True
                self._free = _is_map(self._memo.frame(self._stack[-1][0]))
                if self._free:
                    out.append(FREE_KEY)
            elif byte == ord("}") and self._stack and self._stack[-1][2] == 0:
                self._close_container()
            else:
                self._mode = _LOST
        elif mode == _COLON:
            if byte != ord(":"):
                self._mode = _LOST
                return
            self._open_member()
        elif mode == _AFTER:
            number, is_object, count = self._stack[-1]
            frame = self._memo.frame(number)
            if byte == ord(","):
                if is_object:
                    self._mode = _KEY
                    uncounted = 1 if _is_map(frame) else None
                else:
                    uncounted = _uncounted_from(frame)
                    self._mode, self._frame = _VALUE, self._number_of(self._item(frame, count + 1))
                    count += 1
                    kept = count if uncounted is None else min(count, uncounted + 1)
                    self._stack = (*self._stack[:-1], (number, False, kept))
                if uncounted is not None and count >= uncounted:  # the count no longer matters
                    out.append((MARK if count == uncounted else BACK) + len(self._stack))
            elif byte == (ord("}") if is_object else ord("]")):
                self._close_container()
            else:
                self._mode = _LOST
        elif mode == _DONE:
            self._mode = _LOST

    def _name_byte(self, byte: int, out: list[int]) -> None:
        """One byte of a bare key (or the ``:`` after it)."""
        if byte == ord(":"):
            out.append(byte)
            self._free = False
            self._open_member()
        elif not self._free:
            out.append(byte)
            self._key = (self._key or b"") + bytes((byte,))

    def _open_member(self) -> None:
        """After a key's ``:``: the value of the member the key names."""
        frame, _, count = self._stack[-1]
        self._stack = (*self._stack[:-1], (frame, True, min(count + 1, 2)))
        self._mode = _VALUE
        self._frame = self._number_of(self._member(self._memo.frame(frame), self._key or b""))

    def _open_value(self, byte: int, out: list[int]) -> None:
        frame = self._option(self._memo.frame(self._frame), byte)
        self._free = self._closable = False
        if byte == self._quote:
            self._mode, self._escape, self._need, self._key, self._empty = _STRING, 0, 0, None, True
            self._free = isinstance(frame, FreeFrame) or (
                isinstance(frame, StringFrame) and not frame.min_length and frame.max_length is None
                and not frame.patterns and frame.format is None
            )
            self._closable = not self._free and frame is not None
            out += (byte, FREE_STRING) if self._free else (byte, MARK) if self._closable else (byte,)
            return
        if byte in _DIGITS:
            steps = NUMBER_STEPS if isinstance(frame, FreeFrame) else free_number_steps(frame)
            self._free = steps is not None
            self._closable = not self._free and frame is not None
            self._integer = steps is INTEGER_STEPS
            self._mode, self._number = _NUMBER, (steps or NUMBER_STEPS).get((0, byte))
            if self._number is None:
                self._mode, self._free = _LOST, False
                out.append(byte)
            else:
                out += (FREE_NUMBER,) if self._free else (MARK, byte) if self._closable else (byte,)
            return
        if byte in _LITERALS and frame is not None:
            out.append(MARK)
            self._closable = True
        out.append(byte)
        if byte == ord("{"):
            self._stack = (*self._stack, (self._number_of(frame), True, 0))
            self._mode = _KEY
        elif byte == ord("["):
            self._stack = (*self._stack, (self._number_of(frame), False, 0))
            self._mode, self._frame = _VALUE, self._number_of(self._item(frame, 0))
        elif byte in _LITERALS:
            self._mode, self._literal = _LITERAL, _LITERALS[byte]
        elif byte == ord("]") and self._stack and not self._stack[-1][1] and self._stack[-1][2] == 0:
            self._close_container()  # an empty array: "]" where its first item would begin
        else:
            self._mode = _LOST

    def _string_byte(self, byte: int) -> bool:
        """Advance one byte of a string; whether it closed the string."""
        escape = self._escape
        if self._key is not None and not self._free:
            self._key += bytes((byte,))
        self._empty = False
        if self._delimiter is not None:  # no escapes: the delimiter token alone ends the text
            if byte == QUOTE:
                self._end_value()
                return True
        elif escape == 1:
            self._escape = 2 if byte == ord("u") else 0
            return False
        elif escape:
            self._escape = escape + 1 if escape < 5 else 0
            return False
        elif byte == ord("\\"):
            self._escape = 1
            return False
        elif byte == ord('"'):
            if self._key is None:
                self._end_value()
            else:
                self._mode = _COLON
                self._key = self._key[:-1]
            return True
        if byte < 0x80:
            self._need = 0
        elif byte >= 0xC0:
            self._need = (1 if byte < 0xE0 else 2 if byte < 0xF0 else 3)
        elif self._need:
            self._need -= 1
        return False

    def _end_value(self) -> None:
        self._free = self._closable = False
        self._mode = _AFTER if self._stack else _DONE

    def _close_container(self) -> None:
        self._stack = self._stack[:-1]
        self._end_value()

    def _number_of(self, frame: Frame | None) -> int:
        return self._memo.number(frame, self._definitions)

    def _resolve(self, frame: Frame | None) -> Frame | None:
        return None if frame is None else resolve_frame(frame, self._definitions)

    def _option(self, frame: Frame | None, byte: int) -> Frame | None:
        """The frame of a value that begins with ``byte``: the one option of
        a union that a value can begin with it, else None (not known)."""
        frame = self._resolve(frame)
        if not isinstance(frame, UnionFrame):
            return frame
        options = [o for o in map(self._resolve, frame.options) if o is not None and _begins(o, byte)]
        return options[0] if len(options) == 1 and not isinstance(options[0], UnionFrame) else None

    def _member(self, frame: Frame | None, key: bytes) -> Frame | None:
        if isinstance(frame, FreeFrame):
            return frame
        if not isinstance(frame, ObjectFrame):
            return None
        if self._delimiter is not None and any(":" in declared for declared, _ in frame.properties):
            return None  # a bare key ends at its first ':', so such a key would be read as another
        try:
            name = json.loads(b'"' + key + b'"')
        except ValueError:
            return None
        return member_frame(frame, name)

    def _item(self, frame: Frame | None, index: int) -> Frame | None:
        if isinstance(frame, FreeFrame):
            return frame
        if not isinstance(frame, ArrayFrame):
            return None
        return frame.prefix_items[index] if index < len(frame.prefix_items) else frame.items


def member_frame(frame: ObjectFrame, key: str) -> Frame | None:
    """The frame of ``key``'s value in an object of ``frame``: the declared
    one, else the additional one when no pattern may pick another (else
    None: not known here)."""
    declared = frame.property(key)
    if declared is not None:
        return declared
    return frame.additional if not frame.pattern_properties else None


class ArgumentsTracker:
    """Follows one sequence through the calls of a dialect whose arguments
    are one JSON value in the call's markup (``arguments_opening``), with a
    :class:`JsonWalk` through each call's arguments, from the call's
    opening token to its closing one."""

    def __init__(self, opening: re.Pattern[bytes], open_id: int, close_id: int | None, table: list[bytes],
                 walks: Callable[[str], JsonWalk | None]) -> None:
        self._opening = opening
        self._open_id = open_id
        self._close_id = close_id
        self._table = table
        self._walks = walks
        self._markup: bytes | None = None  # the call's markup so far, until its arguments begin
        self._walk: JsonWalk | None = None

    @property
    def walk(self) -> JsonWalk | None:
        """The walk through the open call's arguments, once they began."""
        return self._walk

    def snapshot(self) -> tuple[object, ...]:
        return self._markup, self._walk, self._walk.snapshot() if self._walk is not None else None

    def restore(self, snapshot: tuple[object, ...]) -> None:
        self._markup, self._walk, walked = snapshot  # type: ignore[assignment]
        if self._walk is not None:
            self._walk.restore(walked)  # type: ignore[arg-type]

    def feed(self, token: int) -> None:
        """Advance past ``token``, which the grammar accepted."""
        if token == self._open_id:
            self._markup, self._walk = b"", None
            return
        if token == self._close_id:
            self._markup, self._walk = None, None
            return
        data = self._table[token]
        if self._walk is not None:
            self._walk.feed(data, token)
            return
        if self._markup is None:
            return
        markup = self._markup + data
        match = self._opening.match(markup)  # the opening, where the markup has it whole
        if match is None:
            self._markup = markup if len(markup) <= MARKUP_LIMIT else None
            return
        self._markup = None
        self._walk = self._walks(json.loads(match.group("tool")))
        if self._walk is not None:
            self._walk.feed(markup[match.end() :])


def walk_syntax(compiled: CompiledTools) -> tuple[bool, int | None]:
    """Whether the walk follows ``compiled``'s values: JSON, or Gemma's
    syntax with its delimiter a token, whose strings keep no text out (their
    free leaves are then llguidance's plain ones); and the delimiter's token
    (None: JSON's quotes)."""
    markers = Markers(compiled.tokenizer)
    syntax = get_dialect(compiled.dialect).values_syntax(markers)
    if syntax.excluded_text is not None:
        return False, None
    if isinstance(syntax, JsonSyntax):
        return True, None
    if isinstance(syntax, GemmaSyntax) and markers.is_token(syntax.string_delimiter):
        return True, compiled.tokenizer.token_id(syntax.string_delimiter)
    return False, None


def arguments_trackers(compiled: CompiledTools, count: int, memo: WalkMemo) -> list[ArgumentsTracker] | None:
    """One tracker per sequence for ``compiled``, or None when its dialect
    does not write its arguments as one JSON value (or writes its call
    opening as text, or its JSON strings keep text out)."""
    tok = compiled.tokenizer
    dialect = get_dialect(compiled.dialect)
    opening = dialect.arguments_opening
    if opening is None or not Markers(tok).is_token(dialect.call_open) or not compiled.tools \
            or walk_syntax(compiled) != (True, None):
        return None
    tools = {tool.name: tool for tool in compiled.tools}

    def walks(name: str) -> JsonWalk | None:
        tool = tools.get(name)
        return None if tool is None else JsonWalk(tool.root, tool.schema.definitions, memo)

    open_id = tok.token_id(dialect.call_open)
    assert open_id is not None
    close_id = tok.token_id(dialect.call_close)
    return [ArgumentsTracker(opening, open_id, close_id, tok.token_table[0], walks) for _ in range(count)]


def _is_map(frame: Frame | None) -> bool:
    """Whether an object of ``frame`` is a map: its keys free leaves (any
    key, the same frame for every value)."""
    return isinstance(frame, FreeFrame) or (
        isinstance(frame, ObjectFrame) and not frame.properties and not frame.pattern_properties
        and not frame.forbidden and frame.additional is not None
    )


def _uncounted_from(frame: Frame | None) -> int | None:
    """From which item index on an array of ``frame`` no longer counts its
    items (the grammar stands in one place after each comma), or None."""
    if isinstance(frame, FreeFrame):
        return 1
    if isinstance(frame, ArrayFrame) and frame.max_items is None and frame.items is not None:
        return max(len(frame.prefix_items), frame.min_items, 1)
    return None


def free_number_steps(frame: Frame | None) -> dict[tuple[int, int], int] | None:
    """The automaton of a number of ``frame`` when it is free (an integer or
    number with no bound or step: the grammar's plain ``%json`` leaf), or
    None."""
    if isinstance(frame, (IntegerFrame, NumberFrame)) and frame.minimum is None and frame.maximum is None \
            and frame.multiple_of is None:
        return INTEGER_STEPS if isinstance(frame, IntegerFrame) else NUMBER_STEPS
    return None


def _begins(frame: Frame, byte: int) -> bool:
    """Whether a value of ``frame`` may begin with ``byte``."""
    if isinstance(frame, (FreeFrame, UnionFrame)):
        return True
    if isinstance(frame, EnumFrame):
        return any(_begins_value(value, byte) for value in frame.values)
    kinds = {ord('"'): StringFrame, ord("{"): ObjectFrame, ord("["): ArrayFrame, ord("t"): BooleanFrame,
             ord("f"): BooleanFrame, ord("n"): NullFrame}
    if byte in _DIGITS:
        return isinstance(frame, (IntegerFrame, NumberFrame))
    return isinstance(frame, kinds.get(byte, ()))


def _begins_value(value: object, byte: int) -> bool:
    return json.dumps(value).encode()[:1] == bytes((byte,))
