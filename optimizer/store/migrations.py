"""The schema of state.db as a sequence of migrations, applied in order when a run folder is opened:
a run made by an older version gains the new tables and columns, never loses a row. Append only;
never edit a migration that has shipped."""

from __future__ import annotations

import sqlite_utils
from sqlite_utils import Migrations

migrations = Migrations("optimizer")


# The first schema as it shipped, table by table in the order m001 creates them: (name, columns,
# primary key, indexes as (columns, unique)). Data, so the migration reads as the schema it is.
Columns = dict[str, type]
_INITIAL: tuple[tuple[str, Columns, str, tuple[tuple[list[str], bool], ...]], ...] = (
    (  # one row: this optimizer run
        "runs",
        {
            "id": str,
            "skill_name": str,
            "skill_dir": str,
            "target": str,
            "started_at": str,
            "eval_set_hash": str,
            "split_json": str,
            "settings_json": str,
            "status": str,
            "stop_reason": str,
            "from_run": str,
            "finished_at": str,
        },
        "id",
        (),
    ),
    (
        "versions",
        {
            "label": str,
            "hash": str,
            "parent": str,
            "iteration": int,
            "created_at": str,
            "status": str,
            "decision": str,
            "summary": str,
            "rationale": str,
            "stage": str,
            "score": float,
            "pass_rate": float,
            "cost_usd": float,
        },
        "label",
        ((["hash"], True),),
    ),
    (  # one execution of one eval by one configuration
        "eval_runs",
        {
            "key": str,
            "version": str,
            "eval_id": int,
            "configuration": str,
            "run_number": int,
            "split": str,
            "status": str,
            "error": str,
            "skill_invoked": int,
            "tokens": int,
            "time_seconds": float,
            "completed_at": str,
        },
        "key",
        ((["version", "eval_id"], False),),
    ),
    (
        "gradings",
        {
            "key": str,
            "status": str,
            "score": float,
            "pass_rate": float,
            "passed": int,
            "total": int,
            "rubric_normalized": float,
            "gate_passed": int,
            "grading_json": str,
            "structural_json": str,
            "completed_at": str,
        },
        "key",
        (),
    ),
    (
        "decisions",
        {
            "version": str,
            "parent": str,
            "stage": str,
            "decision": str,
            "delta": float,
            "ci_low": float,
            "ci_high": float,
            "reason": str,
            "selection_json": str,
            "decided_at": str,
        },
        "version",
        (),
    ),
    (
        "iterations",
        {
            "number": int,
            "parent": str,
            "stage": str,
            "candidates_json": str,
            "started_at": str,
            "finished_at": str,
        },
        "number",
        (),
    ),
    (  # the model-call ledger, which doubles as the cache that makes resume free
        "calls",
        {
            "hash": str,
            "role": str,
            "model": str,
            "sample": int,
            "outcome": str,
            "response_json": str,
            "input_tokens": int,
            "output_tokens": int,
            "cache_write_tokens": int,
            "cache_read_tokens": int,
            "cost_usd": float,
            "latency_ms": float,
            "attempts": int,
            "error": str,
            "created_at": str,
        },
        "hash",
        ((["role"], False),),
    ),
    (  # a call served from the ledger: counted, and the money it saved
        "cache_hits",
        {"id": int, "hash": str, "role": str, "saved_usd": float, "at": str},
        "id",
        (),
    ),
)


@migrations()
def m001_initial(db: sqlite_utils.Database) -> None:
    for name, columns, pk, indexes in _INITIAL:
        db.table(name).create(columns, pk=pk)
        for on, unique in indexes:
            db.table(name).create_index(on, unique=unique)


@migrations()
def m002_best_and_scopes(db: sqlite_utils.Database) -> None:
    # The current best is a decision, not a derivation: with Pareto parents a winning child may
    # still score below the best, so the loop records it explicitly.
    db.table("runs").add_column("current_best", str)
    db.table("runs").add_column("test_json", str)
    db.table("runs").add_column("pid", int)
    db.table("runs").add_column("stage", str)
    db.table("runs").add_column("last_error", str)
    # Which version (or stage) a model call was made for, so lineage can show cost per version.
    db.table("calls").add_column("scope", str)
    db.table("versions").add_column("split_scores_json", str)


@migrations()
def m003_batches_and_estimate(db: sqlite_utils.Database) -> None:
    # Message Batches in flight (llm.batch): recorded as soon as the service acknowledges one, so
    # a resumed run re-attaches to it instead of paying for the same requests again. `items_json`
    # maps each custom_id (the ledger's request hash) to its role, model, sample and scope.
    db.table("batches").create(
        {
            "id": str,
            "scope": str,
            "roles": str,
            "custom_ids_json": str,
            "items_json": str,
            "status": str,
            "created_at": str,
            "ended_at": str,
            "counts_json": str,
        },
        pk="id",
    )
    db.table("batches").create_index(["status"])
    db.table("calls").add_column("batch_id", str)  # set when the answer came through a batch
    db.table("runs").add_column("estimate_json", str)  # the cost preview shown when the run started


