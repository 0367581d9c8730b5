"""The workspace's state: the SQLite database (schema migrations, runs, gradings, versions,
decisions, the model-call ledger), atomic file writes, the run lock and a read-only opener for the
views. Every SQL statement on state.db is here, in a repository per table or concern with typed
methods (ledger.py holds every sum of money spent); the views read through the same repositories
over a read-only View. Every step writes here before the next one starts, so a crash loses
nothing. It may import the shared modules only (optimizer.errors, config, schemas, logs, tags),
never a stage."""
