"""The sampling-time constraint (``ToolCallConstraint``) on CPU, without a
model: the mask it applies is exactly llguidance's allowed set, allowed
logits are untouched, padded vocabulary columns are masked, a steady-state
step allocates nothing, and a forbidden token never leaves a row without an
allowed token."""

from __future__ import annotations

import functools
import weakref
from typing import Any

import numpy as np
import pytest
import torch
from sample_tools import WEATHER, WRITE_FILE, unwarmed_cache
from torch.profiler import ProfilerActivity, profile

from constrained import compile_tools, load_tokenizer, render_tool_calls
from constrained.compiler import CompiledTools
from constrained.errors import ArgumentError, ConstraintError
from constrained.runtime.constraint import MISSES_IN_A_ROW, RowState, ToolCallConstraint, fill_masks_together
from constrained.runtime.logits_mask import apply_bit_planes
from constrained.tokenizers import Tokenizer

CALL = {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
ENDS = {"gemma4": "<|tool_response>", "qwen3_coder": "<|im_end|>"}
TOKENIZERS = {"gemma4": "gemma4", "qwen3_coder": "qwen3"}


@functools.cache
def tok(name: str) -> Tokenizer:
    return load_tokenizer(name)


def compiled(dialect: str = "gemma4", **options: Any) -> CompiledTools:
    options.setdefault("tool_choice", "required")
    return compile_tools([WEATHER], dialect, tok(TOKENIZERS[dialect]), **options)


def call_tokens(dialect: str = "gemma4") -> list[int]:
    """A complete output: one call and the dialect's end-of-calls token."""
    t = tok(TOKENIZERS[dialect])
    return t.encode(render_tool_calls([CALL], [WEATHER], dialect)) + [t.token_id(ENDS[dialect])]


def llguidance_allowed(matcher: Any, vocab: int) -> np.ndarray:
    """The allowed set straight from llguidance, for comparison."""
    words = np.frombuffer(matcher.compute_bitmask(), dtype=np.uint32)
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")[:vocab]
    return bits.astype(bool)


@pytest.mark.parametrize("dialect", ["gemma4", "qwen3_coder"])
def test_mask_is_exactly_the_grammar_allowed_set_at_every_step(dialect: str) -> None:
    ct = compiled(dialect)
    vocab = ct.tokenizer.vocab_size
    reference = ct.matcher()
    constraint = ToolCallConstraint(ct, 1)
    logits = torch.zeros(1, vocab)
    for token in call_tokens(dialect):
        logits.zero_()
        constraint.mask_logits(logits)
        expected = llguidance_allowed(reference, vocab)
        assert np.array_equal(torch.isfinite(logits[0]).numpy(), expected)
        assert expected[token]
        assert reference.consume_token(token)
        constraint.consume([token])
    assert constraint.is_finished(0) and constraint.state(0) is RowState.FINISHED
    assert constraint.events == []


def test_the_allowed_words_view_is_read_only() -> None:
    """The constraint writes only what changed in its bitmask (it knows what
    each row holds), so the view it lends cannot be written through."""
    constraint = ToolCallConstraint(compiled(), 1)
    constraint.prepare(torch.zeros(1, constraint.vocab_size))
    constraint.fill_masks()
    words = constraint.allowed_words(0)
    with pytest.raises(ValueError, match="read-only"):
        words[0] = 1


def test_finished_row_allows_only_end_of_generation_tokens() -> None:
    ct = compiled()
    constraint = ToolCallConstraint(ct, 1)
    constraint.consume_row(0, call_tokens())
    logits = torch.zeros(1, ct.tokenizer.vocab_size)
    constraint.mask_logits(logits)
    assert sorted(torch.isfinite(logits[0]).nonzero().flatten().tolist()) == sorted(ct.tokenizer.eos_token_ids)
    with pytest.raises(ConstraintError, match="takes no more tokens"):
        constraint.consume_row(0, [5000])


def test_allowed_logits_keep_their_exact_values_and_forbidden_ones_become_minus_inf() -> None:
    ct = compiled()
    constraint = ToolCallConstraint(ct, 1)
    tokens = call_tokens()
    constraint.consume_row(0, tokens[: tokens.index(ct.tokenizer.token_id('<|"|>')) + 1])  # inside a string
    generator = torch.Generator().manual_seed(0)
    original = torch.randn(1, ct.tokenizer.vocab_size, generator=generator) * 30
    original[0, :50] = float("inf")  # extreme logits among forbidden tokens
    original[0, 50:60] = -0.0
    logits = original.clone()
    constraint.mask_logits(logits)
    allowed = torch.from_numpy(llguidance_allowed(constraint.rows[0].matcher, ct.tokenizer.vocab_size))
    assert allowed.sum() > 1000
    assert torch.equal(logits[0, allowed], original[0, allowed])
    assert torch.all(logits[0, ~allowed] == float("-inf"))
    assert not torch.isnan(logits).any()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_logits_wider_than_the_vocabulary_are_masked_past_it(dtype: torch.dtype) -> None:
    ct = compiled()
    vocab = ct.tokenizer.vocab_size
    constraint = ToolCallConstraint(ct, 2)
    logits = torch.zeros(2, vocab + 100, dtype=dtype)
    constraint.mask_logits(logits)
    assert torch.all(logits[:, vocab:] == float("-inf"))
    assert torch.isfinite(logits[:, :vocab]).sum() >= 2


def test_logits_narrower_than_the_end_tokens_are_refused() -> None:
    constraint = ToolCallConstraint(compiled("qwen3_coder"), 1)
    with pytest.raises(ConstraintError, match="use the model's own tokenizer"):
        constraint.mask_logits(torch.zeros(1, 1000))


def test_buffers_are_fixed_after_the_first_call() -> None:
    ct = compiled()
    constraint = ToolCallConstraint(ct, 1)
    constraint.mask_logits(torch.zeros(1, ct.tokenizer.vocab_size))
    with pytest.raises(ConstraintError, match="make a new constraint"):
        constraint.mask_logits(torch.zeros(1, ct.tokenizer.vocab_size, dtype=torch.float16))
    with pytest.raises(ConstraintError, match="make a new constraint"):
        constraint.mask_logits(torch.zeros(2, ct.tokenizer.vocab_size))
    with pytest.raises(ConstraintError, match="prepare"):
        ToolCallConstraint(ct, 1).fill_masks()


@pytest.mark.parametrize("threads", [None, 2])  # in the calling thread, or on llguidance's pool
def test_rows_of_a_batch_are_independent_and_match_single_rows(threads: int | None) -> None:
    ct = compiled()
    vocab = ct.tokenizer.vocab_size
    tokens = call_tokens()
    batch = ToolCallConstraint(ct, 3, num_threads=threads)
    singles = [ToolCallConstraint(ct, 1) for _ in range(3)]
    # Row r lags r tokens behind row 0.
    for step in range(len(tokens)):
        chosen = [tokens[step - r] if step >= r else None for r in range(3)]
        for r, token in enumerate(chosen):
            if token is not None:
                batch.consume_row(r, [token])
                singles[r].consume_row(0, [token])
        logits = torch.zeros(3, vocab)
        batch.mask_logits(logits)
        for r in range(3):
            single = torch.zeros(1, vocab)
            singles[r].mask_logits(single)
            assert torch.equal(logits[r], single[0])


def test_steady_state_step_allocates_nothing() -> None:
    """The promise: after the first call, filling and applying the
    mask over 100 steps records no memory allocation in torch's profiler."""
    ct = compiled("qwen3_coder")
    constraint = ToolCallConstraint(ct, 4)
    logits = torch.randn(4, 151936)
    constraint.mask_logits(logits)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for _ in range(100):
            constraint.mask_logits(logits)
    allocations = [e for e in prof.events() if e.cpu_memory_usage != 0]
    ops = {e.name for e in prof.events()}
    assert {"aten::index_select", "aten::minimum"} <= ops  # the profiler saw the apply step
    assert allocations == []


def test_a_forbidden_token_releases_the_row_and_is_reported() -> None:
    ct = compiled()
    vocab = ct.tokenizer.vocab_size
    constraint = ToolCallConstraint(ct, 2)
    forbidden = ct.tokenizer.encode("hello")[0]
    first = call_tokens()[0]
    constraint.consume([first, forbidden])
    assert constraint.state(0) is RowState.ACTIVE and constraint.state(1) is RowState.RELEASED
    [event] = constraint.events
    assert (event.row, event.position, event.token_id) == (1, 0, forbidden)
    assert "not allowed" in str(event)
    logits = torch.randn(2, vocab)
    original = logits.clone()
    constraint.mask_logits(logits)
    assert torch.equal(logits[1], original[1])  # unconstrained: untouched
    assert not torch.isnan(logits).any() and torch.isfinite(logits).any(dim=1).all()
    constraint.consume([call_tokens()[1], 7])  # the released row takes anything
    assert len(constraint.events) == 1


def test_on_violation_stop_leaves_only_end_tokens() -> None:
    ct = compiled()
    constraint = ToolCallConstraint(ct, 1, on_violation="stop")
    constraint.consume([ct.tokenizer.encode("hello")[0]])
    assert constraint.state(0) is RowState.STOPPED and constraint.is_finished(0)
    logits = torch.randn(1, ct.tokenizer.vocab_size)
    constraint.mask_logits(logits)
    assert sorted(torch.isfinite(logits[0]).nonzero().flatten().tolist()) == sorted(ct.tokenizer.eos_token_ids)


def test_an_end_token_fed_too_early_is_a_violation_not_an_error_state() -> None:
    ct = compiled()
    end = ct.tokenizer.token_id("<|tool_response>")
    constraint = ToolCallConstraint(ct, 1)
    constraint.consume([call_tokens()[0]])
    constraint.consume([end])
    assert constraint.state(0) is RowState.RELEASED
    constraint.rollback(1)  # back over the violation: the grammar governs again
    assert constraint.state(0) is RowState.ACTIVE
    constraint.consume_row(0, call_tokens()[1:])
    assert constraint.state(0) is RowState.FINISHED


def test_rollback_restores_the_mask() -> None:
    ct = compiled()
    vocab = ct.tokenizer.vocab_size
    tokens = call_tokens()
    constraint = ToolCallConstraint(ct, 1)
    constraint.consume_row(0, tokens[:4])
    before = torch.zeros(1, vocab)
    constraint.mask_logits(before)
    constraint.consume_row(0, tokens[4:])
    assert constraint.is_finished(0)
    constraint.rollback(len(tokens) - 4)
    assert constraint.state(0) is RowState.ACTIVE
    after = torch.zeros(1, vocab)
    constraint.mask_logits(after)
    assert torch.equal(before, after)
    with pytest.raises(ConstraintError, match="cannot roll back"):
        constraint.rollback(5)


def string_tool(name: str, *required: str, integer: str | None = None) -> dict[str, Any]:
    properties: dict[str, Any] = {key: {"type": "string"} for key in required}
    if integer is not None:
        properties[integer] = {"type": "integer"}
    parameters = {"type": "object", "properties": properties, "required": [*required, *([integer] if integer else [])]}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


def test_a_rollback_leaves_no_mask_of_the_path_taken_back() -> None:
    """llguidance keeps its last mask keyed by lexer state and parser row,
    and its rollback keeps it too: a mask computed inside the string value
    that ends ``last``'s arguments (where ``"}`` may follow) came back, after
    a rollback, at the first string value of ``first`` (which needs a
    ``size`` after it). The constraint recomputes the mask where it rolled
    back to, so every mask after it is a fresh matcher's."""
    ct = compile_tools([string_tool("last", "name"), string_tool("first", "material", integer="size")], "hermes", "qwen3",
                       tool_choice="required", parallel_tool_calls=False)
    tok = ct.tokenizer
    taken_back = tok.encode('<tool_call>\n{"name": "last", "arguments": {"name": "x')
    kept = tok.encode('<tool_call>\n{"name": "first", "arguments": {"material": "')
    constraint = ToolCallConstraint(ct, cache_masks=False)
    logits = torch.zeros(1, tok.vocab_size)
    constraint.consume_row(0, taken_back)
    constraint.mask_logits(logits)
    constraint.rollback(len(taken_back))
    constraint.consume_row(0, kept)
    logits.zero_()
    allowed = torch.isfinite(constraint.mask_logits(logits)[0]).numpy()
    fresh = ct.matcher()
    assert fresh.consume_tokens(kept)
    assert np.array_equal(allowed, llguidance_allowed(fresh, tok.vocab_size))
    assert allowed[tok.encode('",')[0]] and not allowed[tok.encode('"}')[0]]


def test_forced_tokens_are_the_grammar_fixed_text() -> None:
    ct = compiled(tool_choice="get_weather", reasoning=False)
    constraint = ToolCallConstraint(ct, 1)
    forced = constraint.forced_tokens(0)
    # Keys in alphabetical order (gemma4's trained order): required city first.
    assert ct.tokenizer.decode(forced) == '<|tool_call>call:get_weather{city:<|"|>'
    constraint.consume_row(0, forced)
    assert constraint.forced_tokens(0) == []  # the string's text is the model's
    with_reasoning = ToolCallConstraint(compiled(tool_choice="get_weather"), 1)
    assert with_reasoning.forced_tokens(0) == []  # the reasoning block may open first


@pytest.mark.parametrize("dialect", ["gemma4", "qwen3_coder"])
def test_masks_along_a_run_of_forced_tokens_are_llguidance_s_through_a_rollback(dialect: str) -> None:
    """Without the mask cache, the steps of a forced run are known from the
    run llguidance named once; each equals llguidance's own mask, also after
    a rollback into the run and after fast-forward fed part of it."""
    ct = compiled(dialect, tool_choice="get_weather", reasoning=False)
    vocab = ct.tokenizer.vocab_size
    tokens = call_tokens(dialect)
    constraint = ToolCallConstraint(ct, 1, cache_masks=False)
    reference = ct.matcher()
    logits = torch.zeros(1, vocab)

    def masks_alike() -> bool:
        logits.zero_()
        constraint.mask_logits(logits)
        return np.array_equal(torch.isfinite(logits[0]).numpy(), llguidance_allowed(reference, vocab))

    run = constraint.forced_tokens(0)
    assert len(run) >= 4 and run == tokens[: len(run)]
    constraint.consume_row(0, run[:1])
    reference.consume_token(run[0])
    for position, token in enumerate(tokens[1:], start=1):
        assert masks_alike(), position
        constraint.consume([token])
        assert reference.consume_token(token)
        if position == 3:
            constraint.rollback(2)
            assert reference.rollback(2)
            assert masks_alike()
            constraint.consume([tokens[2]])
            assert reference.consume_token(tokens[2])
            assert masks_alike()
            constraint.consume([tokens[3]])
            assert reference.consume_token(tokens[3])
    assert constraint.forced_rows >= len(run) - 1 and constraint.events == []
    assert constraint.is_finished(0)


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        ToolCallConstraint(compiled(), 0)
    with pytest.raises(ValueError, match="on_violation"):
        ToolCallConstraint(compiled(), 1, on_violation="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one token per row"):
        ToolCallConstraint(compiled(), 2).consume([1])


def test_raw_text_rows_apply_sparsely_without_allocating() -> None:
    """Inside a qwen3_coder string every row's forbidden tokens are few and
    known, so the CPU apply sets just those (``index_fill_``) instead of a
    pass over the whole row, still allocating nothing, and the result is
    exactly llguidance's mask."""
    ct = compiled("qwen3_coder")
    vocab = ct.tokenizer.vocab_size
    tokens = call_tokens("qwen3_coder")
    opened = ct.tokenizer.encode(render_tool_calls([CALL], [WEATHER], "qwen3_coder")).index(
        ct.tokenizer.encode("Paris")[0]
    )
    constraint = ToolCallConstraint(ct, 2)
    for row in range(2):
        constraint.consume_row(row, tokens[:opened])
    logits = torch.randn(2, vocab + 64)
    constraint.mask_logits(logits)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for _ in range(20):
            constraint.mask_logits(logits)
    ops = {e.name for e in prof.events()}
    assert "aten::index_fill_" in ops and "aten::index_select" not in ops
    assert [e for e in prof.events() if e.cpu_memory_usage != 0] == []
    expected = torch.from_numpy(llguidance_allowed(constraint.rows[0].matcher, vocab))
    assert 100_000 < int(expected.sum()) < vocab
    for row in range(2):
        assert torch.equal(torch.isfinite(logits[row, :vocab]), expected)
    assert torch.all(logits[:, vocab:] == float("-inf"))


def test_a_forced_step_keeps_one_logit_without_allocating() -> None:
    """Where the grammar forces one token the CPU apply keeps that logit and
    fills the rest (from llguidance's mask, then from the mask cache), with
    the exact value kept and nothing allocated; a batch mixing such a row
    with a dense one matches each alone."""
    ct = compiled("qwen3_coder")
    vocab = ct.tokenizer.vocab_size
    tokens = call_tokens("qwen3_coder")
    constraint = ToolCallConstraint(ct, 3)
    for row in range(2):
        constraint.consume_row(row, tokens[:1])  # <tool_call>: a newline is forced
    logits = torch.randn(3, vocab + 64)
    original = logits.clone()
    constraint.mask_logits(logits)
    forced = llguidance_allowed(constraint.rows[0].matcher, vocab)
    dense = llguidance_allowed(constraint.rows[2].matcher, vocab)
    assert int(forced.sum()) == 1 and int(dense.sum()) > 1  # row 2: the table path
    for _ in range(2):  # llguidance's mask, then the cached one
        for row, expected in ((0, forced), (1, forced), (2, dense)):
            assert torch.equal(torch.isfinite(logits[row, :vocab]), torch.from_numpy(expected))
            kept = torch.isfinite(logits[row])
            assert torch.equal(logits[row][kept], original[row][kept])
        assert torch.all(logits[:, vocab:] == float("-inf"))
        logits.copy_(original)
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            constraint.mask_logits(logits)
        assert "aten::index_copy_" in {e.name for e in prof.events()}
        assert [e for e in prof.events() if e.cpu_memory_usage != 0] == []


def _hermes_city_steps(city_frame: dict[str, Any]) -> tuple[CompiledTools, int | None, int]:
    """A hermes call of a weather tool whose city is ``city_frame``, with a
    long city: the cache's tool set, the step where the row stopped
    looking masks up (None: never) and the call's length in tokens."""
    qwen = tok("qwen3")
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": city_frame}, "required": ["city"]}}}
    ct = unwarmed_cache(compile_tools([tool], "hermes", qwen, tool_choice="required"))
    city = " ".join(f"district{i}" for i in range(60))
    tokens = qwen.encode(render_tool_calls([{"name": "get_weather", "arguments": {"city": city}}], [tool], "hermes"))
    constraint = ToolCallConstraint(ct)
    constraint.prepare(torch.zeros(1, qwen.vocab_size))
    stopped_at = None
    for step, token in enumerate(tokens):
        constraint.fill_masks()
        if stopped_at is None and constraint.rows[0].node is None:
            stopped_at = step
        constraint.consume([token])
    return ct, stopped_at, len(tokens)


def test_a_row_stops_keeping_masks_after_a_run_of_misses_that_allow_several_tokens() -> None:
    """A string under a pattern is JSON text the cache keys on: a long one
    would fill the cache with rows no other request meets, so after
    MISSES_IN_A_ROW such misses the row stops looking masks up and keeping
    them. Forced steps before it cost nothing and do not count."""
    ct, stopped_at, length = _hermes_city_steps({"type": "string", "pattern": "^[a-z0-9 ]+$"})
    cache = ct._masks
    assert stopped_at is not None and stopped_at < length - 10
    assert cache.rows <= MISSES_IN_A_ROW + 2  # the string's rows and the few dense markup steps before it
    assert cache.masks - cache.rows > 5  # the forced markup before the string was kept


def test_a_free_json_string_is_one_row_whatever_its_text() -> None:
    """A string no length, pattern or format constrains is a free leaf: its
    masks are one per state of its text, so a long one keeps a handful of
    rows and the row never stops looking masks up."""
    ct, stopped_at, _ = _hermes_city_steps({"type": "string"})
    assert stopped_at is None
    assert ct._masks.rows <= 4


@pytest.mark.parametrize("threads", [None, 2])
def test_constraints_filled_together_match_llguidance_row_by_row(threads: int | None) -> None:
    """An engine's requests carry different tools: their llguidance rows are
    filled in one parallel call, through a scratch bitmask, and every row
    is still exactly its own grammar's mask (cache on and off, batch 1 and 2)."""
    qwen = tok("qwen3")
    sets = [compiled("qwen3_coder"), compiled("qwen3_coder", tool_choice="auto"),
            compile_tools([WEATHER], "hermes", qwen, tool_choice="required")]
    constraints = [ToolCallConstraint(ct, 2, cache_masks=cache) for ct in sets for cache in (True, False)]
    streams = [qwen.encode(render_tool_calls([CALL], [WEATHER], c.compiled.dialect)) for c in constraints]
    for constraint in constraints:
        constraint.prepare(torch.zeros(2, qwen.vocab_size))
    for step in range(12):
        fill_masks_together(constraints, threads)
        for constraint, stream in zip(constraints, streams):
            for row in range(2):
                fed = stream[: max(0, step - 3 * row)]
                reference = constraint.compiled.matcher()
                assert reference.consume_tokens(fed)
                expected = llguidance_allowed(reference, qwen.vocab_size)
                ours = np.unpackbits(constraint.allowed_words(row).view(np.uint8), bitorder="little")[: qwen.vocab_size]
                assert np.array_equal(ours.astype(bool), expected), (constraint.compiled.dialect, step, row)
            for row in range(2):
                if step - 3 * row >= 0:
                    constraint.consume_row(row, [stream[step - 3 * row]])
    with pytest.raises(ArgumentError, match="one vocabulary"):
        fill_masks_together([constraints[0], ToolCallConstraint(compiled("gemma4"))])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("width", [8 * 4 * 40, 8 * 4 * 40 - 13])
def test_the_gpu_bit_plane_apply_equals_the_table_apply(dtype: torch.dtype, width: int) -> None:
    """The GPU path (shifts and a select) and the CPU path (a byte table and
    a minimum) mask the same tokens and keep allowed logits exactly; run
    here on CPU tensors, as the kernels are the same ops."""
    generator = torch.Generator().manual_seed(7)
    batch, words = 3, 40
    bits = torch.randint(-(2**31), 2**31 - 1, (batch, words), dtype=torch.int32, generator=generator)
    logits = torch.randn(batch, width, generator=generator).to(dtype)
    planes = torch.empty((batch, words * 4, 8), dtype=torch.uint8)
    masked = logits.clone()
    apply_bit_planes(bits, torch.arange(8, dtype=torch.uint8), planes, torch.tensor(float("-inf"), dtype=dtype),
                     masked, width)
    unpacked = torch.from_numpy(
        np.unpackbits(bits.numpy().view(np.uint8), axis=1, bitorder="little").astype(bool)
    )[:, :width]
    expected = torch.where(unpacked, logits, torch.tensor(float("-inf"), dtype=dtype))
    assert torch.equal(masked, expected)
    assert 0 < int(unpacked.sum()) < unpacked.numel()



class _Counting:
    """A matcher that counts its copies (the slow way to try an end token),
    the calls that feed it tokens and those tokens, and its validations."""

    def __init__(self, matcher: Any) -> None:
        self._matcher = matcher
        self.copies = self.feeds = self.fed = self.validations = 0

    def deep_copy(self) -> Any:
        self.copies += 1
        return self._matcher.deep_copy()

    def consume_token(self, token: int) -> bool:
        self.feeds, self.fed = self.feeds + 1, self.fed + 1
        return bool(self._matcher.consume_token(token))

    def consume_tokens(self, tokens: list[int]) -> bool:
        self.feeds, self.fed = self.feeds + 1, self.fed + len(tokens)
        return bool(self._matcher.consume_tokens(tokens))

    def try_consume_tokens(self, tokens: list[int]) -> int:
        self.feeds, self.fed = self.feeds + 1, self.fed + len(tokens)
        return int(self._matcher.try_consume_tokens(tokens))

    def validate_tokens(self, tokens: list[int]) -> int:
        self.validations += 1
        return int(self._matcher.validate_tokens(tokens))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._matcher, name)


