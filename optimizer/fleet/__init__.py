"""A fleet night (docs/design.md §18): many skills under one budget, one deadline and one lock,
each next step spent where the members' ledgers say it buys the most, every member an ordinary
run folder. An entry point like cli, daemon and nightly: it may import any stage and the daemon,
and only the CLI imports it."""
