"""Gemma's chat template as Jinja, written from the dialect's own
description (turn format, markers, value syntax) so it is never spelled a
second time: it renders what :meth:`Gemma4.chat_prompt` renders."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .gemma import Gemma4

CALL = "call:"
"""What a call's body starts with, before the tool name (the ``.lark``
file's ``call`` rule writes it too)."""


def gemma_chat_template(dialect: Gemma4) -> str:
    """A Jinja chat template for a Gemma-family dialect: the chat prefix,
    the tools declared in a system turn (``declaration:NAME{...}`` between
    the declaration markers, keys sorted, values in Gemma's syntax), each
    message as one chat turn (roles renamed as the chat format says) with
    an assistant's ``tool_calls`` after its content, and with
    ``add_generation_prompt`` the opening of the assistant's turn.
    Arguments of earlier calls must be objects (vLLM parses the client's
    JSON text before templating; transformers leaves that to the caller)."""
    delimiter = dialect.string_delimiter
    opening, closing = dialect.declaration_markers
    chat, markup = dialect.chat, dialect.markup
    before_role, rest = chat.turn.split("{role}")
    between, after_text = rest.split("{text}")
    roles = json.dumps(dict(chat.roles))
    assistant = chat.roles.get("assistant", "assistant")
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
        f"{{{{- {json.dumps(chat.prefix)} -}}}}"
        f"{{%- set roles = {roles} -%}}"
        "{%- if tools -%}"
        f"{{{{- {json.dumps(before_role + chat.roles.get('system', 'system') + between)} -}}}}"
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
        f"{markup.open}{CALL}{{{{ function.name }}}}{{{{ gemma_value(function.arguments) }}}}{markup.close}"
        "{%- endfor -%}"
        f"{{{{- {json.dumps(after_text)} -}}}}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}"
        f"{{{{- {json.dumps(before_role + assistant + between)} -}}}}"
        "{%- endif -%}"
    )
