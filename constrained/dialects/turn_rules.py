"""The rules the compiler appends to a dialect's grammar for one request:
the start rule for its ``tool_choice``, the end-of-turn rules, a calls
section's rules and the rules that name special tokens. All of them are
made from the dialect's :class:`~.description.CallMarkup`, so the markers
are spelled once, in the description."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..errors import CompileError, OptionError
from ..grammar.lark import literal, regex
from ..options import CompileOptions
from .base import Dialect, Markers
from .description import CallSection, MessageFraming, TextCalls
from .segments import paired_fences

SECTION_RULES = (
    "section_open",
    "reasoning_section_open",
    "text_section_open",
    "TEXT_TO_SECTION",
    "reasoning_text_section_open",
    "REASONING_TEXT_TO_SECTION",
    "section_close",
)
"""The rules of a calls section (see :func:`section_rules`)."""


LEAD_RULES = ("FENCES_PAIRED", "FENCES_PAIRED_IN_LINE", "lead_text", "LEAD_TEXT", "reasoning_lead_text", "REASONING_LEAD_TEXT")
FRAMED_LEAD_RULES = ("lead_text", "reasoning_lead_text")
"""The lead rules where the family writes a turn as messages (:func:`lead_rules`)."""
"""The rules of the free text before a turn's first call (see :func:`lead_rules`)."""
TEXT_CALL_RULES = ("text_call", "TEXT_CALL_OPEN", "reasoning_text_call", "REASONING_TEXT_CALL_OPEN")
"""The rules of a first call read without its opening (see :func:`text_call_rules`)."""


def turn_rules(dialect: Dialect, markers: Markers, options: CompileOptions, has_tools: bool) -> list[str]:
    """The start rule, the end-of-turn rules, the token rules, the rules of
    the text before calls and, where the dialect writes its calls in a
    section, the section's rules."""
    markup = dialect.markup
    rules = [
        start_rule(dialect, markers, options, has_tools),
        f"end_of_turn: {_present(markup.turn_ends, markers)}",
        f"end_after_calls: {_present(markup.ends_after_calls, markers)}",
        *(f"{rule}: {markers(marker)}" for rule, marker in markup.token_rules),
        *lead_rules(markup.messages, markers),
    ]
    if markup.messages is not None:
        rules.append(f"answer: {markers.written(markup.messages.answer)} text?")
    if markup.text_calls is not None:
        rules += text_call_rules(markup.text_calls)
    if markup.section is not None:
        rules += section_rules(markup.section, markers, [marker for _, marker in markup.token_rules])
    return rules


def lead_rules(messages: MessageFraming | None, markers: Markers) -> list[str]:
    """``lead_text``: the dialect's free text (``TEXT``) before a turn's
    first call, and ``reasoning_lead_text`` the same after a reasoning
    block. The parser reads a call marker after an odd number of code-fence
    lines as text in a code block, so this text holds them in pairs. Where
    the family writes messages, the text is a message of its own, in the
    framing's lead markup (after a reasoning block too), and its end marker
    closes any code block in it: there it is plain ``TEXT``."""
    if messages is not None:
        opening, closing = map(markers.written, messages.lead)
        return [f"lead_text: {opening} TEXT {closing}", "reasoning_lead_text: lead_text"]
    return [
        f"FENCES_PAIRED: {regex(paired_fences(line_start=True))}",
        f"FENCES_PAIRED_IN_LINE: {regex(paired_fences(line_start=False))}",
        "lead_text: LEAD_TEXT",
        "LEAD_TEXT: TEXT & FENCES_PAIRED",
        "reasoning_lead_text: REASONING_LEAD_TEXT",
        "REASONING_LEAD_TEXT: TEXT & FENCES_PAIRED_IN_LINE",
    ]


def text_call_rules(text_calls: TextCalls) -> list[str]:
    """``text_call`` (and ``reasoning_text_call``): a first call read
    without its opening, whose opening and the lead text before it are one
    lexeme. llguidance's lexer does not backtrack, so text as a lexeme of
    its own would take the opening's first characters in."""
    opening = literal(text_calls.opening)
    return [
        f"text_call: TEXT_CALL_OPEN {text_calls.rest}",
        f"TEXT_CALL_OPEN: (TEXT & FENCES_PAIRED)? {opening}",
        f"reasoning_text_call: REASONING_TEXT_CALL_OPEN {text_calls.rest}",
        f"REASONING_TEXT_CALL_OPEN: (TEXT & FENCES_PAIRED_IN_LINE)? {opening}",
    ]


