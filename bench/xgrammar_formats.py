"""The formats XGrammar has a built-in structural tag for, side by side with
this library's dialects, written to ``bench/RESULTS.md`` (section
``xgrammar_formats``):

    python bench/xgrammar_formats.py [--bfcl-stride N]

For each family, the same tokens through both engines (``tool_choice``
required, reasoning off, or the rest of a block the prompt opened):

- **valid calls**: held-out BFCL ground-truth calls (every N-th entry from
  the second) and a ``write_file`` call per awkward string value (text that
  looks like JSON or a number, multi-line file contents, the format's own
  tags spelled in a value), rendered as the family writes them; each engine
  should accept them.
- **mutants**: each BFCL call with a required key removed, a string where
  the schema says integer or number, a value outside an enum, a key the
  tool does not declare; each engine should refuse them.
- **cold compile**: every BFCL entry's tool set, compiled with no cache
  (this library: ``compile_tools`` after ``clear_caches``; XGrammar: a
  compiler with its cache off).

gpt-oss's turn holds one call (its ``<|call|>`` ends the turn): each BFCL
entry gives its first call, and every case is judged twice, as the renderer
writes the call's header and without the space before ``<|constrain|>``
(the format's documentation has both; XGrammar's tag writes the second).
MiniMax's prompt opens the reasoning block, so its calls follow the
block's closing, for both engines.

Where the engines disagree, the first cases of each kind are shown.
Mask and advance times per token for ``deepseek_v4`` and ``kimi_k2`` are
in the ``mask_time`` section (``bench/mask_time.py``).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from constrained import clear_caches, compile_tools, load_tokenizer, render_tool_calls
from constrained.compiler import CompiledTools
from constrained.dialects import get_dialect
from constrained.dialects.base import openai_function
from constrained.frames.model import EnumFrame, IntegerFrame, NumberFrame, ObjectFrame
from constrained.tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from corpus import bfcl_entries  # noqa: E402  (the corpus reader the tests use)
from report import environment, write_section  # noqa: E402
from sample_tools import WRITE_FILE  # noqa: E402

FAMILIES = {
    "deepseek_v32": "deepseek_v3_2", "deepseek_v4": "deepseek_v4", "deepseek_v41": "deepseek_v4_1",
    "deepseek_v31": "deepseek_v3_1", "deepseek_r1": "deepseek_r1", "kimi_k2": "kimi", "gpt_oss": "harmony",
    "minimax_m2": "minimax",
}  # fmt: skip
"""Dialect -> XGrammar's built-in structural tag for the same format."""
TOKENIZER = {dialect: "deepseek_v4" for dialect in FAMILIES} | {
    "kimi_k2": "kimi_k2", "gpt_oss": "o200k_harmony", "minimax_m2": "minimax_m2"}  # fmt: skip
"""DeepSeek V4's vocabulary holds every DeepSeek marker; Kimi's, gpt-oss's and MiniMax's are built in."""
OPENED_BY_PROMPT = {"minimax_m2": "Looking it up.\n</think>\n\n"}
"""Families whose prompt opens the reasoning block (MiniMax's ends with
``<think>\n``; XGrammar's tag then starts inside it): both engines get the
block's rest before the calls, this library with ``reasoning="open"``."""
SPELLINGS = {"gpt_oss": ("no space before <|constrain|>", lambda text: text.replace(" <|constrain|>", "<|constrain|>"))}
"""A second way the family writes a call, judged too (Harmony's documentation
writes a call's header both ways; XGrammar's tag writes this one)."""
WRITE = {"type": "function", "function": WRITE_FILE}  # write_file(path, content), as the tests have it
KEYWORDS = {
    "type": "function",
    "function": {
        "name": "register",
        "parameters": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "maxLength": 5, "pattern": "^[a-z]+$"},
                "n": {"type": "integer", "minimum": 1, "maximum": 10},
                "email": {"type": "string", "format": "email"},
                "mode": {"enum": ["fast", "safe"]},
            },
            "required": ["code", "n", "email", "mode"],
        },
    },
}
KEYWORD_VALID = {"code": "abc", "n": 5, "email": "a@b.co", "mode": "fast"}
KEYWORD_MUTANTS = [
    ("maxLength with pattern", {"code": "abcdefgh"}), ("pattern", {"code": "AB1"}), ("maximum", {"n": 11}),
    ("minimum", {"n": 0}), ("format", {"email": "not an email"}), ("enum", {"mode": "slow"}),
]  # fmt: skip
"""Schema keywords serving engines have been seen to drop (XGrammar #749, #895: maxLength beside pattern)."""
AWKWARD = [
    '{"debug": true}', "12", "true", "null", "[1, 2]", "",
    "def f(x):\n    return x\n\n\n", "line 1\r\nline 2\t\n", "  indented\n",
    "</parameter>", '<invoke name="x">', "</div> and </", "a</ parameter>b", 'string="false"',
    "```json\n{}\n```", '"}', "function", "tool_call_end", "functions.ping:0",
]  # fmt: skip


