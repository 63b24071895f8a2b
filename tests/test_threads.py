"""The package's caches shared between threads: compiling, parsing,
stream-parsing and constraining from eight threads at once, every cache
cold (:func:`constrained.clear_caches` first, so the threads race to fill
them), give what one thread alone gives; and ``clear_caches`` forgets
everything while what comes after still works."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest
import torch
from sample_tools import WEATHER

from constrained import (
    ToolCallConstraint,
    ToolCallStreamParser,
    caches,
    clear_caches,
    compile_tools,
    compiler,
    load_tokenizer,
    parse_tool_calls,
    render_tool_calls,
)
from constrained.frames import toolset
from constrained.runtime import text_masks
from constrained.schema.formats import format_regex
from constrained.tokenizers import cache as tokenizer_cache

THREADS = 8
EVENT = {
    "type": "function",
    "function": {
        "name": "add_event",
        "parameters": {
            "type": "object",
            "properties": {
                "title": {"type": "string", "pattern": "^[A-Z][A-Za-z ]+$"},
                "day": {"type": "string", "format": "date"},
                "guests": {"type": "array", "items": {"type": "integer", "minimum": 0}, "maxItems": 3},
            },
            "required": ["title", "day"],
        },
    },
}
TOOLS = [WEATHER, EVENT]
CALLS = [
    {"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"}},
    {"name": "add_event", "arguments": {"title": "Lunch with Ada", "day": "2025-03-01", "guests": [1, 2]}},
]
BAD_CALL = {"name": "add_event", "arguments": {"title": "lunch", "day": "someday"}}
DIALECTS = {"qwen3_coder": "qwen3", "gemma4": "gemma4"}
ENDS = {"qwen3_coder": "<|im_end|>", "gemma4": "<|tool_response>"}

T = TypeVar("T")


def outcomes(dialect: str) -> dict[str, Any]:
    """Everything a request does with ``TOOLS`` in ``dialect``, reduced to
    comparable values (call ids are random, so they are left out)."""
    tok = load_tokenizer(DIALECTS[dialect])
    compiled = compile_tools(TOOLS, dialect, tok, tool_choice="required", reasoning=False)
    text = render_tool_calls(CALLS, TOOLS, dialect)
    bad = render_tool_calls([BAD_CALL], TOOLS, dialect)
    parsed = parse_tool_calls(text + bad, TOOLS, dialect)
    stream = ToolCallStreamParser(TOOLS, dialect)
    deltas = [delta for start in range(0, len(text), 7) for delta in stream.feed(text[start : start + 7])]
    deltas += stream.close()
    return {
        "compiled": compiled,
        "grammar": compiled.grammar,
        "parsed": (calls_of(parsed.tool_calls), parsed.content, [error.reason for error in parsed.errors]),
        "streamed": ([without_ids(delta) for delta in deltas], calls_of(stream.result.tool_calls)),
        "masks": masks_along(compiled, tok.encode(text) + [tok.token_id(ENDS[dialect])]),
    }


def calls_of(tool_calls: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(call["function"]["name"], call["function"]["arguments"]) for call in tool_calls]


def without_ids(delta: Any) -> Any:
    if isinstance(delta, dict):
        return {key: without_ids(value) for key, value in delta.items() if key != "id"}
    if isinstance(delta, list):
        return [without_ids(item) for item in delta]
    return delta


def masks_along(compiled: Any, tokens: list[int]) -> list[str]:
    """A digest of the allowed set at each step of a constraint fed ``tokens``."""
    constraint = ToolCallConstraint(compiled, 1)
    logits = torch.zeros(1, compiled.tokenizer.vocab_size)
    digests = []
    for token in tokens:
        logits.zero_()
        constraint.mask_logits(logits)
        digests.append(hashlib.sha256(torch.isfinite(logits).numpy().tobytes()).hexdigest())
        constraint.consume([token])
    assert constraint.is_finished(0) and constraint.events == []
    return digests


def at_once(work: Callable[[], T]) -> list[T]:
    """``work()`` in :data:`THREADS` threads started together."""
    barrier = threading.Barrier(THREADS)

    def run() -> T:
        barrier.wait()
        return work()

    with ThreadPoolExecutor(THREADS) as pool:
        futures = [pool.submit(run) for _ in range(THREADS)]
        return [future.result() for future in futures]


@pytest.mark.parametrize("dialect", ["qwen3_coder", pytest.param("gemma4", marks=pytest.mark.slow)])
def test_threads_racing_on_cold_caches_get_what_one_thread_gets(dialect: str) -> None:
    clear_caches()
    alone = outcomes(dialect)
    clear_caches()
    together = at_once(lambda: outcomes(dialect))
    assert len({id(result.pop("compiled")) for result in together}) == 1  # one compiled set kept for all
    alone.pop("compiled")
    for result in together:
        assert result == alone


def test_clear_caches_forgets_everything_and_what_follows_still_works() -> None:
    before = outcomes("qwen3_coder")
    assert len(toolset._cache) and len(compiler._cache) and len(tokenizer_cache._loaded) and len(text_masks._masks)
    assert format_regex.cache_info().currsize > 0
    clear_caches()
    assert all(len(kept) == 0 for kept in list(caches._caches))
    assert format_regex.cache_info().currsize == 0
    after = outcomes("qwen3_coder")
    assert after.pop("compiled") is not before.pop("compiled")
    assert after == before


def test_a_cache_keeps_the_first_value_made_and_forgets_the_least_recently_used() -> None:
    kept: caches.LruCache[str, int] = caches.LruCache("test", 2)
    assert kept.get_or_make("a", lambda: 1) == 1
    assert kept.get_or_make("a", lambda: 2) == 1
    assert kept.put("b", 3) == 3 and kept.get("a") == 1  # "a" used last: "b" is the oldest
    kept.put("c", 4)
    assert "b" not in kept and kept.get("a") == 1 and len(kept) == 2
    with pytest.raises(ValueError, match="at least 1"):
        caches.LruCache("test", 0)
