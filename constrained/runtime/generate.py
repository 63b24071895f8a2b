"""A complete constrained decoding loop: ``constrained.runtime.generate``.

It is the custom-loop API put to work: encode the prompts (left-padded into
one batch), run the model with a KV cache, mask each step's logits with a
:class:`~constrained.runtime.constraint.ToolCallConstraint`, sample, feed the tokens
back, and parse the text into tool calls. With ``fast_forward`` the tokens
the grammar forces (markers, key names, the rest of a tool name) are appended
without sampling and fed to the model in the same forward pass as the
sampled token before them; in a batch, as many as every unfinished row has.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..compiler import CompiledTools, compile_tools
from ..dialects import get_dialect
from ..dialects.base import openai_function
from ..errors import LLAMA_CPP_EXTRA, MODEL_EXTRA, ArgumentError, GenerationError, MissingExtraError
from ..options import CompileOptions, Reasoning, ToolChoice
from ..output.parse import RejectedCall, parse_tool_calls
from ..tokenizers import Tokenizer, load_tokenizer
from .budget import require_budget
from .constraint import ConstraintEvent, OnViolation, ToolCallConstraint, compiled_for_prompts

if TYPE_CHECKING:
    import torch

Messages = list[dict[str, Any]]
Prompt = str | Messages
Engine = Literal["transformers", "llama-cpp"]
ENGINES: tuple[Engine, ...] = ("transformers", "llama-cpp")
"""What runs the model: transformers (torch), or llama.cpp through llama-cpp-python."""


@dataclass(frozen=True)
class GenerationStats:
    """What one generation cost: tokens in and out, passes, seconds."""

    prompt_tokens: int
    new_tokens: int
    forced_tokens: int
    """Tokens appended by fast-forward, without sampling."""
    forward_passes: int
    seconds: float
    prefill_seconds: float
    """Time of the first forward pass (the prompt, and forced tokens after it)."""


@dataclass(frozen=True)
class GenerationResult:
    """One sequence's output: the text (without its final end token), every
    generated token id, and the text parsed into OpenAI-style tool calls."""

    text: str
    token_ids: list[int]
    content: str | None
    tool_calls: list[dict[str, Any]]
    errors: list[RejectedCall]
    reasoning: str | None
    finished: bool
    """The sequence ended (an end token, or its grammar completed) rather
    than running out of ``max_new_tokens``."""
    events: list[ConstraintEvent] = field(default_factory=list)
    stats: GenerationStats | None = None
    closed_by_budget: bool = False
    """The budget ran short and the constraint allowed only what closes the
    call in the tokens left: the call is complete, a value may be cut short."""

    @property
    def finish_reason(self) -> str:
        """As OpenAI says it: ``"length"`` when the budget ended the output
        (cut, or closed by the constraint), else ``"tool_calls"`` when
        there are calls, else ``"stop"``."""
        if self.closed_by_budget or not self.finished:
            return "length"
        return "tool_calls" if self.tool_calls else "stop"

    def to_json(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "tool_calls": self.tool_calls,
            "errors": [e.to_json() for e in self.errors],
            "reasoning": self.reasoning,
            "finished": self.finished,
            "finish_reason": self.finish_reason,
            "events": [str(e) for e in self.events],
        }


def generate(
    model: Any,
    tokenizer: Tokenizer | str | Any,
    prompt_or_messages: Prompt | Sequence[Prompt],
    tools: Sequence[Any] | CompiledTools,
    dialect: str | None = None,
    *,
    tool_choice: ToolChoice = "auto",
    parallel_tool_calls: bool = True,
    reasoning: Reasoning = True,
    options: CompileOptions | None = None,
    max_new_tokens: int = 256,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int | None = None,
    fast_forward: bool = True,
    constrain: bool = True,
    on_violation: OnViolation = "unconstrained",
    chat_tokenizer: Any = None,
    engine: Engine = "transformers",
    close_within_budget: bool = True,
) -> GenerationResult | list[GenerationResult]:
    """Generate tool calls with ``model``: a transformers causal LM, or,
    with ``engine="llama-cpp"``, a ``llama_cpp.Llama`` (a GGUF model run by
    llama.cpp: no torch; :func:`~constrained.runtime.models.load_model`
    loads the embedded default so).

    ``prompt_or_messages`` is a user message (str), a list of chat messages,
    or a list of those for a batch (then a list of results is returned).
    ``tools`` are tool definitions in any accepted format, or a
    :class:`CompiledTools` (then ``dialect`` and the options come from it).
    The compile options are keyword arguments (``tool_choice``,
    ``parallel_tool_calls``, ``reasoning``) or one ``options`` object
    (:class:`~constrained.options.CompileOptions`). The prompt is built with ``chat_tokenizer``'s chat template when it
    has one, else in the dialect's own turn format with the tools listed as
    JSON in a system turn. Where the prompt ends inside a reasoning block
    (a thinking model's template, or the dialect's own turn format for
    ``reasoning="open"`` and for families whose templates open it), the
    output is constrained and parsed as starting inside it
    (:meth:`CompiledTools.after_prompt`). ``constrain=False`` runs the same
    loop without the mask, for comparison.

    Under llama.cpp the prompts run one after another, llama.cpp samples
    (the same greedy choice, or its own seeded sampler), and tokens the
    grammar forces are sampled one by one (the mask allows only them), so
    ``fast_forward`` changes nothing there.

    With ``close_within_budget`` (the default), ``max_new_tokens`` is the
    constraint's budget: as it runs out, only what completes the open call
    validly in the tokens left is allowed, so a call always closes (a value
    may be cut short: :attr:`GenerationResult.finish_reason` is then
    ``"length"``), and a budget no complete output fits raises
    :class:`~constrained.errors.BudgetError` before generating.

    Without the engine's extra (``model``, ``llama-cpp``) it raises
    :class:`~constrained.errors.MissingExtraError` naming it.
    """
    _require(engine)
    if max_new_tokens < 1:
        raise ArgumentError(f"max_new_tokens must be at least 1, got {max_new_tokens}", argument="max_new_tokens")
    keywords = CompileOptions(tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls, reasoning=reasoning)
    options = CompileOptions.resolve(options, keywords)
    tok = tokenizer if isinstance(tokenizer, Tokenizer) else load_tokenizer(tokenizer)
    batch_input = _is_batch(prompt_or_messages)
    prompts: list[Prompt] = list(prompt_or_messages) if batch_input else [prompt_or_messages]  # type: ignore[arg-type,list-item]
    compiled, texts = _compiled_prompts(tools, dialect, tok, options, prompts, chat_tokenizer)
    budget = max_new_tokens if close_within_budget and constrain else None
    if budget is not None:
        require_budget(compiled, budget)
    if engine == "llama-cpp":
        sampling = _llama_sampling(do_sample, temperature, top_k, top_p)
        results = _generate_with_llama(model, tok, compiled, [tok.encode(t) for t in texts], max_new_tokens, constrain,
                                       on_violation, sampling, seed, budget)
        return results if batch_input else results[0]
    import torch

    sampler = _Sampler(do_sample, temperature, top_k, top_p, seed)
    loop = _Loop(model, tok, compiled, len(texts), constrain, on_violation, sampler, fast_forward, budget)
    with torch.inference_mode():
        results = loop.run([tok.encode(t) for t in texts], max_new_tokens)
    return results if batch_input else results[0]


def _compiled_prompts(tools: Sequence[Any] | CompiledTools, dialect: str | None, tok: Tokenizer,
                      options: CompileOptions, prompts: list[Prompt],
                      chat_tokenizer: Any) -> tuple[CompiledTools, list[str]]:
    """The tools compiled (unless they are) as the prompts' rendered texts need them, and those texts."""
    if isinstance(tools, CompiledTools):
        compiled = tools
    else:
        if dialect is None:
            raise GenerationError("generate() needs a dialect (or a CompiledTools)")
        compiled = compile_tools(tools, dialect=dialect, tokenizer=tok, options=options)
    texts = [build_prompt(p, compiled, chat_tokenizer) for p in prompts]
    return compiled_for_prompts(compiled, texts), texts


