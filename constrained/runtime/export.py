"""The embedded default model as a standard Hugging Face folder.

``constrained export-model DIR`` writes the converted weights, the
``gemma4`` tokenizer (Gemma 3's vocabulary with Gemma 4's markers), a
generation config whose end tokens are the ones the constraint ends a turn
with, and a chat template, so that vLLM, transformers or any other engine
loads the model offline and prompts it exactly as :func:`generate` does.

The template is written from the dialect's own description (its turn
format, markers and value syntax), never spelled a second time: it renders
what :meth:`Dialect.chat_prompt` renders, tool declarations, earlier calls
and tool results included (``tests/test_export.py`` compares the two).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..dialects import get_dialect
from ..dialects.gemma import CALL, Gemma4
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
    assert isinstance(dialect, Gemma4)
    tokenizer = load_tokenizer(dialect.default_tokenizer)
    hf = tokenizer.hf  # shared by every user of the tokenizer: it holds the template only while saved
    previous, hf.chat_template = hf.chat_template, chat_template(dialect)
    try:
        hf.save_pretrained(target)
    finally:
        hf.chat_template = previous
    generation = json.loads((source / "generation_config.json").read_text())
    generation["eos_token_id"] = list(tokenizer.eos_token_ids)
    (target / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    return target


def chat_template(dialect: Gemma4) -> str:
    """A Jinja chat template for a Gemma-family dialect: ``chat_prefix``,
    the tools declared in a system turn (``declaration:NAME{...}`` between
    the declaration markers, keys sorted, values in Gemma's syntax), each
    message as one ``chat_turn`` (roles renamed as ``chat_roles`` says) with
    an assistant's ``tool_calls`` after its content, and with
    ``add_generation_prompt`` the opening of the assistant's turn.
    Arguments of earlier calls must be objects (vLLM parses the client's
    JSON text before templating; transformers leaves that to the caller)."""
    delimiter = dialect.string_delimiter
    opening, closing = dialect.declaration_markers
    before_role, rest = dialect.chat_turn.split("{role}")
    between, after_text = rest.split("{text}")
    roles = json.dumps(dialect.chat_roles)
    assistant = dialect.chat_roles.get("assistant", "assistant")
    return (
        "{%- macro gemma_value(v) -%}"
        f"{{%- if v is string -%}}{delimiter}{{{{ v }}}}{delimiter}"
        "{%- elif v is boolean -%}{{ 'true' if v else 'false' }}"
        "{%- elif v is none -%}null"
        "{%- elif v is mapping -%}{{ '{' }}{%- for key, item in v | dictsort(true) -%}"
        "{{ key }}:{{ gemma_value(item) }}{{ ',' if not loop.last }}{%- endfor -%}{{ '}' }}"
        "{%- elif v is iterable -%}[{%- for item in v -%}{{ gemma_value(item) }}{{ ',' if not loop.last }}{%- endfor -%}]"
        "{%- else -%}{{ v }}"
        "{%- endif -%}"
        "{%- endmacro -%}"
        f"{{{{- {json.dumps(dialect.chat_prefix)} -}}}}"
        f"{{%- set roles = {roles} -%}}"
        "{%- if tools -%}"
        f"{{{{- {json.dumps(before_role + dialect.chat_roles.get('system', 'system') + between)} -}}}}"
        "{%- for tool in tools -%}"
        "{%- set f = tool.function if tool.function is defined else tool -%}"
        "{%- set declared = {'parameters': f.parameters if f.parameters is defined and f.parameters is not none else {'type': 'object', 'properties': {}}} -%}"
        "{%- if f.description -%}{%- set declared = {'description': f.description, 'parameters': declared.parameters} -%}{%- endif -%}"
        f"{opening}declaration:{{{{ f.name }}}}{{{{ gemma_value(declared) }}}}{closing}"
        "{%- endfor -%}"
        f"{{{{- {json.dumps(after_text)} -}}}}"
        "{%- endif -%}"
        "{%- for message in messages -%}"
        f"{{{{- {json.dumps(before_role)} + roles.get(message.role, message.role) + {json.dumps(between)} -}}}}"
        "{%- if message.content is string -%}{{ message.content }}"
        "{%- elif message.content is defined and message.content is not none -%}{{ message.content | tojson }}{%- endif -%}"
        "{%- for call in message.tool_calls or [] -%}"
        "{%- set function = call.function if call.function is defined else call -%}"
        "{%- if function.arguments is string -%}"
        "{{ raise_exception('tool call arguments must be an object, not JSON text') }}"
        "{%- endif -%}"
        f"{dialect.call_open}{CALL}{{{{ function.name }}}}{{{{ gemma_value(function.arguments) }}}}{dialect.call_close}"
        "{%- endfor -%}"
        f"{{{{- {json.dumps(after_text)} -}}}}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}"
        f"{{{{- {json.dumps(before_role + assistant + between)} -}}}}"
        "{%- endif -%}"
    )
