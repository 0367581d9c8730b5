"""The workspace's state: the SQLite database (schema migrations, runs, gradings, versions, decisions,
the model-call ledger), atomic file writes, the run lock and a read-only opener for the views.
Every SQL statement on state.db is here, in a repository per table or concern with typed methods
whose rows are named in rows.py (ledger.py holds every sum of money spent); the views read through the same repositories over a
read-only View. Every step writes here before the next one starts, so a crash loses nothing. The
stages it may import are MAY_IMPORT's (pyproject.toml's contracts hold it to them); the
shared modules are open to every stage."""

# The earlier stages this one may import: a contract in pyproject.toml forbids the others.
MAY_IMPORT: tuple[str, ...] = ("decide", "inputs")
