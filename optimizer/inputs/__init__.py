"""What the user hands us, read and checked before anything is spent: the skill folder and its
SKILL.md front matter, evals/evals.json and the trigger evals, the input files an eval names, and
the one-sentence explanations of bad input (exit 2, nothing written). It may import the shared
modules (optimizer.errors, config, schemas, logs, tags) only, never a later stage."""
