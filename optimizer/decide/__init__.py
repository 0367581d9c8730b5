"""Every decision the optimizer makes, as pure functions over typed inputs (docs/design.md §8, §16):
the step rule and its screen (step), the adoption rule (adopt), the sequential looks and how they
spend α (sequential, spending), where added runs go (allot), the false-discovery control over a
night's claims (fdr), the gate's non-inferiority (noninferiority), power and the claim a suite
supports (power), parent selection (parents) and the statistics under all of them (stats). No I/O,
no clock, no globals: a bench imports it alone. It imports no other stage."""

# The earlier stages this one may import: a contract in pyproject.toml forbids the others.
MAY_IMPORT: tuple[str, ...] = ()