@pytest.mark.parametrize("masked", [True, False])
def test_an_end_token_the_steps_mask_allows_ends_the_row_without_copying_the_matcher(masked: bool) -> None:
    ct = compiled()
    tokens = call_tokens()
    constraint = ToolCallConstraint(ct, 1)
    constraint.prepare(torch.zeros(1, ct.tokenizer.vocab_size))
    for token in tokens[:-1]:
        constraint.fill_masks()
        constraint.consume([token])
    counting = constraint.rows[0].matcher = _Counting(constraint.rows[0].matcher)
    if masked:
        constraint.fill_masks()
    constraint.consume([tokens[-1]])
    assert constraint.state(0) is RowState.FINISHED and not constraint.events
    assert counting.copies == (0 if masked else 1)  # without this step's mask, a copy is asked


def test_an_end_token_the_steps_mask_forbids_is_a_violation() -> None:
    ct = compiled()
    constraint = ToolCallConstraint(ct, 1)
    constraint.prepare(torch.zeros(1, ct.tokenizer.vocab_size))
    constraint.fill_masks()
    constraint.consume([call_tokens()[0]])
    constraint.fill_masks()
    constraint.consume([ct.tokenizer.token_id(ENDS["gemma4"])])
    assert constraint.state(0) is RowState.RELEASED and len(constraint.events) == 1


