"""Evals that grow (docs/design.md §17): the user's Claude Code sessions and a run's eval feedback drafted
into candidate evals (evals/candidates.json), reviewed, and only then appended to evals.json.
It may import the shared modules and the stages above it (inputs for sessions, redaction and the
split, store for atomic writes and a run's row, model for drafting with --provider); report's
review page imports it, never the other way round."""
