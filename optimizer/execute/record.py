"""One run folder, shared by every executor: its record, outputs, metrics, timing and metadata,
written when the run ends (its inputs are staged by staging.py, its transcript kept by
transcript.py). Never leave a run folder that looks complete but is not: timing.json is written
last, atomically."""

from __future__ import annotations

import os
import shutil
import stat
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from optimizer import schemas
from optimizer.execute.staging import OUTPUTS, SKILL_COPY, WORK
from optimizer.execute.transcript import Tally, Transcript
from optimizer.inputs.evalset import Eval
from optimizer.store.files import read_json, write_json, write_text
from optimizer.store.rows import RecordColumns

COMPLETE_MARKER = "timing.json"
HARNESS_FILES = frozenset({"metrics.json", "user_notes.md"})  # not outputs (docs/design.md §5)


@dataclass
class TrialRecord:
    """What one execution did; `to_row()` gives the store's trials columns it knows."""

    trial_dir: Path
    eval_id: int
    configuration: str  # "with_skill" | "without_skill"
    run_number: int
    status: str  # "ok" | "error" | "timeout"
    error: str | None
    skill_invoked: bool | None
    tokens: int
    duration_s: float
    tool_calls: dict[str, int]
    transcript_chars: int
    output_chars: int
    files_created: list[str]
    cost_usd: float
    confined: bool | None = None  # whether its model-written commands ran under bubblewrap
    # How: "bwrap", "none" (unconfined, as asked), "host" (the Claude Code CLI unconfined, as asked).
    sandbox: str | None = None

    def to_row(self) -> RecordColumns:
        return {
            "eval_id": self.eval_id,
            "configuration": self.configuration,
            "run_number": self.run_number,
            "status": self.status,
            "error": self.error,
            "skill_invoked": None if self.skill_invoked is None else int(self.skill_invoked),
            "tokens": self.tokens,
            "time_seconds": round(self.duration_s, 3),
            "completed_at": _iso(time.time()),
            "confined": None if self.confined is None else int(self.confined),
            "sandbox": self.sandbox,
        }

    @classmethod
    def load(cls, trial_dir: Path) -> TrialRecord:
        """The record of a complete run folder, read back (a resumed loop never reruns it)."""
        trial_dir = Path(trial_dir)
        metrics = read_json(trial_dir / OUTPUTS / "metrics.json")
        timing = read_json(trial_dir / COMPLETE_MARKER)
        meta = read_json(trial_dir / "eval_metadata.json")
        return cls(
            trial_dir=trial_dir,
            eval_id=int(meta["eval_id"]),
            configuration=metrics.get("configuration") or trial_dir.parent.name,
            run_number=int(metrics.get("run_number") or trial_dir.name.rpartition("-")[2] or 1),
            status=metrics.get("status", "ok"),
            error=metrics.get("error"),
            skill_invoked=metrics.get("skill_invoked"),
            tokens=int(timing.get("total_tokens", 0)),
            duration_s=float(timing.get("executor_duration_seconds") or 0.0),
            tool_calls=dict(metrics.get("tool_calls", {})),
            transcript_chars=int(metrics.get("transcript_chars", 0)),
            output_chars=int(metrics.get("output_chars", 0)),
            files_created=list(metrics.get("files_created", [])),
            cost_usd=float(metrics.get("cost_usd", 0.0)),
            confined=metrics.get("confined"),
            sandbox=metrics.get("sandbox"),
        )


def is_complete(trial_dir: Path) -> bool:
    return (Path(trial_dir) / COMPLETE_MARKER).is_file()


# -- finishing -----------------------------------------------------------------------------------


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _collect_outputs(trial_dir: Path, transcript: Transcript) -> tuple[list[str], int]:
    """Move .work/outputs into the run folder; drop symlinks (a grader reading one could be led
    out of the run); return the output files (harness files aside) and their size in chars."""
    work, outputs = trial_dir / WORK, trial_dir / OUTPUTS
    if outputs.exists():
        shutil.rmtree(outputs)
    if (work / OUTPUTS).is_dir() and not (work / OUTPUTS).is_symlink():
        os.replace(work / OUTPUTS, outputs)
    else:
        outputs.mkdir()
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(trial_dir / SKILL_COPY, ignore_errors=True)
    files: list[str] = []
    chars = 0
    dropped: list[str] = []
    for path in sorted(outputs.rglob("*")):
        rel = path.relative_to(outputs).as_posix()
        mode = path.lstat().st_mode
        # A FIFO would block whoever reads it next (a grader, the report), a socket or a device
        # node is nothing a task produces: they go with the links.
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            path.unlink()
            dropped.append(rel)
            continue
        if not stat.S_ISREG(mode) or rel in HARNESS_FILES:
            continue
        files.append(rel)
        data = path.read_bytes()
        try:
            chars += len(data.decode("utf-8"))
        except UnicodeDecodeError:
            chars += len(data)
    if dropped:
        transcript.note(
            "Links, FIFOs, sockets and device nodes removed from outputs",
            "\n".join(f"- {d}" for d in dropped),
        )
    return files, chars


