"""What makes a finished fuzz output a wrong answer: the parse's rejected
calls, call markers the parser did not read as calls, calls that break
``tool_choice`` or ``parallel_tool_calls``, bytes that are not UTF-8.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..compiler import CompiledTools
from ..dialects import get_dialect
from ..options import TOOL_CHOICES
from ..output.parse import ParseResult

if TYPE_CHECKING:
    from ..tokenizers import Tokenizer


def output_problems(
    compiled: CompiledTools, tokens: list[int] | tuple[int, ...], text: str, parsed: ParseResult
) -> list[str]:
    """What makes a finished output of ``compiled`` a wrong answer: a call the
    parser rejected (wrong markup, a value the schema does not allow), a call
    marker the parser did not read as a call, or calls that break
    ``tool_choice`` / ``parallel_tool_calls``. ``tokens`` are the output's
    tokens, ``text`` their text without the end token, ``parsed`` its parse.
    Calls whose opening is text (qwen3_coder's bare ``<function=`` under
    auto) have no marker token: the scanner's count of them is added."""
    problems = [f"call of {e.tool!r} rejected: {e.reason}" for e in parsed.errors]
    names = [call["function"]["name"] for call in parsed.tool_calls]
    dialect = get_dialect(compiled.dialect).reading(compiled.reasoning)
    call_open = compiled.tokenizer.token_id(dialect.markup.open)
    # An opening that is text around a named token (DSML) is counted in the
    # text: no value may hold the token's text.
    heads = dialect.markup.arguments_opening
    if dialect.markup.messages is not None and heads is not None:
        # Every message's header opens with that token: a call's is the one that names a tool.
        opened = len(heads.findall(text.encode()))
    elif dialect.markup.markers_in_section and dialect.markup.section is not None:
        # Text markers (MiniMax's): a call opens right after the section's opening or the call before.
        markup, section = dialect.markup, dialect.markup.section
        opened = text.count(section.opening + section.inner + markup.open) + text.count(markup.close + markup.separator + markup.open)
    else:
        opened = sum(token == call_open for token in tokens) if call_open is not None else text.count(dialect.markup.open)
    unmarked = sum(segment.kind == "call" and not segment.text.startswith(dialect.markup.open) for segment in dialect.scan(text))
    if opened + unmarked != len(names) + len(parsed.errors):
        problems.append(
            f"{opened} call marker(s) and {unmarked} call(s) opened as text, "
            f"but {len(names)} call(s) and {len(parsed.errors)} rejected"
        )
    choice = compiled.tool_choice
    if choice == "none" and names:
        problems.append(f'tool_choice "none" but {len(names)} call(s)')
    if choice not in TOOL_CHOICES:
        others = sorted({name for name in names if name != choice})
        if others:
            problems.append(f"tool_choice {choice!r} but calls of {', '.join(others)}")
    if choice != "auto" and choice != "none" and not names:
        problems.append(f"tool_choice {choice!r} but no call")
    if not compiled.parallel_tool_calls and len(names) > 1:
        problems.append(f"parallel_tool_calls=False but {len(names)} calls")
    return problems


def output_text(tok: Tokenizer, tokens: list[int] | tuple[int, ...]) -> tuple[str, bool]:
    """The text of ``tokens`` byte for byte, and whether it is valid UTF-8
    (invalid bytes replaced)."""
    data = b"".join(tok.token_bytes(token) for token in tokens)
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace"), False
