"""The frames: the typed intermediate form of a tool's parameters, what the
grammar and the parser work from. :mod:`.model` defines them,
:mod:`.normalize` makes them from JSON Schema (expanding conjunctions in
:mod:`.conjunctions`, each type's keywords in :mod:`.objects`,
:mod:`.arrays` and :mod:`.scalars`, on the shared :mod:`.sites`, with
:mod:`.numbers` and :mod:`.unions`), :mod:`.accepts` and :mod:`.types` say
which values they allow, and :mod:`.toolset` reads a list of tools into
frames under the tool-set policy."""
