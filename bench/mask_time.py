"""Per-token mask time, side by side on the same token sequences:

    python bench/mask_time.py [--bfcl-stride 5] [--plot bench/mask_time.png] [--only TEXT]

Engines, each computing the next-token mask before every token of the same
rendered calls (then fed the token):
- ``constrained, first call``: :class:`~constrained.ToolCallConstraint`
  (one row), ``fill_masks`` into its own buffer: precomputed rows inside
  raw-text values, the mask cache and llguidance elsewhere, with the tool
  set's mask cache emptied before the constraint is made (a tool set's
  first request in a loop of one's own: the constraint warms the cache
  when it is made, timed apart as its setup);
- ``constrained, repeated call``: the same call a third time, the mask
  cache as the first two left it (every later request of the tool set);
- ``llguidance (our grammar)``: the same grammar through a bare llguidance
  matcher, i.e. without the precomputed rows and the cache;
- ``llguidance (plain)`` (coding workloads): the straightforward grammar of
  the measured anchors in ``docs/design.md``: raw text up to the closing
  markup as one lazy lexeme (qwen3_coder), ``/(.|\\n)*/`` between string
  tokens (gemma4);
- ``constrained, call never seen``: the calls-never-seen workload only (see
  below), each case's first and only run;
- ``constrained, other values``: the other-values workload only (see below):
  the tool set's cache as an engine's compile and one request of the
  ground-truth call left it;
- ``XGrammar 0.2.9``: its built-in structural tag for the dialect
  (``qwen_3_coder``, ``gemma_4``, ``qwen_3`` for hermes, ``glm_4_7``,
  ``deepseek_v4``, ``kimi``, ``harmony`` for gpt_oss, ``minimax``) with
  the same tools, ``tool_choice="required"``, reasoning disabled. In
  gpt_oss each case is its first call (the call's ``<|call|>`` ends the
  turn), its header written as XGrammar's tag writes it (no space before
  ``<|constrain|>``, which Harmony's documentation writes too and this
  library's grammar accepts). MiniMax-M2's prompt opens the reasoning
  block: its calls follow the block's closing, with reasoning ``"open"``
  here and ``"enabled"`` in XGrammar's tag.

Workloads: coding-agent calls with long contents (``write_file`` with 3,000
characters of Python, ``edit`` with old and new strings) in qwen3_coder,
glm47 and gemma4; the BFCL v3 ground-truth calls (every ``--bfcl-stride``-th
entry whose truth is a valid call) and one call of every MCP corpus tool
(arguments from its schema, every server's tools declared) in qwen3_coder,
gemma4 and hermes; the same BFCL calls with other values (numbers moved by
one, strings one letter longer, or only one of the two where the tools
accept nothing else), timed after a request of the ground-truth call, as an
agent calls the same tools with new arguments (XGrammar after the same
request); and calls never seen: other BFCL entries (every
``--bfcl-stride``-th from the second, so none is in the BFCL workload), each
compiled cold (both engines' compile caches cleared) and timed on its first
run with no warm-up, as a new request of a new tool set meets a process
that has served others (what each engine builds once per tokenizer is
built beforehand); ours is compiled as a serving engine compiles it, on its
compile thread (``ToolsRequest.compile``: ``compile_tools``, then the masks
every request starts with, ``warm_mask_cache``). The compile times are
reported beside, and a second
table gives each whole call: compile, the request's setup and every mask. Keys
are written in schema order (``key_order="schema"``, XGrammar's order). A sequence an engine refuses is left out for every
engine and counted. One thread; each case runs twice per engine and the
second run is timed (the first builds lexer states and caches); the coding
workloads' one case in five rounds, the engines taking turns, steps pooled. Feeding
each token after its mask is timed too (ours: ``consume``; llguidance's
``consume_token``; XGrammar's ``accept_token``), for the table of mask and
advance per token: what a serving engine's CPU pays per token.
"""

from __future__ import annotations

import argparse
import inspect
import logging
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import llguidance
import numpy as np
import torch

