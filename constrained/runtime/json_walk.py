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
A value syntax other than JSON says how the walk follows it
(:meth:`~constrained.grammar.syntax.ValueSyntax.walk_shape`: strings between
delimiter tokens with no escapes, bare keys), or why it cannot.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import NamedTuple

from ..caches import Memo
from ..frames.model import ArrayFrame, Frame, FreeFrame, ObjectFrame, UnionFrame, resolve_frame
from ..grammar.syntax import JSON_SHAPE, WalkShape
from .json_frames import (
    INTEGER_STEPS,
    NUMBER_START,
    NUMBER_STEPS,
    begins,
    free_number_steps,
    is_free_string,
    is_map,
    member_frame,
    uncounted_from,
)

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
_LITERALS = {ord("t"): b"rue", ord("f"): b"alse", ord("n"): b"ull"}


_MEMO_STEPS = 1 << 13
"""The most steps a :class:`WalkMemo` keeps (a few hundred bytes each)."""
_MEMO_FRAMES = 1 << 12
"""The most frames a :class:`WalkMemo` numbers; past them a frame is not
known (its text stays whole), so a tool set's walks stay bounded."""


class Container(NamedTuple):
    """An open object or array: its frame, whether it is an object, and its
    members or items so far (capped where the count no longer matters)."""

    frame: int
    is_object: bool
    size: int


class WalkState(NamedTuple):
    """Where a walk stands, and the key of the memo's steps. Frames are the
    memo's numbers for them (-1: not known)."""

    mode: int
    """What the walk expects next (``_VALUE``, ``_STRING``, ...)."""
    frame: int
    """The frame of the value expected or open."""
    stack: tuple[Container, ...]
    """The open containers, innermost last."""
    free: bool
    """The open string or number is a free leaf."""
    closable: bool
    """The open leaf's text is left out once it is closed."""
    escape: int
    """A string's escape: 0, after a backslash 1, in ``\\u`` 2-5 (hex digits read + 2)."""
    need: int
    """The UTF-8 continuation bytes the string's last character still needs."""
    key: bytes | None
    """The key read so far, while a key is open (a free key's text is not kept)."""
    empty: bool
    """The open string has no text yet."""
    number: int | None
    """The open number's state in its automaton."""
    integer: bool
    """The open number is an integer."""
    literal: bytes
    """What the open literal still needs."""


class WalkSnapshot(NamedTuple):
    """A walk's state, skeleton and end after a feed (a memo step, or a
    rollback's snapshot)."""

    state: WalkState
    skeleton: tuple[int, ...]
    ended: int | None


class WalkMemo:
    """What the JSON walks of one tool set learn, shared by its requests:
    a number for each frame they met, with the definitions its references
    name (a walk's state holds numbers, cheap to compare), and each step:
    from a state, by a token (or bytes), to a state and a skeleton. A step is one
    lookup once it is known."""

    def __init__(self) -> None:
        self._frames: list[tuple[Frame, Mapping[str, Frame]]] = []
        # By the ids of the frame and its definitions: both are kept in _frames, so the ids stay theirs.
        self._numbers: dict[tuple[int, int], int] = {}
        self.steps: Memo[tuple[WalkState, int | bytes], WalkSnapshot] = Memo("JSON walk steps", _MEMO_STEPS)
        self._lock = threading.Lock()

    def number(self, frame: Frame | None, definitions: Mapping[str, Frame]) -> int:
        """``frame``'s number, read with ``definitions`` (-1 for None, or
        past :data:`_MEMO_FRAMES`: not known)."""
        if frame is None:
            return -1
        key = (id(frame), id(definitions))
        number = self._numbers.get(key)
        if number is None:
            with self._lock:
                number = self._numbers.get(key)
                if number is None:
                    if len(self._frames) >= _MEMO_FRAMES:
                        return -1
                    self._frames.append((frame, definitions))
                    number = self._numbers[key] = len(self._frames) - 1
        return number

    def frame(self, number: int) -> Frame | None:
        return self._frames[number][0] if number >= 0 else None


_START = WalkState(_VALUE, -1, (), False, False, 0, 0, None, False, None, False, b"")


