"""Calls that close within a token budget (``ToolCallConstraint(budget=...)``).

A scripted runaway writes part of a call, then never closes what it is in
(a string it keeps writing, an array it keeps adding items to, a nested
object it keeps adding keys to). With a budget, the output must still be
one complete, valid call of the tool, its text beginning with what was
written, in at most the budget's tokens; from "just enough" upwards."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest

from constrained import BudgetError, CompiledTools, ToolCallConstraint, compile_tools, load_tokenizer, parse_tool_calls
from constrained.dialects import get_dialect
from constrained.runtime.budget import closing_search
from constrained.tokenizers import Tokenizer

DIALECTS = ["qwen3_coder", "hermes", "glm45", "glm47", "gemma4", "functiongemma"]

ORDER = {
    "name": "create_order",
    "parameters": {
        "type": "object",
        "properties": {
            "customer": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "email": {"type": "string"}, "phone": {"type": "string"}},
                "required": ["name"],
            },
            "items": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-\\d{4}$"},
                                   "qty": {"type": "integer", "minimum": 1}},
                    "required": ["sku", "qty"],
                },
            },
            "note": {"type": "string"},
        },
        "required": ["customer", "items", "note"],
    },
}
CALL = {"name": "create_order", "arguments": {
    "customer": {"name": "Alice", "email": "alice@example.com"},
    "items": [{"sku": "ABC-1234", "qty": 2}],
    "note": "ring twice",
}}

# Where the scripted writer stops writing the call and runs away: inside the
# customer object (after its first member), inside the items array (after
# its first item), inside the note string.
CUTS = {"nested object": "alice@example.com", "array": "1234", "string": "ring"}


@functools.cache
def tokenizer(dialect: str) -> Tokenizer:
    return load_tokenizer(get_dialect(dialect).default_tokenizer)


@functools.cache
def compiled(dialect: str) -> CompiledTools:
    return compile_tools([ORDER], dialect, tokenizer(dialect), tool_choice="required", parallel_tool_calls=False,
                         reasoning=False)


def prefix(dialect: str, cut: str) -> list[int]:
    """The tokens of the call's text up to just after the cut's text (and
    past the value's closing, for the object and the array)."""
    tok = tokenizer(dialect)
    text = get_dialect(dialect).render_call(compiled(dialect).tools[0], CALL["arguments"], "trained")
    end = text.index(CUTS[cut]) + len(CUTS[cut])
    if cut != "string":  # past the string's closing: the writer then adds members or items
        rest = tok.encode(text[end:])
        end += len(tok.decode(rest[:1]))
    return tok.encode(text[:end])


def runaway_token(tok: Tokenizer, allowed: set[int], avoid: set[int]) -> int:
    """What the runaway writes next: more text if it may, else another item
    or member, else the first allowed token (never what the plan would close
    with when anything else is allowed)."""
    for text in ("x", ",", ", ", " {", "{"):
        ids = tok.encode(text)
        if len(ids) == 1 and ids[0] in allowed:
            return ids[0]
    choices = sorted(allowed - avoid) or sorted(allowed)
    return choices[0]


def run(dialect: str, written: list[int], budget: int) -> tuple[list[int], ToolCallConstraint]:
    tok = tokenizer(dialect)
    constraint = ToolCallConstraint(compiled(dialect), 1, budget=budget)
    constraint.prepare_host()
    constraint.consume_row(0, written)
    output = list(written)
    closers = {tok.encode(text)[0] for text in ('"', "}", "]", "</", '<|"|>', "<escape>") if tok.encode(text)}
    while not constraint.is_finished(0) and len(output) < budget:
        constraint.fill_masks()
        bits = np.unpackbits(constraint.allowed_words(0).view(np.uint8), bitorder="little")
        token = runaway_token(tok, set(np.flatnonzero(bits).tolist()), closers)
        constraint.consume([token])
        output.append(token)
    return output, constraint


@pytest.mark.parametrize("cut", list(CUTS))
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_runaway_call_closes_validly_within_any_budget_that_fits(dialect: str, cut: str) -> None:
    tok, written = tokenizer(dialect), prefix(dialect, cut)
    matcher = compiled(dialect).matcher()
    matcher.consume_tokens(written)
    plan = closing_search(compiled(dialect)).plan(matcher, 1000)
    assert plan is not None
    for extra in (0, 1, 6, 40):  # "just enough" upward
        budget = len(written) + len(plan) + extra
        output, constraint = run(dialect, written, budget)
        text = tok.decode([t for t in output if t not in tok.eos_token_ids])
        assert len(output) <= budget
        assert text.startswith(tok.decode(written))  # what was written stays, closed, never cut
        assert compiled(dialect).check(text).accepted, (extra, text)
        parsed = parse_tool_calls(text, [ORDER], dialect)
        assert parsed.errors == [] and [c["function"]["name"] for c in parsed.tool_calls] == ["create_order"], text
        assert constraint.closed_by_budget(0)
        assert constraint.events == []


@pytest.mark.parametrize("dialect", ["qwen3_coder", "gemma4"])
def test_a_budget_no_call_fits_is_refused_before_anything_is_generated(dialect: str) -> None:
    needed = len(closing_search(compiled(dialect)).plan(compiled(dialect).matcher(), 1000) or [])
    with pytest.raises(BudgetError, match=f"a budget of {needed - 1} tokens cannot hold a complete output") as raised:
        ToolCallConstraint(compiled(dialect), 2, budget=needed - 1)
    assert raised.value.needed == needed and raised.value.argument == "budget"
    ToolCallConstraint(compiled(dialect), 2, budget=needed)  # just enough
    with pytest.raises(BudgetError):
        ToolCallConstraint(compiled(dialect), 2, budget=[needed + 50, needed - 1])  # one row's is short


def test_per_row_budgets_must_match_the_batch() -> None:
    with pytest.raises(ValueError, match="one value per row"):
        ToolCallConstraint(compiled("gemma4"), 2, budget=[500])


@pytest.mark.parametrize("dialect", ["qwen3_coder", "gemma4"])
def test_under_auto_no_call_opens_where_none_fits(dialect: str) -> None:
    """A writer that opens a call as soon as it may, near the end of the
    budget: where no call fits, the opening is not allowed, so the output
    is text that ends in time, never a call cut off."""
    tok = tokenizer(dialect)
    auto = compile_tools([ORDER], dialect, tok, tool_choice="auto", reasoning=False)
    opening = tok.token_id(get_dialect(dialect).markup.open)
    call = len(closing_search(auto).plan(_opened(auto, opening), 1000) or [])
    budget = 12
    assert call > budget
    constraint = ToolCallConstraint(auto, 1, budget=budget)
    constraint.prepare_host()
    word = tok.encode("Hello")[0]
    output: list[int] = []
    while not constraint.is_finished(0) and len(output) < budget:
        constraint.fill_masks()
        words = constraint.allowed_words(0)
        opens = bool(int(words[opening >> 5]) >> (opening & 31) & 1)
        token = opening if opens else word
        constraint.consume([token])
        output.append(token)
    assert opening not in output
    assert parse_tool_calls(tok.decode(output), [ORDER], dialect).tool_calls == []


def _opened(compiled_tools: CompiledTools, opening: int | None) -> object:
    matcher = compiled_tools.matcher()
    assert opening is not None and matcher.consume_token(opening)
    return matcher


def test_the_command_line_closes_within_the_budget_unless_told_not_to(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from constrained import cli
    from constrained.runtime import generate as generate_module
    from constrained.runtime import models
    from constrained.runtime.generate import GenerationResult

    seen: list[bool] = []
    call = {"id": "call_1", "type": "function", "function": {"name": "create_order", "arguments": "{}"}}

    def fake_generate(*args: object, close_within_budget: bool, **kwargs: object) -> GenerationResult:
        seen.append(close_within_budget)
        return GenerationResult("", [], "", [call], [], None, True)

    monkeypatch.setattr(models, "load_model", lambda *a, **k: models.LoadedModel(None, None, "gemma4", name="fake"))
    monkeypatch.setattr(models, "converted_default_model", lambda: None)
    monkeypatch.setattr(generate_module, "generate", fake_generate)
    tools = tmp_path / "order.tools.json"
    tools.write_text(json.dumps([{"type": "function", "function": ORDER}]))
    for flags, expected in (([], True), (["--no-close-within-budget"], False)):
        assert cli.main(["generate", str(tools), "--prompt", "order", "--quiet", *flags]) == 0
        assert seen[-1] is expected
    capsys.readouterr()


def test_a_rolled_back_row_still_closes_within_its_budget() -> None:
    """Speculative decoding takes tokens back: the plan is found again from
    where the row stands then (the budget leaves room for the tokens taken
    back to be written again, as the plan writes them)."""
    dialect = "gemma4"
    tok, written = tokenizer(dialect), prefix(dialect, "string")
    matcher = compiled(dialect).matcher()
    matcher.consume_tokens(written)
    plan = closing_search(compiled(dialect)).plan(matcher, 1000) or []
    budget = len(written) + len(plan) + 12
    constraint = ToolCallConstraint(compiled(dialect), 1, budget=budget)
    constraint.prepare_host()
    constraint.consume_row(0, written)
    x = tok.encode("x")[0]
    constraint.consume_row(0, [x, x])
    constraint.rollback(2 + len(written) // 2)  # back into the call, before the note
    output = written[: len(written) - len(written) // 2]
    while not constraint.is_finished(0) and len(output) < budget:
        constraint.fill_masks()
        bits = np.unpackbits(constraint.allowed_words(0).view(np.uint8), bitorder="little")
        token = runaway_token(tok, set(np.flatnonzero(bits).tolist()), set())
        constraint.consume([token])
        output.append(token)
    text = tok.decode([t for t in output if t not in tok.eos_token_ids])
    assert len(output) <= budget and compiled(dialect).check(text).accepted, text