from constrained import ToolCallConstraint, compile_tools, load_tokenizer, render_tool_calls
from constrained.compiler import clear_compile_cache
from constrained.dialects import get_dialect
from constrained.dialects.base import openai_function
from constrained.frames.toolset import normalize_tools
from constrained.runtime.constraint import warm_mask_cache
from constrained.tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from corpus import bfcl_entries, mcp_calls  # noqa: E402  (the corpus reader the tests use)
from report import BENCH, environment, plot_distributions, summary, write_section  # noqa: E402
from xgrammar_formats import OPENED_BY_PROMPT, SPELLINGS  # noqa: E402  (how each family's calls are written for both engines)

PYTHON = inspect.getsource(textwrap)[:3000]  # real Python source, fixed per Python version
CODING_ROUNDS = 5
"""Rounds of the coding workloads' one case, the engines taking turns, their
steps pooled: the p99 of one run of about 800 steps is its eight slowest,
where this machine's own pauses land."""
OLD = inspect.getsource(textwrap.dedent)
NEW = OLD.replace("margin", "indent_prefix")


def function(name: str, *params: str) -> dict[str, Any]:
    properties = {p: {"type": "string"} for p in params}
    parameters = {"type": "object", "properties": properties, "required": list(params)}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


WRITE = function("write_file", "path", "content")
EDIT = function("edit", "path", "old_string", "new_string")
FIRST, REPEATED = "constrained, first call", "constrained, repeated call"
OTHER_VALUES = "constrained, other values"
NEVER_SEEN = "constrained, call never seen"
XGRAMMAR = "XGrammar 0.2.9"
TOKENIZER = {"qwen3_coder": "qwen3", "glm47": "qwen3", "hermes": "qwen3", "gemma4": "gemma4", "deepseek_v4": "deepseek_v4",
             "kimi_k2": "kimi_k2", "gpt_oss": "o200k_harmony", "minimax_m2": "minimax_m2"}
XGRAMMAR_TAG = {"qwen3_coder": "qwen_3_coder", "glm47": "glm_4_7", "hermes": "qwen_3", "gemma4": "gemma_4",
                "deepseek_v4": "deepseek_v4", "kimi_k2": "kimi", "gpt_oss": "harmony", "minimax_m2": "minimax"}
END = {"qwen3_coder": "<|im_end|>", "glm47": "<|endoftext|>", "hermes": "<|im_end|>", "gemma4": "<|tool_response>",
       "deepseek_v4": "<｜end▁of▁sentence｜>", "kimi_k2": "<|im_end|>", "gpt_oss": "<|call|>", "minimax_m2": "[e~["}
CALL_DIALECTS = ("qwen3_coder", "gemma4", "hermes", "deepseek_v4", "kimi_k2", "gpt_oss", "minimax_m2")
"""The dialects of the BFCL, MCP and never-seen workloads."""


@dataclass
class Case:
    tools: list[dict[str, Any]]  # any form compile_tools reads (BFCL functions as given)
    calls: list[tuple[str, dict[str, Any]]]


@dataclass
class Workload:
    dialect: str
    name: str
    cases: list[Case]
    times: dict[str, list[float]] = field(default_factory=dict)
    advance: dict[str, list[float]] = field(default_factory=dict)  # feeding each token, aligned with times
    tokens: int = 0
    measured: int = 0
    refused: dict[str, int] = field(default_factory=dict)
    hits: dict[str, int] = field(default_factory=dict)  # masks from the mask cache, per engine
    never_seen: bool = False  # each case timed on its first run, compiled cold
    other_values: bool = False  # each case's call with other values, after a request of the call itself
    compile_ms: dict[str, list[float]] = field(default_factory=dict)  # per engine, never-seen cases
    setup_ms: dict[str, list[float]] = field(default_factory=dict)  # a request's setup (never-seen cases; first calls: the warm-up)
    masks_ms: dict[str, list[float]] = field(default_factory=dict)  # every mask of a case together
    rounds: int = 1  # times each case is timed, the engines taking turns

    def record(self, results: dict[str, list[float] | None], tokens: int,
               advance: dict[str, list[float]] | None = None) -> bool:
        """Keep one case's step times per engine (mask; ``advance``: feeding
        each token), or count it left out when an engine refused its tokens;
        whether it was kept."""
        refused = [engine for engine, times in results.items() if times is None]
        if refused:
            reason = "no valid call" if len(refused) == len(results) else f"refused by {', '.join(refused)}"
            self.refused[reason] = self.refused.get(reason, 0) + 1
            return False
        self.measured += 1
        self.tokens += tokens
        for engine, times in results.items():
            self.times.setdefault(engine, []).extend(times or [])
            if advance is not None:
                self.advance.setdefault(engine, []).extend(advance[engine])
        return True


