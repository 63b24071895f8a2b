"""Precomputed raw-text masks (``constrained.runtime.text_masks``) against llguidance.

The constraint fills a row from a precomputed mask inside any-text values of
qwen3_coder and glm; every such row must equal the mask llguidance computes
for the same grammar and tokens, over the whole vocabulary. Checked on the
BFCL ground truth, on coding-agent calls with awkward contents, on seeded
random walks that steer towards the closing, across rollbacks, and with GLM
markers as special tokens.
"""

from __future__ import annotations

import inspect
import random
import textwrap

import numpy as np
import pytest
import torch
from corpus import bfcl_entries
from sample_tools import RAW_DIALECTS

from constrained import compile_tools, load_tokenizer, render_tool_calls
from constrained.dialects import get_dialect
from constrained.dialects.base import Markers
from constrained.dialects.raw_values import ValueKind, top_level_value_kind
from constrained.errors import CompileError
from constrained.frames.toolset import normalize_tool
from constrained.runtime.constraint import RowState, ToolCallConstraint
from constrained.runtime.text_masks import _utf8_prefix, kmp_transitions, text_frame_masks
from constrained.tools import load_tools

TRACKED = (*RAW_DIALECTS, "gemma4", "functiongemma")
"""The dialects whose top-level strings the frame tracker follows: raw
values, and Gemma's strings between delimiter tokens."""



def tool(name: str, properties: dict, required: list[str] | None = None) -> dict:
    parameters = {"type": "object", "properties": properties, "required": required or list(properties)}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


WRITE = tool("write_file", {"path": {"type": "string"}, "content": {"type": "string"}})
EDIT = tool("edit", {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}})


