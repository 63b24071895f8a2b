"""Top-level argument values of the XML-style dialects (qwen3_coder, glm):
strings raw, every other value JSON, each followed by its closing marker."""

from __future__ import annotations

import json
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any

from ..frames import BooleanFrame, EnumFrame, Frame, FreeFrame, NullFrame, StringFrame, UnionFrame
from ..grammar.lark import literal
from ..grammar.values import ValueEmitter
from .base import Dialect
from .segments import Partial, Value


@dataclass(frozen=True)
class RawValues:
    """How one dialect closes a top-level value.

    ``any_text`` is Lark for any raw text *with* its closing; ``close`` is
    Lark for the closing after other values; ``close_text`` the closing as
    text, or ``None`` when it is a special token (text closings join the
    constrained text in one lexeme, so the text cannot run into them);
    ``excluded`` a regex raw text may not match in full (``None``: nothing,
    since a special-token closing cannot occur in text); ``python_literals``
    allows ``True``/``False``/``None`` as the template's ``str()`` writes them.
    """

    any_text: str
    close: str
    close_text: str | None
    excluded: str | None
    python_literals: bool

    def value(self, frame: Frame, emitter: ValueEmitter, path: str) -> str:
        """Lark for one top-level value of ``frame`` and its closing."""
        frame = emitter.resolve(frame)
        if _any_string(frame):
            return self.any_text
        if isinstance(frame, UnionFrame):
            return "(" + " | ".join(self.value(option, emitter, path) for option in frame.options) + ")"
        if isinstance(frame, StringFrame):
            if self.close_text is not None:
                return emitter.closed_text(frame, path, self.excluded, self.close_text) or self.any_text
            text = emitter.raw_text(frame, path)
            return f"{text} {self.close}" if text else self.any_text
        if isinstance(frame, EnumFrame):
            texts = [literal(v) for v in frame.values if isinstance(v, str)]
            others = [emitter.syntax.scalar(v) for v in frame.values if not isinstance(v, str)]
            options = [f"({' | '.join(others)}) {self.close}"] if others else []
            if texts and self.close_text is not None:
                options.append(emitter.rules.terminal("text", f"({' | '.join(texts)}) {literal(self.close_text)}"))
            elif texts:
                options.append(f"({' | '.join(texts)}) {self.close}")
            return " | ".join(options) if len(options) == 1 else f"({' | '.join(options)})"
        if isinstance(frame, BooleanFrame) and self.python_literals:
            return f'("true" | "false" | "True" | "False") {self.close}'
        if isinstance(frame, NullFrame) and self.python_literals:
            return f'("null" | "None") {self.close}'
        return f"{emitter.value(frame, path)} {self.close}"


class RawValueDialect(Dialect):
    """A dialect whose calls are read by one walk over the call's text:
    complete (``final``) or as far as an unfinished call goes."""

    @abstractmethod
    def walk(self, body: str, *, final: bool) -> Partial:
        """What ``body`` holds; when ``final``, malformed markup raises
        :class:`Malformed` instead of ending the walk."""

    def parse_body(self, body: str) -> tuple[str, list[tuple[str, Value]]]:
        partial = self.walk(body, final=True)
        assert partial.name is not None
        return partial.name, partial.pairs

    def partial_body(self, body: str) -> Partial:
        return self.walk(body, final=False)


def raw_text(value: Any) -> str:
    """A value as these dialects write it: strings raw, the rest JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _any_string(frame: Frame) -> bool:
    """Raw text of any content is a valid value of ``frame``: then every
    other option of a union is covered too (its JSON text is such text)."""
    if isinstance(frame, (FreeFrame,)) or frame == StringFrame():
        return True
    return isinstance(frame, UnionFrame) and any(_any_string(option) for option in frame.options)