def workloads(bfcl_stride: int) -> list[Workload]:
    loads = []
    for dialect in ("qwen3_coder", "glm47", "gemma4", "deepseek_v4"):
        loads.append(Workload(dialect, "write_file", [Case([WRITE], [("write_file", {"path": "src/t.py", "content": PYTHON})])],
                              rounds=CODING_ROUNDS))
        loads.append(Workload(dialect, "edit", [Case([EDIT], [("edit", {"path": "src/t.py", "old_string": OLD, "new_string": NEW})])],
                              rounds=CODING_ROUNDS))
    bfcl = [Case(entry.functions, entry.calls) for entry in bfcl_entries()[::bfcl_stride]]
    mcp = mcp_cases()
    for dialect in CALL_DIALECTS:
        loads.append(Workload(dialect, f"BFCL (every {bfcl_stride}th entry)", bfcl))
        loads.append(Workload(dialect, "MCP corpus", mcp))
        loads.append(Workload(dialect, f"BFCL, other values (every {bfcl_stride}th entry)", bfcl, other_values=True))
    unseen = [Case(entry.functions, entry.calls) for entry in bfcl_entries()[1::bfcl_stride]]
    for dialect in CALL_DIALECTS:
        loads.append(Workload(dialect, f"BFCL calls never seen (every {bfcl_stride}th from the 2nd)", unseen,
                              never_seen=True))
    return loads


def mcp_cases() -> list[Case]:
    """One call per MCP corpus tool, every tool of its server declared."""
    cases = []
    for call in mcp_calls():
        specs = [{"type": "function", "function": openai_function(t)} for t in normalize_tools(call.tools)]
        cases.append(Case(specs, [(call.name, call.arguments)]))
    return cases


# -- engines -----------------------------------------------------------------

Stepper = tuple[Callable[[], Any], Callable[[int], bool]]  # (fill the mask, feed a token)
CACHE_STATES: dict[str, str] = {}
"""How the mask cache served each dialect (``ToolCallConstraint.cache_state``),
so a dialect whose values the cache cannot follow shows in the report."""


def constrained_engine(compiled: Any, tok: Tokenizer, cache_masks: bool = True) -> Stepper:
    constraint = ToolCallConstraint(compiled, cache_masks=cache_masks)
    if cache_masks:
        CACHE_STATES[compiled.dialect] = constraint.cache_state
    constraint.prepare(torch.zeros(1, tok.vocab_size))

    def feed(token: int) -> bool:
        constraint.consume([token])
        return not constraint.events

    return constraint.fill_masks, feed


def fresh_cache(compiled: Any) -> Any:
    """``compiled`` with its mask cache emptied (a tool set's first call)."""
    object.__setattr__(compiled, "_masks", None)
    return compiled


