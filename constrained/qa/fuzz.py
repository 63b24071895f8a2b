"""Random-walk fuzzing of a compiled constraint (issue 7).

A walk drives :class:`~constrained.runtime.constraint.ToolCallConstraint` as a
decoding loop does (fill the host bitmask, pick a token it allows, consume
it), so the precomputed raw-text rows and the cheap consume path are
exercised, not only llguidance. It ends when the grammar finishes, when the
token budget runs out, when no token is allowed while the grammar is
unfinished (a wedge), or when something goes wrong (an exception, the
constraint refusing a token its own mask allowed, a mask that differs from a
plain llguidance matcher fed the same tokens). A finished output is parsed
and checked against the schema and ``tool_choice``: what the grammar lets
through must be a valid answer.

Two seeded samplers: ``uniform`` (uniform over the allowed set) and
``steered``, which leans towards structure so that walks reach the ends of
values and calls, which uniform sampling almost never does.
"""

from __future__ import annotations

import json
import re
import threading
import time
import traceback
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..compiler import TOOL_CHOICES, CompiledTools
from ..runtime.constraint import RowState, ToolCallConstraint
from ..dialects import get_dialect
from ..dialects.base import Markers
from ..output.parse import ParseResult, parse_tool_calls

if TYPE_CHECKING:
    from ..tokenizers import Tokenizer

SAMPLERS = ("uniform", "steered")


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
    ``constrained.runtime.generate`` does. ``rollback``: now and then take back a few
    tokens, as speculative decoding does.
    """

    sampler: str = "steered"
    budget: int = 256
    crosscheck_every: int = 0
    fast_forward: bool = False
    rollback: bool = False

    def __post_init__(self) -> None:
        if self.sampler not in SAMPLERS:
            raise ValueError(f"unknown sampler {self.sampler!r}; expected one of {', '.join(SAMPLERS)}")
        if self.budget < 1:
            raise ValueError(f"budget must be at least 1, got {self.budget}")
        if self.crosscheck_every < 0:
            raise ValueError(f"crosscheck_every must not be negative, got {self.crosscheck_every}")

    def cli_options(self) -> str:
        """These options as ``constrained fuzz`` takes them."""
        flags = [f"--sampler {self.sampler}", f"--budget {self.budget}"]
        flags += [f"--crosscheck {self.crosscheck_every}"] if self.crosscheck_every else []
        flags += ["--fast-forward"] if self.fast_forward else []
        flags += ["--rollback"] if self.rollback else []
        return " ".join(flags)


@dataclass(frozen=True)
class FuzzRun:
    """One walk: its settings, how it ended, the tokens and their text, and
    for a finished output the parse and what is wrong with it (``problems``,
    empty when the output is a valid answer)."""

    dialect: str
    tool_choice: str
    parallel_tool_calls: bool
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
    seconds: float = 0.0
    """How long the walk took, checks included."""

    @property
    def valid(self) -> bool:
        return self.outcome is Outcome.FINISHED and not self.problems

    @property
    def failed(self) -> bool:
        """A wedge, an error, or a finished output that is not valid."""
        return self.outcome in (Outcome.WEDGE, Outcome.ERROR) or bool(self.problems)

    def replay_options(self) -> str:
        """The ``constrained fuzz`` options that repeat this walk (after TOOLS)."""
        one_call = " --no-parallel" if not self.parallel_tool_calls else ""
        return (
            f"--dialect {self.dialect} --tool-choice {self.tool_choice}{one_call} {self.options.cli_options()} "
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
        if run.failed and len(self.failures) < self.keep:
            self.failures.append(run)

    def merge(self, other: "FuzzSummary") -> None:
        for name in ("runs", "finished", "valid", "wedges", "errors", "budget_exhausted", "precomputed_steps"):
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


# -- reading the bitmask ---------------------------------------------------------


def allowed_ids(words: np.ndarray, vocab_size: int) -> np.ndarray:
    """Every token id a bitmask row allows, from its nonzero words only."""
    nonzero = np.flatnonzero(words)
    bits = np.unpackbits(words[nonzero].view(np.uint8), bitorder="little").reshape(-1, 32)
    rows, columns = np.nonzero(bits)
    ids = nonzero[rows] * 32 + columns
    return ids[ids < vocab_size]


def _allows(words: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Per id of ``ids`` (int64), whether the row allows it."""
    return ((words[ids >> 5] >> (ids & 31).astype(np.uint32)) & 1).astype(bool)


