"""What a tool set's frame trackers (:mod:`.frame_tracker`) look up per
tool and key, made once per tool set and shared by its requests, and the
tables of a dialect's raw-text masks, built ahead of a first request."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from ..dialects import get_dialect
from ..dialects.base import Markers
from ..dialects.raw_values import RawTextSyntax, ValueKind
from ..grammar.syntax import WalkShape
from .json_frames import free_number_steps, member_frame, walk_shape
from .json_walk import JsonWalk, WalkMemo
from .text_masks import TextFrameMasks, ValueGuards, text_frame_masks, value_guards

if TYPE_CHECKING:
    from ..compiler import CompiledTools
    from ..frames.toolset import NormalizedTool
    from ..tokenizers import Tokenizer


class Lookups(NamedTuple):
    syntax: RawTextSyntax
    tok: Tokenizer
    masks: TextFrameMasks
    value_kind: Callable[[str, str], ValueKind]
    guards: Callable[[str], ValueGuards | None]
    values_decide: Callable[[str], bool]
    number_steps: Callable[[str, str], dict[tuple[int, int], int] | None]
    members_in_order: bool
    json_walk: Callable[[str, str], JsonWalk | None]


def tracker_lookups(compiled: CompiledTools, memo: WalkMemo | None) -> Lookups | None:
    """:class:`FrameTracker`'s arguments for ``compiled``'s sequences (but
    its memo): what they look up per tool and key, kept as they are first
    asked for; None when the dialect has no raw-text values."""
    tok = compiled.tokenizer
    dialect = get_dialect(compiled.dialect)
    syntax = dialect.raw_text_syntax(Markers(tok))
    if syntax is None or not compiled.tools:
        return None
    masks = _text_masks(tok, syntax)
    tools = {tool.name: tool for tool in compiled.tools}
    kinds: dict[tuple[str, str], ValueKind] = {}

    def value_kind(tool: str, key: str) -> ValueKind:
        kind = kinds.get((tool, key))
        if kind is None:
            known = tools.get(tool)
            kind = kinds[tool, key] = ValueKind.UNTRACKED if known is None else syntax.value_kind(known, key)
        return kind

    objects = {tool.name: dialect.argument_objects(tool) for tool in compiled.tools}

    def values_decide(tool: str) -> bool:
        return len(objects.get(tool, ())) != 1

    automata: dict[tuple[str, str], dict[tuple[int, int], int] | None] = {}

    def number_steps(tool: str, key: str) -> dict[tuple[int, int], int] | None:
        """The automaton of ``key``'s values when they are any JSON number
        (the grammar's plain ``%json`` number leaf), else None."""
        if (tool, key) not in automata:
            member = objects[tool][0].property(key) if not values_decide(tool) else None
            automata[tool, key] = free_number_steps(tools[tool].schema.resolve(member)) if member is not None else None
        return automata[tool, key]

    shape = walk_shape(compiled)
    walking = shape if memo is not None and isinstance(shape, WalkShape) else None

    def json_walk(tool: str, key: str) -> JsonWalk | None:
        """A walk through ``key``'s value, where its frame is known."""
        member = member_frame(objects[tool][0], key) if walking is not None and not values_decide(tool) else None
        return None if member is None or walking is None or memo is None else \
            JsonWalk(member, tools[tool].schema.definitions, memo, walking)

    guard_sets: dict[str, ValueGuards | None] = {}

    def guards(tool: str) -> ValueGuards | None:
        if tool not in guard_sets:
            guard_sets[tool] = _value_guards(tok, syntax, masks, tools.get(tool))
        return guard_sets[tool]

    in_order = compiled.options.key_order != "any"  # "any": each set of keys written has its own continuation
    return Lookups(syntax, tok, masks, value_kind, guards, values_decide, number_steps, in_order, json_walk)


def prepare_tables(tok: Tokenizer, dialect: str) -> None:
    """Build, once per process, what the raw-text masks of ``dialect`` need
    over ``tok`` (its masks per closing state, the vocabulary sorted by
    bytes, its long tokens joined for the guards' scan: about 0.4 s for a 150k
    vocabulary), so that a first request does not pay for them inside its
    decoding steps. Nothing to do for a dialect without raw-text values."""
    syntax = get_dialect(dialect).raw_text_syntax(Markers(tok))
    if syntax is not None:
        _value_guards(tok, syntax, _text_masks(tok, syntax), None)


def _text_masks(tok: Tokenizer, syntax: RawTextSyntax) -> TextFrameMasks:
    return text_frame_masks(tok, syntax.close, tok.token_id(syntax.close) if syntax.close_is_token else None)


def _value_guards(tok: Tokenizer, syntax: RawTextSyntax, masks: TextFrameMasks, tool: NormalizedTool | None) -> ValueGuards | None:
    """The guards of ``tool``'s raw values (of an unknown tool: those every
    tool has). A closing token may be spelled out as text, which the parser
    could not tell from it, so it is a guard too."""
    spelled = (syntax.close,) if syntax.close_is_token and not syntax.text_may_spell_close else ()
    texts = (*syntax.value_guards(tool), *spelled)
    return value_guards(tok, masks, tuple(t.encode("utf-8") for t in texts), syntax.value_lead.encode("utf-8"))