def allowed(matcher, vocab_size: int) -> np.ndarray:
    """llguidance's mask as one bool per token."""
    words = np.zeros((vocab_size + 31) // 32, dtype=np.uint32)
    matcher.unsafe_compute_mask_ptr(words.ctypes.data, words.nbytes)
    return np.unpackbits(words.view(np.uint8), bitorder="little")[:vocab_size].astype(bool)


class Pair:
    """A one-row constraint and a plain llguidance matcher, fed alike."""

    def __init__(self, compiled):
        self.compiled = compiled
        self.vocab = compiled.tokenizer.vocab_size
        self.constraint = ToolCallConstraint(compiled)
        self.reference = compiled.matcher()
        self.logits = torch.zeros(1, self.vocab)
        self.checked = 0

    def check(self) -> np.ndarray:
        """The constraint's mask, asserted equal to llguidance's wherever it
        came from a precomputed row."""
        before = self.constraint.precomputed_rows
        self.logits.zero_()
        ours = torch.isfinite(self.constraint.mask_logits(self.logits))[0].numpy()
        if self.constraint.precomputed_rows > before:
            expected = allowed(self.reference, self.vocab)
            differ = np.nonzero(ours != expected)[0]
            tok = self.compiled.tokenizer
            assert differ.size == 0, [(int(t), tok.token_bytes(int(t)), bool(expected[t])) for t in differ[:8]]
            self.checked += 1
        return ours

    def feed(self, token: int) -> None:
        self.constraint.consume([token])
        assert self.reference.consume_token(token), self.reference.get_error()

    def run(self, tokens: list[int]) -> None:
        for token in tokens:
            assert self.check()[token], f"token {token} not allowed"
            self.feed(token)


def compiled_for(dialect: str, tools, tok=None, **options):
    tok = tok or get_dialect(dialect).default_tokenizer
    return compile_tools(tools, dialect, load_tokenizer(tok) if isinstance(tok, str) else tok,
                         tool_choice="required", reasoning=False, **options)


def rendered_tokens(compiled, calls) -> list[int]:
    tok, dialect = compiled.tokenizer, get_dialect(compiled.dialect)
    text = render_tool_calls([{"name": n, "arguments": a} for n, a in calls], compiled.tools, compiled.dialect)
    end = next(marker for marker in dialect.markup.ends_after_calls if Markers(tok).is_token(marker))
    return tok.encode(text) + [tok.token_id(end)]


PYTHON = inspect.getsource(textwrap)[:3000]
AWKWARD = [
    PYTHON,
    "</parameter>x\n</parameter\n</parameter >\n<parameter=x>\n",  # closing look-alikes
    "ends in half a closing\n</paramete",
    "</arg_value >\n</arg_valu",
    "多字节文字 🎉 émoji ✓\n  indented\t\ttabs\r\nCRLF",
    "",
    "\n\n\n",
]


@pytest.mark.parametrize("dialect", TRACKED)
def test_coding_calls_match_llguidance(dialect):
    compiled = compiled_for(dialect, [WRITE, EDIT])
    pair = Pair(compiled)
    # The texts the dialect can write (MiniMax's values end at the first </parameter>), each twice:
    # the second time the tracker's per-token steps are remembered.
    awkward = [text for text in AWKWARD if get_dialect(dialect).text_problem(text, top_level=True) is None]
    assert len(awkward) >= len(AWKWARD) - 1
    calls = [("write_file", {"path": "a.py", "content": text}) for text in awkward + awkward]
    calls.append(("edit", {"path": "a.py", "old": PYTHON[:500], "new": PYTHON[:500].replace("text", "txt")}))
    pair.run(rendered_tokens(compiled, calls))
    assert pair.constraint.state(0) is RowState.FINISHED
    content_tokens = 2 * sum(len(compiled.tokenizer.encode(text)) for text in awkward)
    assert pair.checked >= 0.9 * content_tokens


@pytest.mark.slow
@pytest.mark.parametrize("dialect", (*RAW_DIALECTS, "gemma4"))
def test_bfcl_ground_truth_matches_llguidance(dialect):
    """BFCL entries with valid ground truth (every second; the others every fourth)."""
    entries = bfcl_entries()[:: 2 if dialect == "qwen3_coder" else 4]
    tok = compiled_for(dialect, [WRITE]).tokenizer
    checked = finished = 0
    for entry in entries:
        tools = {t.name for t in load_tools(entry.functions)}
        if any(name not in tools for name, _ in entry.calls):
            continue
        compiled = compile_tools(entry.functions, dialect, tok, tool_choice="required", reasoning=False)
        try:
            tokens = rendered_tokens(compiled, entry.calls)
        except Exception:  # ground truth the schema rejects (listed in test_dialect_corpus)
            continue
        if not compiled.check(tok.decode(tokens[:-1])).accepted:
            continue
        pair = Pair(compiled)
        pair.run(tokens)
        checked += pair.checked
        finished += pair.constraint.state(0) is RowState.FINISHED
    assert finished >= len(entries) * 0.95
    assert checked > 1000, checked


def interesting(tok) -> list[int]:
    """Tokens that touch the closings or split characters."""
    table, special = tok.token_table
    marks = (b"<", b"/", b"\n", b">", b"parameter", b"arg_value", b'"', b"|")
    return [t for t, data in enumerate(table) if t not in special and data
            and (any(m in data for m in marks) or any(b >= 0x80 for b in data))]


@pytest.mark.slow
@pytest.mark.parametrize("dialect", TRACKED)
def test_random_walks_match_llguidance(dialect):
    """Seeded walks inside a value: each token drawn from the allowed set,
    half the time among tokens near the closing, until the call ends."""
    compiled = compiled_for(dialect, [WRITE])
    tok = compiled.tokenizer
    near = interesting(tok)
    start = rendered_tokens(compiled, [("write_file", {"path": "p", "content": "x"})])
    text = tok.decode(start)
    prefix = tok.encode(text[: text.index("content") + len("content")])
    rng = random.Random(7)
    checked = 0
    for _ in range(40):
        pair = Pair(compiled)
        for token in prefix:
            pair.feed(token)
        for _ in range(80):
            if pair.constraint.state(0) is not RowState.ACTIVE:
                break
            mask = pair.check()
            choices = [t for t in rng.sample(near, 400) if mask[t]] if rng.random() < 0.5 else []
            pair.feed(rng.choice(choices) if choices else int(rng.choice(np.nonzero(mask)[0])))
        checked += pair.checked
    assert checked > 1500


@pytest.mark.parametrize("dialect", ["qwen3_coder", "glm47", "gemma4"])
def test_rollback_restores_the_tracker(dialect):
    compiled = compiled_for(dialect, [WRITE])
    tokens = rendered_tokens(compiled, [("write_file", {"path": "p", "content": PYTHON[:400]})])
    pair = Pair(compiled)
    pair.run(tokens[:60])
    pair.constraint.rollback(25)
    pair.reference.rollback(25)
    pair.run(tokens[35:])
    assert pair.constraint.state(0) is RowState.FINISHED
    # Back across the end of the content into the path, and on again.
    pair.constraint.rollback(len(tokens) - 50)
    pair.reference = compiled.matcher()
    pair.reference.consume_tokens(tokens[:50])
    pair.run(tokens[50:])
    assert pair.constraint.state(0) is RowState.FINISHED


def glm_special_tokenizer():
    """The Qwen vocabulary with GLM's markers added as special tokens."""
    from tokenizers import AddedToken

    backend = load_tokenizer("qwen3").backend
    clone = type(backend).from_str(backend.to_str())
    markers = ["<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"]
    clone.add_special_tokens([AddedToken(m, special=True) for m in markers])
    return load_tokenizer(clone, eos_token_ids=[clone.token_to_id("<|endoftext|>")])


@pytest.mark.slow
@pytest.mark.parametrize("dialect", ["glm45", "glm47"])
def test_glm_special_markers_match_llguidance(dialect):
    tok = glm_special_tokenizer()
    assert Markers(tok).is_token("</arg_value>")
    compiled = compiled_for(dialect, [WRITE, EDIT], tok)
    pair = Pair(compiled)
    calls = [("write_file", {"path": "a.py", "content": text}) for text in AWKWARD]
    pair.run(rendered_tokens(compiled, calls))
    assert pair.constraint.state(0) is RowState.FINISHED
    assert pair.checked > 500


def value_kind(parameters: dict, key: str) -> ValueKind:
    spec = {"type": "function", "function": {"name": "f", "parameters": parameters}}
    tool = normalize_tool(load_tools([spec])[0])
    return top_level_value_kind(get_dialect("qwen3_coder"), tool, key, "\n</parameter>\n")


@pytest.mark.parametrize(
    "parameters, key, kind",
    [
        ({"type": "object", "properties": {"a": {"type": "string"}}}, "a", ValueKind.ANY_TEXT),
        ({"type": "object", "properties": {"a": {"type": ["string", "integer"]}}}, "a", ValueKind.ANY_TEXT),
        ({"type": "object", "properties": {"a": {}}}, "a", ValueKind.ANY_TEXT),
        ({"type": "object", "properties": {"a": {"type": "string", "maxLength": 5}}}, "a", ValueKind.OTHER),
        ({"type": "object", "properties": {"a": {"type": "integer"}}}, "a", ValueKind.OTHER),
        ({"type": "object", "additionalProperties": {"type": "string"}}, "zz", ValueKind.ANY_TEXT),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}, "zz", ValueKind.OTHER),
        (
            {"anyOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["b"]},
            ]},
            "a",
            ValueKind.OTHER,
        ),
        ({"type": "object", "properties": {"a": {"type": "string"}, "b": {"enum": ["x\n</parameter>\ny"]}}}, "a",
         ValueKind.UNTRACKED),
    ],
)
def test_value_kind(parameters, key, kind):
    assert value_kind(parameters, key) is kind