def _allows_one(words: np.ndarray, token: int) -> bool:
    return bool((int(words[token >> 5]) >> (token & 31)) & 1)


# -- samplers ------------------------------------------------------------------------


class Sampler(Protocol):
    """Picks the next token from a filled bitmask row; ``None`` when the row
    allows nothing. One instance per walk (a sampler may keep a plan)."""

    def choose(self, words: np.ndarray, rng: np.random.Generator) -> int | None: ...


class UniformSampler:
    """Uniform over the allowed set: a few random ids tested against the
    row (rejection sampling: exact, and cheap when many tokens are allowed),
    else a draw from the allowed ids enumerated."""

    _TRIES = 16

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size

    def choose(self, words: np.ndarray, rng: np.random.Generator) -> int | None:
        ids = rng.integers(0, self.vocab_size, self._TRIES)
        hits = ids[_allows(words, ids)]
        if hits.size:
            return int(hits[0])
        allowed = allowed_ids(words, self.vocab_size)
        return int(allowed[rng.integers(allowed.size)]) if allowed.size else None


@dataclass(frozen=True)
class StructureTokens:
    """The tokens that carry a grammar's structure: special tokens, short
    punctuation and whitespace tokens, the token sequences of the grammar's
    literals (markup, key and tool names, ``true``/``false``/``null``, enum
    values), and of the closings that end a value of any text (a JSON
    string's ``"``, the dialect's raw-value closing)."""

    specials: np.ndarray
    punctuation: np.ndarray
    literals: tuple[tuple[int, ...], ...]
    weights: np.ndarray
    """Per literal: how often the grammar uses it (markup repeats, names do not)."""
    closings: tuple[tuple[int, ...], ...]

    @property
    def literal_firsts(self) -> np.ndarray:
        return _firsts(self.literals)

    @property
    def closing_firsts(self) -> np.ndarray:
        return _firsts(self.closings)


def _firsts(sequences: tuple[tuple[int, ...], ...]) -> np.ndarray:
    return np.array([sequence[0] for sequence in sequences], dtype=np.int64)


