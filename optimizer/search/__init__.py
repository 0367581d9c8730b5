"""The search: one engine (engine.py, the loop of docs/design.md §3) and the targets it improves (the
body, the description), each proposing variants, judging them against their parent and writing
its lineage; the stop rules, the estimate and the evidence a proposer reads. Every request it
sends is a pure function of the ledger. It may import every earlier stage (inputs to grade) and
the shared modules, never report."""
