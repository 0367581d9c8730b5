"""Evals that grow (docs/design.md §17): the user's Claude Code sessions and a run's eval feedback
drafted into candidate evals (evals/candidates.json), reviewed, and only then appended to
evals.json. The stages it may import are MAY_IMPORT's (pyproject.toml's contracts hold it to
them); the shared modules are open to every stage. Report's review page imports it, never the
other way round."""

# The earlier stages this one may import: a contract in pyproject.toml forbids the others.
MAY_IMPORT: tuple[str, ...] = ("decide", "inputs", "store", "model")
