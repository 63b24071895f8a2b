"""The frame trackers' shared memo (``constrained.runtime.frame_tracker``):
what a tool set's trackers learn about its markup (a token that only
extends it, markup that closes a call's arguments) and look up per tool
and key is kept once per tool set, and a tracker that uses it stands
exactly where one that works everything out byte by byte does."""

from __future__ import annotations

import functools

import pytest
from corpus import bfcl_entries
from sample_tools import WRITE_FILE

from constrained import compile_tools, load_tokenizer, render_tool_calls
from constrained.runtime.constraint import ToolCallConstraint
from constrained.runtime.frame_tracker import FrameTracker, TrackerMemo, frame_trackers
from constrained.tokenizers import Tokenizer

TOKENIZERS = {"gemma4": "gemma4", "qwen3_coder": "qwen3", "glm47": "qwen3"}


@functools.cache
def tok(name: str) -> Tokenizer:
    return load_tokenizer(name)


class _NeverQuiet(dict):
    """A memo table that knows nothing and keeps nothing: every markup
    token goes byte by byte, as without the memo."""

    def get(self, key, default=None):  # type: ignore[no-untyped-def]
        return False

    def __setitem__(self, key, value) -> None:  # type: ignore[no-untyped-def]
        pass


class _Forgetful(dict):
    def __setitem__(self, key, value) -> None:  # type: ignore[no-untyped-def]
        pass


def byte_by_byte() -> TrackerMemo:
    memo = TrackerMemo()
    memo.quiet.table, memo.closes.table, memo.openings.table = _NeverQuiet(), _Forgetful(), _Forgetful()
    return memo


def calls(dialect: str, count: int) -> list[tuple[object, list[int]]]:
    """BFCL ground-truth calls of ``dialect`` that render: (compiled tools, tokens)."""
    t = tok(TOKENIZERS[dialect])
    found = []
    for entry in bfcl_entries()[::7]:
        try:
            compiled = compile_tools(entry.functions, dialect, t, tool_choice="required", key_order="schema")
            text = "".join(render_tool_calls([{"name": n, "arguments": a}], compiled.tools, dialect, key_order="schema")
                           for n, a in entry.calls)
        except Exception:  # ground truth that is no valid call of its tools
            continue
        found.append((compiled, t.encode(text)))
        if len(found) == count:
            break
    return found


def place(tracker: FrameTracker) -> tuple[object, ...]:
    return (*tracker.snapshot(), tracker.closed_arguments, tracker.in_text_frame, tracker.number_state)


@pytest.mark.parametrize("dialect", ["gemma4", "qwen3_coder", "glm47"])
def test_a_tracker_with_a_learned_memo_stands_where_byte_by_byte_matching_does(dialect: str) -> None:
    for compiled, tokens in calls(dialect, 25):
        shared = TrackerMemo()
        (warm,) = frame_trackers(compiled, 1, shared=shared)  # type: ignore[arg-type, misc]
        for token in tokens:  # the memo learns this call
            warm.feed(token)
        (learned,) = frame_trackers(compiled, 1, shared=shared)  # type: ignore[arg-type, misc]
        (plain,) = frame_trackers(compiled, 1, shared=byte_by_byte())  # type: ignore[arg-type, misc]
        assert shared.quiet and any(shared.quiet.table.values())
        for position, token in enumerate(tokens):
            learned.feed(token)
            plain.feed(token)
            assert place(learned) == place(plain), (compiled.tools[0].name, position)


def test_a_tool_sets_requests_share_one_memo_and_what_it_looked_up() -> None:
    compiled, tokens = calls("gemma4", 1)[0]
    first = ToolCallConstraint(compiled)  # type: ignore[arg-type]
    first.consume_row(0, tokens)
    second = ToolCallConstraint(compiled)  # type: ignore[arg-type]
    first_tracker, second_tracker = first.rows[0].tracker, second.rows[0].tracker
    assert first_tracker is not None and second_tracker is not None
    memo = first_tracker._memo
    assert second_tracker._memo is memo and memo.quiet
    # The lookups per tool and key are the same functions, with what they found kept.
    assert second_tracker._value_kind is first_tracker._value_kind


def test_a_memo_table_starts_over_when_full() -> None:
    memo = TrackerMemo(limit=3)
    for key in range(3):
        memo.closes.learn(bytes([key]), None)
    assert len(memo.closes) == 3
    memo.closes.learn(b"x", "tool")
    assert memo.closes.table == {b"x": "tool"}


def test_the_closing_state_after_text_is_where_its_bytes_lead_from_the_tracker() -> None:
    """What a value's crossing tokens are learned from: the closing's state
    once text is written from where the tracker stands; None where that
    text would complete the closing, or leave it matched from the value's
    opening (qwen3_coder's opening ends with the newline its closing begins
    with, and a value may not close at once)."""
    t = tok("qwen3")
    compiled = compile_tools([WRITE_FILE], "qwen3_coder", t)
    (tracker,) = frame_trackers(compiled, 1)  # type: ignore[misc]
    for token in t.encode("<tool_call>\n<function=write_file>\n<parameter=path>\n"):
        tracker.feed(token)
    assert tracker.in_text_frame
    assert tracker.closing_state_after(b"\n</parameter") == 12
    assert tracker.closing_state_after(b"</parameter") is None  # still the opening's newline
    assert tracker.closing_state_after(b"a\n</parameter>\n") is None  # the value would close
    for token in t.encode("src/a.py\n</parameter>"):
        tracker.feed(token)
    assert tracker.in_text_frame and tracker.closing_state_after(b"") == 13
    assert tracker.closing_state_after(b"\n") is None
    assert tracker.closing_state_after(b"x\n</parameter") == 12