class JsonWalk:
    """Follows the bytes of one JSON value of ``frame`` (``None``: not
    known, so nothing in it is free), written as ``shape`` says (JSON's
    quoted strings and keys by default).

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
    accept) too.

    A step the memo does not know yet unpacks the state into attributes
    (``_mode``, ``_frame``, ...: :class:`WalkState`'s fields), walks its
    bytes one by one through the handler of the mode each stands in
    (:data:`_BYTE_STEPS`), and packs them again."""

    def __init__(self, frame: Frame | None, definitions: Mapping[str, Frame], memo: WalkMemo,
                 shape: WalkShape = JSON_SHAPE) -> None:
        self._definitions = definitions
        self._memo = memo
        self._shape = shape
        self._quote = ord('"') if shape.delimiter is None else QUOTE
        self._state = _START._replace(frame=memo.number(frame, definitions))
        self.skeleton: tuple[int, ...] = ()
        self.ended: int | None = None
        """After :meth:`feed`: where in the bytes fed the value ended (the
        rest is not the walk's), or None."""
        self.first_fed: int | None = None
        """How many bytes the first :meth:`feed` held: the end of the token
        in which the value began."""

    def snapshot(self) -> WalkSnapshot:
        return WalkSnapshot(self._state, self.skeleton, self.ended)

    def restore(self, snapshot: WalkSnapshot) -> None:
        self._state, self.skeleton, self.ended = snapshot

    @property
    def in_leaf(self) -> bool:
        state = self._state
        return state.free and state.mode in (_STRING, _NUMBER, _NAME)

    @property
    def keeps_text(self) -> bool:
        """Whether the text stands where the skeleton keeps what is written:
        inside a leaf that is not free, or past what the walk could follow."""
        state = self._state
        return state.mode == _LOST or (state.mode in (_STRING, _NUMBER, _NAME, _LITERAL) and not state.free)

    @property
    def leaf_state(self) -> int | None:
        state = self._state
        if not state.free:
            return None
        if state.mode == _NUMBER:
            return state.number
        if state.mode == _NAME:
            return KEY_STATE
        if state.mode == _STRING and state.escape == 0 and state.need == 0:
            if state.key is None:
                return EMPTY_STRING_STATE if state.empty else STRING_STATE
            return EMPTY_KEY_STATE if state.empty else KEY_STATE
        return None

    def feed(self, data: bytes, token: int | None = None) -> None:
        """Advance past ``data`` (the bytes of ``token``, when it is given).
        The step is looked up in the memo by the token, else by the bytes
        (a value that begins inside a token), and kept there."""
        before = self._state
        if self.first_fed is None:
            self.first_fed = len(data)
        key = (before, token if token is not None else data)
        known = self._memo.steps.table.get(key)
        if known is not None:
            self._state, self.skeleton, self.ended = known
            return
        walked = (QUOTE,) if token is not None and token == self._shape.delimiter else data
        self._walk_bytes(before, walked, len(data))
        self._memo.steps.learn(key, WalkSnapshot(self._state, self.skeleton, self.ended))

    def _walk_bytes(self, before: WalkState, walked: bytes | tuple[int, ...], length: int) -> None:
        """A step the memo does not know: from ``before``, each byte of
        ``walked`` (``length`` bytes fed) through its mode's handler."""
        (self._mode, self._frame, self._stack, self._free, self._closable, self._escape, self._need, self._key,
         self._empty, self._number, self._integer, self._literal) = before
        out: list[int] = []
        self.ended = None
        ends = self._shape.ends_at_value
        for position, byte in enumerate(walked):
            if ends and self._mode == _DONE:  # a value in the markup: the rest is markup
                self.ended = position
                break
            _BYTE_STEPS[self._mode](self, byte, out)
        else:
            if ends and self._mode == _DONE:
                self.ended = length
        self._state = WalkState(self._mode, self._frame, self._stack, self._free, self._closable, self._escape,
                                self._need, self._key, self._empty, self._number, self._integer, self._literal)
        self.skeleton = tuple(out)

    # -- one byte, by what the walk expects ----------------------------------

    def _at_value(self, byte: int, out: list[int]) -> None:
        if byte in _SPACE:
            out.append(byte)
        else:
            self._open_value(byte, out)

    def _in_string(self, byte: int, out: list[int]) -> None:
        closable = self._closable
        if self._string_byte(byte):
            if closable:
                out += (BACK, CLOSED_LEAF)
            out.append(byte)
        elif not self._free:
            out.append(byte)

    def _in_number(self, byte: int, out: list[int]) -> None:
        state = (INTEGER_STEPS if self._integer else NUMBER_STEPS).get((self._number, byte))  # type: ignore[arg-type]
        if state is None:
            if self._closable:
                out += (BACK, CLOSED_LEAF)
            self._end_value()
            _BYTE_STEPS[self._mode](self, byte, out)  # the byte after the number
            return
        self._number = state
        if not self._free:
            out.append(byte)

    def _in_literal(self, byte: int, out: list[int]) -> None:
        out.append(byte)
        if not self._literal or byte != self._literal[0]:
            self._mode = _LOST
            return
        self._literal = self._literal[1:]
        if not self._literal:
            if self._closable:
                out += (BACK, CLOSED_LEAF)
            self._end_value()

    def _at_key(self, byte: int, out: list[int]) -> None:
        out.append(byte)
        if byte in _SPACE:
            return
        bare = self._shape.bare_keys
        if bare and byte in _NAME_START:
            self._mode, self._empty = _NAME, False
            self._free = is_map(self._memo.frame(self._stack[-1].frame))
            self._key = b"" if self._free else bytes((byte,))
            out[-1] = FREE_KEY if self._free else byte
        elif byte == ord('"') and not bare:
            self._mode, self._key, self._escape, self._need, self._empty = _STRING, b"", 0, 0, True
            self._free = is_map(self._memo.frame(self._stack[-1].frame))
            if self._free:
                out.append(FREE_KEY)
        elif byte == ord("}") and self._stack and self._stack[-1].size == 0:
            self._close_container()
        else:
            self._mode = _LOST

    def _at_colon(self, byte: int, out: list[int]) -> None:
        out.append(byte)
        if byte in _SPACE:
            return
        if byte != ord(":"):
            self._mode = _LOST
            return
        self._open_member()

    def _in_name(self, byte: int, out: list[int]) -> None:
        """One byte of a bare key (or the ``:`` after it)."""
        if byte == ord(":"):
            out.append(byte)
            self._free = False
            self._open_member()
        elif not self._free:
            out.append(byte)
            self._key = (self._key or b"") + bytes((byte,))

    def _after_value(self, byte: int, out: list[int]) -> None:
        out.append(byte)
        if byte in _SPACE:
            return
        if byte == ord(","):
            self._next_in_container(out)
        elif byte == (ord("}") if self._stack[-1].is_object else ord("]")):
            self._close_container()
        else:
            self._mode = _LOST

    def _after_end(self, byte: int, out: list[int]) -> None:
        out.append(byte)
        self._mode = _LOST

    def _lost(self, byte: int, out: list[int]) -> None:
        out.append(byte)

    # -- what the bytes open and close ----------------------------------------

    def _next_in_container(self, out: list[int]) -> None:
        """After a comma: the next member (a key) or item (a value); where
        their count no longer matters, the skeleton keeps its place at the
        first such comma and comes back to it at each later one."""
        number, is_object, count = self._stack[-1]
        frame = self._memo.frame(number)
        if is_object:
            self._mode = _KEY
            uncounted = 1 if is_map(frame) else None
        else:
            uncounted = uncounted_from(frame)
            self._mode, self._frame = _VALUE, self._number_of(self._item(frame, count + 1))
            count += 1
            kept = count if uncounted is None else min(count, uncounted + 1)
            self._stack = (*self._stack[:-1], Container(number, False, kept))
        if uncounted is not None and count >= uncounted:  # the count no longer matters
            out.append((MARK if count == uncounted else BACK) + len(self._stack))

    def _open_member(self) -> None:
        """After a key's ``:``: the value of the member the key names."""
        frame, _, count = self._stack[-1]
        self._stack = (*self._stack[:-1], Container(frame, True, min(count + 1, 2)))
        self._mode = _VALUE
        self._frame = self._number_of(self._member(self._memo.frame(frame), self._key or b""))

    def _open_value(self, byte: int, out: list[int]) -> None:
        frame = self._option(self._memo.frame(self._frame), byte)
        self._free = self._closable = False
        if byte == self._quote:
            self._open_string(frame, byte, out)
        elif byte in NUMBER_START:
            self._open_number(frame, byte, out)
        else:
            self._open_other(frame, byte, out)

    def _open_string(self, frame: Frame | None, byte: int, out: list[int]) -> None:
        self._mode, self._escape, self._need, self._key, self._empty = _STRING, 0, 0, None, True
        self._free = is_free_string(frame)
        self._closable = not self._free and frame is not None
        out += (byte, FREE_STRING) if self._free else (byte, MARK) if self._closable else (byte,)

    def _open_number(self, frame: Frame | None, byte: int, out: list[int]) -> None:
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

    def _open_other(self, frame: Frame | None, byte: int, out: list[int]) -> None:
        """A value that begins with ``byte``, no string or number: a
        container, a literal, or the ``]`` of an empty array."""
        if byte in _LITERALS and frame is not None:
            out.append(MARK)
            self._closable = True
        out.append(byte)
        if byte == ord("{"):
            self._stack = (*self._stack, Container(self._number_of(frame), True, 0))
            self._mode = _KEY
        elif byte == ord("["):
            self._stack = (*self._stack, Container(self._number_of(frame), False, 0))
            self._mode, self._frame = _VALUE, self._number_of(self._item(frame, 0))
        elif byte in _LITERALS:
            self._mode, self._literal = _LITERAL, _LITERALS[byte]
        elif byte == ord("]") and self._stack and not self._stack[-1].is_object and self._stack[-1].size == 0:
            self._close_container()  # an empty array: "]" where its first item would begin
        else:
            self._mode = _LOST

    def _string_byte(self, byte: int) -> bool:
        """Advance one byte of a string; whether it closed the string."""
        if self._key is not None and not self._free:
            self._key += bytes((byte,))
        self._empty = False
        if self._shape.delimiter is not None:  # no escapes: the delimiter token alone ends the text
            if byte == QUOTE:
                self._end_value()
                return True
        elif self._escaped(byte):
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

    def _escaped(self, byte: int) -> bool:
        """Whether ``byte`` is part of a JSON string's escape (advancing it)."""
        escape = self._escape
        if escape == 1:
            self._escape = 2 if byte == ord("u") else 0
            return True
        if escape:
            self._escape = escape + 1 if escape < 5 else 0
            return True
        if byte == ord("\\"):
            self._escape = 1
            return True
        return False

    def _end_value(self) -> None:
        self._free = self._closable = False
        self._mode = _AFTER if self._stack else _DONE

    def _close_container(self) -> None:
        self._stack = self._stack[:-1]
        self._end_value()

    # -- frames ---------------------------------------------------------------

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
        options = [o for o in map(self._resolve, frame.options) if o is not None and begins(o, byte)]
        return options[0] if len(options) == 1 and not isinstance(options[0], UnionFrame) else None

    def _member(self, frame: Frame | None, key: bytes) -> Frame | None:
        if isinstance(frame, FreeFrame):
            return frame
        if not isinstance(frame, ObjectFrame):
            return None
        if self._shape.bare_keys and any(":" in declared for declared, _ in frame.properties):
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


_ByteStep = Callable[[JsonWalk, int, list[int]], None]
_BYTE_STEPS: tuple[_ByteStep, ...] = (
    JsonWalk._at_value, JsonWalk._in_string, JsonWalk._in_number, JsonWalk._in_literal, JsonWalk._after_value,
    JsonWalk._at_key, JsonWalk._at_colon, JsonWalk._after_end, JsonWalk._lost, JsonWalk._in_name,
)
"""Each mode's handler of one byte, in the modes' order (``_VALUE`` to ``_NAME``)."""
