"""Tool constraints inside a serving engine, independent of which engine.

A server renders prompts in one process and samples in another, so a
request's tools travel between them as data: :class:`ToolsRequest` is that
description (JSON, small, what an engine's per-request ``extra_args`` can
carry), and compiling it is cached by its content (:func:`compile_tools`).
:class:`EngineRows` holds one constraint per request in the engine's
persistent batch, keyed by the request's row, follows the engine's adds,
removals and moves, catches each row up on the tokens it sampled, and masks
only the rows of requests that carry tools: every other row's logits are
left exactly as they were.

A tool set not compiled before is compiled on a background thread
(:meth:`ToolsRequest.compile_in_background`): the engine's step that admits
the request goes on, the forward pass runs meanwhile, and the batch waits
only for what is left of the compile when the request's first sampled row
needs its mask.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Union

from ..caches import LruCache
from ..compiler import CompiledTools, compile_tools
from ..dialects.base import Dialect
from ..errors import (
    ArgumentError,
    BudgetError,
    ConstrainedError,
    OptionError,
    SchemaLimitError,
    UnsatisfiableSchemaError,
)
from ..frames.toolset import normalize_tool_set
from ..options import Reasoning, check_reasoning
from ..tokenizers import Tokenizer
from .budget import require_budget
from .constraint import OnViolation, ToolCallConstraint, fill_masks_together, warm_mask_cache

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

EXTRA_ARGS_KEY = "constrained_tools"
"""The key of a request's ``extra_args`` that holds its :class:`ToolsRequest`."""


@dataclass(frozen=True)
class ToolsRequest:
    """What one request asks of the constraint: its dialect, its tools as
    the client sent them (OpenAI ``tools`` entries), ``tool_choice``
    (``"auto"``, ``"required"`` or a tool's name) and whether several calls
    may follow one another."""

    dialect: str
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: str = "auto"
    parallel_tool_calls: bool = True
    reasoning: Reasoning = True

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: Any) -> ToolsRequest:
        """Read a description written by :meth:`to_json`; an
        :class:`ArgumentError` says what is wrong with any other value."""
        try:
            data = json.loads(text) if isinstance(text, str) else None
        except ValueError as e:
            raise ArgumentError(f"{EXTRA_ARGS_KEY}: not JSON ({e})", argument=EXTRA_ARGS_KEY) from e
        if not isinstance(data, dict) or not isinstance(data.get("dialect"), str):
            raise ArgumentError(
                f"{EXTRA_ARGS_KEY} must be a JSON object with a 'dialect' string, got {str(text)[:80]!r}",
                argument=EXTRA_ARGS_KEY,
            )
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ArgumentError(f"{EXTRA_ARGS_KEY}: unknown fields {unknown}", argument=EXTRA_ARGS_KEY)
        if not isinstance(known.get("tools", []), list):
            raise ArgumentError(f"{EXTRA_ARGS_KEY}: 'tools' must be a list", argument=EXTRA_ARGS_KEY)
        try:
            check_reasoning(known.get("reasoning", True))
        except OptionError as e:
            raise ArgumentError(f"{EXTRA_ARGS_KEY}: {e}", argument=EXTRA_ARGS_KEY) from None
        return cls(**known)

    def check(self) -> None:
        """Raise the error of the first tool whose definition is malformed
        (not a function tool, no name, a schema that is not a schema, a name
        used twice), naming the tool. Tools that are well formed but cannot
        be constrained (unsatisfiable, past a limit) are not errors here:
        compiling leaves them out, logged, as the library does everywhere."""
        tool_set = normalize_tool_set(self.tools)
        for left in tool_set.left_out:
            if left.error is not None and not _unconstrainable(left.error):
                raise left.error

    def compile(self, tokenizer: Tokenizer | str) -> CompiledTools:
        """The constraint for this request (cached by content, so a server
        compiles each tool set once), with the masks its requests start
        with already in its mask cache (:func:`.warm_mask_cache`)."""
        compiled = compile_tools(
            self.tools,
            self.dialect,
            tokenizer,
            tool_choice=self.tool_choice,
            parallel_tool_calls=self.parallel_tool_calls,
            reasoning=self.reasoning,
        )
        for left in compiled.left_out:
            logger.warning("tool %r is left out of the constraint: %s", left.name, left.reason)
        warm_mask_cache(compiled)
        return compiled

    def compile_in_background(self, tokenizer: Tokenizer | str) -> Future[CompiledTools | None]:
        """:meth:`compile` on the engine's compile thread (one, so that
        compiles do not compete with each other for the cores the engine
        needs). The future holds ``None`` when the tools cannot be compiled
        (logged: the front end checked them, so this is rare)."""
        return _compiler().submit(self._compile_or_none, tokenizer)

    def _compile_or_none(self, tokenizer: Tokenizer | str) -> CompiledTools | None:
        try:
            return self.compile(tokenizer)
        except ConstrainedError as e:
            logger.error("a request runs unconstrained: its tools cannot be compiled: %s", e)
            return None


