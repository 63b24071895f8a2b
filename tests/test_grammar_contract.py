"""Every dialect is found by the registry, and its ``.lark`` file meets the
contract written in ``grammars/README.md``: the rules it must define, none
the compiler appends, and special tokens only among the dialect's markers."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pytest

import constrained.dialects as dialects_package
from constrained.compiler import compile_tools
from constrained.dialects import DIALECTS, get_dialect
from constrained.dialects.base import Dialect
from constrained.dialects.contract import APPENDED_RULES, appended_rules, grammar_rules, needed_rules
from constrained.dialects.turn_rules import FRAMED_LEAD_RULES, LEAD_RULES
from constrained.errors import UnknownDialectError
from constrained.grammar.lark import literal

NAMES = sorted(DIALECTS)
GENERATED = "// -- generated --"
_TOKEN = re.compile(
    r'(?P<json>%json\s*\{.*\})|(?P<string>"(?:[^"\\\n]|\\.)*")|(?P<regex>/(?:[^/\\\n]|\\.)+/)'
    r"|(?P<special><[^<>\s]+>)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|."
)
"""Lark read left to right: ``%json`` leaves, strings and regexes (whose
text is not grammar), special tokens, rule names."""


def _tokens(body: str, kind: str) -> set[str]:
    """The special tokens (``kind`` "special") or rule names ("name") a body uses."""
    return {match.group() for match in _TOKEN.finditer(body) if match.lastgroup == kind}


def _lark(name: str) -> dict[str, str]:
    return grammar_rules(get_dialect(name).grammar())


def _written(marker: str) -> str:
    """Lark for a marker that is text around ``<...>`` tokens (or one token)."""
    parts = re.split(r"(<[^<>\s]+>)", marker)
    return " ".join(part if index % 2 else literal(part) for index, part in enumerate(parts) if part)


def _spelled(text: str, dialect: Dialect) -> str:
    """Lark for marker ``text`` as the dialect's ``.lark`` writes it: a named
    token by its rule, the text around it as literals; a marker that is
    text inside the section as a literal."""
    names = {marker: rule for rule, marker in dialect.markup.token_rules}
    if not any(marker in text for marker in names):
        return literal(text) if dialect.markup.markers_in_section else text
    parts = re.split("(" + "|".join(map(re.escape, names)) + ")", text)
    return " ".join(names.get(part) or literal(part) for part in parts if part)


def test_the_registry_holds_every_dialect_class_of_the_package():
    defined = {}
    for info in pkgutil.iter_modules(dialects_package.__path__):
        module = importlib.import_module(f"constrained.dialects.{info.name}")
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, Dialect) and value.__module__ == module.__name__:
                if not inspect.isabstract(value):
                    defined[value.name] = value
    assert sorted(defined) == NAMES
    for name, dialect in DIALECTS.items():
        assert type(dialect) is defined[name] and dialect.name == name
        assert get_dialect(name) is dialect


def test_an_unknown_dialect_names_the_known_ones():
    with pytest.raises(UnknownDialectError, match=", ".join(NAMES)):
        get_dialect("no_such_dialect")


@pytest.mark.parametrize("name", NAMES)
def test_lark_defines_the_rules_the_compiler_uses(name):
    dialect, rules = get_dialect(name), _lark(name)
    needed = needed_rules(dialect)
    assert needed <= set(rules), f"missing: {sorted(needed - set(rules))}"
    assert ("reasoning" in rules) == bool(dialect.reasoning.tokens)
    assert ("call_separator" in rules) == bool(dialect.markup.separator)


@pytest.mark.parametrize("name", NAMES)
def test_lark_defines_no_rule_the_compiler_appends(name):
    rules = set(_lark(name))
    assert not rules & APPENDED_RULES
    assert not [rule for rule in rules if rule.lower().startswith("g_")]


@pytest.mark.parametrize("name", NAMES)
def test_lark_refers_only_to_its_own_rules_and_tool_body(name):
    rules = _lark(name)
    referred = set().union(*(_tokens(body, "name") for body in rules.values()))
    assert referred <= set(rules) | {"tool_body"} | {rule for rule, _ in get_dialect(name).markup.token_rules}


@pytest.mark.parametrize("name", NAMES)
def test_lark_special_tokens_are_the_dialects_markers(name):
    dialect, rules = get_dialect(name), _lark(name)
    used = set().union(*(_tokens(body, "special") for body in rules.values()))
    markers = {*dialect.markup.required_tokens, *dialect.reasoning.tokens}
    assert used <= markers, f"not markers of {name}: {sorted(used - markers)}"


@pytest.mark.parametrize("name", NAMES)
def test_the_call_runs_between_the_scanners_markers(name):
    dialect, rules = get_dialect(name), _lark(name)
    call = rules["call"]
    opening, closing = _spelled(dialect.markup.open, dialect), _spelled(dialect.markup.close, dialect)
    assert call.startswith(opening + " ")
    # A framed turn's call closing also ends the turn: end_after_calls writes it.
    assert call.endswith(" tool_body" if dialect.markup.messages else " " + closing)
    if dialect.reasoning.tokens:
        opening, closing = (_written(marker) for marker in dialect.reasoning.tokens)
        label = f"{literal(dialect.reasoning.label)} " if dialect.reasoning.label else ""
        # A block is its opening, the label the parser reads, then the rest a prompt may have opened.
        assert rules["reasoning"] == f"{opening} {label}reasoning_rest"
        assert closing in _tokens(rules["reasoning_rest"], "special") and opening not in _tokens(rules["reasoning_rest"], "special")


@pytest.mark.parametrize("name", NAMES)
def test_call_separator_is_the_dialects_text(name):
    dialect, rules = get_dialect(name), _lark(name)
    if dialect.markup.separator:
        assert rules["call_separator"] == literal(dialect.markup.separator)


@pytest.mark.parametrize("name", NAMES)
def test_the_compiler_appends_to_the_lark_file(name):
    dialect = get_dialect(name)
    tool = {"name": "f", "parameters": {"type": "object", "properties": {"s": {"type": "string"}, "o": {}}}}
    grammar = compile_tools([tool], name, dialect.default_tokenizer).grammar
    fixed, generated = grammar.split(f"\n{GENERATED}\n")
    assert fixed == dialect.grammar()
    appended = set(grammar_rules(generated))
    lead = FRAMED_LEAD_RULES if dialect.markup.messages else LEAD_RULES  # (a turn written as messages: fewer)
    assert (APPENDED_RULES - set(LEAD_RULES)) | set(lead) <= appended and not appended & set(_lark(name))
    assert all(rule in appended_rules(dialect) or rule.lower().startswith("g_") for rule in appended), sorted(appended)