class SteeredSampler:
    """Leans towards structure so that walks close values and calls.

    Each step: go on with the literal being written, if its next token is
    allowed; else, by a seeded draw, pick uniformly among the allowed special
    tokens, or start an allowed closing, or start an allowed literal (drawn
    by how often the grammar uses it), or pick uniformly among the allowed
    punctuation tokens, or uniformly among all allowed tokens (also whenever
    the chosen group has nothing allowed). Inside text of any content every
    literal is allowed, and only a closing ends it: without the closings
    group a walk would write markup into the text for a long time first.
    """

    SPECIAL = 0.15
    CLOSING = 0.2
    LITERAL = 0.25
    PUNCTUATION = 0.15

    def __init__(self, structure: StructureTokens, vocab_size: int) -> None:
        self.structure = structure
        self.uniform = UniformSampler(vocab_size)
        self._literal_firsts = structure.literal_firsts
        self._closing_firsts = structure.closing_firsts
        self._plan: list[int] = []

    def choose(self, words: np.ndarray, rng: np.random.Generator) -> int | None:
        if self._plan:
            token = self._plan.pop(0)
            if _allows_one(words, token):
                return token
            self._plan.clear()
        structure, draw = self.structure, rng.random()
        picked = None
        if draw < self.SPECIAL:
            picked = _pick(structure.specials, words, rng)
        elif draw < self.SPECIAL + self.CLOSING:
            picked = self._start(structure.closings, self._closing_firsts, None, words, rng)
        elif draw < self.SPECIAL + self.CLOSING + self.LITERAL:
            picked = self._start(structure.literals, self._literal_firsts, structure.weights, words, rng)
        elif draw < self.SPECIAL + self.CLOSING + self.LITERAL + self.PUNCTUATION:
            picked = _pick(structure.punctuation, words, rng)
        return picked if picked is not None else self.uniform.choose(words, rng)

    def _start(
        self,
        sequences: tuple[tuple[int, ...], ...],
        firsts: np.ndarray,
        weights: np.ndarray | None,
        words: np.ndarray,
        rng: np.random.Generator,
    ) -> int | None:
        """Start one of ``sequences`` whose first token is allowed (by
        ``weights``, else uniformly); the rest becomes the plan."""
        candidates = np.flatnonzero(_allows(words, firsts))
        if not candidates.size:
            return None
        if weights is None:
            index = candidates[rng.integers(candidates.size)]
        else:
            cumulative = np.cumsum(weights[candidates])
            index = candidates[np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right")]
        chosen = sequences[int(index)]
        self._plan = list(chosen[1:])
        return chosen[0]


def _pick(ids: np.ndarray, words: np.ndarray, rng: np.random.Generator) -> int | None:
    allowed = ids[_allows(words, ids)]
    return int(allowed[rng.integers(allowed.size)]) if allowed.size else None


def _make_sampler(name: str, compiled: CompiledTools) -> Sampler:
    """A fresh sampler ``name`` (one of :data:`SAMPLERS`) for one walk."""
    vocab_size = compiled.tokenizer.vocab_size
    if name == "steered":
        return SteeredSampler(structure_tokens(compiled), vocab_size)
    return UniformSampler(vocab_size)


# -- the structure of a grammar ---------------------------------------------------------

_LARK_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_PUNCTUATION = frozenset(b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ \t\n\r")


def grammar_literals(grammar: str) -> list[str]:
    """The text of every string literal in a Lark grammar, in order (regexes,
    ``%json`` schemas and comments skipped)."""
    found: list[str] = []
    for line in grammar.splitlines():
        position = 0
        while position < len(line):
            if line[position] == '"':
                match = _LARK_STRING.match(line, position)
                if match is None:
                    break
                try:
                    found.append(json.loads(match.group()))
                except ValueError:
                    pass
                position = match.end()
            elif line.startswith("//", position):
                break
            elif line[position] == "<":  # a special token, such as <|"|>
                end = line.find(">", position)
                position = end + 1 if end >= 0 else len(line)
            elif line[position] == "/":
                position = _regex_end(line, position + 1)
            elif line.startswith("%json", position):
                position = _json_end(line, position + len("%json"))
            else:
                position += 1
    return found


def _regex_end(line: str, position: int) -> int:
    while position < len(line) and line[position] != "/":
        position += 2 if line[position] == "\\" else 1
    return position + 1


def _json_end(line: str, position: int) -> int:
    start = len(line) - len(line[position:].lstrip())
    try:
        return json.JSONDecoder().raw_decode(line, start)[1]
    except ValueError:
        return len(line)


_vocabulary_structure: dict[str, tuple[np.ndarray, np.ndarray]] = {}
_structures: OrderedDict[str, StructureTokens] = OrderedDict()
_structure_lock = threading.Lock()
_STRUCTURES_KEPT = 64


def _vocabulary_tokens(tok: "Tokenizer") -> tuple[np.ndarray, np.ndarray]:
    """The special tokens and the punctuation/whitespace tokens of at most
    two bytes of ``tok``, once per vocabulary."""
    with _structure_lock:
        if tok.fingerprint not in _vocabulary_structure:
            table, special = tok.token_table
            punctuation = [
                token
                for token, data in enumerate(table)
                if 0 < len(data) <= 2 and token not in special and all(byte in _PUNCTUATION for byte in data)
            ]
            _vocabulary_structure[tok.fingerprint] = (
                np.array(sorted(special), dtype=np.int64),
                np.array(punctuation, dtype=np.int64),
            )
        return _vocabulary_structure[tok.fingerprint]


def structure_tokens(compiled: CompiledTools) -> StructureTokens:
    """The :class:`StructureTokens` of ``compiled`` (kept for the last few
    compiled tool sets)."""
    with _structure_lock:
        if compiled.fingerprint in _structures:
            _structures.move_to_end(compiled.fingerprint)
            return _structures[compiled.fingerprint]
    tok = compiled.tokenizer
    specials, punctuation = _vocabulary_tokens(tok)
    uses: Counter[tuple[int, ...]] = Counter(
        tuple(tok.encode(text)) for text in grammar_literals(compiled.grammar) if text
    )
    closings = ['"']
    dialect = get_dialect(compiled.dialect)
    syntax = dialect.raw_text_syntax(Markers(tok))
    if syntax is not None and not syntax.close_is_token:
        closings.append(syntax.close)
    structure = StructureTokens(
        specials=specials,
        punctuation=punctuation,
        literals=tuple(uses),
        weights=np.array(list(uses.values()), dtype=np.float64),
        closings=tuple(dict.fromkeys(tuple(tok.encode(text)) for text in closings)),
    )
    with _structure_lock:
        _structures[compiled.fingerprint] = structure
        while len(_structures) > _STRUCTURES_KEPT:
            _structures.popitem(last=False)
    return structure


# -- checking a finished output ---------------------------------------------------------


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
    dialect = get_dialect(compiled.dialect)
    call_open = compiled.tokenizer.token_id(dialect.call_open)
    opened = sum(token == call_open for token in tokens)
    unmarked = sum(segment.kind == "call" and not segment.text.startswith(dialect.call_open) for segment in dialect.scan(text))
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


def output_text(tok: "Tokenizer", tokens: list[int] | tuple[int, ...]) -> tuple[str, bool]:
    """The text of ``tokens`` byte for byte, and whether it is valid UTF-8
    (invalid bytes replaced)."""
    data = b"".join(tok.token_bytes(token) for token in tokens)
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace"), False


# -- the walk ------------------------------------------------------------------------------


class _Walk:
    """One row of a constraint driven by a sampler, with an optional plain
    llguidance matcher fed the same tokens to compare masks with."""

    ROLLBACK_CHANCE = 1 / 32  # per step, with WalkOptions.rollback
    ROLLBACK_MOST = 8

    def __init__(self, compiled: CompiledTools, options: WalkOptions, rng: np.random.Generator) -> None:
        import torch

        self.compiled = compiled
        self.options = options
        self.rng = rng
        self.sampler = _make_sampler(options.sampler, compiled)
        self.vocab_size = compiled.tokenizer.vocab_size
        self.constraint = ToolCallConstraint(compiled, 1)
        self.logits = torch.zeros(1, self.vocab_size)
        self.constraint.prepare(self.logits)
        self.reference = compiled.matcher() if options.crosscheck_every else None
        words = (self.vocab_size + 31) // 32
        self.reference_words = np.zeros(words, dtype=np.uint32)
        self.finite = np.zeros(words * 32, dtype=bool)  # the applied logits' allowed set, padded to whole words
        self.tokens: list[int] = []
        self.consumed = 0  # tokens fed, rolled back ones included
        self.masks = 0

    def run(self) -> tuple[Outcome, str]:
        """Walk until the grammar finishes or the budget runs out; how it
        ended and what went wrong, if anything."""
        options, constraint = self.options, self.constraint
        while self.consumed < options.budget:
            if options.rollback and self.tokens and self.rng.random() < self.ROLLBACK_CHANCE:
                self._rollback(int(self.rng.integers(1, min(self.ROLLBACK_MOST, len(self.tokens)) + 1)))
            forced = constraint.forced_tokens(0) if options.fast_forward else []
            if forced:
                problem = self._feed(forced[: options.budget - self.consumed], forced=True)
            else:
                token, problem = self._sample()
                if token is None:
                    if problem:
                        return Outcome.ERROR, problem
                    return Outcome.WEDGE, f"no token allowed after {len(self.tokens)} tokens"
                problem = self._feed([token], forced=False)
            if problem:
                return Outcome.ERROR, problem
            if constraint.state(0) is RowState.FINISHED:
                return Outcome.FINISHED, ""
        return Outcome.BUDGET_EXHAUSTED, ""

    def _sample(self) -> tuple[int | None, str]:
        """Fill the mask, check it, pick a token; ``(None, why)`` when the row
        allows nothing (why: '') or the mask is wrong."""
        constraint = self.constraint
        constraint.fill_masks()
        words = constraint.allowed_words(0)
        self.masks += 1
        every = self.options.crosscheck_every
        if every and self.masks % every == 1 % every:
            mismatch = self._crosscheck(words)
            if mismatch:
                return None, mismatch
        return self.sampler.choose(words, self.rng), ""

    def _feed(self, tokens: list[int], *, forced: bool) -> str:
        """Consume ``tokens`` (a sampled one, or forced ones as fast-forward
        appends them); what went wrong, if anything."""
        if forced:
            self.constraint.consume_row(0, tokens)
        else:
            self.constraint.consume(tokens)
        self.tokens.extend(tokens)
        self.consumed += len(tokens)
        if self.constraint.events:
            kind = "token the grammar forced" if forced else "sampled token its own mask allowed"
            return f"the constraint refused a {kind}: {self.constraint.events[0]}"
        if self.reference is not None and not all(self.reference.consume_token(t) for t in tokens):
            return f"llguidance refused tokens {tokens} that the constraint accepted: {self.reference.get_error()}"
        return ""

    def _rollback(self, count: int) -> None:
        self.constraint.rollback(count)
        if self.reference is not None:
            self.reference.rollback(count)
        del self.tokens[-count:]

    def _crosscheck(self, words: np.ndarray) -> str:
        """Compare the row with llguidance's own mask and with the applied
        logits; a description of the first difference, or ''."""
        assert self.reference is not None
        self.reference.unsafe_compute_mask_ptr(self.reference_words.ctypes.data, self.reference_words.nbytes)
        tok = self.compiled.tokenizer
        if not np.array_equal(words, self.reference_words):
            shown = [(t, tok.token_bytes(t), _allows_one(words, t)) for t in _differing(words, self.reference_words)]
            return f"mask differs from llguidance's at tokens (id, bytes, allowed by ours) {shown}"
        self.logits.zero_()
        self.constraint.apply(self.logits)
        np.isfinite(self.logits[0].numpy(), out=self.finite[: self.vocab_size])
        applied = np.packbits(self.finite, bitorder="little").view(np.uint32)
        if not np.array_equal(applied, words):
            return f"applied logits differ from the bitmask at tokens {_differing(applied, words)}"
        return ""


def _differing(first: np.ndarray, second: np.ndarray, shown: int = 6) -> list[int]:
    """The first token ids where two bitmask rows differ."""
    return [int(t) for t in np.flatnonzero(np.unpackbits((first ^ second).view(np.uint8), bitorder="little"))[:shown]]


def walk(compiled: CompiledTools, seed: int, options: WalkOptions | None = None) -> FuzzRun:
    """One random walk over ``compiled``, seeded by ``seed``. Nothing raises:
    an exception is reported as an error outcome, with where it was raised."""
    options = options or WalkOptions()
    started = time.perf_counter()
    tok = compiled.tokenizer
    state: _Walk | None = None
    outcome, detail, text, parsed, problems = Outcome.ERROR, "", "", None, []
    try:
        state = _Walk(compiled, options, np.random.default_rng(seed))
        outcome, detail = state.run()
        if outcome is Outcome.FINISHED:
            text, utf8 = output_text(tok, state.tokens[:-1])  # without the end token
            parsed = parse_tool_calls(text, compiled, compiled.dialect)
            problems = output_problems(compiled, state.tokens, text, parsed) + ([] if utf8 else ["the output is not valid UTF-8"])
    except Exception as exc:  # a fuzz run reports whatever raised, with where
        where = traceback.extract_tb(exc.__traceback__)[-1]
        outcome, detail = Outcome.ERROR, f"{type(exc).__name__}: {exc} (at {where.filename}:{where.lineno})"
    tokens = tuple(state.tokens) if state is not None else ()
    if outcome is not Outcome.FINISHED:
        text = output_text(tok, tokens)[0]
    return FuzzRun(
        dialect=compiled.dialect,
        tool_choice=compiled.tool_choice,
        parallel_tool_calls=compiled.parallel_tool_calls,
        seed=seed,
        options=options,
        outcome=outcome,
        tokens=tokens,
        text=text,
        parsed=parsed,
        problems=tuple(problems),
        detail=detail,
        precomputed_steps=state.constraint.precomputed_rows if state is not None else 0,
        seconds=time.perf_counter() - started,
    )


def fuzz(compiled: CompiledTools, runs: int, seed: int = 0, options: WalkOptions | None = None, *,
         keep: int = 5) -> FuzzSummary:
    """``runs`` walks with seeds ``seed``, ``seed + 1``, ...; their summary
    (with the first ``keep`` failing walks)."""
    summary = FuzzSummary(keep=keep)
    for offset in range(runs):
        summary.add(walk(compiled, seed + offset, options))
    return summary
