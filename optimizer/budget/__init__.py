"""A night's money and time, below the search that spends them: what a night will cost before it
starts (estimate, over the cost model's prices and token counts), how fast it goes (pace), the
rules that stop it (stops: the budget, the deadline, the stop file, the plateau, the worth of going
on) and what the next proposal is worth (worth). The one Budget the model client admits every call
through is model/budget.py; this package reads it, never writes it. The stages it may import are
MAY_IMPORT's (pyproject.toml's contracts hold it to them); the shared modules are open to all."""

# The earlier stages this one may import: a contract in pyproject.toml forbids the others.
MAY_IMPORT: tuple[str, ...] = ("decide", "inputs", "store", "model", "execute", "grade")
