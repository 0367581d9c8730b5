"""One grading unit for every run, whichever command made it: the structural checks, the LLM judge
with its rubric, the rendering of outputs for the judge, per-run scores, the aggregate
(benchmark.json) and the runs every decision reads. A failure of ours leaves a run unscored,
never 0. It may import inputs, store, sim, model, sandbox, execute and the shared modules, never
search or report."""
