"""Requests, configs and the library's own masks, for the tests that drive
the logits processor through vLLM's model runners' interfaces (Model Runner
V2 in every supported vLLM, V1 where vLLM still has it). No GPU runs here,
so the tensors are on the CPU."""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from vllm.sampling_params import SamplingParams

from constrained import load_tokenizer, render_tool_calls
from constrained.options import Reasoning
from constrained.runtime.constraint import ToolCallConstraint
from constrained.runtime.engine import EXTRA_ARGS_KEY, ToolsRequest

NAME = "constrained.vllm:ToolCallLogitsProcessor"
MAX_REQUESTS = 8
MAX_LEN = 512


def tool(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties, "required": list(properties)}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


WEATHER = tool("get_weather", {"city": {"type": "string"}, "days": {"type": "integer"}})
ADD = tool("add", {"a": {"type": "integer"}, "b": {"type": "integer"}})
WRITE = tool("write_file", {"path": {"type": "string"}, "content": {"type": "string"}})
CALLS = {
    "get_weather": {"city": "Paris", "days": 3},
    "add": {"a": 12, "b": -7},
    "write_file": {"path": "a.py", "content": "def f(x):\n    return x < 2\n"},
}


@functools.cache
def tok():
    return load_tokenizer("qwen3")


def config(*, speculative: bool = False) -> Any:
    """What the processor reads of vLLM's config: the served tokenizer, the
    vocabulary size, whether speculative decoding is on."""
    model = SimpleNamespace(tokenizer="qwen3", get_vocab_size=lambda: tok().vocab_size)
    return SimpleNamespace(model_config=model, speculative_config=object() if speculative else None)


def request_states() -> Any:
    """The runner's request state, with the fields ``LogitsProcRequestState``
    takes (vLLM's own class needs pinned memory, which needs a GPU)."""
    return SimpleNamespace(
        device=torch.device("cpu"),
        max_num_reqs=MAX_REQUESTS,
        vocab_size=tok().vocab_size,
        all_token_ids=SimpleNamespace(gpu=torch.zeros(MAX_REQUESTS, MAX_LEN, dtype=torch.int32)),
        prompt_len=SimpleNamespace(np=np.zeros(MAX_REQUESTS, dtype=np.int32)),
        prefill_len=SimpleNamespace(np=np.zeros(MAX_REQUESTS, dtype=np.int32)),
        total_len=SimpleNamespace(gpu=torch.zeros(MAX_REQUESTS, dtype=torch.int32)),
    )


def params(*tools: dict[str, Any], choice: str = "required", reasoning: Reasoning = True,
           max_tokens: int = 4096) -> SamplingParams:
    """A request's sampling parameters; by default a budget far past these
    short outputs, so the masks are the grammar's alone."""
    if not tools:
        return SamplingParams(max_tokens=max_tokens)
    described = ToolsRequest("qwen3_coder", list(tools), tool_choice=choice, reasoning=reasoning)
    return SamplingParams(max_tokens=max_tokens, extra_args={EXTRA_ARGS_KEY: described.to_json()})


def call_tokens(spec: dict[str, Any]) -> list[int]:
    name = spec["function"]["name"]
    return tok().encode(render_tool_calls([{"name": name, "arguments": CALLS[name]}], [spec], "qwen3_coder"))


def reference(spec: dict[str, Any] | None, output: list[int], width: int, reasoning: Reasoning = True) -> np.ndarray | None:
    """The tokens the library allows after ``output`` for a request with
    ``spec`` alone (None: a request without tools)."""
    if spec is None:
        return None
    compiled = ToolsRequest("qwen3_coder", [spec], tool_choice="required", reasoning=reasoning).compile(tok())
    constraint = ToolCallConstraint(compiled, 1)
    constraint.consume_row(0, output)
    logits = torch.zeros(1, width)
    constraint.mask_logits(logits)
    return torch.isfinite(logits[0]).numpy()
