"""Reading JSON Schema: ``$ref`` resolution, normalization into typed frames,
effective types, and the ``annotate_ref_types`` utility."""
