"""DeepSeek's DSML: V3.2, V4 and V4.1 write a turn's calls in one block of
XML-like tags, each tag opened by the special token ``｜DSML｜``::

    <｜DSML｜function_calls>
    <｜DSML｜invoke name="get_weather">
    <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
    <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜function_calls>

A string is written raw (``string="true"``), any other value as JSON
(``string="false"``). The block's name and the tags' differ by version
(:class:`DsmlTags`); the rest is the same. The grammar writes what
DeepSeek's encoding writes; no value holds the text ``｜DSML`` (the
token's text less its last character), so a value ends at its first
closing tag and the parser reads the token's text.

Model drift the parser reads: a ``string`` attribute that disagrees with
the value (``string="false"`` text that is no JSON is read as text, typed
by the schema; ``string="true"`` for a parameter that takes no string is
typed by the schema too), arguments written as one JSON object inside the
invoke tags, and whitespace between the tags.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from ..frames.accepts import member_frames
from ..frames.model import EnumFrame, Frame, FreeFrame, StringFrame, UnionFrame
from ..frames.toolset import NormalizedTool
from ..frames.types import json_types
from ..grammar.emitter import ValueEmitter
from ..grammar.lark import literal, regex
from ..grammar.syntax import JSON_SYNTAX, ValueSyntax
from .base import Markers, openai_function
from .deepseek_prompt import END_OF_SENTENCE, END_THINK, THINK, DeepSeekPrompt
from .description import CallMarkup, CallSection, Drift, ReasoningMarkup
from .raw_values import RawTextSyntax, RawValueDialect, ValueKind, raw_text, skip_space, top_level_value_kind
from .segments import Malformed, MarkedText, Parsed, Partial, Raw, Value, held_back_all

DSML = "｜DSML｜"
"""The special token every tag starts with."""
_KEY_TEXT = r'[^"\n]+'
"""Tool names and parameter keys, inside the tags' double quotes."""
_NAME = re.compile(_KEY_TEXT)
_IS_STRING = re.compile(r'\s+string="(true|false)"\s*>')
HELD_OUT = DSML[:-1]
"""Text no value holds: a value ends at its first closing tag, and the
parser reads the token as its text. (The token's text less its last
character, which repeats its first: a JSON string's pattern keeps out a
text whose first character does not repeat.)"""
_EXCLUDED = f"(?s:.*{re.escape(HELD_OUT)}.*)"


@dataclass(frozen=True)
class DsmlTags:
    """The names a version writes after ``｜DSML｜``."""

    calls: str
    invoke: str = "invoke"
    parameter: str = "parameter"

    def markup(self) -> CallMarkup:
        return CallMarkup(
            turn_ends=(END_OF_SENTENCE,),
            ends_after_calls=(END_OF_SENTENCE,),
            open=f'<{DSML}{self.invoke} name="',
            close=f"</{DSML}{self.invoke}>",
            separator="\n",
            section=CallSection(f"<{DSML}{self.calls}>", f"</{DSML}{self.calls}>", lead="\n\n", inner="\n"),
            token_rules=(("dsml", DSML),),
            argument_key=_KEY_TEXT,
        )

    def parameter_open(self, key: str) -> str:
        """A parameter's opening tag up to its ``string`` attribute's value."""
        return f'<{DSML}{self.parameter} name="{key}" string="'

    @property
    def parameter_close(self) -> str:
        return f"</{DSML}{self.parameter}>"


def grammar(tags: DsmlTags) -> str:
    """The fixed parts of a version's grammar (the compiler appends the
    section, the ``dsml`` token rule and the rest)."""
    excluded = regex(f"(?s:.*){re.escape(DSML)}(?s:.*)")
    return "\n".join(
        [
            f"// DeepSeek DSML ({tags.calls.strip()}): fixed parts; tool_body is generated.",
            f"reasoning: {THINK} reasoning_rest",
            f"reasoning_rest: THINK_TEXT? {END_THINK} BLANK?",
            r"THINK_TEXT: /(.|\n)+/",
            r"BLANK: /[ \t\n]+/",
            "text: TEXT",
            rf"TEXT: /(.|\n)+/ & ~{excluded}",
            f'call: "<" dsml {literal(tags.invoke + " name=" + chr(34))} tool_body "</" dsml {literal(tags.invoke + ">")}',
            r'call_separator: "\n"',
            'json_value: %json {"x-guidance": {"whitespace_flexible": false, '
            '"item_separator": ", ", "key_separator": ": "}}',
        ]
    )