def test_enum_holding_the_closing_is_refused():
    """A top-level enum value holding the closing text cannot be written in
    qwen3_coder (the first closing would end it), so the tool is refused
    rather than given a grammar the parser would misread."""
    spec = tool("f", {"a": {"enum": ["x\n</parameter>\n<parameter=b>\ny"]}, "b": {"type": "string"}})
    with pytest.raises(CompileError, match="cannot be written in dialect 'qwen3_coder'"):
        compiled_for("qwen3_coder", [spec])


def test_precomputed_masks_of_the_qwen_closing():
    tok = load_tokenizer("qwen3")
    masks = text_frame_masks(tok, "\n</parameter>\n", None)
    inside = np.unpackbits(masks.inside.view(np.uint8), axis=1, bitorder="little")[:, : tok.vocab_size].astype(bool)
    im_end = tok.token_id("<|im_end|>")
    newline = tok.encode("\n")[0]
    assert not inside[:, im_end].any()  # special tokens never occur in text
    assert inside[0, newline] and inside[12, newline]
    assert not inside[13, newline] and newline in masks.completing[13]  # "\n</parameter>" + "\n"
    assert all(len(c) == 0 for c in masks.completing[:12])
    assert masks.crossing[13] and all(tok.token_bytes(t)[0:1] == b"\n" for t in masks.crossing[13])
    assert text_frame_masks(tok, "\n</parameter>\n", None) is masks  # built once per tokenizer


