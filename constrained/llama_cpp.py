"""``constrained`` in llama.cpp, through llama-cpp-python (the ``llama-cpp``
extra; no torch).

:class:`ToolCallLogitsProcessor` masks llama-cpp-python's numpy scores in
place, and its ``stop`` method is the stopping criterion that ends the
generation when the calls are complete::

    from llama_cpp import Llama, LogitsProcessorList, StoppingCriteriaList
    from constrained.llama_cpp import ToolCallLogitsProcessor

    processor = ToolCallLogitsProcessor(compiled)  # a new one per generation
    llm.create_completion(prompt_ids, max_tokens=256, logits_processor=LogitsProcessorList([processor]),
                          stopping_criteria=StoppingCriteriaList([processor.stop]))

The tokens are the compiled tokenizer's: give llama.cpp token ids encoded
with it, and decode its output with it. ``generate(..., engine="llama-cpp")``
and ``constrained generate --engine llama-cpp`` run the embedded default
model's GGUF this way (``load_model(engine="llama-cpp")``).
"""

from __future__ import annotations

from .errors import LLAMA_CPP_EXTRA, MissingExtraError
from .runtime.llama import ScoresMask, ToolCallLogitsProcessor
from .runtime.models import default_gguf

MissingExtraError.require("constrained.llama_cpp", LLAMA_CPP_EXTRA, "llama_cpp")

__all__ = ["ScoresMask", "ToolCallLogitsProcessor", "default_gguf"]
