"""Tokenizers from Hugging Face sources: a local tokenizer directory
(``tokenizer.json``, optionally ``tokenizer_config.json``, ``config.json``
for the embedding row count, ``generation_config.json`` for the EOS ids), a
``tokenizer.json`` file, a transformers fast tokenizer or a
``tokenizers.Tokenizer`` object."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import TokenizerError
from .builtin import BUILTIN_NAMES
from .core import Tokenizer, tokenizers_module, transformers_tokenizer

if TYPE_CHECKING:  # pragma: no cover
    import tokenizers


def _read_json(path: Path) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _as_id_list(value: Any) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
    return []


def _config_vocab_size(cfg: Mapping[str, Any]) -> int | None:
    for c in (cfg, cfg.get("text_config") or {}):
        if isinstance(c, Mapping) and isinstance(c.get("vocab_size"), int):
            return int(c["vocab_size"])
    return None


def _config_eos(gcfg: Mapping[str, Any], cfg: Mapping[str, Any]) -> list[int]:
    text_cfg = cfg.get("text_config")
    return (
        _as_id_list(gcfg.get("eos_token_id"))
        or _as_id_list(cfg.get("eos_token_id"))
        or _as_id_list(text_cfg.get("eos_token_id") if isinstance(text_cfg, Mapping) else None)
    )


_COMMON_EOS = ("<|im_end|>", "<|endoftext|>", "<eos>", "</s>", "<|eot_id|>", "<|end_of_text|>", "<|end|>")


def _guess_eos(backend: tokenizers.Tokenizer) -> list[int]:
    """The first well-known end-of-sequence token the vocabulary has."""
    for t in _COMMON_EOS:
        i = backend.token_to_id(t)
        if i is not None:
            return [i]
    return []


def _load_slow(path: Path, vocab_size: int | None, eos: Sequence[int] | None) -> Tokenizer | None:
    """A directory's slow (sentencepiece) tokenizer, converted to a fast one
    by transformers; ``None`` where there is none or no transformers."""
    import importlib.util

    if not (path.is_dir() and (path / "tokenizer_config.json").is_file()):
        return None
    if importlib.util.find_spec("transformers") is None:
        return None
    from transformers import AutoTokenizer

    try:
        hf = AutoTokenizer.from_pretrained(str(path))
    except Exception as e:
        raise TokenizerError(f"{path}: transformers cannot load this tokenizer ({e})") from e
    cfg = _read_json(path / "config.json")
    if vocab_size is None:
        vocab_size = _config_vocab_size(cfg)
    tok = load_object(hf, vocab_size, eos or _config_eos(_read_json(path / "generation_config.json"), cfg))
    tok.name = path.name
    return tok


def _named_eos(backend: Any, tcfg: dict[str, Any]) -> list[int]:
    """The end token ``tokenizer_config.json`` names, if the vocabulary has it."""
    name = tcfg.get("eos_token")
    name = name.get("content") if isinstance(name, dict) else name
    token = backend.token_to_id(name) if isinstance(name, str) else None
    return [] if token is None else [token]


def load_path(path: Path, vocab_size: int | None, eos: Sequence[int] | None) -> Tokenizer:
    """The tokenizer of a local directory or ``tokenizer.json`` file; a
    directory with only a slow tokenizer goes through transformers."""
    tk = tokenizers_module()
    directory = path if path.is_dir() else path.parent
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.is_file():
        slow = _load_slow(path, vocab_size, eos)
        if slow is not None:
            return slow
        raise TokenizerError(
            f"{path}: no tokenizer.json there. Pass a Hugging Face tokenizer directory with a "
            f"tokenizer.json (a fast tokenizer), a tokenizer.json file, or one of the built-in "
            f"names: {', '.join(BUILTIN_NAMES)}"
        )
    try:
        backend = tk.Tokenizer.from_file(str(file))
    except Exception as e:
        raise TokenizerError(f"{file}: not a readable tokenizers JSON file ({e})") from e
    tcfg = _read_json(directory / "tokenizer_config.json") if path.is_dir() else {}
    cfg = _read_json(directory / "config.json") if path.is_dir() else {}
    gcfg = _read_json(directory / "generation_config.json") if path.is_dir() else {}
    # Added tokens only tokenizer_config.json declares.
    from tokenizers import AddedToken

    for sid, info in sorted((tcfg.get("added_tokens_decoder") or {}).items(), key=lambda kv: int(kv[0])):
        content = info.get("content") if isinstance(info, dict) else None
        if isinstance(content, str) and backend.token_to_id(content) is None:
            if int(sid) == backend.get_vocab_size(with_added_tokens=True):
                backend.add_tokens([AddedToken(content, special=bool(info.get("special")), normalized=False)])
    if vocab_size is None:
        vocab_size = _config_vocab_size(cfg) or backend.get_vocab_size(with_added_tokens=True)
    eos_ids = list(eos or ()) or _config_eos(gcfg, cfg) or _named_eos(backend, tcfg) or _guess_eos(backend)
    bos_name = tcfg.get("bos_token")
    bos_name = bos_name.get("content") if isinstance(bos_name, dict) else bos_name
    bos = backend.token_to_id(bos_name) if isinstance(bos_name, str) else None

    def hf_factory() -> Any:
        try:
            import transformers
        except ImportError as e:
            raise TokenizerError("Tokenizer.hf needs the 'transformers' extra: pip install 'constrained[transformers]'") from e
        if path.is_dir():
            return transformers.AutoTokenizer.from_pretrained(str(path))
        return transformers.PreTrainedTokenizerFast(tokenizer_file=str(file))

    return Tokenizer(
        name=path.name,
        backend=backend,
        vocab_size=vocab_size,
        eos_token_ids=[i for i in eos_ids if i < vocab_size],
        bos_token_id=bos if bos is not None and bos < vocab_size else None,
        hf_factory=hf_factory,
    )


def load_object(obj: Any, vocab_size: int | None, eos: Sequence[int] | None) -> Tokenizer:
    """The tokenizer of a ``tokenizers.Tokenizer`` or a transformers fast
    tokenizer (copied, so its padding and truncation settings stay its own)."""
    tk = tokenizers_module()
    hf = None
    if isinstance(obj, tk.Tokenizer):
        backend = tk.Tokenizer.from_str(obj.to_str())
        name = "tokenizers.Tokenizer"
        eos_ids = list(eos or ()) or _guess_eos(backend)
        bos = None
    else:
        inner = getattr(obj, "backend_tokenizer", None)
        if not isinstance(inner, tk.Tokenizer):
            raise TokenizerError(
                f"cannot use a {type(obj).__name__} as a tokenizer: pass a built-in name "
                f"({', '.join(BUILTIN_NAMES)}), a local tokenizer directory or tokenizer.json, "
                "or a Hugging Face *fast* tokenizer (one with .backend_tokenizer)"
            )
        backend = tk.Tokenizer.from_str(inner.to_str())  # a copy: padding/truncation settings stay theirs
        backend.no_padding()
        backend.no_truncation()
        hf = obj
        name = str(getattr(obj, "name_or_path", "") or type(obj).__name__)
        eos_ids = list(eos or ())
        if not eos_ids:
            gen = getattr(obj, "generation_config", None)
            eos_ids = _as_id_list(getattr(gen, "eos_token_id", None)) if gen is not None else []
        if not eos_ids:
            eos_ids = _as_id_list(getattr(obj, "eos_token_id", None)) or _guess_eos(backend)
        bos = getattr(obj, "bos_token_id", None)
        if vocab_size is None:
            try:
                vocab_size = len(obj)
            except TypeError:
                vocab_size = None
    size = vocab_size if vocab_size is not None else backend.get_vocab_size(with_added_tokens=True)
    return Tokenizer(
        name=name,
        backend=backend,
        vocab_size=size,
        eos_token_ids=[i for i in eos_ids if i < size],
        bos_token_id=bos if isinstance(bos, int) and bos < size else None,
        hf=hf,
        hf_factory=None if hf is not None else (lambda: transformers_tokenizer(backend, {}, False)),
    )