def _require(engine: str) -> None:
    """Refuse an unknown engine, or one whose extra is not installed."""
    if engine not in ENGINES:
        raise ArgumentError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}", argument="engine")
    if engine == "llama-cpp":
        MissingExtraError.require("generate(engine='llama-cpp')", LLAMA_CPP_EXTRA, "llama_cpp")
    else:
        MissingExtraError.require("generate", MODEL_EXTRA, "torch")


def _llama_sampling(do_sample: bool, temperature: float, top_k: int, top_p: float) -> dict[str, Any]:
    """:func:`generate`'s sampling options as llama-cpp-python's (greedy at
    temperature 0; no min-p, typical-p or repetition penalty, as in the
    transformers loop)."""
    if do_sample and temperature <= 0:
        raise ArgumentError(f"temperature must be positive when sampling, got {temperature}", argument="temperature")
    return {"temp": temperature if do_sample else 0.0, "top_k": top_k, "top_p": top_p, "min_p": 0.0,
            "repeat_penalty": 1.0}


def _generate_with_llama(llm: Any, tok: Tokenizer, compiled: CompiledTools, prompts: list[list[int]],
                         max_new_tokens: int, constrain: bool, on_violation: OnViolation, sampling: dict[str, Any],
                         seed: int | None, budget: int | None) -> list[GenerationResult]:
    """:func:`generate` under llama.cpp (:func:`.llama.generate_with_llama`)."""
    from .llama import generate_with_llama

    if seed is not None:
        llm.set_seed(seed)
    end_ids = frozenset(tok.eos_token_ids)
    runs = generate_with_llama(llm, compiled, prompts, max_new_tokens=max_new_tokens, sampling=sampling,
                               constrain=constrain, on_violation=on_violation, end_ids=end_ids, budget=budget)
    return [
        generation_result(tok, compiled, run.output, end_ids, run.finished, run.events,
                          GenerationStats(len(prompt), len(run.output), 0, len(run.output), run.seconds, run.prefill),
                          run.closed_by_budget)
        for prompt, run in zip(prompts, runs)
    ]


