"""The logits processor loaded and driven through Model Runner V2's own
classes (vLLM 0.33's GPU default and, from 0.34, vLLM's only runner),
without a server: its loader, its request-state fields and
``LogitsContext``. Each step's rows come in a new order, slots are
recycled, a request resumes after preemption; every constrained row must be
masked exactly as the library masks that request alone, and every other row
left as it was. No GPU runs here, so the tensors are on the CPU."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
import torch
from batches import ADD, NAME, WEATHER, WRITE, call_tokens, config, params, reference, request_states, tok
from vllm.sampling_params import SamplingParams
from vllm.v1.worker.gpu.sample.logits_processor import LogitsContext, build_custom_logits_processors
from vllm.v1.worker.gpu.sample.logits_processor.loader import _load_v2_logitsprocs_by_fqcns as load_v2

from constrained.errors import OptionError
from constrained.options import Reasoning
from constrained.runtime.engine import EXTRA_ARGS_KEY
from constrained.vllm import ToolCallLogitsProcessor


class Request:
    """One request in a slot: its prompt, what it will sample, what it has."""

    def __init__(
        self, slot: int, spec: dict[str, Any] | None, prompt_len: int, generated: int = 0, reasoning: Reasoning = True
    ) -> None:
        self.slot, self.spec, self.prompt_len, self.reasoning = slot, spec, prompt_len, reasoning
        thought = tok().encode("The sum, then.</think>\n\n") if reasoning == "open" else []
        self.target = thought + call_tokens(spec if spec is not None else WEATHER)
        self.output = self.target[:generated]

    def row_inputs(self) -> tuple[int, int]:
        """The token fed at this step's row and the tokens visible to it."""
        fed = self.output[-1] if self.output else 1000 + self.prompt_len  # the prompt's last token
        return fed, self.prompt_len + len(self.output)


class V2Batch:
    """A Model Runner V2 engine around the processor: slots, the runner's
    request state, each step's ``LogitsContext``."""

    def __init__(self) -> None:
        self.states = request_states()
        [self.processor] = build_custom_logits_processors(config(), self.states, False, [NAME])
        self.requests: dict[int, Request] = {}
        self.width = tok().vocab_size + 64  # padded embedding rows

    def join(self, request: Request) -> bool:
        slot = request.slot
        self.requests[slot] = request
        self.states.prompt_len.np[slot] = request.prompt_len
        self.states.prefill_len.np[slot] = request.prompt_len + len(request.output)
        history = [7] * request.prompt_len + request.output
        self.states.all_token_ids.gpu[slot, : len(history)] = torch.tensor(history, dtype=torch.int32)
        added = self.processor.add_request(
            slot, params(request.spec, reasoning=request.reasoning) if request.spec else params()
        )
        self.processor.apply_staged_writes()
        return added

    def step(self, order: list[int], generator: torch.Generator, extra: dict[int, int] | None = None) -> None:
        """One step over the slots in ``order`` (one row each); ``extra``
        overrides a slot's visible length (a prefill chunk). Checks every row."""
        fed, seen = zip(*(self.requests[slot].row_inputs() for slot in order))
        seen = [(extra or {}).get(slot, length) for slot, length in zip(order, seen)]
        mapping = np.array(order, dtype=np.int32)
        ctx = LogitsContext(
            expanded_idx_mapping=torch.from_numpy(mapping),
            idx_mapping=torch.from_numpy(mapping),
            idx_mapping_np=mapping,
            expanded_local_pos=torch.zeros(len(order), dtype=torch.int32),
            input_ids=torch.tensor(fed, dtype=torch.int32),
            pos=torch.tensor(seen, dtype=torch.int64) - 1,
            seq_lens_upper_bound_np=np.array(seen, dtype=np.int32),
        )
        logits = torch.randn(len(order), self.width, generator=generator)
        before = logits.clone()
        out = self.processor.apply(logits, ctx)
        assert out is logits
        for row, slot in enumerate(order):
            request = self.requests[slot]
            expected = reference(request.spec, request.output, self.width, request.reasoning)
            chunk = slot in (extra or {})
            if expected is None or chunk:
                assert torch.equal(logits[row], before[row]), (slot, "a row the processor must leave alone")
                continue
            kept = torch.isfinite(logits[row]).numpy()
            assert (kept == expected).all(), (slot, len(request.output))
            assert torch.equal(logits[row][kept], before[row][kept])

    def sample(self, order: list[int]) -> None:
        for slot in order:
            request = self.requests[slot]
            if len(request.output) < len(request.target):
                request.output.append(request.target[len(request.output)])


def test_the_v2_loader_accepts_the_class():
    assert load_v2([NAME]) == [ToolCallLogitsProcessor]


