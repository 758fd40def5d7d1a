"""What more than one stage decides for a candidate, on one read of the store: dedupe and
conflict decide once, and persist decides the same way again when its transaction is refused.
`candidate_reads` (the read), `duplicate` (is it a memory we hold: dedupe's tiers), `fact_row`
(what it does to its entity_facts row: conflict's decision, and the state it leaves a memory
in, which patch and rollback write too). No stage owns them."""