@dataclass
class Tally:
    """One family's counts, and the cases the engines disagree on."""

    counts: Counter[str] = field(default_factory=Counter)
    shown: dict[str, list[str]] = field(default_factory=dict)
    ours_ms: list[float] = field(default_factory=list)
    theirs_ms: list[float] = field(default_factory=list)

    def judge(self, kind: str, valid: bool, ours: bool, theirs: bool, text: str) -> None:
        self.counts[f"{kind}: cases"] += 1
        for engine, accepted in (("constrained", ours), ("XGrammar", theirs)):
            if accepted != valid:
                self.counts[f"{kind}: {engine} {'refuses' if valid else 'accepts'}"] += 1
                examples = self.shown.setdefault(f"{kind}: {engine} {'refuses' if valid else 'accepts'}", [])
                if len(examples) < 2:
                    examples.append(text)


class XGrammar:
    """XGrammar's compiler over one vocabulary, its cache off."""

    def __init__(self, tok: Tokenizer, reasoning: str) -> None:
        import xgrammar as xgr

        table, _ = tok.token_table
        info = xgr.TokenizerInfo(list(table), xgr.VocabType.RAW, vocab_size=tok.vocab_size, stop_token_ids=list(tok.eos_token_ids))
        self.xgr = xgr
        self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.tok = tok
        self.reasoning = reasoning

    def compile(self, tag: str, specs: list[dict[str, Any]]) -> Any:
        structural = self.xgr.get_model_structural_tag(tag, tools=specs, tool_choice="required", reasoning=self.reasoning)
        return self.compiler.compile_structural_tag(structural)

    def accepts(self, grammar: Any, tokens: list[int]) -> bool:
        matcher = self.xgr.GrammarMatcher(grammar)
        return all(matcher.accept_token(token) for token in tokens) and matcher.is_terminated()


def specs_of(compiled: CompiledTools) -> list[dict[str, Any]]:
    return [{"type": "function", "function": openai_function(tool)} for tool in compiled.tools]