def build_prompt(prompt: Prompt, compiled: CompiledTools, chat_tokenizer: Any = None) -> str:
    """The prompt text for one conversation (see :func:`generate`)."""
    messages: Messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    if chat_tokenizer is not None and getattr(chat_tokenizer, "chat_template", None):
        definitions = [{"type": "function", "function": openai_function(t)} for t in compiled.tools]
        text: str = chat_tokenizer.apply_chat_template(
            messages, tools=definitions, add_generation_prompt=True, tokenize=False
        )
        return text
    return get_dialect(compiled.dialect).chat_prompt(messages, compiled.tools, compiled.reasoning)


def _is_batch(prompt: Any) -> bool:
    if isinstance(prompt, str):
        return False
    items = list(prompt)
    return bool(items) and all(isinstance(p, (str, list)) for p in items)


class _Sampler:
    """Greedy choice or seeded sampling with temperature, top-k and top-p."""

    def __init__(self, do_sample: bool, temperature: float, top_k: int, top_p: float, seed: int | None) -> None:
        import torch

        if do_sample and temperature <= 0:
            raise ArgumentError(
                f"temperature must be positive when sampling, got {temperature}; use do_sample=False for greedy decoding",
                argument="temperature",
            )
        self.do_sample = do_sample
        self.temperature, self.top_k, self.top_p = temperature, top_k, top_p
        self.generator = torch.Generator()
        if seed is not None:
            self.generator.manual_seed(seed)

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        import torch

        if not self.do_sample:
            return logits.argmax(dim=-1)
        scores = logits.float() / self.temperature
        if self.top_k > 0:
            kth = torch.topk(scores, min(self.top_k, scores.shape[-1]), dim=-1).values[:, -1:]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        if self.top_p < 1.0:
            ordered, order = torch.sort(scores, descending=True, dim=-1)
            probs = ordered.softmax(dim=-1)
            drop = probs.cumsum(dim=-1) - probs > self.top_p  # keep the smallest head reaching top_p
            scores = scores.scatter(-1, order, ordered.masked_fill(drop, float("-inf")))
        probs = scores.softmax(dim=-1).cpu()
        return torch.multinomial(probs, 1, generator=self.generator).squeeze(-1).to(logits.device)