class DeepSeekV32(DeepSeekPrompt, RawValueDialect):
    name = "deepseek_v32"
    family = "DeepSeek-V3.2"
    default_tokenizer = "deepseek_v4"
    tags = DsmlTags(calls="function_calls")
    value_syntax = JSON_SYNTAX
    grammar_source = grammar(tags)
    markup = tags.markup()
    reasoning = ReasoningMarkup(tokens=(THINK, END_THINK), thinks_by_default=False, prompt_opens=True)
    drift = Drift(self_closing=re.compile(r'(?P<name>[^"\n]+)"[ \t]*/>'))  # V4's zero-argument invoke
    any_guard = re.compile(re.escape(HELD_OUT))

    def values_syntax(self, markers: Markers) -> ValueSyntax:
        return replace(self.value_syntax, excluded_texts=(HELD_OUT,))

    def call_body(self, tool: NormalizedTool, emitter: ValueEmitter, markers: Markers) -> str:
        tags = self.tags

        # The key apart from the tag around it, as an undeclared key's is:
        # the lexer then splits a declared key where it splits any other.
        def opening(key: str) -> str:
            return f'"<" dsml {literal(tags.parameter + " name=" + chr(34))} {key} {literal(chr(34) + " string=" + chr(34))}'

        def member(key: str, frame: Frame, path: str) -> str:
            return f"{opening(literal(key))} {self._value(frame, emitter, path)}"

        bodies = []
        for frame in self.argument_objects(tool):
            extra = emitter.additional_member(
                frame, "", regex(_KEY_TEXT), opening, lambda value: self._value(value, emitter, "/additionalProperties")
            )
            members = emitter.members(frame, lambda k, v: member(k, v, f"/properties/{k}"), literal("\n"), extra, "")
            parts = (literal(tool.name + '">\n'), members, literal("\n"))  # members is empty for a call without arguments
            bodies.append(" ".join(part for part in parts if part))
        return " | ".join(f"({body})" for body in bodies)

    def _value(self, frame: Frame, emitter: ValueEmitter, path: str) -> str:
        """The ``string`` attribute's value, the tag's end and the value
        with its closing tag: ``true`` and raw text for the frame's strings,
        ``false`` and JSON for the rest."""
        frame = emitter.resolve(frame)
        strings, others = _split(frame, emitter)
        close = f'"</" dsml {literal(self.tags.parameter + ">")}'
        options = []
        if strings:
            options.append(f'"true\\">" ({" | ".join(self._raw(s, emitter, path) for s in strings)}) dsml {literal(self.tags.parameter + ">")}')
        if others:
            # Each option by itself: the emitter knows a frame by its identity,
            # so no frame made here (which would not outlive this call) goes to it.
            json = " | ".join(emitter.value(o, path) if not isinstance(o, tuple) else emitter.enum(o) for o in others)
            options.append(f'"false\\">" ({json}) {close}')
        return options[0] if len(options) == 1 else f"({' | '.join(options)})"

    @staticmethod
    def _raw(frame: StringFrame | EnumFrame, emitter: ValueEmitter, path: str) -> str:
        """Raw text of ``frame`` and the ``</`` before the closing tag's
        token, as one lexeme: the text runs on past any ``</`` until the
        token comes."""
        if isinstance(frame, EnumFrame):
            texts = " | ".join(literal(v) for v in frame.values if isinstance(v, str))
            return emitter.rules.terminal("text", f'({texts}) "</"')
        content = emitter.string_content(frame, path, _EXCLUDED)
        if content is None:
            content = f"/(?s:.*)/ & ~{regex(_EXCLUDED)}"
        return emitter.rules.terminal("raw_text", f'({content}) "</"')

    def raw_text_syntax(self, markers: Markers) -> RawTextSyntax:
        """Tracking starts at the first ``｜DSML｜`` (the section's opening)
        and runs to the end of the turn; a value ends at ``</｜DSML｜``. The
        markup between values says which call and key the next one is."""
        tags, dsml = self.tags, re.escape(DSML)
        name = r'[^"\n]+'
        invoke = f"<{dsml}{re.escape(tags.invoke)} name="
        opening = (
            rf"(?:{re.escape(tags.calls)}>\n|{re.escape(tags.parameter)}>\n(?:</{dsml}{re.escape(tags.invoke)}>\n)?)"
            rf'(?:{invoke}"{name}">\n\n</{dsml}{re.escape(tags.invoke)}>\n)*'
            rf'(?:{invoke}"(?P<tool>{name})">\n)?'
            rf'<{dsml}{re.escape(tags.parameter)} name="(?P<key>{name})" string="(?:true|false)">'
        )
        return RawTextSyntax(
            call_open=DSML,
            call_close=self.markup.close,
            opening=re.compile(opening.encode()),
            close=f"</{DSML}",
            close_is_token=False,
            close_at_start=True,
            json_may_hold_close=False,
            value_lead="",
            value_guards=self.value_guards,
            value_kind=self._value_kind,
            open_repeats=True,
        )

    def value_guards(self, tool: NormalizedTool | None) -> tuple[str, ...]:
        """The token's text: no raw value spells it."""
        return (HELD_OUT,)

    def _value_kind(self, tool: NormalizedTool, key: str) -> ValueKind:
        """As for any raw-text dialect, but a value the ``string`` attribute
        may make raw text or JSON is not followed: the tracker does not read
        the attribute."""
        kind = top_level_value_kind(self, tool, key, close=f"</{DSML}")
        frames = [tool.schema.resolve(f) for obj in self.argument_objects(tool) for f in member_frames(obj, key) or ()]
        kinds = {_writes_as(frame, tool) for frame in frames} or {"both"}
        if len(kinds) > 1 or "both" in kinds:
            return ValueKind.UNTRACKED
        return kind

    def name_problem(self, name: str) -> str | None:
        return None if _NAME.fullmatch(name) and DSML not in name else 'invoke name="NAME" needs a name without \'"\' or a newline'

    def key_problem(self, key: str, top_level: bool) -> str | None:
        if top_level and not _NAME.fullmatch(key):
            return 'parameter name="KEY" needs a key without \'"\' or a newline'
        return self.text_problem(key, top_level)

    def closing_problem(self, text: str, top_level: bool) -> str | None:
        return f"no value may hold {HELD_OUT!r}, the start of the token every tag starts with" if HELD_OUT in text else None

    def render_call(self, tool: NormalizedTool, arguments: dict[str, Any], key_order: str) -> str:
        tags = self.tags
        parameters = [
            f'{tags.parameter_open(key)}{"true" if isinstance(value, str) else "false"}">{raw_text(value)}{tags.parameter_close}'
            for key, value in self.arranged(tool, arguments, key_order).items()
        ]
        return f'{self.markup.open}{tool.name}">\n' + "\n".join(parameters) + f"\n{self.markup.close}"

    def walk(self, body: str, *, final: bool, resume: Partial | None = None) -> Partial:
        """The name and ``">``, then parameter tags (any whitespace between
        them) or one JSON object; a value runs to its first closing tag."""
        tags = self.tags
        if resume is not None:
            assert resume.name is not None
            name, pairs, position = resume.name, list(resume.pairs), 0
        else:
            end = body.find('">')
            if end < 0:
                if final or "\n" in body:
                    raise Malformed('expected the tool name and ">" after invoke name="')
                return Partial()
            name = body[:end]
            if not _NAME.fullmatch(name):
                raise Malformed('expected the tool name and ">" after invoke name="')
            pairs, position = [], end + 2
            rest = body[position:].strip()
            if rest.startswith("{"):
                return self._json_arguments(name, rest, final)
        opening = f"<{DSML}{tags.parameter}"
        while (position := skip_space(body, position)) < len(body):
            if not body.startswith(opening, position):
                if final or not opening.startswith(body[position:]):
                    raise Malformed(f"expected a parameter tag at offset {position}", name)
                return Partial(name, pairs, resume_at=position)
            key_start = position + len(opening)
            head = re.compile(r'\s+name="(' + _KEY_TEXT + ')"').match(body, key_start)
            attribute = _IS_STRING.match(body, head.end()) if head else None
            if attribute is None:
                if final or "\n" in body[key_start:]:
                    raise Malformed("expected a parameter tag with name and string attributes", name)
                return Partial(name, pairs, resume_at=position)
            assert head is not None
            key, start = head.group(1), attribute.end()
            closing = body.find(tags.parameter_close, start)
            if closing < 0:
                if final:
                    raise Malformed(f"the value of {key!r} is not closed with {tags.parameter_close!r}", name)
                held = held_back_all(body[start:], (tags.parameter_close,))
                tail = MarkedText(re.compile(re.escape(tags.parameter_close)), (tags.parameter_close,), body[start + len(held) :])
                return Partial(name, pairs, key, held, resume_at=position, open_value=tail)
            pairs.append((key, self._typed(name, key, body[start:closing], attribute.group(1) == "true")))
            position = closing + len(tags.parameter_close)
        return Partial(name, pairs, resume_at=position)

    def _json_arguments(self, name: str, text: str, final: bool) -> Partial:
        """Arguments written as one JSON object inside the invoke tags (drift)."""
        try:
            arguments = json.loads(text)
        except ValueError:
            if final:
                raise Malformed("the arguments are neither parameter tags nor one JSON object", name) from None
            return Partial(name)
        if not isinstance(arguments, dict):
            raise Malformed("the arguments are neither parameter tags nor one JSON object", name)
        return Partial(name, [(key, Parsed(value)) for key, value in arguments.items()], resume_at=0)

    def _typed(self, name: str, key: str, text: str, is_string: bool) -> Value:
        """A value as its ``string`` attribute says, where the parameter's
        schema allows that: a string kept as written, else JSON; text the
        attribute misreads is typed by the schema (:class:`Raw`)."""
        if is_string:
            return Parsed(text) if self._takes_string(name, key) else Raw(text)
        try:
            return Parsed(json.loads(text))
        except ValueError:
            return Raw(text)

    def _takes_string(self, name: str, key: str) -> bool:
        tool = self.tools.get(name)
        if tool is None:
            return True
        return self.cached(("string", name, key), lambda: _takes_string(tool, key, self))

    def tool_result(self, content: str, first: bool, last: bool, closing: str) -> str:
        """Results in ``<function_results>``, one ``<result>`` each."""
        text = ("\n\n<function_results>" if first else "") + f"\n<result>{content}</result>"
        return text + (f"\n</function_results>\n\n{closing}" if last else "")

    def declare_tools(self, tools: Any) -> str:
        """The tools section of DeepSeek's system prompt."""
        tags, dsml = self.tags, DSML
        schemas = "\n".join(json.dumps(openai_function(tool), ensure_ascii=False) for tool in tools)
        block = f"<{dsml}{tags.calls}>"
        return (
            "## Tools\nYou have access to a set of tools you can use to answer the user's question.\n"
            f'You can invoke functions by writing a "{block}" block like the following as part of your reply to the user:\n'
            f"{block}\n{self.markup.open}$FUNCTION_NAME\">\n{tags.parameter_open('$PARAMETER_NAME')}true|false\">"
            f"$PARAMETER_VALUE{tags.parameter_close}\n...\n{self.markup.close}\n</{dsml}{tags.calls}>\n"
            "String and scalar parameters should be specified as is without any escaping or quotes, while lists and "
            'objects should use JSON format. The "string" attribute should be set to "true" for string type parameters '
            'and "false" for other types (numbers, booleans, arrays, objects).\n'
            f"Here are the functions available in JSONSchema format:\n<functions>\n{schemas}\n</functions>\n"
        )


