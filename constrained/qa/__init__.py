"""Checking the engine against itself and the world: the random-walk
fuzzer and the conformance judge (JSON-Schema-Test-Suite, MaskBench)."""
