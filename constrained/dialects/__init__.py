"""The tool-call dialects, by name (:mod:`.registry` holds them), and what
a dialect of another package is made of: the base class, its groups of
settings, and what its hooks return."""

from __future__ import annotations

from ..grammar.syntax import JSON_SYNTAX
from .base import Dialect, Markers
from .description import CallMarkup, CallSection, ChatFormat, Drift, MessageFraming, ReasoningMarkup, TextCalls
from .registry import DIALECTS, ENTRY_POINT_GROUP, get_dialect, register_dialect
from .segments import Malformed, Parsed, Value

__all__ = [
    "DIALECTS",
    "ENTRY_POINT_GROUP",
    "JSON_SYNTAX",
    "CallMarkup",
    "CallSection",
    "ChatFormat",
    "Dialect",
    "Drift",
    "Malformed",
    "Markers",
    "MessageFraming",
    "Parsed",
    "ReasoningMarkup",
    "TextCalls",
    "Value",
    "get_dialect",
    "register_dialect",
]