def test_v2_rows_in_a_new_order_each_step_are_masked_as_their_requests_alone():
    batch = V2Batch()
    assert batch.join(Request(5, WEATHER, prompt_len=11))
    assert batch.join(Request(2, ADD, prompt_len=4))
    assert not batch.join(Request(0, None, prompt_len=9))
    generator = torch.Generator().manual_seed(0)
    shuffle = random.Random(0)
    for _ in range(10):
        order = [5, 2, 0]
        shuffle.shuffle(order)
        batch.step(order, generator)
        batch.sample(order)


def test_v2_a_request_whose_prompt_opened_the_reasoning_block_is_masked_as_one():
    """The front end says the prompt opened the block (``reasoning="open"``):
    the row's first masks let only text and ``</think>`` out of it, then the
    call, exactly as the library's constraint for that request."""
    batch = V2Batch()
    assert batch.join(Request(4, ADD, prompt_len=7, reasoning="open"))
    assert batch.join(Request(1, WEATHER, prompt_len=5))
    generator = torch.Generator().manual_seed(3)
    first = reference(ADD, [], batch.width, "open")
    assert first is not None and first[tok().token_id("</think>")] and not first[tok().token_id("<tool_call>")]
    for _ in range(len(batch.requests[4].target) + 1):
        batch.step([1, 4], generator)
        batch.sample([1, 4])
    assert batch.requests[4].output == batch.requests[4].target


def test_v2_a_recycled_slot_is_reinitialized():
    batch = V2Batch()
    generator = torch.Generator().manual_seed(1)
    batch.join(Request(3, WEATHER, prompt_len=6))
    batch.join(Request(1, ADD, prompt_len=8))
    for _ in range(5):
        batch.step([3, 1], generator)
        batch.sample([3, 1])
    # Slot 3's request finished; a request with other tools takes the slot,
    # then one without tools takes slot 1.
    assert batch.join(Request(3, WRITE, prompt_len=20))
    assert not batch.join(Request(1, None, prompt_len=5))
    for _ in range(6):
        batch.step([1, 3], generator)
        batch.sample([1, 3])


def test_v2_a_request_resumed_after_preemption_catches_up_from_the_token_history():
    batch = V2Batch()
    generator = torch.Generator().manual_seed(2)
    batch.join(Request(4, ADD, prompt_len=7, generated=9))  # nine tokens sampled before it was preempted
    for _ in range(4):
        batch.step([4], generator)
        batch.sample([4])


def test_v2_a_prefill_chunk_is_left_alone_and_the_last_one_masked():
    batch = V2Batch()
    generator = torch.Generator().manual_seed(3)
    batch.join(Request(6, WRITE, prompt_len=30))
    batch.step([6], generator, extra={6: 12})  # a chunk of the prompt: its sample is discarded
    batch.step([6], generator)  # the prompt's last chunk: the first output token is masked
    batch.sample([6])
    batch.step([6], generator)


def test_v2_a_step_allocates_nothing_once_the_requests_have_joined():
    from torch.profiler import ProfilerActivity, profile

    batch = V2Batch()
    batch.join(Request(0, WEATHER, prompt_len=3))
    batch.join(Request(1, ADD, prompt_len=3))
    generator = torch.Generator().manual_seed(4)
    batch.step([0, 1], generator)
    batch.sample([0, 1])
    mapping = np.array([1, 0], dtype=np.int32)
    logits = torch.zeros(2, batch.width)
    contexts = []
    for _ in range(4):
        fed, seen = zip(*(batch.requests[slot].row_inputs() for slot in mapping))
        contexts.append(LogitsContext(
            expanded_idx_mapping=torch.from_numpy(mapping), idx_mapping=torch.from_numpy(mapping), idx_mapping_np=mapping,
            expanded_local_pos=torch.zeros(2, dtype=torch.int32), input_ids=torch.tensor(fed, dtype=torch.int32),
            pos=torch.tensor(seen) - 1, seq_lens_upper_bound_np=np.array(seen, dtype=np.int32),
        ))
        batch.sample([0, 1])
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for ctx in contexts:
            batch.processor.apply(logits, ctx)
    assert [e for e in prof.events() if e.cpu_memory_usage != 0] == []


def test_v2_speculative_decoding_is_refused_at_start_with_the_way_out():
    with pytest.raises(OptionError, match="speculative decoding") as caught:
        build_custom_logits_processors(config(speculative=True), request_states(), False, [NAME])
    assert "CONSTRAINED_VLLM_ROUTE=structured_outputs" in str(caught.value)


def test_v2_a_malformed_description_is_the_clients_error():
    with pytest.raises(ValueError, match=EXTRA_ARGS_KEY):
        ToolCallLogitsProcessor.validate_params(SamplingParams(extra_args={EXTRA_ARGS_KEY: "{"}))
