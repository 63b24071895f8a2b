"""One sequence of a :class:`~constrained.runtime.constraint.ToolCallConstraint`:
its llguidance matcher, where it stands, and what its rollback needs.

The batch holds one :class:`Row` per sequence, as XGrammar's batch matcher
holds one matcher per sequence; a row's fields are read on every token,
so it keeps them in ``__slots__``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from ..errors import ConstraintError

if TYPE_CHECKING:
    from .arguments_tracker import ArgumentsSnapshot, ArgumentsTracker
    from .frame_tracker import FrameTracker, TrackerSnapshot
    from .mask_cache import MaskNode


class RowState(Enum):
    """Where one sequence of the batch stands."""

    ACTIVE = "active"
    """The grammar governs the next token."""
    FINISHED = "finished"
    """The grammar is complete; only end-of-generation tokens are allowed."""
    RELEASED = "released"
    """A forbidden token was fed; the sequence continues unconstrained."""
    STOPPED = "stopped"
    """A forbidden token was fed; only end-of-generation tokens are allowed."""


OnViolation = Literal["unconstrained", "stop"]
ON_VIOLATION = ("unconstrained", "stop")


@dataclass(frozen=True)
class ConstraintEvent:
    """A token the grammar did not allow was fed to sequence ``row``, after
    ``position`` tokens of its output; the row went to ``state``."""

    row: int
    position: int
    token_id: int
    token: str
    state: RowState

    def __str__(self) -> str:
        return (
            f"sequence {self.row}: token {self.token_id} ({self.token!r}) at output position "
            f"{self.position} is not allowed by the grammar; the sequence is now {self.state.value}"
        )


class HistoryEntry(NamedTuple):
    """A token a row holds (end tokens aside), with what stood before it:
    its follower's snapshot and its places in the mask cache (:class:`Row`'s
    fields of the same names), for rollback."""

    token: int
    snapshot: TrackerSnapshot | ArgumentsSnapshot | None
    node: MaskNode | None
    value_start: MaskNode | None
    call_node: MaskNode | None
    skeleton: MaskNode | None
    kept: tuple[MaskNode | None, ...]


new_entry = tuple.__new__
"""Makes a :class:`HistoryEntry` from a tuple: one is made at every token,
and the named tuple's own constructor costs 0.3 us more."""


class Row:
    """One sequence's state under the grammar."""

    __slots__ = (
        "matcher", "state", "consumed", "unfed", "unmatched", "ended", "masked", "follower", "tracker", "node",
        "value_start", "call_node", "skeleton", "kept", "misses", "history", "mask_at", "forced",
    )

    def __init__(self, matcher: Any, follower: FrameTracker | ArgumentsTracker | None, tracker: FrameTracker | None,
                 root: MaskNode | None) -> None:
        self.matcher = matcher
        self.state = RowState.ACTIVE
        self.consumed = 0
        """Tokens the row holds under the grammar."""
        self.unfed = 0
        """How many of its last tokens held (in :attr:`history`) its matcher
        was not fed yet: a token its step's mask allowed is held without
        llguidance, which is fed only when it is asked (``_catch_up``)."""
        self.unmatched = 0
        """Tokens fed after a violation, the forbidden one included."""
        self.ended = False
        """The last token held is an end token (not in the matcher)."""
        self.masked = False
        """The host bitmask holds the row's mask for its next token."""
        self.follower = follower
        """What follows the row's markup: its frame tracker (raw-value
        dialects) or its arguments tracker (JSON arguments), if any."""
        self.tracker = tracker
        """The follower when it is a frame tracker, else None."""
        self.node = root
        """Where its history stands in the mask cache (None: not looked up)."""
        self.value_start: MaskNode | None = None
        """The node where its open raw value began (for a value of any text
        whose member alone decides what follows it, the member's node,
        which keeps its crossing tokens)."""
        self.call_node: MaskNode | None = None
        """Where its open call began."""
        self.skeleton: MaskNode | None = None
        """Where its JSON skeleton stands."""
        self.kept: tuple[MaskNode | None, ...] = ()
        """The places its JSON skeleton keeps to come back to (``JsonWalk.skeleton``)."""
        self.misses = 0
        """Cache misses since the last hit."""
        self.history: list[HistoryEntry] = []
        self.mask_at = -1
        """How many tokens it held when llguidance last computed its mask
        (-1: never, with this matcher); see :meth:`roll_back_matcher`."""
        self.forced: list[int] = []
        """The tokens llguidance said the grammar forces from here
        (``compute_ff_tokens``), dropped from the front as they are fed."""

    def restore(self, entry: HistoryEntry) -> None:
        """Stand where the row stood before ``entry``'s token."""
        _, snapshot, self.node, self.value_start, self.call_node, self.skeleton, self.kept = entry
        if self.follower is not None:
            self.follower.restore(snapshot)  # type: ignore[arg-type]

    def keyed_on_text(self) -> bool:
        """Whether the row's place in the cache is keyed by text written, so
        a run of misses may be text no other request writes: outside JSON
        the walk follows, or inside JSON where its skeleton keeps the text
        (``JsonWalk.keeps_text``). Misses in a JSON value's structure are
        its new places, which other requests meet."""
        walk = self.follower.walk if self.follower is not None else None
        return walk is None or walk.keeps_text

    def take_back(self, count: int) -> None:
        """Stand where the row stood before its last ``count`` tokens held,
        and forget those."""
        self.restore(self.history[-count])
        del self.history[-count:]

    def roll_back_matcher(self, row: int, count: int, fresh_matcher: Callable[[], Any]) -> None:
        """Take ``count`` tokens back from the matcher of the row (sequence
        ``row`` of its batch, for errors).

        llguidance keeps the last mask it computed, keyed by its lexer state
        and parser row index, and its rollback keeps it: tokens fed after a
        rollback can meet that key again in a different parser row and get
        that mask (after a string value that ends one tool's arguments, where
        ``"}`` may follow, the first string value of another tool, which
        still needs a key, allowed ``"}`` too). So when llguidance computed a
        mask past the point rolled back to, the row gets a new matcher
        (``fresh_matcher()``), fed the tokens it keeps (under 1 us a token)
        when llguidance is next asked; otherwise its own rollback is exact.
        Tokens the matcher was not fed are only forgotten."""
        kept = self.consumed - count
        unfed = min(count, self.unfed)
        self.unfed -= unfed
        count -= unfed
        if not count:
            return
        if self.mask_at <= kept:
            if not self.matcher.rollback(count):
                raise ConstraintError(f"sequence {row}: llguidance could not roll back {count} tokens")
            return
        self.matcher, self.mask_at, self.unfed = fresh_matcher(), -1, kept
