"""What the user hands us, read and checked before anything is spent: the skill folder and its
SKILL.md front matter, evals/evals.json and the trigger evals, the input files an eval names, and
the one-sentence explanations of bad input (exit 2, nothing written). The stages it may import are
MAY_IMPORT's (pyproject.toml's contracts hold it to them); the shared modules are open to
every stage."""

# The earlier stages this one may import: a contract in pyproject.toml forbids the others.
MAY_IMPORT: tuple[str, ...] = ("decide",)
