"""What a dialect must declare to be registered, checked whole at
registration so that a mistake is named there, not deep inside a compile.

The grammar's part is the contract ``grammars/README.md`` writes down: the
rules the compiler refers to, and none of the rules it appends.
"""

from __future__ import annotations

import inspect
import re

from ..errors import DialectError
from .base import Dialect
from .description import CallMarkup, ChatFormat, Drift, ReasoningMarkup
from .turn_rules import FRAMED_LEAD_RULES, LEAD_RULES, SECTION_RULES, TEXT_CALL_RULES

APPENDED_RULES = frozenset({"start", "end_of_turn", "end_after_calls", "tool_body", *LEAD_RULES})
"""Rules the compiler appends to a grammar (besides the ``g_*`` ones, a
calls section's, text calls' and the token rules: :mod:`.turn_rules`;
where the family writes a turn as messages, the lead rules are fewer)."""
NAME = re.compile(r"[A-Za-z0-9_]+")
"""A dialect's name: also part of serving plug-ins' parser names."""

_GROUPS = {"markup": CallMarkup, "reasoning": ReasoningMarkup, "drift": Drift, "chat": ChatFormat}
_RULE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:\[lazy\])?[ \t]*:(.*)$", re.MULTILINE)
_COMMENT = re.compile(r"^\s*//.*$", re.MULTILINE)
_GUIDE = "see 'Adding a dialect' in docs/design.md"


def grammar_rules(grammar: str) -> dict[str, str]:
    """Each rule's body by name, in Lark text whose rules are one line each."""
    return {match.group(1): match.group(2).strip() for match in _RULE.finditer(_COMMENT.sub("", grammar))}


def needed_rules(dialect: Dialect) -> set[str]:
    """The rules the compiler refers to in ``dialect``'s grammar."""
    needed = {"text", "TEXT", "call", dialect.value_syntax.free_rule}
    if dialect.markup.text_calls is not None:
        needed |= {dialect.markup.text_calls.rest, dialect.markup.text_calls.later}
    if dialect.reasoning.tokens:
        needed |= {"reasoning", "reasoning_rest"}
    if dialect.markup.separator:
        needed.add("call_separator")
    return needed


def appended_rules(dialect: Dialect) -> set[str]:
    """The rules the compiler appends to ``dialect``'s grammar (besides the ``g_*`` ones)."""
    markup = dialect.markup
    own = {rule for rule, _ in markup.token_rules} | (set(SECTION_RULES) if markup.section else set())
    own |= set(TEXT_CALL_RULES) if markup.text_calls else set()
    if markup.messages is None:
        return set(APPENDED_RULES) | own
    return (set(APPENDED_RULES) - set(LEAD_RULES)) | set(FRAMED_LEAD_RULES) | own | {"answer"}


def check_dialect(dialect: object) -> Dialect:
    """``dialect`` when it can be registered, else a :class:`DialectError`
    that says what is missing and how to give it."""
    if inspect.isclass(dialect) and issubclass(dialect, Dialect):
        missing = sorted(getattr(dialect, "__abstractmethods__", ()))
        hooks = f" (first define its hooks {', '.join(missing)})" if missing else ""
        raise DialectError(f"register an instance of {dialect.__qualname__}, not the class: {dialect.__qualname__}(){hooks}")
    if not isinstance(dialect, Dialect):
        raise DialectError(f"expected a Dialect instance, got {type(dialect).__qualname__}; {_GUIDE}")
    label = type(dialect).__qualname__
    for attribute, kind in (("name", str), ("family", str), ("default_tokenizer", str)):
        if not isinstance(getattr(dialect, attribute, None), kind):
            raise DialectError(f"dialect {label} sets no {attribute} (a str); {_GUIDE}")
    if not NAME.fullmatch(dialect.name):
        raise DialectError(f"dialect name {dialect.name!r}: use letters, digits and '_' only")
    if not hasattr(dialect, "value_syntax"):
        raise DialectError(f"dialect {dialect.name!r} sets no value_syntax (e.g. JSON_SYNTAX); {_GUIDE}")
    for attribute, group in _GROUPS.items():
        if not isinstance(getattr(dialect, attribute, None), group):
            raise DialectError(f"dialect {dialect.name!r}: {attribute} must be a {group.__name__}(...); {_GUIDE}")
    _check_grammar(dialect)
    return dialect


def _check_grammar(dialect: Dialect) -> None:
    try:
        grammar = dialect.grammar()
    except (OSError, ValueError) as exc:
        raise DialectError(
            f"dialect {dialect.name!r}: cannot read its grammar ({exc}); set grammar_source to the Lark text "
            "or to its .lark file (a pathlib.Path)"
        ) from None
    rules = grammar_rules(grammar)
    missing = sorted(needed_rules(dialect) - set(rules))
    if missing:
        raise DialectError(
            f"dialect {dialect.name!r}: its grammar defines no rule {', '.join(missing)}, which the compiler "
            "refers to (grammars/README.md lists what each rule writes)"
        )
    appended = sorted(rule for rule in rules if rule in appended_rules(dialect) or rule.lower().startswith("g_"))
    if appended:
        raise DialectError(
            f"dialect {dialect.name!r}: its grammar defines {', '.join(appended)}, which the compiler appends; "
            "rename or remove them"
        )
