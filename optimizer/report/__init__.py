"""Reading a run after (or while) it works: terminal views (status, tree, show), the spend line, the
HTML report and the review server. Never changes a run's state; the only file it writes is
report.html or feedback.json on request. It is the last stage: nothing but the entry points imports
it, and it reads the engine's layer only through the store and the budget: never search/. The stages it may import are MAY_IMPORT's (pyproject.toml's contracts hold it to
them); the shared modules are open to every stage."""

# The earlier stages this one may import: a contract in pyproject.toml forbids the others.
MAY_IMPORT: tuple[str, ...] = (
    "decide",
    "inputs",
    "store",
    "model",
    "execute",
    "grade",
    "budget",
    "grow",
)
