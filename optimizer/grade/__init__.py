"""One grading unit for every run, whichever command made it: the structural checks, the LLM judge
with its rubric, the rendering of outputs for the judge, per-run scores, the aggregate
(benchmark.json) and the runs every decision reads. A failure of ours leaves a run unscored, never
0. The stages it may import are MAY_IMPORT's (pyproject.toml's contracts hold it to
them); the shared modules are open to every stage."""

# The earlier stages this one may import: a contract in pyproject.toml forbids the others.
MAY_IMPORT: tuple[str, ...] = ("decide", "inputs", "store", "model", "sandbox", "execute")