def _split(frame: Frame, emitter: ValueEmitter) -> tuple[list[StringFrame | EnumFrame], list[Frame | tuple[Any, ...]]]:
    """The options of ``frame`` written as raw strings, and those written
    as JSON: frames of the schema, or the values of an enum that are no
    strings."""
    options = [emitter.resolve(o) for o in frame.options] if isinstance(frame, UnionFrame) else [frame]
    strings: list[StringFrame | EnumFrame] = []
    others: list[Frame | tuple[Any, ...]] = []
    for option in options:
        if isinstance(option, FreeFrame):
            strings.append(StringFrame())
            others.append(option)
        elif isinstance(option, StringFrame):
            strings.append(option)
        elif isinstance(option, EnumFrame):
            texts = tuple(v for v in option.values if isinstance(v, str))
            rest = tuple(v for v in option.values if not isinstance(v, str))
            if texts:
                strings.append(EnumFrame(texts))
            if rest:
                others.append(rest)
        else:
            others.append(option)
    if any(isinstance(s, StringFrame) and s == StringFrame() for s in strings):
        strings = [StringFrame()]
    return strings, others


def _writes_as(frame: Frame, tool: NormalizedTool) -> str:
    """``"raw"``, ``"json"`` or ``"both"``: how values of ``frame`` are written."""
    types = json_types(frame, tool.schema.definitions)
    if "string" not in types:
        return "json"
    return "raw" if types == {"string"} else "both"


def _takes_string(tool: NormalizedTool, key: str, dialect: RawValueDialect) -> bool:
    definitions = tool.schema.definitions
    frames = [f for obj in dialect.argument_objects(tool) for f in member_frames(obj, key) or ()]
    return not frames or any("string" in json_types(f, definitions) for f in frames)


class DeepSeekV4(DeepSeekV32):
    name = "deepseek_v4"
    family = "DeepSeek-V4"
    tags = DsmlTags(calls="tool_calls")
    grammar_source = grammar(tags)
    markup = tags.markup()


class DeepSeekV41(DeepSeekV32):
    name = "deepseek_v41"
    family = "DeepSeek-V4.1"
    tags = DsmlTags(calls=" calls", invoke=" invoke", parameter=" parameter")
    grammar_source = grammar(tags)
    markup = tags.markup()

