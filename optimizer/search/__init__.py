"""The search: one engine (engine.py, the loop of docs/design.md §3) and the targets it improves (the
body, the description), each proposing variants, judging them against their parent and writing its
lineage; the stop rules, the estimate and the evidence a proposer reads. Every request it sends is
a pure function of the ledger. The stages it may import are MAY_IMPORT's
(pyproject.toml's contracts hold it to them); the shared modules are open to every stage."""

# The earlier stages this one may import: a contract in pyproject.toml forbids the others.
MAY_IMPORT: tuple[str, ...] = ("decide", "inputs", "store", "model", "execute", "grade", "budget")
