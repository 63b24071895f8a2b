"""Building blocks of llguidance grammars, with no dialect in them: Lark
text helpers (:mod:`.lark`), regex translation (:mod:`.regex`), the value
syntax (:mod:`.syntax`: JSON here, each dialect's own beside it), number
leaves (:mod:`.number_leaves`) and the rules of a frame's values
(:mod:`.emitter`)."""
