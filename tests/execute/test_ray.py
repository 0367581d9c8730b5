"""The Ray backend on a local two-CPU cluster started here: runs execute in Ray workers (each with
its own simulator and in-memory ledger), the driver alone writes the run folders and the ledger,
the outputs equal a local run's, and a redone run pays nothing twice. Skipped only without Ray."""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
import sys
from pathlib import Path

import pytest
import tiers

from optimizer.config import Settings
from optimizer.errors import BadInput
from optimizer.execute import get_executor
from optimizer.execute.record import is_complete
from optimizer.inputs import skill as skills
from optimizer.inputs.evals import load_evals
from optimizer.model import make_client, scoped
from optimizer.sim import Simulator
from optimizer.store import ledger
from optimizer.store.db import Store

pytestmark = pytest.mark.slow  # Ray's workers

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "tests" / "fixtures" / "csv-report"


@pytest.fixture(scope="module")
def ray_cluster():
    if importlib.util.find_spec("ray") is None:
        tiers.skip("ray", "Ray is not installed (pip install '.[ray]')")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="warning")
    yield ray
    ray.shutdown()


def settings_for(backend: str) -> Settings:
    return Settings.model_validate({"llm": {"provider": "sim"}, "execute": {"backend": backend}})


async def execute(tmp: Path, backend: str, store: Store, folder: str) -> list:
    settings = settings_for(backend)
    client = make_client(settings, store, simulator=Simulator(seed=0))
    executor = get_executor(None, settings, client=client)
    snapshot = tmp / "v0" / "skill"
    if not snapshot.exists():
        skills.snapshot(EXAMPLE, snapshot)
    evals = load_evals(EXAMPLE)
    try:
        with scoped("v0"):
            return list(
                await asyncio.gather(
                    *(
                        executor.execute(
                            skill_dir=snapshot if c == "with_skill" else None,
                            skill_name="csv-report",
                            eval=evals.by_id(1),
                            inputs_root=EXAMPLE,
                            trial_dir=tmp / folder / c / "run-1",
                            run_number=1,
                            sample=1,
                        )
                        for c in ("with_skill", "without_skill")
                    )
                )
            )
    finally:
        await client.aclose()


def files(trial_dir: Path) -> dict[str, bytes]:
    return {
        p.relative_to(trial_dir).as_posix(): p.read_bytes()
        for p in sorted(trial_dir.rglob("*"))
        if p.is_file()
    }


async def test_runs_execute_in_ray_workers_and_come_back_whole(tmp_path, ray_cluster):
    store = Store(tmp_path / "state.db")
    records = await execute(tmp_path, "ray", store, "ray")
    assert type(get_executor(None, settings_for("ray"), client=object())).__name__ == "RayExecutor"
    assert [r.status for r in records] == ["ok", "ok"]
    for record in records:
        assert is_complete(record.trial_dir) and not list(record.trial_dir.parent.glob(".*ray-tmp"))
        assert (record.trial_dir / "transcript.md").is_file()
    assert (
        records[0].skill_invoked is True
        and (records[0].trial_dir / "outputs" / "report.md").is_file()
    )
    # The workers' model calls are in the driver's ledger, with their scope and cost.
    calls = store.query("select * from calls where outcome = 'ok'")
    steps = sum(
        len(
            [
                1
                for line in (r.trial_dir / "transcript.jsonl").read_text().splitlines()
                if '"role": "assistant"' in line
            ]
        )
        for r in records
    )
    assert len(calls) == steps > 0 and {c["scope"] for c in calls} == {"v0"}
    assert sum(c["cost_usd"] for c in calls) == pytest.approx(
        sum(r.cost_usd for r in records), rel=1e-3
    )
    # Same seed, same answers: the outputs are those of a local run.
    local = await execute(tmp_path, "local", Store(tmp_path / "local.db"), "local")
    for remote, here in zip(records, local, strict=True):
        a, b = files(remote.trial_dir), files(here.trial_dir)
        assert a.keys() == b.keys()
        assert a["transcript.md"] == b["transcript.md"]
        assert {k: v for k, v in a.items() if k.startswith("outputs/") and "metrics" not in k} == {
            k: v for k, v in b.items() if k.startswith("outputs/") and "metrics" not in k
        }

    # A run redone (its folder lost) is served from the driver's ledger: nothing paid twice.
    spent = store.spent_usd()
    for record in records:
        shutil.rmtree(record.trial_dir)
    again = await execute(tmp_path, "ray", store, "ray")
    assert [r.status for r in again] == ["ok", "ok"]
    assert store.spent_usd() == pytest.approx(spent)
    assert ledger.summary(store)["cache_hits"] == len(calls)
    store.close()


def test_backend_ray_without_ray_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails, as when missing
    with pytest.raises(BadInput, match=r"pip install '\.\[ray\]'"):
        get_executor(None, settings_for("ray"), client=object())


def test_the_default_backend_is_local():
    assert Settings().execute.backend == "local" and Settings().ray.address == ""
    assert type(get_executor("command", Settings())).__name__ == "CommandExecutor"
