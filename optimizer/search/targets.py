"""The targets a run can optimise, by the name `--target` takes and state.db's runs.target keeps.
A new target is one module with an `open_target(run)` and one line here; the engine is unchanged."""

from __future__ import annotations

from optimizer.search import body, description
from optimizer.search.engine import OpenTarget

TARGETS: dict[str, OpenTarget] = {"body": body.open_target, "description": description.open_target}