def mutants(compiled: CompiledTools, name: str, arguments: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Invalid arguments made from valid ones, by kind."""
    tool = next(t for t in compiled.tools if t.name == name)
    root = tool.schema.resolve(tool.root)
    if not isinstance(root, ObjectFrame):
        return
    for key in root.required:
        if key in arguments:
            yield "required key removed", {k: v for k, v in arguments.items() if k != key}
            break
    for key, frame in root.properties:
        frame = tool.schema.resolve(frame)
        if key in arguments and isinstance(frame, (IntegerFrame, NumberFrame)):
            yield "a string for a number", {**arguments, key: "seven"}
            break
    for key, frame in root.properties:
        frame = tool.schema.resolve(frame)
        if key in arguments and isinstance(frame, EnumFrame) and all(isinstance(v, str) for v in frame.values):
            yield "a value outside the enum", {**arguments, key: "not-" + "-".join(map(str, frame.values))[:40]}
            break
    if root.additional is None and not root.pattern_properties:
        yield "an undeclared key", {**arguments, "undeclared_key": 1}


def run(dialect: str, stride: int) -> Tally:
    tally = Tally()
    tok = load_tokenizer(TOKENIZER[dialect])
    markup = get_dialect(dialect).markup
    one_call = markup.messages is not None  # a call's closing ends the turn, which then holds one call
    end = tok.token_id(markup.close) if one_call else tok.eos_token_ids[0]
    opened = OPENED_BY_PROMPT.get(dialect, "")
    xgrammar = XGrammar(tok, "enabled" if opened else "disabled")
    tag = FAMILIES[dialect]
    reasoning = "open" if opened else False

    def judge(kind: str, valid: bool, compiled: CompiledTools, grammar: Any, calls: list[dict[str, Any]]) -> None:
        try:
            text = render_tool_calls(calls, compiled.tools, dialect, key_order="schema")
        except Exception:  # a mutant the renderer cannot write (no such key in the format)
            return
        spellings = [(kind, opened + text)]
        if dialect in SPELLINGS:
            label, respelled = SPELLINGS[dialect]
            spellings.append((f"{kind} ({label})", respelled(text)))
        for judged_kind, judged in spellings:
            tokens = tok.encode(judged) + [end]
            tally.judge(judged_kind, valid, compiled.check(judged).accepted, xgrammar.accepts(grammar, tokens), judged)

    write = compile_tools([WRITE], dialect, tok, tool_choice="required", reasoning=reasoning, key_order="schema")
    write_grammar = xgrammar.compile(tag, [WRITE])
    for value in AWKWARD:
        if get_dialect(dialect).text_problem(value, top_level=True) is not None:
            tally.counts["awkward strings: not writable in the format"] += 1  # a value ending at its own closing
            continue
        judge("awkward strings", True, write, write_grammar, [{"name": "write_file", "arguments": {"path": value, "content": value}}])
    keywords = compile_tools([KEYWORDS], dialect, tok, tool_choice="required", reasoning=reasoning, key_order="schema")
    keywords_grammar = xgrammar.compile(tag, [KEYWORDS])
    judge("schema keywords", True, keywords, keywords_grammar, [{"name": "register", "arguments": KEYWORD_VALID}])
    for kind, change in KEYWORD_MUTANTS:
        judge(f"mutant, {kind}", False, keywords, keywords_grammar, [{"name": "register", "arguments": {**KEYWORD_VALID, **change}}])
    for entry in bfcl_entries()[1::stride]:
        clear_caches()
        started = time.perf_counter()
        try:
            compiled = compile_tools(entry.functions, dialect, tok, tool_choice="required", reasoning=reasoning, key_order="schema")
        except Exception:
            tally.counts["BFCL: tool set not compiled"] += 1
            continue
        tally.ours_ms.append((time.perf_counter() - started) * 1000)
        specs = specs_of(compiled)
        started = time.perf_counter()
        grammar = xgrammar.compile(tag, copy.deepcopy(specs))
        tally.theirs_ms.append((time.perf_counter() - started) * 1000)
        calls = [{"name": name, "arguments": arguments} for name, arguments in entry.calls[: 1 if one_call else None]]
        if not compiled.check(opened + render_tool_calls(calls, compiled.tools, dialect, key_order="schema")).accepted:
            tally.counts["BFCL: ground truth no valid call"] += 1  # as the tests find it
            continue
        judge("BFCL calls", True, compiled, grammar, calls)
        for kind, arguments in mutants(compiled, *entry.calls[0]):
            judge(f"mutant, {kind}", False, compiled, grammar, [{"name": entry.calls[0][0], "arguments": arguments}])
    return tally


def report(tallies: dict[str, Tally], stride: int, seconds: float) -> str:
    lines = [
        "## Formats beside XGrammar's built-in structural tags (`bench/xgrammar_formats.py`)",
        "",
        f"{environment()}. `python bench/xgrammar_formats.py --bfcl-stride {stride}`, {seconds:.0f} s. The same tokens "
        "through this library's constraint and XGrammar's structural tag for the family (`tool_choice` required, "
        "reasoning off; minimax_m2's calls after the rest of the reasoning block its prompt opens): valid calls should be accepted, mutants refused. Cold compile: each held-out BFCL entry's "
        "tool set with no cache on either side (median / mean ms; this library's mask cache is warmed by the first "
        "constraint, which `mask_time`'s first-call setup counts).",
        "",
        "| dialect | XGrammar tag | kind | cases | constrained wrong | XGrammar wrong |",
        "|---|---|---|---:|---:|---:|",
    ]
    for dialect, tally in tallies.items():
        kinds = sorted({key.split(": ")[0] for key in tally.counts if key.endswith(": cases")})
        for kind in kinds:
            verb = "refuses" if not kind.startswith("mutant") else "accepts"
            lines.append(
                f"| {dialect} | `{FAMILIES[dialect]}` | {kind} | {tally.counts[f'{kind}: cases']} | "
                f"{tally.counts[f'{kind}: constrained {verb}']} | {tally.counts[f'{kind}: XGrammar {verb}']} |"
            )
    left_out = [
        f"{dialect}, {key} {count}" for dialect, tally in tallies.items() for key, count in sorted(tally.counts.items())
        if not key.endswith((": cases", " refuses", " accepts"))
    ]
    if left_out:
        lines += ["", "Left out (no case for either engine): " + "; ".join(left_out) + "."]
    lines += ["", "| dialect | cold compile, constrained | cold compile, XGrammar | ratio (mean) |", "|---|---:|---:|---:|"]
    for dialect, tally in tallies.items():
        ours, theirs = tally.ours_ms, tally.theirs_ms
        lines.append(
            f"| {dialect} | {statistics.median(ours):.1f} / {statistics.mean(ours):.1f} | "
            f"{statistics.median(theirs):.1f} / {statistics.mean(theirs):.1f} | "
            f"{statistics.mean(ours) / statistics.mean(theirs):.2f}x |"
        )
    shown = [(dialect, key, text) for dialect, tally in tallies.items() for key, texts in tally.shown.items() for text in texts]
    if shown:
        lines += ["", "Where an engine is wrong (the first cases of each kind):", ""]
        lines += [f"- {dialect}, {key}: `{text!r}`" for dialect, key, text in shown]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bfcl-stride", type=int, default=10)
    args = parser.parse_args()
    started = time.perf_counter()
    tallies = {dialect: run(dialect, args.bfcl_stride) for dialect in FAMILIES}
    section = report(tallies, args.bfcl_stride, time.perf_counter() - started)
    write_section("xgrammar_formats", section)
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
