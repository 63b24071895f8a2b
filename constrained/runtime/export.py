"""The embedded default model as a standard Hugging Face folder.

``constrained export-model DIR`` writes the converted weights, the
``gemma4`` tokenizer (Gemma 3's vocabulary with Gemma 4's markers), a
generation config whose end tokens are the ones the constraint ends a turn
with, and a chat template, so that vLLM, transformers or any other engine
loads the model offline and prompts it exactly as :func:`generate` does.

The template is the dialect's own (:meth:`Dialect.chat_template`, written
from its turn format, markers and value syntax): it renders what
:meth:`Dialect.chat_prompt` renders, tool declarations, earlier calls
and tool results included (``tests/test_export.py`` compares the two).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..dialects import get_dialect
from ..errors import GenerationError
from ..tokenizers import load_tokenizer
from .models import DEFAULT_DIALECT, default_model_path


def export_model(directory: str | Path, *, force: bool = False) -> Path:
    """Write the default model to ``directory`` (created; an existing
    non-empty one only with ``force``, its files then replaced)."""
    target = Path(directory)
    if target.exists() and not target.is_dir():
        raise GenerationError(f"cannot export the model to {str(target)!r}: it is a file, not a folder")
    if target.is_dir() and any(target.iterdir()) and not force:
        raise GenerationError(f"{str(target)!r} exists and is not empty: choose a new folder or pass force=True (--force)")
    target.mkdir(parents=True, exist_ok=True)
    source = default_model_path()
    for name in ("config.json", "model.safetensors"):
        shutil.copyfile(source / name, target / name)
    dialect = get_dialect(DEFAULT_DIALECT)
    template = dialect.chat_template()
    if template is None:
        raise GenerationError(f"dialect {dialect.name!r} has no chat template to export the model with")
    tokenizer = load_tokenizer(dialect.default_tokenizer)
    hf = tokenizer.hf  # shared by every user of the tokenizer: it holds the template only while saved
    previous, hf.chat_template = hf.chat_template, template
    try:
        hf.save_pretrained(target)
    finally:
        hf.chat_template = previous
    generation = json.loads((source / "generation_config.json").read_text())
    generation["eos_token_id"] = list(tokenizer.eos_token_ids)
    (target / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    return target