def walk_masked(constraint: ToolCallConstraint, tokens: list[int]) -> None:
    """Feed ``tokens`` to a one-row constraint as a sampler does:
    the step's mask first, then the token."""
    for token in tokens:
        constraint.fill_masks()
        constraint.consume([token])


def call_with(city: str, dialect: str = "qwen3_coder") -> list[int]:
    t = tok(TOKENIZERS[dialect])
    call = {"name": "get_weather", "arguments": {"city": city, "unit": "celsius"}}
    return t.encode(render_tool_calls([call], [WEATHER], dialect)) + [t.token_id(ENDS[dialect])]


@pytest.mark.parametrize("dialect", ["gemma4", "qwen3_coder"])
def test_a_call_the_cached_masks_allow_is_held_without_feeding_llguidance(dialect: str) -> None:
    """Tokens their step's mask allowed are held without feeding the
    matcher; a call whose every mask comes from the cache (another city:
    text values have no masks of their own) asks llguidance nothing, not
    even whether a token that ends a string and goes on past its closing is
    allowed, and still finishes where the grammar does."""
    ct = unwarmed_cache(compiled(dialect))
    vocab = ct.tokenizer.vocab_size
    counts = []
    for city in ("Paris", "Lyon"):
        constraint = ToolCallConstraint(ct, 1)
        constraint.prepare(torch.zeros(1, vocab))
        counting = constraint.rows[0].matcher = _Counting(constraint.rows[0].matcher)
        walk_masked(constraint, call_with(city, dialect))
        assert constraint.state(0) is RowState.FINISHED and constraint.events == []
        counts.append((counting.feeds, counting.validations))
    assert counts[0][0] > 0 and counts[1] == (0, 0)
    if dialect == "qwen3_coder":  # its closing begins with a newline the value may end with
        assert counts[0][1] > 0


