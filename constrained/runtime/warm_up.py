"""The warm-up of a tool set's mask cache: the masks of the paths its
requests walk, computed once per tool set before the first request needs
them (:func:`warm_mask_cache`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .mask_cache import MaskCache, mask_cache

if TYPE_CHECKING:
    from ..compiler import CompiledTools
    from .constraint import ToolCallConstraint

_TRUNK_STEPS = 64
"""The most steps :func:`warm_mask_cache` walks from the start (a forced run is shorter)."""
_HEAD_TOOLS = 16
"""Tool sets of at most this many tools also have a call of each tool warmed."""
_CALL_TOKENS = 256
"""The most tokens of each tool's example call :func:`warm_mask_cache` walks."""



def warm_mask_cache(compiled: CompiledTools) -> None:
    """Fill ``compiled``'s mask cache along the paths requests of the tool
    set walk: the tokens the grammar forces from the start and the mask of
    the first choice, then (up to 16 tools) one call of each tool with
    example arguments (:func:`~constrained.frames.examples.example_arguments`;
    without any, a call with none), and the other calls of
    :func:`~constrained.frames.examples.warm_up_arguments`: with fractions
    and negative numbers where the tool takes any number or integer (masks
    there are one per state of the number's text: ``0.5`` and ``0`` reach
    the states after a leading zero, a point and a decimal, ``-0.5`` and
    ``-1`` the state after a minus, and the tokens a value begins with may
    hold the bytes before it, ``[0`` or ``[-``), without each optional key
    and with each alone, with every enum at each of its values (nested ones
    too), booleans false, arrays empty, unions' other options and values of
    any type of other types, for as long as the grammar allows their
    tokens; then the first call twice, where the grammar allows a second
    call. Once a value that leaves no trace is closed, the masks after it
    serve every call that writes the same keys (:mod:`.cache_walk`),
    so the walk computes the markup of the tool's keys, the closings of its
    values and the end of the call. These are llguidance's costliest masks
    (100-200 us on a grammar it has not used: its lexer states are built on
    first use), so an engine computes them where it compiles, on its compile
    thread, and the decoding step finds them cached; in a loop of one's own
    the first constraint computes them before its first mask. The walks stop once
    the rows held take half the cache's room, the rest being left to requests, and
    the rows kept are indexed by the tokens they forbid (as their first
    reuse would). The cache then holds what those calls, made as requests,
    would have left there.

    Done once per tool set, by whichever comes first: this call, or the
    first :class:`ToolCallConstraint` made from ``compiled`` (so a loop of
    one's own finds the cache warmed without asking)."""
    if mask_cache(compiled).claim_warm_up():
        walk_warm_up(compiled)


def walk_warm_up(compiled: CompiledTools) -> None:
    """:func:`warm_mask_cache`'s walks, by the caller that claimed them."""
    from ..dialects import get_dialect
    from ..frames.examples import warm_up_arguments
    from ..output.render import render_tool_calls
    from .constraint import ToolCallConstraint  # the constraint warms the cache it is made with

    cache = mask_cache(compiled)
    constraint = ToolCallConstraint(compiled)
    constraint.prepare_host()
    for _ in range(_TRUNK_STEPS):
        constraint.fill_masks()
        forced = constraint.forced_tokens(0)
        if not forced:
            break
        constraint.consume_row(0, forced[:1])
    tools = compiled.tools if len(compiled.tools) <= _HEAD_TOOLS else ()
    variants = [warm_up_arguments(tool) for tool in tools]
    # Every tool's first call, then every tool's second, and so on: the
    # walks may stop at half the cache's rows.
    calls = [(tool, arguments[turn]) for turn in range(max(map(len, variants), default=0))
             for tool, arguments in zip(tools, variants) if turn < len(arguments)]
    # Where the output starts inside a reasoning block the prompt opened,
    # the calls come after its closing.
    block = get_dialect(compiled.dialect).reasoning_block() if compiled.reasoning == "open" else None
    lead = block.closing if block is not None else ""
    for tool, arguments in calls:
        if _half_full(cache):
            break  # the rest of the cache's room is left to requests
        constraint.rollback(constraint.held(0))
        text = render_tool_calls([{"name": tool.name, "arguments": arguments}], compiled.tools, compiled.dialect,
                                 key_order=compiled.key_order)
        _walk_call(constraint, cache, lead + text)
    if calls and not _half_full(cache):  # a second call after the first, where the grammar allows one
        constraint.rollback(constraint.held(0))
        twice = [{"name": calls[0][0].name, "arguments": calls[0][1]}] * 2
        _walk_call(constraint, cache, lead + render_tool_calls(twice, compiled.tools, compiled.dialect,
                                                               key_order=compiled.key_order))
    cache.index_rows()


def _walk_call(constraint: ToolCallConstraint, cache: MaskCache, text: str) -> None:
    """Feed row 0 the rendered call ``text`` as a model writes it under the
    mask, filling the mask before each token and after the call, for at
    most :data:`_CALL_TOKENS` tokens. Where the tokenizer merged bytes the
    grammar forces with the text after them (Gemma's ``:-`` before a
    negative number), the forced token is fed and the rest tokenized anew;
    the walk stops at any other token the grammar does not allow, and once
    the rows held take half ``cache``'s room (the constraint's)."""
    tok = constraint.compiled.tokenizer
    ids = tok.encode(text)
    at = 0
    for _ in range(_CALL_TOKENS):
        if _half_full(cache):
            return
        constraint.fill_masks()
        if at == len(ids):
            return  # the mask after the call is filled: another call or the end
        token = ids[at]
        if not constraint.mask_allows(0, token):
            forced = constraint.forced_tokens(0)
            rest = tok.decode(ids[at:])
            piece = tok.decode(forced[:1])
            if not forced or not rest.startswith(piece):
                return
            token, ids, at = forced[0], [forced[0], *tok.encode(rest[len(piece):])], 0
        constraint.consume_row(0, [token])
        at += 1
        if constraint.is_finished(0):
            return


def _half_full(cache: MaskCache) -> bool:
    """Whether the warm-up has used its share of ``cache``'s room for rows: a
    request that goes past the cache's size starts it over, warm-up included."""
    return cache.bytes >= cache.max_bytes // 2