@migrations()
def m004_calls_scope_index(db: sqlite_utils.Database) -> None:
    # lineage sums each version's cost by scope after every iteration; without the index that is
    # a scan of the whole ledger per version.
    db.table("calls").create_index(["scope"], if_not_exists=True)


@migrations()
def m005_version_errors(db: sqlite_utils.Database) -> None:
    # A failure of ours while one version was evaluated: recorded on it, the run goes on.
    db.table("versions").add_column("error", str)
    # Why a run is unscored (docs/design.md §7): its cause, shown in status and benchmark.json.
    db.table("gradings").add_column("error", str)


@migrations()
def m006_resumes(db: sqlite_utils.Database) -> None:
    # Each resume's effective settings and the keys it changed ({key: [before, after]}); the run's
    # settings_json is kept equal to the latest, so status shows the limits in force, not the
    # ones the run was started with.
    db.table("resumes").create(
        {"id": int, "at": str, "settings_json": str, "changed_json": str}, pk="id"
    )


@migrations()
def m007_drop_unused_columns(db: sqlite_utils.Database) -> None:
    # Never written: the daemon's pid lives in the run folder's pidfile (store/lock.py), and a
    # version's cost is summed from the ledger by scope (search/lineage.py).
    db.table("runs").transform(drop={"pid"})
    db.table("versions").transform(drop={"cost_usd"})


@migrations()
def m008_run_confinement(db: sqlite_utils.Database) -> None:
    # How each run's model-written commands were confined (1 under bubblewrap, 0 not) and by what
    # ("bwrap", "none" when the user opted out, "host" for the Claude Code CLI); null for runs
    # made before it was recorded. status, show and the report read it.
    db.table("eval_runs").add_column("confined", int)
    db.table("eval_runs").add_column("sandbox", str)


@migrations()
def m009_run_previews(db: sqlite_utils.Database) -> None:
    # What the report shows of each run (grade/preview.py), kept when the run is graded so that a
    # report reads state.db instead of every run folder. Runs graded before have no row; the
    # report reads their folders.
    db.table("previews").create({"key": str, "preview_json": str}, pk="key")


@migrations()
def m010_run_key_columns(db: sqlite_utils.Database) -> None:
    # A grading's run key as columns (store/keys.py), indexed, so that a version's scores and
    # failures are selected by column instead of matching key text. Older rows get their parts
    # from their keys, once, here; `optimizer execute` rows without an eval segment take theirs
    # from eval_runs.
    from optimizer.store.keys import TrialKey

    gradings = db.table("gradings")
    for column, kind in (
        ("prefix", str),
        ("eval_id", int),
        ("configuration", str),
        ("run_number", int),
    ):
        gradings.add_column(column, kind)
    evals = {r["key"]: r["eval_id"] for r in db.query("select key, eval_id from eval_runs")}
    for row in list(db.query("select key from gradings")):
        try:
            parts = TrialKey.parse(row["key"], evals.get(row["key"]))
        except ValueError:
            continue  # not a key this version wrote; left without parts, never selected
        gradings.update(row["key"], dict(parts.columns()))
    gradings.create_index(["prefix", "configuration", "eval_id", "run_number"])


@migrations()
def m011_adoptions(db: sqlite_utils.Database) -> None:
    # Each adoption: the version the user asked for, the one they had, the claim's scope, the
    # rule's decision on fresh runs, what it cost (shown before it was paid) and whether it was
    # certified (docs/design.md §16). The adopted version is the last certified one's.
    db.table("adoptions").create(
        {
            "number": int,
            "version": str,
            "base": str,
            "scope": str,
            "status": str,
            "evals_json": str,
            "estimate_usd": float,
            "decision_json": str,
            "next_step": str,
            "started_at": str,
            "finished_at": str,
        },
        pk="number",
    )


@migrations()
def m012_adoption_schedule(db: sqlite_utils.Database) -> None:
    # One α per claim (docs/design.md §7): the looks an adoption was opened with (first and
    # most fresh runs an eval), its α and the last look it took, so that asking again about the
    # same claim goes on where it stopped and changed settings never reset what was spent.
    # Null in rows from before: read as today's settings and the decision's runs.
    adoptions = db.table("adoptions")
    for column, kind in (("first_runs", int), ("max_runs", int), ("alpha", float), ("looked", int)):
        adoptions.add_column(column, kind)


@migrations()
def m013_trials(db: sqlite_utils.Database) -> None:
    # One word, one meaning: a run is the optimizer's run; one execution of one eval by one
    # configuration is a trial (the seed files' `run-1/` and `run_number` keep their names).
    db.execute("alter table eval_runs rename to trials")


@migrations()
def m014_run_activity(db: sqlite_utils.Database) -> None:
    # What the daemon is doing now is the run's activity; "stage" names a layer of the code.
    db.execute("alter table runs rename column stage to activity")


@migrations()
def m015_decision_phase(db: sqlite_utils.Database) -> None:
    # Where a version was decided (baseline, screening, benchmark, probe) is its phase; "stage"
    # names a layer of the code. selection.json keeps its `stage` field, which old folders hold.
    db.execute("alter table versions rename column stage to phase")
    db.execute("alter table decisions rename column stage to phase")
