"""Writing llguidance Lark text: literals, regexes, ``%json`` leaves and a rule set.

llguidance's Lark dialect (``docs/syntax.md`` in guidance-ai/llguidance): rules
are lowercase, terminals UPPERCASE (one regex each, not recursive), special
tokens are written ``<name>`` or ``<[id]>``, ``%json {...}`` embeds a JSON
Schema as a sub-grammar.
"""

from __future__ import annotations

import json
from typing import Any

# JSON text exactly as Jinja's ``tojson`` / Python's ``json.dumps`` writes it,
# which is what the chat templates render into the model's history.
JSON_STYLE = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


def literal(text: str) -> str:
    """A Lark string literal matching exactly ``text``."""
    return json.dumps(text, ensure_ascii=False)


def literals(*texts: str) -> str:
    """Lark for ``texts`` in a row, each its own literal (empty ones left
    out): delimiters apart from the text between them, so the lexer splits
    a declared key where it splits any other."""
    return " ".join(literal(text) for text in texts if text)


def regex(pattern: str) -> str:
    """A Lark regex literal (``/.../``)."""
    return "/" + pattern.replace("/", "\\/") + "/"


def json_leaf(schema: dict[str, Any]) -> str:
    """A ``%json`` sub-grammar for one schema, in :data:`JSON_STYLE`."""
    return "%json " + json.dumps({**schema, "x-guidance": JSON_STYLE}, ensure_ascii=False, sort_keys=True)


def repeat(expr: str, low: int, high: int | None) -> str:
    """``expr`` repeated ``low`` to ``high`` (unbounded: ``None``) times."""
    if high is None:
        if low == 0:
            return f"({expr})*"
        if low == 1:
            return f"({expr})+"
        return f"({expr}){{{low}}} ({expr})*"
    if (low, high) == (0, 1):
        return f"({expr})?"
    return f"({expr}){{{low},{high}}}"


class RuleSet:
    """Named rules in emission order. Identical bodies share one rule, which
    keeps grammars for many similar tools small."""

    def __init__(self) -> None:
        self._rules: dict[str, str] = {}
        self._lazy: set[str] = set()
        self._by_body: dict[str, str] = {}
        self._counts: dict[str, int] = {}

    def add(self, hint: str, body: str) -> str:
        """The name of a rule with ``body`` (new unless one exists)."""
        existing = self._by_body.get(body)
        if existing is not None:
            return existing
        name = self.reserve(hint)
        self.define(name, body)
        return name

    def terminal(self, hint: str, body: str) -> str:
        """The name of a terminal (one regex; UPPERCASE) with ``body``."""
        existing = self._by_body.get(body)
        if existing is not None:
            return existing
        name = self.reserve(hint).upper()
        self.define(name, body)
        return name

    def lazy_lexeme(self, hint: str, body: str) -> str:
        """The name of a lazy lexeme (one regex, ``name[lazy]``): it ends
        where ``body`` first matches. A text lexeme that ends in its own
        closing must be lazy when a special token may follow it: llguidance
        1.9 panics there on a greedy one."""
        existing = self._by_body.get(body)
        if existing is not None and existing in self._lazy:
            return existing
        name = self.reserve(hint)
        self._lazy.add(name)
        self._rules[name] = body
        self._by_body.setdefault(body, name)
        return name

    def reserve(self, hint: str) -> str:
        """A fresh rule name, for rules whose body refers to themselves.
        Generated names start with ``g_`` so they never meet the fixed rules
        of a dialect's ``.lark`` file."""
        base = "g_" + ("".join(c if c.isalnum() else "_" for c in hint.lower()).strip("_") or "r")
        base = base.replace("__", "_")
        count = self._counts.get(base, 0)
        self._counts[base] = count + 1
        return base if count == 0 else f"{base}_{count}"

    def define(self, name: str, body: str) -> None:
        self._rules[name] = body
        self._by_body.setdefault(body, name)

    def text(self) -> str:
        return "".join(
            f"{name}{'[lazy]' if name in self._lazy else ''}: {body}\n" for name, body in self._rules.items()
        )
