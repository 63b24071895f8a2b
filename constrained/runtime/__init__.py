"""Applying a compiled constraint while a model generates: the logits
mask, the precomputed raw-text masks, the generate loop and the embedded
models."""