_compile_thread: ThreadPoolExecutor | None = None
_compile_thread_lock = threading.Lock()


def _compiler() -> ThreadPoolExecutor:
    """The one compile thread, started on first use (two requests admitted
    at once must not each start one)."""
    global _compile_thread
    with _compile_thread_lock:
        if _compile_thread is None:
            _compile_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="constrained-compile")
        return _compile_thread


_PROBE = "\u2063probe\u2063"
_template_reasoning: LruCache[tuple[str, ...], tuple[Reasoning | None]] = LruCache("chat template reasoning", 256)
"""By what renders the prompt (the tokenizer's class, name and template,
the template given, the arguments) and the dialect; a value is wrapped in
a tuple, as ``None`` is one."""


def template_reasoning(tokenizer: Any, dialect: Dialect, chat_template: str | None, kwargs: dict[str, Any]) -> Reasoning | None:
    """What the generation prompt of ``tokenizer``'s chat template (or
    ``chat_template``) says about reasoning with ``kwargs``
    (:meth:`Dialect.prompt_reasoning` of its tail after a probe user turn),
    or ``None`` when the template cannot be rendered or says nothing.
    Cached: the tail depends on the template and its arguments, not on the
    conversation."""
    try:
        arguments = json.dumps(kwargs, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return None
    templates = json.dumps([getattr(tokenizer, "chat_template", None), chat_template], sort_keys=True, default=str)
    name = str(getattr(tokenizer, "name_or_path", ""))
    key = (type(tokenizer).__qualname__, name, templates, dialect.name, arguments)
    found = _template_reasoning.get_or_make(key, lambda: (_rendered_reasoning(tokenizer, dialect, chat_template, kwargs),))
    return found[0]


def _rendered_reasoning(tokenizer: Any, dialect: Dialect, chat_template: str | None, kwargs: dict[str, Any]) -> Reasoning | None:
    """:func:`template_reasoning` uncached: the tail after a probe user turn."""
    try:
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": _PROBE}],
            chat_template=chat_template,
            add_generation_prompt=True,
            tokenize=False,
            **kwargs,
        )
    except Exception as exc:  # a template that needs more than one user turn, or none at all
        logger.debug("chat template not rendered for its reasoning state: %s", exc)
        return None
    tail = rendered.rpartition(_PROBE)[2] if isinstance(rendered, str) and _PROBE in rendered else None
    return None if tail is None else dialect.prompt_reasoning(tail)


