"""What confining the Claude Code CLI costs: one eval run by the real CLI against the simulator's
HTTP server, in bubblewrap behind the relay and unconfined on the host (sandbox.mode = "none"),
alternating, wall seconds per run. Never a timed test; prints a table.

    PYTHONPATH=. python bench/claude_code_sandbox.py [--runs 6]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from optimizer.config import Settings
from optimizer.execute import get_executor
from optimizer.inputs.evals import load_evals
from optimizer.sim import Simulator, serve

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "csv-report"


async def one(mode: str, url: str, folder: Path, n: int) -> tuple[float, str]:
    settings = Settings.model_validate({"llm": {"provider": "sim"}, "sandbox": {"mode": mode}})
    executor = get_executor("claude-code", settings, base_url=url, api_key="sk-bench")
    started = time.perf_counter()
    record = await executor.execute(
        skill_dir=EXAMPLE,
        skill_name=None,
        eval=load_evals(EXAMPLE).by_id(1),
        inputs_root=EXAMPLE,
        trial_dir=folder / mode / f"run-{n}",
        run_number=n,
        sample=n,
    )
    return time.perf_counter() - started, record.status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=6)
    args = parser.parse_args()
    server, port = serve(Simulator(seed=0), "127.0.0.1", 0)
    seconds: dict[str, list[float]] = {"auto": [], "none": []}
    statuses: dict[str, set[str]] = {"auto": set(), "none": set()}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n in range(1, args.runs + 1):
                for mode in ("auto", "none"):  # alternating, so drift hits both alike
                    took, status = asyncio.run(one(mode, f"http://127.0.0.1:{port}", Path(tmp), n))
                    seconds[mode].append(took)
                    statuses[mode].add(status)
    finally:
        server.shutdown()
        server.server_close()
    table = Table(title=f"Claude Code CLI, one eval, {args.runs} runs each (simulator on loopback)")
    for col in ("mode", "median s", "min s", "max s", "statuses"):
        table.add_column(col)
    names = {"auto": "bubblewrap + relay", "none": "unconfined (host)"}
    for mode, values in seconds.items():
        table.add_row(
            names[mode],
            f"{statistics.median(values):.2f}",
            f"{min(values):.2f}",
            f"{max(values):.2f}",
            ", ".join(sorted(statuses[mode])),
        )
    Console().print(table)
    ratio = statistics.median(seconds["auto"]) / statistics.median(seconds["none"])
    print(f"confined / unconfined (medians): {ratio:.2f}x")


if __name__ == "__main__":
    main()
