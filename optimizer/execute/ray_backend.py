"""The Ray backend of the executors (`execute.backend = "ray"`, `pip install '.[ray]'`): each run is
one Ray task. Never lets a worker write state.db or the workspace: the driver alone does.

What travels, and why:
- to the worker: the settings (backend forced to local), the eval, the skill snapshot and the
  eval's input files as bytes (with their modes, so scripts stay executable), the run's number
  and sample, the scope label, and the ledger rows this run could reuse (completed executor calls
  of the same sample and scope: a run redone after a kill is served from them, as locally);
- in the worker: a scratch folder holds the skill and inputs, the executor runs exactly as it
  does locally (same sandbox, same scrubbing of host paths), and its model calls go through a
  model client over an in-memory state.db: with `llm.provider = "sim"` an in-process simulator
  with the same seed (so answers are the same as the driver's simulator would give), with
  "anthropic" the Messages API with the worker's own ANTHROPIC_API_KEY (the driver never ships
  a key: set it on the cluster's nodes);
- back to the driver: the complete run folder (every file as bytes) and the worker's new ledger
  rows and cache hits. The driver writes the folder atomically (a temporary sibling renamed into
  place, timing.json inside it) and inserts the ledger rows into its own `calls` table, counting
  their cost as its client's spend, so the budget, per-version cost and "never pay twice" hold.

The budget: a worker's client gets what was left of the run's budget when the run was sent, so
`execute.concurrency` runs in flight can together overspend by at most that many runs' cost.
On the simulator the prompt-cache accounting is per worker, so cache read/write token counts (not
the answers) can differ from a local run's. On a remote cluster (`ray.address`) every node needs
this package and its dependencies installed (the same version as the driver).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import tempfile
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import structlog

from optimizer.config import Settings
from optimizer.errors import (
    BadInput,
    BudgetExhausted,
    OptimizerError,
    ProviderSpendLimit,
    WorkFailed,
)
from optimizer.execute import EXECUTORS, Executor, TrialContext
from optimizer.execute.record import TrialRecord, is_complete
from optimizer.execute.staging import resolve_inputs
from optimizer.execute.transcript import Tally, Transcript
from optimizer.inputs.evals import Eval
from optimizer.inputs.skill import files_of
from optimizer.model import simulated
from optimizer.model.port import Client
from optimizer.store import ledger
from optimizer.store.rows import CacheHit, CallRow

if TYPE_CHECKING:
    from optimizer.store.db import Store

log = structlog.get_logger()

INSTALL_HINT = "pip install '.[ray]'"
_ERRORS = {
    cls.__name__: cls
    for cls in (BadInput, BudgetExhausted, ProviderSpendLimit, WorkFailed, OptimizerError)
}
_remote_fn: Any = None


class _Payload(TypedDict):
    """What the driver sends a worker for one run (the module docstring says why each part)."""

    settings: Settings
    executor: str
    eval: Eval
    skill: dict[str, tuple[bytes, int]] | None
    skill_dir_name: str | None
    skill_name: str | None
    inputs: dict[str, bytes]
    run_name: str
    run_number: int
    sample: int
    # The driver's scope label (str | None), set again in the worker by scoped(), which is
    # annotated as taking a str: Any until it takes None too.
    scope: Any
    ledger: list[CallRow]
    budget_usd: float | None
    # The driver's simulator (model.simulated.Simulated) or None; Any, as the worker reads it
    # through .get() and mypy does not narrow a TypedDict's value by a .get() test.
    simulated: Any


class _Result(TypedDict):
    """What a worker sends back (_work builds it as a plain dict, updated by keywords): the run
    folder's files, or the systemic error it raised, and the worker's new ledger rows."""

    worker: str
    files: NotRequired[dict[str, tuple[bytes, int]]]
    systemic: NotRequired[str]
    problems: NotRequired[list[str]]
    calls: NotRequired[list[CallRow]]
    cache_hits: NotRequired[list[CacheHit]]


def require_ray() -> ModuleType:
    """The ray module, or BadInput naming the install command."""
    try:
        import ray
    except ImportError:
        raise BadInput(
            "execute.backend = 'ray' needs Ray, which is not installed: run "
            f"{INSTALL_HINT} (or set execute.backend = 'local')."
        ) from None
    return ray


def ensure_ray(settings: Settings) -> ModuleType:
    """Connect to ray.address, or start a local cluster when it is empty (once per process)."""
    ray = require_ray()
    if not ray.is_initialized():
        address = settings.ray.address.strip() or None
        log.info("ray.init", address=address or "local cluster")
        ray.init(
            address=address,
            include_dashboard=False,
            ignore_reinit_error=True,
            log_to_driver=False,
            logging_level="warning",
        )
    return ray


def _task(ray: ModuleType) -> Any:
    global _remote_fn
    if _remote_fn is None:
        _remote_fn = ray.remote(max_retries=1)(run_in_worker)
    return _remote_fn


class RayExecutor(Executor):
    """Sends each run to a Ray worker and writes what comes back; the same interface as the local
    executors, so the Evaluator and run_pool use it unchanged."""

    def __init__(
        self,
        settings: Settings,
        inner: str,
        *,
        client: Client | None = None,
        base_url: str | None = None,
    ) -> None:
        super().__init__(settings)
        if inner not in EXECUTORS:
            raise BadInput(
                f"execute.executor '{inner}' is not an executor; use one of {', '.join(EXECUTORS)}."
            )
        require_ray()
        self.name = inner
        self.client = client
        self.base_url = base_url
        self.worker_settings = settings.model_copy(
            update={
                "execute": settings.execute.model_copy(update={"backend": "local"}),
                **(
                    {"llm": settings.llm.model_copy(update={"base_url": base_url})}
                    if base_url
                    else {}
                ),
            }
        )

    async def _run(self, ctx: TrialContext, transcript: Transcript, tally: Tally) -> str | None:
        raise NotImplementedError("a Ray run executes in the worker")  # pragma: no cover

    async def execute(
        self,
        *,
        skill_dir: Path | None,
        skill_name: str | None,
        eval: Eval,
        inputs_root: Path,
        trial_dir: Path,
        run_number: int,
        sample: int,
    ) -> TrialRecord:
        trial_dir = Path(trial_dir)
        if is_complete(trial_dir):
            return TrialRecord.load(trial_dir)
        inputs = resolve_inputs(list(eval.files), inputs_root, eval_id=eval.id)  # BadInput here
        ray = ensure_ray(self.settings)
        from optimizer.model import scope

        label = scope.get()
        seed_rows = self._reusable_calls(sample, label)
        payload: _Payload = {
            "settings": self.worker_settings,
            "executor": self.name,
            "eval": eval,
            "skill": _pack(Path(skill_dir), skill=True) if skill_dir is not None else None,
            "skill_dir_name": Path(skill_dir).name if skill_dir is not None else None,
            "skill_name": skill_name,
            "inputs": {name: src.read_bytes() for src, name in inputs},
            "run_name": trial_dir.name,
            "run_number": run_number,
            "sample": sample,
            "scope": label,
            "ledger": seed_rows,
            "budget_usd": self._budget_left(seed_rows),
            # The driver's simulator, pickled by reference: the worker builds the same one.
            "simulated": simulated.registered() if self.settings.llm.provider == "sim" else None,
        }
        ref = _task(ray).options(num_cpus=self.settings.ray.num_cpus_per_run).remote(payload)
        try:
            result: _Result = await ref
        except asyncio.CancelledError:
            ray.cancel(ref)
            raise
        self._adopt(result.get("calls", []), result.get("cache_hits", []))
        if "systemic" in result:  # re-raised here, as the local executor would have raised it
            raise _ERRORS.get(result["systemic"], WorkFailed)(*result["problems"])
        _write_run(trial_dir, result["files"])
        log.info(
            "run.executed_on_ray",
            executor=self.name,
            eval_id=eval.id,
            run=run_number,
            worker=result.get("worker"),
            new_calls=len(result.get("calls", [])),
        )
        return TrialRecord.load(trial_dir)

    # -- the driver's ledger ----------------------------------------------------------------------

    def _store(self) -> Store | None:
        return self.client.store if self.client is not None else None

    def _reusable_calls(self, sample: int, label: str | None) -> list[CallRow]:
        store = self._store()
        if store is None:
            return []
        return ledger.executor_answers(store, sample, label)

    def _budget_left(self, seed_rows: list[CallRow]) -> float | None:
        client = self.client
        left = client.budget.left_usd() if client is not None else None
        if left is None:
            return None
        # The worker's own client counts the rows it is given as spent already, as the budget
        # counts them: an adoption's rows are paid apart (store/money.py), so never added here.
        counted = [r for r in seed_rows if not str(r.get("scope") or "").startswith("adoption ")]
        return left + sum(float(r["cost_usd"] or 0) for r in counted)

    def _adopt(self, calls: list[CallRow], hits: list[CacheHit]) -> None:
        """The worker's ledger rows into the driver's ledger, counted as this run's spend."""
        store, client = self._store(), self.client
        if store is None or client is None:
            return
        for row in calls:
            if store.completed_call(row["hash"]) is not None:
                continue  # never counted twice
            store.record_call(row)
            if row.get("outcome") == "ok":
                client.count_paid(float(row.get("cost_usd") or 0.0))
        for hit in hits:
            store.record_cache_hit(hit["hash"], hit["role"], saved_usd=float(hit["saved_usd"] or 0))
            client.count_saved(float(hit["saved_usd"] or 0))