@dataclass(frozen=True)
class TrialIdentity:
    """Which trial a folder holds: its eval, configuration and run number, and the executor."""

    trial_dir: Path
    eval: Eval
    configuration: str  # "with_skill" | "without_skill"
    run_number: int
    executor: str


@dataclass(frozen=True)
class TrialOutcome:
    """How a trial ended (status, error), when it started and ended, and how its model-written
    commands were confined."""

    status: str
    error: str | None
    started: float
    ended: float
    confined: bool | None = None
    sandbox: str | None = None


def finish_run(
    trial: TrialIdentity, outcome: TrialOutcome, transcript: Transcript, tally: Tally
) -> TrialRecord:
    """Write the complete run folder (timing.json last) and return its record."""
    trial_dir = Path(trial.trial_dir)
    if outcome.error:
        transcript.error(outcome.status, outcome.error)
    files, output_chars = _collect_outputs(trial_dir, transcript)
    markdown = transcript.markdown()
    write_text(trial_dir / "transcript.jsonl", transcript.jsonl())
    write_text(trial_dir / "transcript.md", markdown)
    _write_metadata(trial_dir, trial.eval)
    record = TrialRecord(
        trial_dir=trial_dir,
        eval_id=trial.eval.id,
        configuration=trial.configuration,
        run_number=trial.run_number,
        status=outcome.status,
        error=outcome.error,
        skill_invoked=tally.skill_invoked,
        tokens=tally.tokens,
        duration_s=max(0.0, outcome.ended - outcome.started),
        tool_calls=dict(sorted(tally.tool_calls.items())),
        transcript_chars=len(markdown),
        output_chars=output_chars,
        files_created=files,
        cost_usd=round(tally.cost_usd, 6),
        confined=outcome.confined,
        sandbox=outcome.sandbox,
    )
    _write_metrics(record, tally, trial.executor)
    _write_timing(record, outcome)
    return record


def _write_metadata(trial_dir: Path, eval: Eval) -> None:
    """eval_metadata.json: the eval's id, name, prompt and expectations, the latter also as
    numbered assertions."""
    expectations = list(eval.expectations)
    write_json(
        trial_dir / "eval_metadata.json",
        {
            "eval_id": eval.id,
            "eval_name": eval.name,
            "prompt": eval.prompt,
            "assertions": [
                {"id": f"assertion-{i}", "text": t} for i, t in enumerate(expectations, 1)
            ],
            "expectations": expectations,
        },
        model=schemas.EvalMetadata,
    )


def _write_metrics(record: TrialRecord, tally: Tally, executor: str) -> None:
    """outputs/metrics.json: the seed's metrics of the run, then our extensions."""
    write_json(
        record.trial_dir / OUTPUTS / "metrics.json",
        {
            "tool_calls": record.tool_calls,
            "total_tool_calls": sum(record.tool_calls.values()),
            "total_steps": tally.steps,
            "files_created": record.files_created,
            "errors_encountered": tally.tool_errors + (1 if record.status != "ok" else 0),
            "output_chars": record.output_chars,
            "transcript_chars": record.transcript_chars,
            # our extensions (output may add fields, docs/design.md §6)
            "skill_invoked": tally.skill_invoked,
            "status": record.status,
            "error": record.error,
            "executor": executor,
            "configuration": record.configuration,
            "run_number": record.run_number,
            "cost_usd": record.cost_usd,
            "truncated_answers": tally.truncated,
            "confined": record.confined,
            "sandbox": record.sandbox,
            **tally.clock,
        },
        model=schemas.Metrics,
    )


def _write_timing(record: TrialRecord, outcome: TrialOutcome) -> None:
    """timing.json, the marker of a complete run folder: written last, by finish_run."""
    duration = record.duration_s
    write_json(
        record.trial_dir / COMPLETE_MARKER,
        {
            "total_tokens": record.tokens,
            "duration_ms": int(round(duration * 1000)),
            "total_duration_seconds": round(duration, 3),
            "executor_start": _iso(outcome.started),
            "executor_end": _iso(outcome.ended),
            "executor_duration_seconds": round(duration, 3),
        },
        model=schemas.Timing,
    )