def stream_pieces(deltas: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The library's stream deltas (:class:`~constrained.output.stream.ToolCallStreamParser`)
    as an engine's one streamed message takes them: the content joined, and
    the call fragments in order. A report of a streamed call rejected later
    is logged: its fragments cannot be taken back from the client."""
    content: list[str] = []
    calls: list[dict[str, Any]] = []
    for delta in deltas:
        if "content" in delta:
            content.append(delta["content"])
        calls.extend(delta.get("tool_calls", ()))
        for error in delta.get("tool_call_errors", ()):
            logger.warning("streamed tool call %s rejected when complete: %s", error["id"], error["reason"])
    return "".join(content), calls


Compiled = Union[CompiledTools, "Future[CompiledTools | None]"]
"""A request's compiled tools, or their compile still running."""


def _unconstrainable(error: Exception) -> bool:
    return isinstance(error, (UnsatisfiableSchemaError, SchemaLimitError))


class _Row:
    """One request's constraint (made once its compile is done) and the live
    list of its sampled tokens."""

    def __init__(self, compiled: Compiled, output_ids: Sequence[int], on_violation: OnViolation,
                 budget: int | None) -> None:
        self.compiled = compiled
        self.output_ids = output_ids
        self.on_violation: OnViolation = on_violation
        self.budget = budget
        self.fed = 0
        self._constraint: ToolCallConstraint | None = None

    def constraint(self) -> ToolCallConstraint | None:
        """The request's constraint, waiting for its compile if it still
        runs; ``None`` when its tools could not be compiled."""
        if self._constraint is None:
            compiled = self.compiled.result() if isinstance(self.compiled, Future) else self.compiled
            if compiled is None:
                return None
            self.compiled = compiled
            budget = self.budget
            if budget is not None:
                try:
                    require_budget(compiled, budget)
                except BudgetError as e:
                    logger.warning("a request's calls may be cut off at its token budget: %s", e)
                    budget = None
            self._constraint = ToolCallConstraint(compiled, 1, on_violation=self.on_violation, budget=budget)
        return self._constraint

    def catch_up(self, constraint: ToolCallConstraint) -> None:
        """Feed the tokens sampled since the last step. A negative id is a
        placeholder an engine fills in later (asynchronous scheduling): the
        row waits for it."""
        ids = self.output_ids
        while self.fed < len(ids) and ids[self.fed] >= 0:
            if not constraint.is_finished(0):
                constraint.consume((ids[self.fed],))
            self.fed += 1


class EngineRows:
    """The constraints of an engine's batch: row index -> the request there.

    Call :meth:`add`, :meth:`remove` and :meth:`move` as the engine changes
    its batch, then :meth:`apply` on each step's logits (rows x vocabulary,
    the engine's row order). Each request keeps its own matcher and mask
    buffers, allocated when it joins; a step allocates nothing."""

    def __init__(self, *, on_violation: OnViolation = "unconstrained") -> None:
        self.on_violation: OnViolation = on_violation
        self._rows: dict[int, _Row] = {}

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, index: int) -> bool:
        return index in self._rows

    def constraint(self, index: int) -> ToolCallConstraint | None:
        """The constraint of the request at ``index`` (waiting for its
        compile), or ``None`` when its tools could not be compiled."""
        return self._rows[index].constraint()

    def compiled(self, index: int) -> Compiled:
        """What :meth:`add` was given for the request at ``index``."""
        return self._rows[index].compiled

    def add(self, index: int, compiled: Compiled, output_ids: Sequence[int], budget: int | None = None) -> None:
        """Constrain the request now at ``index``; ``output_ids`` is its
        growing list of sampled tokens (already sampled ones are fed at the
        next :meth:`apply`, as after a preemption). ``compiled`` may be a
        compile still running (:meth:`ToolsRequest.compile_in_background`):
        the first :meth:`apply` that masks the row waits for it. ``budget``:
        the request's most output tokens, within which its calls then
        close (a budget no complete call fits is logged and not kept)."""
        self._rows[index] = _Row(compiled, output_ids, self.on_violation, budget)

    def remove(self, index: int) -> None:
        """The request at ``index`` left, or the one there now has no tools."""
        self._rows.pop(index, None)

    def move(self, source: int, target: int, *, swap: bool) -> None:
        """The request at ``source`` is now at ``target`` (and, with
        ``swap``, the one at ``target`` at ``source``)."""
        moved = self._rows.pop(source, None)
        other = self._rows.pop(target, None)
        if moved is not None:
            self._rows[target] = moved
        if swap and other is not None:
            self._rows[source] = other

    def apply(self, logits: torch.Tensor, placement: Mapping[int, int] | None = None) -> torch.Tensor:
        """Mask, in place, the rows of requests with tools; returns
        ``logits``. Without ``placement`` a request's key is its logits row;
        with it (an engine whose rows are reordered every step), only the
        requests it names are masked, each at the row it gives. Every
        request's mask is filled in one step
        (:func:`~constrained.runtime.constraint.fill_masks_together`)."""
        placed = placement.items() if placement is not None else [(key, key) for key in self._rows]
        rows = []
        for key, index in placed:
            row = self._rows[key]
            constraint = row.constraint()
            if constraint is None:  # its tools could not be compiled: served unconstrained
                del self._rows[key]
                continue
            row.catch_up(constraint)
            constraint.prepare(logits[index : index + 1])
            rows.append((index, constraint))
        fill_masks_together([constraint for _, constraint in rows])
        for index, constraint in rows:
            constraint.apply(logits[index : index + 1])
        return logits