def test_a_long_value_reaches_its_closing_without_feeding_llguidance_its_text() -> None:
    """GLM's closing ``</arg_value>`` can be completed by hundreds of tokens
    that go on past it. Which of them the grammar allows is learned once per
    member, at a value's first step (the warm-up's calls do it for the
    tools' members), so the content of a long file reaches the step before
    its closing's last byte without llguidance being fed that content or
    asked to validate; a second request asks llguidance nothing."""
    t = tok("qwen3")
    ct = compile_tools([WRITE_FILE], "glm47", t)
    content = "def double(x):\n    return 2 * x\n\n" * 30
    call = {"name": "write_file", "arguments": {"path": "src/double.py", "content": content}}
    tokens = t.encode(render_tool_calls([call], [WRITE_FILE], "glm47")) + [t.token_id("<|endoftext|>")]
    counts = []
    for _ in range(2):
        constraint = ToolCallConstraint(ct, 1)
        constraint.prepare(torch.zeros(1, t.vocab_size))
        counting = constraint.rows[0].matcher = _Counting(constraint.rows[0].matcher)
        tracker = constraint.rows[0].tracker
        before_closing = []  # llguidance's feeds where the text ends with all of the closing but its last byte
        for token in tokens:
            constraint.fill_masks()
            if tracker.in_text_frame and tracker.masks.crossing[tracker._kmp]:
                before_closing.append(counting.fed)
            constraint.consume([token])
        assert constraint.state(0) is RowState.FINISHED and constraint.events == []
        assert len(before_closing) == 2  # the path's and the content's
        assert before_closing[-1] < len(t.encode(content)) // 4
        counts.append((counting.fed, counting.validations))
    assert counts[0][1] == 0 and counts[1] == (0, 0)


