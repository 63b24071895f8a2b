"""Calls that close within a token budget.

A model that runs away inside a value (a string that never closes, an
array that repeats its items) fills its budget with a call cut in the
middle, which no parser can read. Given each sequence's budget, the
constraint instead keeps, at every step, a *closing plan*: a short token
sequence that completes the open call validly from where the sequence
stands (the open string closed, arrays ended where ``minItems`` allows,
the required keys filled with short valid values, the call closed). While
the budget left is larger than the plan plus a margin, the model writes
freely; nearer the end, only the tokens after which a complete output
still fits stay allowed (:meth:`CallBudget.narrow`), and with no token to
spare, only the plan's next one.

The plan is found by walking the grammar itself (:class:`ClosingSearch`,
llguidance's matcher as the oracle), never by cutting text: every plan
is a continuation the grammar accepts. The margin (:func:`growth_margin`)
covers what one token can open (a key whose value needs several tokens
to close), so a call that fits when the last free token is taken still
fits after it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, assert_never

import numpy as np

from ..caches import LruCache
from ..dialects import get_dialect
from ..errors import ArgumentError, BudgetError, ConstrainedError
from ..frames.model import (
    ArrayFrame,
    BooleanFrame,
    EnumFrame,
    Frame,
    FreeFrame,
    IntegerFrame,
    NullFrame,
    NumberFrame,
    ObjectFrame,
    RefFrame,
    StringFrame,
    UnionFrame,
)
from ..frames.toolset import normalize_tool
from ..tools import Tool

if TYPE_CHECKING:
    from ..compiler import CompiledTools
    from ..frames.toolset import NormalizedTool
    from ..tokenizers import Tokenizer

_PROBE = "VALUE"
"""The value of the probe call whose rendering shows the markup that closes a value."""
_PROBE_TOOL = Tool(
    "probe", "", {"type": "object", "properties": {"s": {"type": "string"}, "n": {"type": "integer"}}}, "openai"
)
_DEPTH = 8
"""Nesting :func:`minimal_value` follows (deeper values count as one token)."""
_MIN_MARGIN = 8
_LONGEST = 1 << 16
"""The longest plan from the start searched for."""
_FEW = 16
"""Where at most this many tokens are allowed near the end of a budget,
each is tried (:meth:`CallBudget._keep_fitting`)."""
_CLASSES = 7
"""The classes of the fallback order (:func:`_token_class`)."""


class ClosingSearch:
    """Finds a short continuation that completes the open call from a
    matcher's state, for one compiled tool set.

    Each step takes the tokens the grammar forces; else the first closing
    the grammar accepts here that really closes (:meth:`_closing`): the
    markup the dialect writes after a value (from a rendered call, its
    longest prefix first), the reasoning closing, a quote, a bracket, a
    separator; else one allowed token in a fixed order (digits,
    punctuation, letters, the rest), preferring one not taken yet so a
    pattern's repeated class meets what follows it.
    The search ends where an end-of-turn token is allowed."""

    def __init__(self, compiled: CompiledTools) -> None:
        tok = compiled.tokenizer
        dialect = get_dialect(compiled.dialect)
        self._vocab = tok.vocab_size
        self._candidates = _closing_candidates(compiled)
        self._rank = _fallback_rank(tok)
        self.plain_words = _plain_words(tok, b"".join(tok.decode(c).encode() for c in self._candidates))
        """The packed mask of plain-text tokens: none of the bytes that begin
        or close markup (those of the closing candidates, brackets, quotes,
        separators, backslash, line breaks) and no special token."""
        markers = (*dialect.markup.turn_ends, *dialect.markup.ends_after_calls)
        ends = {tok.token_id(marker) for marker in markers} | set(tok.eos_token_ids)
        self.ends = frozenset(e for e in ends if e is not None and e < tok.vocab_size)
        """The tokens that end the turn: where one is allowed, the output may end."""
        self._ends = np.array(sorted(self.ends), dtype=np.uint32)
        section = dialect.markup.section
        self.section_closing = len(tok.encode(section.inner + section.closing)) if section is not None else 0
        """The tokens of a calls section's closing: a plan no longer than it
        stands where another call may open in the section."""
        token = tok.token_id(dialect.markup.open)
        self.call_open = token if token is not None and tok.is_special(token) else None
        """The call opening, when it is one special token."""
        self.margin, self.call_margin = growth_margin(compiled)
        self._compiled = compiled
        self._starts: tuple[list[int] | None, int] | None = None

    def start(self) -> tuple[list[int] | None, int]:
        """The plan from the start of an output (``None``: longer than any
        budget a request may have, 1 << 16 tokens) and the margin where
        the output may end: :attr:`call_margin` or a whole call as the
        search writes one, with a quarter more. Found once."""
        if self._starts is None:
            matcher = self._compiled.matcher()
            plan = self.plan(matcher, _LONGEST)
            call = plan or []
            if self.call_open is not None and matcher.consume_token(self.call_open) and not matcher.is_error():
                call = self.plan(matcher, _LONGEST) or call
            self._starts = (plan, max(self.call_margin, len(call) + 1 + len(call) // 4))
        return self._starts

    def plan(self, matcher: Any, limit: int) -> list[int] | None:
        """The tokens of a completion from ``matcher``'s state (left as it
        is), or ``None`` when none of at most ``limit`` tokens was found."""
        walker = matcher.deep_copy()
        plan: list[int] = []
        taken: dict[int, int] = {}  # fallback tokens taken since the last closing
        while len(plan) <= limit:
            forced = walker.compute_ff_tokens()
            ending = next((i for i, token in enumerate(forced) if token in self.ends), None)
            if ending is not None:
                plan += forced[:ending]
                return plan if len(plan) <= limit else None
            if forced:
                walker.consume_tokens(forced)
                plan += forced
                continue
            words = _mask(walker)
            if not words.any():
                return None
            if self._ends_here(words):
                return plan
            step = self._closing(walker)
            if step is None:
                step = [self._fallback(self.allowed_ids(words), taken)]
            else:
                taken.clear()
            walker.consume_tokens(step)
            plan += step
        return None

    def completes(self, matcher: Any, plan: list[int]) -> bool:
        """Whether ``plan`` still completes the output from ``matcher``'s
        state (a token of a value's text taken: its closing still fits)."""
        if matcher.validate_tokens(plan) != len(plan):
            return False
        trial = matcher.deep_copy()
        trial.consume_tokens(plan)
        return self._ends_here(_mask(trial))

    def allowed_ids(self, words: np.ndarray) -> np.ndarray:
        """The tokens a packed mask allows, in order (only its nonzero words unpacked)."""
        nonzero = np.flatnonzero(words)
        bits = np.unpackbits(words[nonzero].view(np.uint8), bitorder="little").reshape(-1, 32)
        rows, slots = np.nonzero(bits)
        ids = nonzero[rows] * 32 + slots
        return ids[ids < self._vocab]

    def _ends_here(self, words: np.ndarray) -> bool:
        """Whether the packed mask allows an end token."""
        return bool((words[self._ends >> 5] >> (self._ends & 31) & 1).any())

    def _closing(self, matcher: Any) -> list[int] | None:
        """The first closing candidate the grammar accepts here that ends
        the turn or leads into markup: after it, an end token is allowed or
        under a quarter of the vocabulary (text that merely spells a
        closing leaves any text allowed)."""
        for candidate in self._candidates:
            if matcher.validate_tokens(candidate) != len(candidate):
                continue
            trial = matcher.deep_copy()
            trial.consume_tokens(candidate)
            after = _mask(trial)
            if self._ends_here(after) or 4 * int(np.bitwise_count(after).sum()) < self._vocab:
                return candidate
        return None

    def _fallback(self, allowed: np.ndarray, taken: dict[int, int]) -> int:
        """The allowed token first in the fallback order, a token taken fewer
        times since the last closing first (a pattern's class that repeats
        gives way to what follows it)."""
        ranks = self._rank[allowed]
        if taken:
            ids = np.fromiter(taken, dtype=np.int64, count=len(taken))
            counts = np.fromiter(taken.values(), dtype=np.int64, count=len(taken))
            where = np.searchsorted(allowed, ids)
            hit = (where < allowed.size) & (allowed[np.minimum(where, allowed.size - 1)] == ids)
            ranks = ranks.copy()
            ranks[where[hit]] += counts[hit] * (_CLASSES * self._vocab)
        token = int(allowed[int(np.argmin(ranks))])
        taken[token] = taken.get(token, 0) + 1
        return token


def _mask(matcher: Any) -> np.ndarray:
    """The matcher's packed mask for the next token."""
    return np.frombuffer(matcher.compute_bitmask(), dtype=np.uint32)


def _closing_candidates(compiled: CompiledTools) -> list[list[int]]:
    """Token sequences that close something in this dialect: every run of
    tokens of the markup a rendered call (in its section, where the dialect
    has one) writes after a string and after a number, from any of its
    tokens on (a model may stop writing markup at any token of it), longest
    first, none that is only whitespace; the reasoning closing, a quote,
    the brackets and the separator of values."""
    tok = compiled.tokenizer
    dialect = get_dialect(compiled.dialect)
    probe = normalize_tool(_PROBE_TOOL)
    texts: list[str] = []
    for arguments, value in (({"s": _PROBE}, _PROBE), ({"n": 7}, "7")):
        call = dialect.markup.calls_text([dialect.render_call(probe, arguments, "schema")])  # in its section
        tail = tok.encode(call[call.rfind(value) + len(value):])
        texts += [tok.decode(tail[start:end]) for start in range(len(tail)) for end in range(len(tail), start, -1)]
    block = dialect.reasoning_block()
    if block is not None:
        texts.append(block.closing)
    texts += ['"', "]", "}", ","]
    candidates: list[list[int]] = []
    for text in texts:
        tokens = tok.encode(text)
        if text.strip() and tokens not in candidates:  # whitespace closes nothing
            candidates.append(tokens)
    return sorted(candidates, key=len, reverse=True)


_ranks: LruCache[str, np.ndarray] = LruCache("fallback token ranks", 8)
"""By tokenizer fingerprint."""


def _fallback_rank(tok: Tokenizer) -> np.ndarray:
    """Per token, its place in the fallback order: single digits, then
    other single punctuation, single letters, ``-``, other text, special
    tokens (markup), whitespace; by id within each class."""
    return _ranks.get_or_make(tok.fingerprint, lambda: _ranked(tok))


def _ranked(tok: Tokenizer) -> np.ndarray:
    table, specials = tok.token_table[0], tok.token_table[1]
    classes = np.full(tok.vocab_size, 5, dtype=np.int64)
    for token in range(min(len(table), tok.vocab_size)):
        if token not in specials:
            classes[token] = _token_class(table[token])
    return classes * tok.vocab_size + np.arange(tok.vocab_size, dtype=np.int64)


_plains: LruCache[tuple[str, bytes], np.ndarray] = LruCache("plain token masks", 32)
"""By tokenizer fingerprint and structural bytes."""


def _plain_words(tok: Tokenizer, closings: bytes) -> np.ndarray:
    """The packed mask of the tokens with none of ``closings``' bytes nor
    the structural bytes of any value syntax, and not special."""
    structural = frozenset(closings + b'"\\,:{}[]<>\n\r')
    return _plains.get_or_make((tok.fingerprint, bytes(sorted(structural))), lambda: _plain(tok, structural))


def _plain(tok: Tokenizer, structural: frozenset[int]) -> np.ndarray:
    table, specials = tok.token_table[0], tok.token_table[1]
    plain = np.zeros(((tok.vocab_size + 31) // 32) * 32, dtype=bool)
    for token in range(min(len(table), tok.vocab_size)):
        data = table[token]
        plain[token] = bool(data) and token not in specials and structural.isdisjoint(data)
    return np.packbits(plain, bitorder="little").view(np.uint32)


def _token_class(data: bytes) -> int:
    if len(data) == 1 and 0x21 <= data[0] <= 0x7E:
        char = chr(data[0])
        return 0 if char.isdigit() else 2 if char.isalpha() else 3 if char == "-" else 1
    return 6 if not data or data.isspace() else 4


def growth_margin(compiled: CompiledTools) -> tuple[int, int]:
    """How many tokens one token may add to a closing plan, at most, inside
    a call and where a call may open: the tokens of the shortest value
    with its key for every member at any depth (a key or an item begun),
    and of the shortest call of the largest tool. Estimates from minimal
    values written out, with a quarter more for the search's detours,
    never below 8."""
    tok = compiled.tokenizer
    dialect = get_dialect(compiled.dialect)
    member = call = _MIN_MARGIN
    for tool in compiled.tools:
        arguments = minimal_value(tool.root, tool.schema.definitions)
        try:
            text = dialect.render_call(tool, arguments, "schema")
        except ConstrainedError:  # a minimal value the renderer refuses (a pattern): its JSON stands in
            text = json.dumps({"name": tool.name, "arguments": arguments})
        call = max(call, len(tok.encode(text)))
        for key, frame in _members(tool):
            written = json.dumps({key: minimal_value(frame, tool.schema.definitions)}, ensure_ascii=False)
            member = max(member, len(tok.encode(written)) + 2)
    return member + member // 4, call + call // 4


def _members(tool: NormalizedTool) -> list[tuple[str, Frame]]:
    """Every member and item frame of ``tool``, at any depth (references
    followed once)."""
    found: list[tuple[str, Frame]] = []
    seen: set[str] = set()
    stack: list[Frame] = [tool.root]
    while stack:
        frame = stack.pop()
        if isinstance(frame, RefFrame):
            if frame.name in seen or frame.name not in tool.schema.definitions:
                continue
            seen.add(frame.name)
            stack.append(tool.schema.definitions[frame.name])
        elif isinstance(frame, ObjectFrame):
            found += list(frame.properties)
            stack += [member for _, member in frame.properties]
            if frame.additional is not None:
                stack.append(frame.additional)
        elif isinstance(frame, ArrayFrame):
            items = [*frame.prefix_items, *([frame.items] if frame.items is not None else [])]
            found += [("", item) for item in items]
            stack += items
        elif isinstance(frame, UnionFrame):
            stack += list(frame.options)
    return found


def minimal_value(frame: Frame, definitions: Mapping[str, Frame], depth: int = 0) -> Any:
    """A short value for ``frame``, for counting tokens: required keys
    only, the fewest items, the shortest strings, the smallest numbers."""
    if depth > _DEPTH:
        return 0
    match frame:
        case RefFrame():
            target = definitions.get(frame.name)
            return minimal_value(target, definitions, depth + 1) if target is not None else 0
        case UnionFrame():
            values = [minimal_value(option, definitions, depth + 1) for option in frame.options]
            return min(values, key=lambda v: len(json.dumps(v)), default=0)
        case ObjectFrame():
            members = dict(frame.properties)
            return {key: minimal_value(members[key], definitions, depth + 1) if key in members else 0
                    for key in frame.required}
        case ArrayFrame():
            items = [*frame.prefix_items, *[frame.items] * frame.min_items][:frame.min_items]
            return [minimal_value(item, definitions, depth + 1) if item is not None else 0 for item in items]
        case StringFrame():
            return "x" * max(frame.min_length, 8 if frame.patterns or frame.format else 0)
        case EnumFrame():
            return min(frame.values, key=lambda v: len(json.dumps(v)), default=0)
        case IntegerFrame() | NumberFrame():
            return frame.minimum if frame.minimum is not None else 0
        case BooleanFrame():
            return True
        case NullFrame():
            return None
        case FreeFrame():
            return 0
        case _:
            assert_never(frame)


class CallBudget:
    """The closing plans of a constraint's rows, each with its budget: the
    most tokens the row may hold.

    A row's plan is kept while the row takes the plan's tokens; after
    another token it may have grown by at most :attr:`margin` tokens, and
    it is checked (most tokens of a value's text leave its closing as it
    was) or found again only when the budget left comes near that bound."""

    def __init__(self, compiled: CompiledTools, budgets: Sequence[int]) -> None:
        """Refuse budgets the plan from the start does not fit, before
        anything is generated; every row begins with that plan."""
        bad = [b for b in budgets if b < 1]
        if bad:
            raise ArgumentError(f"a budget must be at least 1 token, got {bad[0]}", argument="budget")
        self.budgets = list(budgets)
        self.search = closing_search(compiled)
        plan, self.call_margin = self.search.start()
        self.margin = self.search.margin
        short = min(self.budgets)
        if plan is None or len(plan) > short:
            needed = f"more than {_LONGEST}" if plan is None else str(len(plan))
            raise BudgetError(
                f"a budget of {short} tokens cannot hold a complete output: the shortest these tools and this "
                f"tool_choice allow needs {needed} tokens; raise the budget (max_new_tokens)",
                needed=None if plan is None else len(plan),
            )
        self.closed = [False] * len(budgets)
        """Per row, whether a plan's token was the only one allowed (a value
        may have been cut short to close the call)."""
        self._plans: list[list[int] | None] = [list(plan) for _ in budgets]
        self._stale = [False] * len(budgets)  # a token other than the plan's was taken since it was found
        self._bounds = [len(plan)] * len(budgets)  # the most tokens the row's plan may have now
        self.overruns = 0
        """Times a row's plan was longer than its budget left (the margin was short)."""

    def narrow(self, row: int, held: int, words: np.ndarray, matcher: Callable[[], Any]) -> bool:
        """Narrow ``row``'s packed mask ``words`` (as the grammar filled it)
        to what still closes within its budget, having taken ``held``
        tokens (:meth:`_keep_fitting`); with no token to spare, to the
        plan's next token. ``matcher`` gives the row's matcher, caught up,
        should the plan need checking or finding again. Whether the mask
        changed."""
        left = self.budgets[row] - held
        if left > self._bounds[row] + self.call_margin:
            return False
        plan = self._plans[row]
        if plan is None or self._stale[row]:
            plan = self._plan_again(row, matcher(), left)
            if plan is None:
                return False
        if len(plan) > left:
            self.overruns += 1
        if left > len(plan) + self._margin(plan):
            return False
        if plan and left <= len(plan):
            words.fill(0)
            words[plan[0] >> 5] = np.uint32(1 << (plan[0] & 31))
            self.closed[row] = True
        else:
            self._keep_fitting(words, matcher, left, plan)
        return True

    def _keep_fitting(self, words: np.ndarray, matcher: Callable[[], Any], left: int, plan: list[int]) -> None:
        """Keep the plan's next token, the end tokens, and the allowed
        tokens after which a complete output fits in what is ``left``:
        where few are allowed (markup), each is tried; where many (text),
        those of plain text (no byte that may close or open anything: the
        plan still closes after them) inside a call, and every one but the
        call opening where the output may end."""
        allowed = self.search.allowed_ids(words)
        if allowed.size > _FEW:
            opening = self.search.call_open
            if plan:
                np.bitwise_and(words, self.search.plain_words[: len(words)], out=words)
                words[plan[0] >> 5] |= np.uint32(1 << (plan[0] & 31))
            elif opening is not None:
                words[opening >> 5] &= ~np.uint32(1 << (opening & 31))
            return
        caught_up = matcher()
        for token in allowed.tolist():
            if token in self.search.ends or (plan and token == plan[0]):
                continue
            trial = caught_up.deep_copy()
            if not trial.consume_token(token) or self.search.plan(trial, left - 1) is None:
                words[token >> 5] &= ~np.uint32(1 << (token & 31))

    def _plan_again(self, row: int, matcher: Any, left: int) -> list[int] | None:
        """The row's plan, checked (it still completes) or found again."""
        plan = self._plans[row]
        if plan is None or not self.search.completes(matcher, plan):
            plan = self.search.plan(matcher, left + self.margin)
        self._plans[row], self._stale[row] = plan, False
        if plan is None:
            self.overruns += 1
            self._bounds[row] = left  # look again after the next token
            return None
        self._bounds[row] = len(plan)
        return plan

    def fed(self, row: int, token: int) -> None:
        """``row`` took ``token``."""
        plan = self._plans[row]
        if plan and plan[0] == token and not self._stale[row]:
            del plan[0]
            self._bounds[row] = len(plan)
        else:
            self._stale[row] = True
            self._bounds[row] += self._margin(plan)

    def _margin(self, plan: list[int] | None) -> int:
        """How many tokens the next token may add to ``plan``: a call's
        where one may open (the output may end, or only a calls section's
        closing is left), else a member's."""
        return self.call_margin if not plan or len(plan) <= self.search.section_closing else self.margin

    def forget(self, row: int) -> None:
        """``row`` was rolled back: its plan is found again at the next step
        (its bound unknown, as large as the budget)."""
        self._plans[row] = None
        self._stale[row] = False
        self._bounds[row] = self.budgets[row]


def require_budget(compiled: CompiledTools, budget: int) -> None:
    """Raise :class:`~constrained.errors.BudgetError` now when no complete
    output of ``compiled`` fits in ``budget`` tokens (what a constraint
    given that budget raises when it is made, for a caller that makes it
    later, inside an engine's loop)."""
    CallBudget(compiled, [budget])


_searches: LruCache[tuple[str, str], ClosingSearch] = LruCache("closing searches", 64)
"""By the compiled set's fingerprint and grammar."""


def closing_search(compiled: CompiledTools) -> ClosingSearch:
    """The :class:`ClosingSearch` of ``compiled``, made once per grammar."""
    return _searches.get_or_make((compiled.fingerprint, compiled.grammar), lambda: ClosingSearch(compiled))


def call_budget(compiled: CompiledTools, batch_size: int, budget: int | Sequence[int] | None) -> CallBudget | None:
    """The rows' budgets (one for all, or one per row), checked against the
    shortest complete output before anything is generated."""
    if budget is None:
        return None
    budgets = [budget] * batch_size if isinstance(budget, int) else [int(b) for b in budget]
    if len(budgets) != batch_size:
        raise ArgumentError(f"budget needs one value per row ({batch_size}), got {len(budgets)}", argument="budget")
    return CallBudget(compiled, budgets)