# -- the worker ------------------------------------------------------------------------------------


def run_in_worker(payload: _Payload) -> dict[str, Any]:
    """The Ray task: one run in a scratch folder; returns its files and ledger rows."""
    root = Path(tempfile.mkdtemp(prefix="optimizer-ray-"))
    try:
        return asyncio.run(_work(payload, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _work(payload: _Payload, root: Path) -> dict[str, Any]:
    from optimizer.execute import get_executor
    from optimizer.model import make_client, scoped
    from optimizer.store.db import Store

    settings: Settings = payload["settings"]
    inputs_root = root / "inputs"
    for name, data in payload["inputs"].items():
        _write_file(inputs_root / name, data, None)
    skill_dir = None
    if payload["skill"] is not None:
        skill_dir = root / "skill" / (payload["skill_dir_name"] or "skill")
        skill_dir.mkdir(parents=True)
        for rel, (data, mode) in payload["skill"].items():
            _write_file(skill_dir / rel, data, mode)
    store = Store(Path(":memory:"))
    seeded = set()
    for row in payload["ledger"]:
        store.record_call(row)
        seeded.add(row["hash"])
    client = None
    if payload.get("simulated") is not None:
        simulated.register(payload["simulated"])
    if payload["executor"] == "anthropic":
        client = make_client(settings, store, budget_usd=payload["budget_usd"])
    trial_dir = root / "runs" / payload["run_name"]
    out: dict[str, Any] = {"worker": f"{socket.gethostname()}:{os.getpid()}"}
    try:
        with scoped(payload["scope"]):
            executor = get_executor(payload["executor"], settings, client=client)
            await executor.execute(
                skill_dir=skill_dir,
                skill_name=payload["skill_name"],
                eval=payload["eval"],
                inputs_root=inputs_root,
                trial_dir=trial_dir,
                run_number=payload["run_number"],
                sample=payload["sample"],
            )
        out["files"] = _pack(trial_dir)
    except OptimizerError as exc:  # systemic: the driver raises it again
        out.update(systemic=type(exc).__name__, problems=exc.problems)
    finally:
        if client is not None:
            await client.aclose()
    out["calls"] = [r for r in ledger.all_calls(store) if r["hash"] not in seeded]
    out["cache_hits"] = ledger.cache_hits(store)
    store.close()
    return out


# -- files as bytes --------------------------------------------------------------------------------


def _pack(folder: Path, *, skill: bool = False) -> dict[str, tuple[bytes, int]]:
    """Every file under folder (relative POSIX path → bytes and permission bits); symlinks are
    left out (a run folder has none, a skill snapshot must not); a skill without its evals/."""
    out: dict[str, tuple[bytes, int]] = {}
    if skill:
        names = list(files_of(folder, include_evals=False))  # the skill's own file list
    else:
        names = [
            p.relative_to(folder).as_posix()
            for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink()
        ]
    for rel in names:
        path = folder / rel
        if path.is_file() and not path.is_symlink():
            out[rel] = (path.read_bytes(), path.stat().st_mode & 0o777)
    return out


def _write_file(path: Path, data: bytes, mode: int | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if mode is not None:
        path.chmod(mode)


def _write_run(trial_dir: Path, files: dict[str, tuple[bytes, int]]) -> None:
    """The run folder as the worker left it, atomically: built beside it, then renamed in."""
    tmp = trial_dir.parent / f".{trial_dir.name}.ray-tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for rel, (data, mode) in files.items():
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise WorkFailed(f"a Ray worker sent back a file outside its run folder ({rel!r}).")
        _write_file(tmp / rel, data, mode)
    if trial_dir.exists():
        shutil.rmtree(trial_dir)
    os.replace(tmp, trial_dir)