def llguidance_engine(grammar: str, tok: Tokenizer) -> Stepper:
    matcher = llguidance.LLMatcher(tok.ll_tokenizer, grammar, log_level=0)
    if matcher.is_error():
        raise RuntimeError(matcher.get_error())
    buf = np.zeros((tok.vocab_size + 31) // 32, dtype=np.uint32)
    return (lambda: matcher.unsafe_compute_mask_ptr(buf.ctypes.data, buf.nbytes)), (
        lambda token: bool(matcher.consume_token(token)) and not matcher.is_error()
    )


_xgr_compilers: dict[str, Any] = {}


def xgrammar_grammar(dialect: str, specs: list[dict[str, Any]], tok: Tokenizer) -> Any:
    """XGrammar's compiled structural tag for ``specs`` in ``dialect``."""
    import xgrammar as xgr

    if tok.name not in _xgr_compilers:
        table, _ = tok.token_table
        info = xgr.TokenizerInfo(list(table), xgr.VocabType.RAW, vocab_size=tok.vocab_size,
                                 stop_token_ids=list(tok.eos_token_ids))
        _xgr_compilers[tok.name] = xgr.GrammarCompiler(info, max_threads=1)
    reasoning = "enabled" if dialect in OPENED_BY_PROMPT else "disabled"  # the prompt opened the block
    tag = xgr.get_model_structural_tag(XGRAMMAR_TAG[dialect], tools=specs, tool_choice="required", reasoning=reasoning)
    return _xgr_compilers[tok.name].compile_structural_tag(tag)


def xgrammar_engine(dialect: str, specs: list[dict[str, Any]], tok: Tokenizer) -> Stepper:
    return xgrammar_matcher(xgrammar_grammar(dialect, specs, tok), tok)


def xgrammar_matcher(grammar: Any, tok: Tokenizer) -> Stepper:
    import xgrammar as xgr

    matcher = xgr.GrammarMatcher(grammar)
    bitmask = xgr.allocate_token_bitmask(1, tok.vocab_size)
    return (lambda: matcher.fill_next_token_bitmask(bitmask, 0)), matcher.accept_token


def plain_grammar(dialect: str, spec: dict[str, Any], tok: Tokenizer) -> str:
    """The straightforward baseline grammar for one call of ``spec`` (coding
    workloads: every parameter a required string, in schema order)."""
    fn = spec["function"]
    params = list(fn["parameters"]["properties"])
    if dialect == "qwen3_coder":
        body = " ".join(f'"<parameter={p}>\\n" raw' for p in params)
        return (
            f'start: <tool_call> "\\n<function={fn["name"]}>\\n" {body} "</function>\\n" </tool_call> <|im_end|>\n'
            'raw[lazy]: /(.|\\n)*\\n<\\/parameter>\\n/\n'
        )
    if dialect == "deepseek_v4":  # raw text up to the "</" before the closing tag's token
        dsml = f"<[{tok.token_id('｜DSML｜')}]>"
        body = ' "\\n" '.join(f'"<" {dsml} "parameter name=\\"{p}\\" string=\\"true\\">" RAW {dsml} "parameter>"' for p in params)
        return (
            f'start: "\\n\\n<" {dsml} "tool_calls>\\n<" {dsml} "invoke name=\\"{fn["name"]}\\">\\n" {body} '
            f'"\\n</" {dsml} "invoke>\\n</" {dsml} "tool_calls>" <｜end▁of▁sentence｜>\nRAW: /(?s:.*)<\\//\n'
        )
    if dialect == "glm47":
        body = " ".join(f'"<arg_key>{p}</arg_key><arg_value>" raw' for p in params)
        return f'start: <tool_call> "{fn["name"]}" {body} </tool_call> <|endoftext|>\nraw[lazy]: /(.|\\n)*<\\/arg_value>/\n'
    members = ' "," '.join(f'"{p}:" <|"|> TXT? <|"|>' for p in params)
    return f'start: <|tool_call> "call:{fn["name"]}{{" {members} "}}" <tool_call|> <|tool_response>\nTXT: /(.|\\n)+/\n'


def time_steps(stepper: Stepper, tokens: list[int], feeds: list[float] | None = None) -> list[float] | None:
    """Microseconds of each mask, before each token (``feeds``: also of
    feeding each token, appended); ``None`` if a token is refused."""
    fill, feed = stepper
    times = []
    for token in tokens:
        start = time.perf_counter_ns()
        fill()
        filled = time.perf_counter_ns()
        times.append((filled - start) / 1000.0)
        accepted = feed(token)
        if feeds is not None:
            feeds.append((time.perf_counter_ns() - filled) / 1000.0)
        if not accepted:
            return None
    return times


def prepared(load: Workload, case: Case, tok: Tokenizer) -> tuple[Any, list[int], list[dict[str, Any]]] | None:
    """The case's compiled tools, its calls' tokens (end token included) and
    its tools as OpenAI specs; None (counted) when its calls are no valid
    calls of its tools."""
    try:
        reasoning = "open" if load.dialect in OPENED_BY_PROMPT else False
        compiled = compile_tools(case.tools, load.dialect, tok, tool_choice="required", reasoning=reasoning,
                                 key_order="schema")
        text = written(load.dialect, [{"name": n, "arguments": a} for n, a in case.calls], compiled)
    except Exception:  # ground truth that is no valid call of its tools (see tests/test_dialect_corpus.py)
        load.refused["no valid call"] = load.refused.get("no valid call", 0) + 1
        return None
    tokens = tok.encode(text) + [tok.token_id(END[load.dialect])]
    return compiled, tokens, [{"type": "function", "function": openai_function(t)} for t in compiled.tools]


def written(dialect: str, calls: list[dict[str, Any]], compiled: Any) -> str:
    """The calls as the dialect writes them (keys in schema order): in a
    family whose call ends the turn, the first call, in the spelling both
    engines take (:data:`xgrammar_formats.SPELLINGS`); after the rest of the
    reasoning block where the family's prompt opens one
    (:data:`xgrammar_formats.OPENED_BY_PROMPT`)."""
    if get_dialect(dialect).markup.messages is not None:
        calls = calls[:1]
    text = render_tool_calls(calls, compiled.tools, dialect, key_order="schema")
    text = SPELLINGS[dialect][1](text) if dialect in SPELLINGS else text
    return OPENED_BY_PROMPT.get(dialect, "") + text


def prepared_cases(load: Workload, tok: Tokenizer) -> Iterator[tuple[Case, Any, list[int], list[dict[str, Any]]]]:
    """Each case of ``load`` that is a valid call, prepared (:func:`prepared`):
    (case, compiled tools, tokens, OpenAI specs)."""
    for case in load.cases:
        found = prepared(load, case, tok)
        if found is not None:
            yield (case, *found)


def run_never_seen(load: Workload) -> None:
    """Each case compiled cold and timed on its first run, ours and XGrammar's:
    the compile, the per-request setup (ours: the constraint, its llguidance
    matcher and buffers; XGrammar's: its matcher and bitmask) and every mask."""
    tok = load_tokenizer(TOKENIZER[load.dialect])
    # What each engine builds once per tokenizer and process (ours: llguidance's
    # token trie, the raw-text rows; XGrammar's: its compiler and TokenizerInfo),
    # built before the first case with a tool no case has.
    warm = prepared(load, Case([WRITE], [("write_file", {"path": "a", "content": "b"})]), tok)
    assert warm is not None
    time_steps(constrained_engine(warm[0], tok), warm[1])
    time_steps(xgrammar_engine(load.dialect, warm[2], tok), warm[1])
    for case in load.cases:
        clear_compile_cache()
        started = time.perf_counter()
        found = prepared(load, case, tok)  # the compile (and the call rendered, ~0.1 ms)
        if found is None:
            continue
        compiled, tokens, specs = found
        warm_mask_cache(compiled)  # the rest of an engine's compile (ToolsRequest.compile)
        ours_ms = (time.perf_counter() - started) * 1000
        _xgr_compilers[tok.name].clear_cache()
        started = time.perf_counter()
        grammar = xgrammar_grammar(load.dialect, specs, tok)
        theirs_ms = (time.perf_counter() - started) * 1000
        steppers, setup_ms = {}, {}
        started = time.perf_counter()
        steppers[NEVER_SEEN] = constrained_engine(compiled, tok)
        setup_ms[NEVER_SEEN] = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        steppers[XGRAMMAR] = xgrammar_matcher(grammar, tok)
        setup_ms[XGRAMMAR] = (time.perf_counter() - started) * 1000
        feeds: dict[str, list[float]] = {engine: [] for engine in steppers}
        results = {engine: time_steps(stepper, tokens, feeds[engine]) for engine, stepper in steppers.items()}
        if load.record(results, len(tokens), feeds):
            for engine, compile_ms in ((NEVER_SEEN, ours_ms), (XGRAMMAR, theirs_ms)):
                load.compile_ms.setdefault(engine, []).append(compile_ms)
                load.setup_ms.setdefault(engine, []).append(setup_ms[engine])
                load.masks_ms.setdefault(engine, []).append(sum(results[engine] or []) / 1000)


def moved(value: Any, numbers: bool, strings: bool) -> Any:
    """``value`` with its numbers moved and its strings lengthened (either)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return value + (1 if isinstance(value, int) else 0.5) if numbers else value
    if isinstance(value, str):
        return value + "s" if strings else value
    if isinstance(value, list):
        return [moved(item, numbers, strings) for item in value]
    if isinstance(value, dict):
        return {key: moved(item, numbers, strings) for key, item in value.items()}
    return value


def other_values(load: Workload, case: Case, compiled: Any, tok: Tokenizer, tokens: list[int]) -> list[int] | None:
    """The tokens of the case's calls with other values (numbers and strings
    moved, else one of the two) that its tools accept; None if there are none."""
    for numbers, strings in ((True, True), (True, False), (False, True)):
        calls = [{"name": name, "arguments": moved(arguments, numbers, strings)} for name, arguments in case.calls]
        try:
            text = written(load.dialect, calls, compiled)
        except Exception:  # moved values the dialect cannot write
            continue
        other = tok.encode(text) + [tok.token_id(END[load.dialect])]
        if other != tokens and compiled.check(text).accepted:
            return other
    return None


def run_other_values(load: Workload) -> None:
    """Each case's call with other values, after a request of the call
    itself: ours with the tool set's cache as an engine's compile and that
    request left it, XGrammar after the same request."""
    tok = load_tokenizer(TOKENIZER[load.dialect])
    for case, compiled, tokens, specs in prepared_cases(load, tok):
        other = other_values(load, case, compiled, tok, tokens)
        if other is None:
            load.refused["no other values its tools accept"] = load.refused.get("no other values its tools accept", 0) + 1
            continue
        warm_mask_cache(fresh_cache(compiled))
        time_steps(constrained_engine(compiled, tok), tokens)  # the earlier request
        compiled._masks.hits = 0
        feeds: dict[str, list[float]] = {OTHER_VALUES: [], XGRAMMAR: []}
        results = {OTHER_VALUES: time_steps(constrained_engine(compiled, tok), other, feeds[OTHER_VALUES])}
        hits = compiled._masks.hits
        time_steps(xgrammar_engine(load.dialect, specs, tok), tokens)
        results[XGRAMMAR] = time_steps(xgrammar_engine(load.dialect, specs, tok), other, feeds[XGRAMMAR])
        if load.record(results, len(other), feeds):
            load.hits[OTHER_VALUES] = load.hits.get(OTHER_VALUES, 0) + hits


def run(load: Workload) -> None:
    if load.never_seen:
        run_never_seen(load)
        return
    if load.other_values:
        run_other_values(load)
        return
    tok = load_tokenizer(TOKENIZER[load.dialect])
    for case, compiled, tokens, specs in prepared_cases(load, tok):
        for _ in range(load.rounds):
            run_round(load, case, compiled, tokens, specs, tok)


def run_round(load: Workload, case: Case, compiled: Any, tokens: list[int], specs: list[dict[str, Any]],
              tok: Tokenizer) -> None:
    """One case timed once per engine, each after an untimed run: the first
    call of the tool set (cache emptied; the warm-up ran without it), then a
    repeated call (the cache the first one filled), then the others."""
    engines: dict[str, Callable[[], Stepper]] = {
        FIRST: lambda: constrained_engine(fresh_cache(compiled), tok),
        REPEATED: lambda: constrained_engine(compiled, tok),
        "llguidance (our grammar)": lambda: llguidance_engine(compiled.grammar, tok),
    }
    if load.name in ("write_file", "edit"):
        engines["llguidance (plain)"] = lambda: llguidance_engine(plain_grammar(load.dialect, case.tools[0], tok), tok)
    engines[XGRAMMAR] = lambda: xgrammar_engine(load.dialect, specs, tok)
    results, hits, feeds = {}, {}, {}
    for engine, make in engines.items():
        warm = constrained_engine(compiled, tok, cache_masks=False) if engine == FIRST else make()
        time_steps(warm, tokens)  # warm-up (for the repeated call: the second call)
        if engine == REPEATED:
            compiled._masks.hits = 0
        started = time.perf_counter()
        stepper = make()
        if engine == FIRST:  # the constraint warms the emptied cache as it is made
            load.setup_ms.setdefault(FIRST, []).append((time.perf_counter() - started) * 1000)
            compiled._masks.hits = 0  # the warm-up's own lookups aside
        results[engine] = time_steps(stepper, tokens, feeds.setdefault(engine, []))
        if engine in (FIRST, REPEATED):
            hits[engine], compiled._masks.hits = compiled._masks.hits, 0
    if load.record(results, len(tokens), feeds):
        for engine, count in hits.items():
            load.hits[engine] = load.hits.get(engine, 0) + count


def report(loads: list[Workload], plot: str) -> str:
    lines = [
        "## Mask time per token (`bench/mask_time.py`)",
        "",
        f"{environment()}; one thread. Each engine computes the mask before every token of the same rendered "
        "calls, end token included; each case runs twice per engine and the second run is timed (the coding "
        f"workloads' one case in {CODING_ROUNDS} rounds, the engines taking turns, their steps pooled). "
        f"`{FIRST}`: the tool set's mask cache emptied before the timed run (its untimed run went without the "
        "cache), as for the first request with these tools in a loop of one's own: the constraint warms the cache "
        "as it is made (`warm_mask_cache`; its median setup, warm-up included, beside the share from the cache); "
        f"`{REPEATED}`: the third call (the second, untimed, indexes each reused row once), as for every later "
        f"request that walks the same markup; `{OTHER_VALUES}`: the same tools' call with other values (numbers "
        "moved by one, strings a letter longer, where the tools accept them), after an engine's compile "
        f"(`warm_mask_cache`) and one request of the ground-truth call; `{NEVER_SEEN}`: held-out BFCL entries, each "
        "compiled cold as an engine compiles (`compile_tools`, then `warm_mask_cache` on its compile thread, not "
        "in the per-token times) and timed on its first and only run; XGrammar's cold compile likewise outside "
        "them. `from cache`: the share of masks the cache gave (the rest: precomputed raw-text rows, forced tokens "
        "and llguidance); for calls never seen, the median cold compile of a case's tools instead, and the whole "
        "call (compile, setup, every mask) in the table below. The mask cache per dialect: "
        + "; ".join(f"{dialect}: {state}" for dialect, state in sorted(CACHE_STATES.items())) + ".",
        "",
        "| dialect | workload | cases | tokens | engine | from cache | mean us | p50 us | p99 us | max us "
        "| mean / XGrammar | p99 / XGrammar |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for load in loads:
        if not load.times:
            continue
        ref = summary(load.times[XGRAMMAR])
        for engine, times in load.times.items():
            mean, p50, p99, worst = summary(times)
            cached = f"{load.hits[engine] / load.tokens:.0%}" if engine in load.hits else ""
            if engine in load.compile_ms:
                cached = f"compile {statistics.median(load.compile_ms[engine]):.1f} ms (median)"
            elif engine in load.setup_ms:
                cached += f"; setup {statistics.median(load.setup_ms[engine]):.1f} ms (median)"
            lines.append(
                f"| {load.dialect} | {load.name} | {load.measured // load.rounds} | {load.tokens // load.rounds} | {engine} | {cached} | {mean:.1f} | {p50:.1f} "
                f"| {p99:.1f} | {worst:.1f} | {mean / ref[0]:.2f} | {p99 / ref[2]:.2f} |"
            )
    lines += whole_calls([load for load in loads if load.masks_ms])
    lines += mask_and_advance(loads)
    return "\n".join(lines + report_tail(loads, plot, "engine", "mask us per token (whiskers p1-p99)"))


def mask_and_advance(loads: list[Workload]) -> list[str]:
    """Per token, the mask and feeding the token to the engine (ours:
    ``consume``, which also moves the row's place in the mask cache;
    XGrammar's ``accept_token``): what a serving engine's CPU pays for each
    token of each sequence."""
    lines = [
        "",
        "Mask and advance per token, from the same runs: the mask, then feeding the sampled token (ours: "
        "`consume`, which also follows the call's markup to key the mask cache; llguidance's `consume_token`; "
        "XGrammar's `accept_token`); us.",
        "",
        "| dialect | workload | engine | advance mean | advance p99 | mask + advance mean | mask + advance p99 "
        "| mean / XGrammar | p99 / XGrammar |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for load in loads:
        if XGRAMMAR not in load.advance:
            continue
        both = {engine: [a + b for a, b in zip(load.times[engine], feeds)] for engine, feeds in load.advance.items()}
        ref = summary(both[XGRAMMAR])
        for engine, feeds in load.advance.items():
            advance, whole = summary(feeds), summary(both[engine])
            lines.append(
                f"| {load.dialect} | {load.name} | {engine} | {advance[0]:.1f} | {advance[2]:.1f} | {whole[0]:.1f} "
                f"| {whole[2]:.1f} | {whole[0] / ref[0]:.2f} | {whole[2] / ref[2]:.2f} |"
            )
    return lines


def whole_calls(loads: list[Workload]) -> list[str]:
    """For calls never seen: a call's compile, its request's setup and every
    mask, per case (what a new tool set's first request waits in all)."""
    if not loads:
        return []
    lines = [
        "",
        "Calls never seen, whole call per case: the compile, the request's setup (ours: the constraint with its "
        "llguidance matcher and buffers; XGrammar's: its matcher and bitmask) and every mask of the call; ms.",
        "",
        "| dialect | engine | compile p50 | setup p50 | masks p50 | whole call p50 | whole call mean "
        "| whole call p99 | mean / XGrammar |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for load in loads:
        calls = {engine: [sum(parts) for parts in zip(load.compile_ms[engine], load.setup_ms[engine], masks)]
                 for engine, masks in load.masks_ms.items()}
        ref = statistics.mean(calls[XGRAMMAR])
        for engine, masks in load.masks_ms.items():
            mean, p50, p99, _ = summary(calls[engine])
            lines.append(
                f"| {load.dialect} | {engine} | {statistics.median(load.compile_ms[engine]):.2f} "
                f"| {statistics.median(load.setup_ms[engine]):.2f} | {statistics.median(masks):.2f} | {p50:.2f} "
                f"| {mean:.2f} | {p99:.2f} | {mean / ref:.2f} |"
            )
    return lines


def report_tail(loads: list[Workload], plot: str, engines: str, ylabel: str) -> list[str]:
    """The end of a report over ``loads``: the cases left out (for every one
    of the ``engines``), and the distributions, drawn into ``plot``."""
    notes = [f"- {load.dialect} {load.name}: left out " + ", ".join(f"{n} ({why})" for why, n in load.refused.items())
             for load in loads if load.refused]
    lines = ["", f"Cases left out (for every {engines}):", *notes] if notes else []
    plot_distributions([(f"{load.dialect}: {load.name}", load.times) for load in loads if load.times], plot, ylabel)
    return lines + ["", f"Distributions: [`{Path(plot).name}`]({Path(plot).name})."]


def run_all(loads: list[Workload], run: Callable[[Workload], None]) -> None:
    """``run`` each workload, its case count and seconds on stderr."""
    for load in loads:
        started = time.perf_counter()
        run(load)
        print(f"{load.dialect} {load.name}: {load.measured} cases, {time.perf_counter() - started:.0f} s", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bfcl-stride", type=int, default=5)
    parser.add_argument("--plot", help="where to draw the distributions (default: bench/mask_time.png; with --only, "
                        "the temporary directory)")
    parser.add_argument("--only", help="run the workloads whose dialect and name hold this text (printed, not written)")
    args = parser.parse_args()
    logging.getLogger("constrained").setLevel(logging.ERROR)  # refused sequences are counted, not logged
    loads = [load for load in workloads(args.bfcl_stride) if args.only is None or args.only in f"{load.dialect} {load.name}"]
    if not loads:
        parser.error(f"no workload's dialect and name hold {args.only!r}")
    run_all(loads, run)
    plot = args.plot or str(BENCH / "mask_time.png" if args.only is None else Path(tempfile.gettempdir()) / "mask_time_only.png")
    section = report(loads, plot)
    if args.only is None:
        write_section("mask_time", section)
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
