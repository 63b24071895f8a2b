"""The fuzzer's records: how a walk samples (:class:`WalkOptions`), how it
ended (:class:`Outcome`), one walk (:class:`FuzzRun`, with the command that
replays it) and counts over many (:class:`FuzzSummary`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..errors import ArgumentError
from ..options import CompileOptions, Flag, command_line, option
from ..output.parse import ParseResult
from .fuzz_samplers import SAMPLERS


class Outcome(Enum):
    """How a walk ended."""

    FINISHED = "finished"
    """The grammar completed (its end token was consumed)."""
    BUDGET_EXHAUSTED = "budget exhausted"
    """The token budget ran out first."""
    WEDGE = "wedge"
    """The grammar was unfinished and the mask allowed no token."""
    ERROR = "error"
    """Something raised, the constraint refused a token its mask allowed, or
    the mask differed from llguidance's (cross-check)."""


@dataclass(frozen=True)
class WalkOptions:
    """How a walk samples and what it checks.

    ``sampler``: one of :data:`SAMPLERS`. ``budget``: most tokens consumed
    (rolled back ones count too). ``crosscheck_every=N`` (N > 0): compare
    every N-th mask with a plain llguidance matcher fed the same tokens, and
    with the logits :meth:`~ToolCallConstraint.apply` masks. ``fast_forward``:
    feed the tokens the grammar forces with ``consume_row``, unsampled, as
    ``constrained.runtime.generate`` does. ``rollback``: now and then take
    back a few tokens, as speculative decoding does.
    """

    sampler: str = option(
        "steered",
        Flag("--sampler", "uniform over the allowed tokens, or steered towards structure", SAMPLERS, always=True),
    )
    budget: int = option(256, Flag("--budget", "most tokens per walk", always=True))
    crosscheck_every: int = option(
        0, Flag("--crosscheck", "compare every N-th mask with llguidance's own; 0 never", metavar="N")
    )
    fast_forward: bool = option(False, Flag("--fast-forward", "feed the tokens the grammar forces unsampled"))
    rollback: bool = option(False, Flag("--rollback", "now and then take back a few tokens"))

    def __post_init__(self) -> None:
        if self.sampler not in SAMPLERS:
            raise ArgumentError(
                f"unknown sampler {self.sampler!r}; expected one of {', '.join(SAMPLERS)}", argument="sampler"
            )
        if self.budget < 1:
            raise ArgumentError(f"budget must be at least 1, got {self.budget}", argument="budget")
        if self.crosscheck_every < 0:
            raise ArgumentError(
                f"crosscheck_every must not be negative (0: never), got {self.crosscheck_every}",
                argument="crosscheck_every",
            )


@dataclass(frozen=True)
class FuzzRun:
    """One walk: its settings, how it ended, the tokens and their text, and
    for a finished output the parse and what is wrong with it (``problems``,
    empty when the output is a valid answer)."""

    dialect: str
    compile_options: CompileOptions
    """The options the walked constraint was compiled with."""
    seed: int
    options: WalkOptions
    outcome: Outcome
    tokens: tuple[int, ...]
    text: str
    parsed: ParseResult | None = None
    problems: tuple[str, ...] = ()
    detail: str = ""
    """What went wrong, for a wedge or an error."""
    precomputed_steps: int = 0
    """Steps whose mask was a precomputed raw-text row."""
    cached_steps: int = 0
    """Steps whose mask came from the mask cache (earlier walks of the same
    compiled set fill it)."""
    seconds: float = 0.0
    """How long the walk took, checks included."""

    @property
    def tool_choice(self) -> str:
        return self.compile_options.tool_choice

    @property
    def parallel_tool_calls(self) -> bool:
        return self.compile_options.parallel_tool_calls

    @property
    def valid(self) -> bool:
        return self.outcome is Outcome.FINISHED and not self.problems

    @property
    def failed(self) -> bool:
        """A wedge, an error, or a finished output that is not valid."""
        return self.outcome in (Outcome.WEDGE, Outcome.ERROR) or bool(self.problems)

    def replay_options(self) -> str:
        """The ``constrained fuzz`` options that repeat this walk (after TOOLS)."""
        return (
            f"--dialect {self.dialect} {command_line(self.compile_options)} {command_line(self.options)} "
            f"--seed {self.seed} --runs 1"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "dialect": self.dialect,
            "tool_choice": self.tool_choice,
            "parallel_tool_calls": self.parallel_tool_calls,
            "sampler": self.options.sampler,
            "seed": self.seed,
            "outcome": self.outcome.value,
            "problems": list(self.problems),
            "detail": self.detail,
            "text": self.text,
            "replay": self.replay_options(),
        }


@dataclass
class FuzzSummary:
    """Counts over many walks, with the first ``keep`` failing ones."""

    runs: int = 0
    finished: int = 0
    valid: int = 0
    wedges: int = 0
    errors: int = 0
    budget_exhausted: int = 0
    precomputed_steps: int = 0
    cached_steps: int = 0
    failures: list[FuzzRun] = field(default_factory=list)
    keep: int = 5

    @property
    def invalid(self) -> int:
        return self.finished - self.valid

    @property
    def ok(self) -> bool:
        """No wedge, no error, every finished output valid."""
        return not (self.wedges or self.errors or self.invalid)

    def add(self, run: FuzzRun) -> None:
        self.runs += 1
        self.finished += run.outcome is Outcome.FINISHED
        self.valid += run.valid
        self.wedges += run.outcome is Outcome.WEDGE
        self.errors += run.outcome is Outcome.ERROR
        self.budget_exhausted += run.outcome is Outcome.BUDGET_EXHAUSTED
        self.precomputed_steps += run.precomputed_steps
        self.cached_steps += run.cached_steps
        if run.failed and len(self.failures) < self.keep:
            self.failures.append(run)

    def merge(self, other: FuzzSummary) -> None:
        for name in ("runs", "finished", "valid", "wedges", "errors", "budget_exhausted", "precomputed_steps",
                     "cached_steps"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.failures.extend(other.failures[: max(0, self.keep - len(self.failures))])

    def counts(self) -> dict[str, int]:
        return {
            "runs": self.runs,
            "finished": self.finished,
            "valid": self.valid,
            "invalid": self.invalid,
            "wedges": self.wedges,
            "errors": self.errors,
            "budget_exhausted": self.budget_exhausted,
        }