class _Loop:
    """The decoding loop for one batch."""

    def __init__(
        self,
        model: Any,
        tok: Tokenizer,
        compiled: CompiledTools,
        batch: int,
        constrain: bool,
        on_violation: OnViolation,
        sampler: _Sampler,
        fast_forward: bool,
        budget: int | None,
    ) -> None:
        self.model, self.tok, self.compiled = model, tok, compiled
        self.batch = batch
        self.constraint = ToolCallConstraint(compiled, batch, on_violation=on_violation, budget=budget) \
            if constrain else None
        self.sampler = sampler
        self.fast_forward = fast_forward and constrain
        model_ends = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        model_ends = [model_ends] if isinstance(model_ends, int) else list(model_ends or [])
        self.end_ids = frozenset(tok.eos_token_ids) | frozenset(model_ends)
        # transformers 5 renamed the forward's cache argument.
        self.cache_argument = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        pad = getattr(getattr(model, "generation_config", None), "pad_token_id", None)
        self.pad_id = pad if isinstance(pad, int) else min(self.end_ids, default=0)

    def run(self, prompts: list[list[int]], max_new_tokens: int) -> list[GenerationResult]:
        import torch

        device = self.model.device
        width = max(len(p) for p in prompts)
        if not all(prompts):
            raise GenerationError("a prompt encodes to no tokens")
        ids = torch.tensor([[self.pad_id] * (width - len(p)) + p for p in prompts], device=device)
        attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
        outputs: list[list[int]] = [[] for _ in prompts]
        done = [False] * self.batch
        forced_total = passes = 0
        prefill = 0.0
        cache = None
        pending = ids
        started = time.perf_counter()
        while True:
            forced = self._forced(done, outputs, max_new_tokens)
            if forced and all(done):
                break
            if forced:
                pending = torch.cat([pending, torch.tensor(forced, device=device)], dim=1)
                attention = torch.cat([attention, torch.ones_like(attention[:, : len(forced[0])])], dim=1)
                forced_total += len(forced[0])
            positions = (attention.cumsum(-1) - 1).clamp(min=0)[:, -pending.shape[1] :]
            out = self.model(
                input_ids=pending,
                attention_mask=attention,
                position_ids=positions,
                use_cache=True,
                logits_to_keep=1,
                **{self.cache_argument: cache},
            )
            passes += 1
            if passes == 1:
                prefill = time.perf_counter() - started
            cache = out[self.cache_argument]
            logits = out.logits[:, -1, :]
            if self.constraint is not None:
                self.constraint.mask_logits(logits)
            chosen = self.sampler(logits).tolist()
            for r, token in enumerate(chosen):
                if done[r]:
                    chosen[r] = self.pad_id  # a finished row is fed padding, as transformers does
                    continue
                if self.constraint is not None:
                    self.constraint.consume_row(r, [token])
                outputs[r].append(token)
                done[r] = self._ended(r, token) or len(outputs[r]) >= max_new_tokens
            if all(done):
                break
            pending = torch.tensor(chosen, device=device).unsqueeze(1)
            attention = torch.cat([attention, torch.ones_like(attention[:, :1])], dim=1)
        seconds = time.perf_counter() - started
        return [
            self._result(r, outputs[r], GenerationStats(len(p), len(outputs[r]), forced_total, passes, seconds, prefill))
            for r, p in enumerate(prompts)
        ]

    def _forced(self, done: list[bool], outputs: list[list[int]], max_new_tokens: int) -> list[list[int]]:
        """The forced tokens to append now: as many as every unfinished row
        has (padding for finished rows), within ``max_new_tokens``."""
        if not self.fast_forward or self.constraint is None:
            return []
        runs = {r: self.constraint.forced_tokens(r) for r in range(self.batch) if not done[r]}
        room = min(max_new_tokens - 1 - len(outputs[r]) for r in runs)
        n = min([len(run) for run in runs.values()] + [room])
        if n <= 0:
            return []
        rows = []
        for r in range(self.batch):
            if r in runs:
                run = runs[r][:n]
                self.constraint.consume_row(r, run)
                outputs[r].extend(run)
                rows.append(run)
                done[r] = self._ended(r, run[-1])
            else:
                rows.append([self.pad_id] * n)
        return rows

    def _ended(self, row: int, token: int) -> bool:
        if self.constraint is not None and self.constraint.is_finished(row):
            return True
        return token in self.end_ids

    def _result(self, row: int, output: list[int], stats: GenerationStats) -> GenerationResult:
        finished = self.constraint is not None and self.constraint.is_finished(row)
        events = [e for e in self.constraint.events if e.row == row] if self.constraint is not None else []
        closed = self.constraint is not None and self.constraint.closed_by_budget(row)
        return generation_result(self.tok, self.compiled, output, self.end_ids, finished, events, stats, closed)


def generation_result(tok: Tokenizer, compiled: CompiledTools, output: list[int], end_ids: frozenset[int],
                      grammar_finished: bool, events: list[ConstraintEvent], stats: GenerationStats,
                      closed_by_budget: bool = False) -> GenerationResult:
    """One sequence's output, its final end token dropped, read into calls."""
    body = output[:-1] if output and output[-1] in end_ids else output
    text = tok.decode(body)
    parsed = parse_tool_calls(text, compiled, dialect=compiled.dialect)
    return GenerationResult(
        text=text,
        token_ids=output,
        content=parsed.content,
        tool_calls=parsed.tool_calls,
        errors=parsed.errors,
        reasoning=parsed.reasoning,
        finished=len(body) < len(output) or grammar_finished,
        events=events,
        stats=stats,
        closed_by_budget=closed_by_budget,
    )