def test_tokens_held_unfed_reach_the_matcher_in_one_call_when_llguidance_is_asked() -> None:
    ct = compiled("qwen3_coder")
    tokens = call_with("Paris")
    warm = ToolCallConstraint(ct, 1)
    warm.prepare(torch.zeros(1, ct.tokenizer.vocab_size))
    walk_masked(warm, tokens)
    constraint = ToolCallConstraint(ct, 1)
    constraint.prepare(torch.zeros(1, ct.tokenizer.vocab_size))
    counting = constraint.rows[0].matcher = _Counting(constraint.rows[0].matcher)
    walk_masked(constraint, tokens[:-3])
    assert counting.feeds == 0
    fresh = ct.matcher()
    assert fresh.consume_tokens(tokens[:-3])
    forced = fresh.compute_ff_tokens()
    assert forced and constraint.forced_tokens(0) == forced  # asks llguidance: the matcher catches up first
    assert (counting.feeds, counting.fed) == (1, len(tokens) - 3)
    vocab = ct.tokenizer.vocab_size
    assert np.array_equal(llguidance_allowed(counting, vocab), llguidance_allowed(fresh, vocab))


def test_a_rollback_over_tokens_held_unfed_gives_llguidance_s_masks_again() -> None:
    """Back within the tokens held unfed, then past them into tokens the
    matcher was fed (some of them after the last mask llguidance computed,
    which takes a new matcher): each mask after it is a fresh matcher's, and
    the call still finishes."""
    ct = compiled("qwen3_coder")
    vocab = ct.tokenizer.vocab_size
    tokens = call_with("Paris")
    constraint = ToolCallConstraint(ct, 1)
    logits = torch.zeros(1, vocab)
    constraint.prepare(logits)
    walk_masked(constraint, tokens)  # warms the cache, so what follows is held unfed
    constraint.rollback(len(tokens))
    constraint.consume_row(0, tokens[:3])  # no mask this step: fed to the matcher
    walk_masked(constraint, tokens[3:-1])
    for back in (2, len(tokens) - 5):
        constraint.rollback(back)
        kept = len(tokens) - 1 - back
        fresh = ct.matcher()
        assert fresh.consume_tokens(tokens[:kept])
        logits.zero_()
        allowed = torch.isfinite(constraint.mask_logits(logits)[0]).numpy()
        assert np.array_equal(allowed, llguidance_allowed(fresh, vocab)), back
        constraint.consume([tokens[kept]])
        walk_masked(constraint, tokens[kept + 1 : -1])
    walk_masked(constraint, tokens[-1:])
    assert constraint.state(0) is RowState.FINISHED and constraint.events == []


