"""Per-token mask time, side by side on the same token sequences (issue 6):

    python bench/mask_time.py [--out bench/RESULTS.md] [--plot bench/mask_time.png]

Engines, each computing the next-token mask before every token of the
same rendered call (the tokens are then fed to it):
- ``constrained``: the grammar ``compile_tools`` emits, through llguidance;
- ``llguidance (plain)``: a straightforward Lark grammar for the same call,
  the baseline of ``../shared/DESIGN.md``: raw text up to the closing markup
  as one lazy lexeme (qwen3_coder), ``/(.|\\n)*/`` between string tokens
  (gemma4);
- ``XGrammar 0.2.9``: its built-in structural tag for the dialect
  (``qwen_3_coder``, ``gemma_4``) with the same tools.

Workloads: coding-agent calls with long file contents (``write_file`` with
3,000 characters of Python, ``edit`` with old and new strings of Python) in
qwen3_coder (Qwen3 vocabulary, 151,936) and gemma4 (Gemma 4 layout,
262,144). One thread, masks into a preallocated buffer, timed with
``perf_counter_ns``. Writes a Markdown table and a PNG of the distributions.
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import platform
import statistics
import sys
import textwrap
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any, Callable

import llguidance
import numpy as np

from constrained import compile_tools, load_tokenizer, render_tool_calls
from constrained.tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parents[1]
PYTHON = inspect.getsource(textwrap)[:3000]  # real Python source, fixed per Python version
OLD = inspect.getsource(textwrap.dedent)
NEW = OLD.replace("margin", "indent_prefix")


def tool(name: str, *params: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {
                "type": "object",
                "properties": {p: {"type": "string"} for p in params},
                "required": list(params),
            },
        },
    }


# Parameters in alphabetical order, so that the schema order (XGrammar's,
# Qwen's) and Gemma's trained alphabetical order give the same text.
WRITE = tool("write_file", "content", "path")
EDIT = tool("edit", "new_string", "old_string", "path")
CALLS = {
    "write_file": (WRITE, {"path": "src/textwrap_copy.py", "content": PYTHON}),
    "edit": (EDIT, {"path": "src/textwrap_copy.py", "old_string": OLD, "new_string": NEW}),
}
DIALECTS = {"qwen3_coder": ("qwen3", "qwen_3_coder", "<|im_end|>"), "gemma4": ("gemma4", "gemma_4", "<|tool_response>")}


def plain_grammar(dialect: str, spec: dict[str, Any]) -> str:
    """The straightforward baseline grammar for one call of ``spec``."""
    fn = spec["function"]
    if dialect == "qwen3_coder":
        params = " ".join(f'"<parameter={p}>\\n" raw' for p in fn["parameters"]["properties"])
        return (
            f'start: <tool_call> "\\n<function={fn["name"]}>\\n" {params} "</function>\\n" </tool_call> <|im_end|>\n'
            'raw[lazy]: /(.|\\n)*\\n<\\/parameter>\\n/\n'
        )
    members = ' "," '.join(f'"{p}:" <|"|> TXT? <|"|>' for p in sorted(fn["parameters"]["properties"]))
    return (
        f'start: <|tool_call> "call:{fn["name"]}{{" {members} "}}" <tool_call|> <|tool_response>\n'
        "TXT: /(.|\\n)+/\n"
    )


def time_llguidance(tok: Tokenizer, grammar: str, tokens: list[int]) -> list[float]:
    matcher = llguidance.LLMatcher(tok.ll_tokenizer, grammar, log_level=0)
    if matcher.is_error():
        raise RuntimeError(matcher.get_error())
    return time_steps(tokens, lambda buf: matcher.unsafe_compute_mask_ptr(buf.ctypes.data, buf.nbytes),
                      matcher.consume_token, tok.vocab_size, lambda: matcher.is_error())


def time_xgrammar(tok: Tokenizer, xgr_name: str, spec: dict[str, Any], tokens: list[int]) -> list[float]:
    import xgrammar as xgr

    table, _ = tok.token_table
    info = xgr.TokenizerInfo(list(table), xgr.VocabType.RAW, vocab_size=tok.vocab_size,
                             stop_token_ids=list(tok.eos_token_ids))
    tag = xgr.get_model_structural_tag(xgr_name, tools=[spec], tool_choice="required", reasoning="disabled")
    matcher = xgr.GrammarMatcher(xgr.GrammarCompiler(info, max_threads=1).compile_structural_tag(tag))
    bitmask = xgr.allocate_token_bitmask(1, tok.vocab_size)

    def fill(_: np.ndarray) -> None:
        matcher.fill_next_token_bitmask(bitmask, 0)

    return time_steps(tokens, fill, matcher.accept_token, tok.vocab_size, lambda: False)


def time_steps(tokens: list[int], fill: Callable[[np.ndarray], Any], feed: Callable[[int], Any], vocab: int,
               failed: Callable[[], bool]) -> list[float]:
    """Microseconds of each mask, before each token; raises if a token is refused."""
    buf = np.zeros((vocab + 31) // 32, dtype=np.uint32)
    times = []
    for i, token in enumerate(tokens):
        start = time.perf_counter_ns()
        fill(buf)
        times.append((time.perf_counter_ns() - start) / 1000.0)
        if feed(token) is False or failed():
            raise RuntimeError(f"token {i} ({token}) refused")
    return times


def summary(times: list[float]) -> tuple[float, float, float, float]:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.mean(times), statistics.median(times), p99, ordered[-1]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(ROOT / "bench" / "RESULTS.md"))
    parser.add_argument("--plot", default=str(ROOT / "bench" / "mask_time.png"))
    args = parser.parse_args()
    rows: list[tuple[str, str, int, str, list[float]]] = []
    for dialect, (tok_name, xgr_name, end) in DIALECTS.items():
        tok = load_tokenizer(tok_name)
        for call_name, (spec, arguments) in CALLS.items():
            text = render_tool_calls([{"name": call_name, "arguments": arguments}], [spec], dialect)
            tokens = tok.encode(text) + [tok.token_id(end)]
            compiled = compile_tools([spec], dialect, tok, tool_choice="required", reasoning=False)
            engines: list[tuple[str, Callable[..., list[float]], tuple[Any, ...]]] = [
                ("constrained", time_llguidance, (tok, compiled.grammar, tokens)),
                ("llguidance (plain)", time_llguidance, (tok, plain_grammar(dialect, spec), tokens)),
                ("XGrammar 0.2.9", time_xgrammar, (tok, xgr_name, spec, tokens)),
            ]
            for engine, run, run_args in engines:
                run(*run_args)  # warm-up: first-time lexer and cache building
                rows.append((dialect, call_name, len(tokens), engine, run(*run_args)))
                print(dialect, call_name, engine, [f"{v:.1f}" for v in summary(rows[-1][4])], file=sys.stderr)
    write_report(rows, args.out, args.plot)
    return 0


def write_report(rows: list[tuple[str, str, int, str, list[float]]], out: str, plot: str) -> None:
    lines = [
        "# Mask time per token, side by side",
        "",
        f"{datetime.date.today()}; produced by `bench/mask_time.py`. llguidance {version('llguidance')}, "
        f"xgrammar {version('xgrammar')}, Python {platform.python_version()}, {platform.machine()}; one thread. "
        "Each engine computes the mask before every token of the same rendered call; the second of two runs "
        "is reported (the first builds lexer states and caches).",
        "",
        "| dialect | call | tokens | engine | mean us | p50 us | p99 us | max us | mean vs XGrammar | p99 vs XGrammar |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    reference = {(d, c): summary(t) for d, c, _, e, t in rows if e.startswith("XGrammar")}
    for dialect, call, n, engine, times in rows:
        mean, p50, p99, worst = summary(times)
        ref = reference[(dialect, call)]
        lines.append(f"| {dialect} | {call} | {n} | {engine} | {mean:.1f} | {p50:.1f} | {p99:.1f} | {worst:.1f} "
                     f"| {mean / ref[0]:.2f} | {p99 / ref[2]:.2f} |")
    lines += ["", f"Distributions: `{Path(plot).name}`."]
    Path(out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({(d, c) for d, c, _, _, _ in rows})
    fig, axes = plt.subplots(1, len(groups), figsize=(5 * len(groups), 4), sharey=True)
    for ax, (dialect, call) in zip(np.atleast_1d(axes), groups):
        data = [(e, t) for d, c, _, e, t in rows if (d, c) == (dialect, call)]
        ax.boxplot([t for _, t in data], whis=(1, 99), showfliers=False)
        ax.set_xticks(range(1, len(data) + 1), [e.split(" ")[0] for e, _ in data], rotation=20)
        ax.set_yscale("log")
        ax.set_title(f"{dialect} {call}")
        ax.set_ylabel("mask time per token (us), whiskers p1-p99")
    fig.tight_layout()
    fig.savefig(plot, dpi=100)


if __name__ == "__main__":
    sys.exit(main())