@pytest.mark.parametrize(("tokenizer", "close", "special"), [
    ("qwen3", "\n</parameter>\n", False), ("gemma4", '<|"|>', True)])
def test_a_text_row_is_written_whole_over_any_row(tokenizer, close, special):
    """A text step writes its state's row (every word set, then the words
    of the special tokens) over whatever the buffer held; where the closing
    is a special token, that token is allowed in every state."""
    tok = load_tokenizer(tokenizer)
    masks = text_frame_masks(tok, close, tok.token_id(close) if special else None)
    for state, written in enumerate(masks.written):
        row = np.random.default_rng(state).integers(0, 2**32, len(written), dtype=np.uint32)
        masks.write(row, state)
        assert np.array_equal(row, written)
        expected = masks.inside[state].copy()
        if special:
            expected[masks.close_token >> 5] |= np.uint32(1 << (masks.close_token & 31))
        assert np.array_equal(written, expected)


def test_kmp_transitions():
    table = kmp_transitions(b"abab")
    state = 0
    states = []
    for byte in b"ababab":
        state = table[state][byte] if state < 4 else table[2][byte]
        states.append(state)
    assert states == [1, 2, 3, 4, 3, 4]


@pytest.mark.parametrize(
    "data, valid",
    [(b"abc", True), ("é".encode(), True), ("文".encode()[:2], True), ("🎉".encode()[:1], True),
     (b"\x80", False), (b"\xc0\xaf", False), (b"\xed\xa0", False), (b"\xf4\x90", False), (b"a\xff", False)],
)
def test_utf8_prefix(data, valid):
    assert _utf8_prefix(data) is valid


@pytest.mark.parametrize("dialect", ["glm45", "glm47"])
@pytest.mark.parametrize("last", [{"type": "string", "maxLength": 20}, {"type": "string", "pattern": "^a+$"}, {"type": "string"}])
def test_glm_string_value_before_the_call_end(dialect, last):
    """A raw string lexeme that ends in its text closing, right before the
    special ``</tool_call>``: masks computed at every step (llguidance 1.9
    panicked there while the lexeme was greedy)."""
    compiled = compiled_for(dialect, [tool("f", {"a": {"type": "integer"}, "b": last})])
    pair = Pair(compiled)
    pair.run(rendered_tokens(compiled, [("f", {"a": 1, "b": "aaa"})]))
    assert pair.constraint.state(0) is RowState.FINISHED
    assert not pair.constraint.events


@pytest.mark.parametrize(
    "tail, kmp",
    [(b"", 0), (b"", 1), (b"\n", 1), (b"\n<param", 0), (b"\n</parameter>\n<parameter=pa", 0), (b"(", 0), (b"()", 5)],
)
def test_guard_tokens_equal_a_scan_of_the_whole_vocabulary(tail, kmp):
    """The tokens that would complete a guard, found from the few that can
    (those holding a guard whole, those starting with a guard's rest), are
    the tokens a scan of every token finds; one guard here ("():") lies
    whole inside real tokens."""
    from constrained.runtime.text_masks import ValueGuards, _completes_at

    tok = load_tokenizer("qwen3")
    masks = text_frame_masks(tok, "\n</parameter>\n", None)
    guards = (b"():", b"\n<parameter=path>\n", b"\n</parameter>\n<parameter=path>\n", b"\n</function>\n")
    found = ValueGuards(tok, masks, guards, b"\n").bad(tail, kmp)
    table, special = tok.token_table
    done = len(masks.close)
    scanned = []
    for token, data in enumerate(table):
        if not data or token in special:
            continue
        end = _completes_at(masks.transitions, kmp, data, done)
        whole = tail + data[: end or len(data)]
        if any(guard in whole for guard in guards):
            scanned.append(token)
    assert found.tolist() == scanned
    if not tail:
        assert len(scanned) >= 3  # tokens such as "():\n" hold a guard whole