def section_rules(section: CallSection, markers: Markers, named: Sequence[str]) -> list[str]:
    """``section_open`` (the lead, the opening and the inner text),
    ``reasoning_section_open`` (the same after a reasoning block, whose
    blank end takes the lead's place: a lead of line breaks after it is
    one lexeme with it), ``text_section_open`` and ``reasoning_text_section_open`` (lead text,
    then the opening: under ``auto``) and ``section_close``. Where the
    opening starts with text before its first token (DSML's ``<``), the
    lead text and that text are one lexeme, which may end only right before
    the token (as in :func:`text_call_rules`). That text never spells one of
    the named tokens (the parser reads text)."""
    tokens = [m for m in (*named, section.opening, section.closing) if markers.is_token(m)]

    def spelled(*texts: str) -> str:
        # Each text its own lexemes: the lead and inner text are where a
        # call's separator or body ends, so the lexer splits them alike.
        return " ".join(markers.spelled(text, tokens) for text in texts if text)

    opening = spelled(section.opening, section.inner)
    first = min((section.opening.find(token) for token in tokens if token in section.opening), default=-1)
    if first == 0:
        text_open = [f"text_section_open: lead_text? {opening}", f"reasoning_text_section_open: reasoning_lead_text? {opening}"]
    else:
        head, rest = (section.opening, "") if first < 0 else (section.opening[:first], section.opening[first:])
        unnamed = " & ~" + regex(f"(?s:.*)({'|'.join(map(re.escape, named))})(?s:.*)") if named else ""
        rest = spelled(rest, section.inner)
        text_open = [
            f"text_section_open: TEXT_TO_SECTION {rest}".rstrip(),
            f"TEXT_TO_SECTION: ((TEXT & FENCES_PAIRED)? {literal(head)}){unnamed}",
            f"reasoning_text_section_open: REASONING_TEXT_TO_SECTION {rest}".rstrip(),
            f"REASONING_TEXT_TO_SECTION: ((TEXT & FENCES_PAIRED_IN_LINE)? {literal(head)}){unnamed}",
        ]
    return [
        f"section_open: {spelled(section.lead, section.opening, section.inner)}",
        f"reasoning_section_open: {opening}",
        *text_open,
        f"section_close: {spelled(section.inner, section.closing)}",
    ]


def start_rule(dialect: Dialect, markers: Markers, options: CompileOptions, has_tools: bool) -> str:
    """``start``: reasoning where allowed, then text, calls or both as
    ``tool_choice`` allows, then the end of the turn."""
    tool_choice = options.tool_choice
    has_block = bool(dialect.reasoning.tokens) and all(map(markers.holds_tokens, dialect.reasoning.tokens))
    if options.reasoning == "open" and not has_block:
        raise OptionError(
            f'reasoning="open": dialect {dialect.name!r} has no reasoning block with tokenizer '
            f"{markers.tokenizer.name!r} (its markers {', '.join(dialect.reasoning.tokens) or 'none'} "
            "must be special tokens, or text around them)",
            argument="reasoning",
        )
    # An open block is the prompt's: the output must close it first (calls come after reasoning).
    reasoning = "reasoning_rest " if options.reasoning == "open" else "reasoning? " if options.reasoning and has_block else ""

    def led(rule: str) -> str:
        # Text before the first call starts a line, or goes on the line a reasoning block closed.
        if not reasoning:
            return rule
        if reasoning == "reasoning_rest ":
            return f"reasoning_rest reasoning_{rule}"
        return f"(reasoning reasoning_{rule} | {rule})"

    markup = dialect.markup
    # Under auto, a dialect may read a call's opening in the text (qwen3_coder's bare <function=).
    text_calls = markup.text_calls if tool_choice == "auto" else None
    later = text_calls.later if text_calls else "call"

    def calls(first_call: str) -> str:
        if not options.parallel_tool_calls or markup.messages is not None:  # (a call's closing ends the turn)
            return first_call
        if markup.separator:
            return f"{first_call} (call_separator {later})*"
        return f"{later}+" if first_call == later else f"{first_call} {later}*"

    text = "text?" if markup.messages is None else "answer"  # (the answer's header even when it is empty)
    if tool_choice == "none" or not has_tools:
        return f"start: {reasoning}{text} end_of_turn"
    if markup.section is not None:
        section = f"{calls('call')} section_close end_after_calls"
        if tool_choice == "auto":
            return f"start: {reasoning}{text} end_of_turn | {led('text_section_open')} {section}"
        return f"start: {led('section_open')} {section}"
    if tool_choice == "auto":
        start = f"start: {reasoning}{text} end_of_turn | {led('lead_text?')} {calls('call')} end_after_calls"
        return start + (f" | {calls(led('text_call'))} end_after_calls" if text_calls else "")
    return f"start: {reasoning}{calls('call')} end_after_calls"


def check_markers(dialect: Dialect, markers: Markers) -> None:
    """Raise :class:`CompileError` where the tokenizer lacks a marker the
    dialect needs as a single special token."""
    tok = markers.tokenizer
    missing = [m for m in dialect.markup.required_tokens if not markers.is_token(m)]
    if missing:
        raise CompileError(
            f"dialect {dialect.name!r} needs {', '.join(missing)} as single special tokens, "
            f"but tokenizer {tok.name!r} does not have them"
        )
    for ends in (dialect.markup.turn_ends, dialect.markup.ends_after_calls):
        if not any(markers.is_token(m) for m in ends):
            raise CompileError(
                f"dialect {dialect.name!r} ends a turn with one of {', '.join(ends)}, "
                f"but tokenizer {tok.name!r} has none of them as a single special token"
            )


def _present(ends: Sequence[str], markers: Markers) -> str:
    return " | ".join(markers(m) for m in ends if markers.is_token(m))


