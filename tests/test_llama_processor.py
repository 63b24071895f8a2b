"""The llama.cpp processor's side that needs no llama.cpp: the numpy mask
and the processor driven as llama-cpp-python drives it (the ids so far and
the next scores, once per token). ``tests_llama_cpp/`` runs it in llama.cpp."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sample_tools import WEATHER

from constrained import compile_tools, load_tokenizer, render_tool_calls
from constrained.errors import ConstraintError
from constrained.runtime.constraint import ToolCallConstraint
from constrained.runtime.llama import ScoresMask, ToolCallLogitsProcessor

TOK = load_tokenizer("qwen3")


def allowed(words: np.ndarray, vocab: int) -> np.ndarray:
    return np.unpackbits(np.ascontiguousarray(words).view(np.uint8), bitorder="little")[:vocab].astype(bool)


def llama_scores(vocab: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Scores as llama-cpp-python hands them over: the ``logit`` field of a
    record array (a strided view), and a copy of the values."""
    records = np.zeros(vocab, dtype=np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True))
    records["logit"] = rng.standard_normal(vocab).astype(np.single)
    return records["logit"], records["logit"].copy()


@pytest.mark.parametrize("vocab", [100, 96, 130])
def test_the_mask_sets_forbidden_scores_to_minus_infinity_and_keeps_the_others_exactly(vocab):
    rng = np.random.default_rng(vocab)
    words = rng.integers(0, 2**32, size=(96 + 31) // 32, dtype=np.uint64).astype(np.uint32)
    scores, before = llama_scores(vocab, rng)
    ScoresMask(len(words)).apply(words, scores)
    keep = np.zeros(vocab, dtype=bool)
    keep[:96] = allowed(words, 96)  # scores past the mask's 96 tokens are forbidden
    assert np.array_equal(scores[keep], before[keep])
    assert np.all(scores[~keep] == -np.inf)


def call_tokens() -> list[int]:
    text = render_tool_calls([{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"}}], [WEATHER],
                             "hermes")
    return [*TOK.encode(text), TOK.eos_token_ids[0]]


def test_the_processor_masks_as_the_constraint_does_and_stops_when_the_calls_are_complete():
    compiled = compile_tools([WEATHER], "hermes", TOK, tool_choice="required", reasoning=False)
    processor = ToolCallLogitsProcessor(compiled)
    reference = ToolCallConstraint(compiled)
    reference.prepare_host()
    ids = TOK.encode("<|im_start|>assistant\n")
    rng = np.random.default_rng(0)
    for token in call_tokens():
        scores, _ = llama_scores(TOK.vocab_size, rng)
        processor(np.array(ids, dtype=np.intc), scores)
        reference.fill_masks()
        assert np.array_equal(np.isfinite(scores), allowed(reference.allowed_words(0), TOK.vocab_size))
        assert not processor.stop(np.array(ids, dtype=np.intc), scores)
        reference.consume((token,))
        ids.append(token)
    assert processor.stop(np.array(ids, dtype=np.intc), scores)
    assert processor.finished and processor.events == []


def test_a_loop_that_feeds_tokens_first_is_followed_once():
    compiled = compile_tools([WEATHER], "hermes", TOK, tool_choice="required", reasoning=False)
    processor = ToolCallLogitsProcessor(compiled)
    ids = TOK.encode("<|im_start|>assistant\n")
    scores, _ = llama_scores(TOK.vocab_size, np.random.default_rng(1))
    with pytest.raises(ConstraintError, match="before the first mask"):
        processor.feed(1)
    for token in call_tokens():
        processor(np.array(ids, dtype=np.intc), scores.copy())
        processor.feed(token)  # as generate's loop does, before llama.cpp reads the token
        ids.append(token)
    assert processor.finished and processor.events == []


def test_a_processor_serves_one_generation():
    compiled = compile_tools([WEATHER], "hermes", TOK, tool_choice="required", reasoning=False)
    processor = ToolCallLogitsProcessor(compiled)
    scores, _ = llama_scores(TOK.vocab_size, np.random.default_rng(2))
    processor(np.array(TOK.encode("a longer first prompt"), dtype=np.intc), scores)
    with pytest.raises(ConstraintError, match="new processor for each generation"):
        processor(np.array(TOK.encode("short"), dtype=np.intc), scores)


def test_a_prompt_that_opened_reasoning_starts_the_constraint_inside_it():
    compiled = compile_tools([WEATHER], "qwen3_coder", TOK, tool_choice="required")
    processor = ToolCallLogitsProcessor(compiled)
    scores, _ = llama_scores(TOK.vocab_size, np.random.default_rng(3))
    processor(np.array(TOK.encode("<|im_start|>assistant\n<think>\n"), dtype=np.intc), scores)
    assert processor.constraint is not None and processor.constraint.compiled.reasoning == "open"
    assert np.isfinite(scores[TOK.token_id("</think>")])


@pytest.mark.slow
def test_the_processor_never_imports_torch():
    """The llama.cpp path masks numpy scores: torch, installed beside it
    here, is not imported (it costs about 2 s of a command-line run), not
    even through a raw-text value's precomputed rows or the cache warm-up."""
    script = """
import sys
import numpy as np
from constrained import compile_tools, load_tokenizer, render_tool_calls
from constrained.runtime.llama import ToolCallLogitsProcessor
from sample_tools import WEATHER
tok = load_tokenizer("gemma4")
compiled = compile_tools([WEATHER], "gemma4", tok, tool_choice="required")
text = render_tool_calls([{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}], [WEATHER], "gemma4")
processor = ToolCallLogitsProcessor(compiled, budget=64)
ids = [2]
for token in tok.encode(text):
    processor(np.array(ids), np.zeros(tok.vocab_size, dtype=np.single))
    ids.append(token)
assert "torch" not in sys.modules, "torch was imported"
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=Path(__file__).parent, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
