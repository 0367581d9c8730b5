"""The workspace's state: the SQLite database (schema migrations, runs, gradings, versions, decisions,
the model-call ledger), atomic file writes, the run lock and a read-only opener for the views.
Every SQL statement on state.db is here, in a repository per table or concern with typed methods
that hand out one frozen record per row, its JSON columns decoded (versions.Version, runs.Run, ...;
the rows written are named in rows.py), and raise errors.StoreError for a state.db they cannot read
(ledger.py holds every sum of money spent); the views read through the same repositories over a
read-only View. Every step writes here before the next one starts, so a crash loses nothing. The
stages it may import are MAY_IMPORT's (pyproject.toml's contracts hold it to them); the
shared modules are open to every stage."""

# The earlier stages this one may import: a contract in pyproject.toml forbids the others.
MAY_IMPORT: tuple[str, ...] = ("decide", "inputs")