@pytest.mark.parametrize("on_violation", ["unconstrained", "stop"])
def test_a_token_a_wrong_mask_let_through_is_a_violation_where_llguidance_refuses_it(on_violation: str) -> None:
    """A token the step's mask allowed is held without asking llguidance
    while the masks after it are known; where they are not, the matcher
    catches up. If a mask was wrong (here, a bit set by hand), llguidance
    refuses that token there: the tokens held before it are kept, the row is
    released (or stopped), the event names the token and its position, and
    a rollback over it lets the grammar govern again."""
    ct = compiled()
    vocab = ct.tokenizer.vocab_size
    tokens, forbidden = call_tokens(), ct.tokenizer.encode("hello")[0]
    logits = torch.zeros(1, vocab)
    warm = ToolCallConstraint(ct, 1)
    warm.prepare(logits)
    walk_masked(warm, tokens)
    constraint = ToolCallConstraint(ct, 1, on_violation=on_violation)  # type: ignore[arg-type]
    constraint.prepare(logits)
    counting = constraint.rows[0].matcher = _Counting(constraint.rows[0].matcher)
    walk_masked(constraint, tokens[:5])
    assert counting.feeds == 0
    constraint.fill_masks()
    constraint.buffers().host_words[0, forbidden >> 5] |= np.uint32(1 << (forbidden & 31))
    constraint.consume([forbidden])
    [event] = constraint.events
    assert (event.position, event.token_id) == (5, forbidden)
    assert (counting.feeds, counting.fed) == (1, 6)  # the five held and the wrong one, in one call
    allowed = torch.isfinite(constraint.mask_logits(logits)[0])
    if on_violation == "stop":
        assert constraint.state(0) is RowState.STOPPED
        assert sorted(allowed.nonzero().flatten().tolist()) == sorted(ct.tokenizer.eos_token_ids)
    else:
        assert constraint.state(0) is RowState.RELEASED and bool(allowed.all())
    constraint.rollback(1)
    assert constraint.state(0) is RowState.ACTIVE
    fresh = ct.matcher()
    assert fresh.consume_tokens(tokens[:5])
    logits.zero_()
    assert np.array_equal(torch.isfinite(constraint.mask_logits(logits)[0]).numpy(), llguidance_allowed(fresh, vocab))
    walk_masked(constraint, tokens[5:])
    assert constraint.state(0) is RowState.FINISHED


def test_a_grammar_whose_end_is_no_end_of_generation_token_finishes_right_after_it() -> None:
    """Where the tokenizer's end-of-generation ids leave out the dialect's
    end-of-calls token, the grammar takes that token and stops there; the
    row finishes at once, though its tokens were held unfed."""
    base = tok("qwen3")
    clipped = load_tokenizer("qwen3", eos_token_ids=[base.token_id("<|endoftext|>")])
    ct = compile_tools([WEATHER], "qwen3_coder", clipped, tool_choice="required")
    tokens = clipped.encode(render_tool_calls([CALL], [WEATHER], "qwen3_coder")) + [clipped.token_id("<|im_end|>")]
    for _ in range(2):  # the second walk under cached masks
        constraint = ToolCallConstraint(ct, 1)
        constraint.prepare(torch.zeros(1, clipped.vocab_size))
        walk_masked(constraint, tokens[:-1])
        assert constraint.state(0) is RowState.ACTIVE
        walk_masked(constraint, tokens[-1:])
        assert constraint.state(0) is RowState.FINISHED and constraint.events == []


def test_a_constraint_is_freed_once_dropped() -> None:
    """No reference cycle keeps a request's constraint (its buffers, its
    matchers) alive until the garbage collector runs: freeing it there costs
    a decoding step of another request milliseconds."""
    ct = compiled("qwen3_coder")
    constraint = ToolCallConstraint(ct, 2)
    constraint.prepare(torch.zeros(2, ct.tokenizer.vocab_size))
    tokens = call_with("Paris")
    for token in tokens[:12]:
        constraint.fill_masks()
        constraint.consume([token, token])
    gone = weakref.ref(constraint)
    del constraint
    assert gone() is None
