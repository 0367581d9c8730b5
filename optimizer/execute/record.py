"""One run folder, shared by every executor: input staging, transcript, metrics, timing, metadata.
Never leave a run folder that looks complete but is not: timing.json is written last, atomically."""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from optimizer import schemas
from optimizer.errors import BadInput
from optimizer.inputs.skill import files_of
from optimizer.store.files import read_json, write_json, write_text

WORK = ".work"
SKILL_COPY = ".skill"
OUTPUTS = "outputs"
COMPLETE_MARKER = "timing.json"
HARNESS_FILES = frozenset({"metrics.json", "user_notes.md"})  # not outputs (docs/design.md §5)


@dataclass
class RunRecord:
    """What one execution did; `to_row()` gives the store's eval_runs columns it knows."""

    run_dir: Path
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

    def to_row(self) -> dict[str, Any]:
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
    def load(cls, run_dir: Path) -> RunRecord:
        """The record of a complete run folder, read back (a resumed loop never reruns it)."""
        run_dir = Path(run_dir)
        metrics = read_json(run_dir / OUTPUTS / "metrics.json")
        timing = read_json(run_dir / COMPLETE_MARKER)
        meta = read_json(run_dir / "eval_metadata.json")
        return cls(
            run_dir=run_dir,
            eval_id=int(meta["eval_id"]),
            configuration=metrics.get("configuration") or run_dir.parent.name,
            run_number=int(metrics.get("run_number") or run_dir.name.rpartition("-")[2] or 1),
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


def is_complete(run_dir: Path) -> bool:
    return (Path(run_dir) / COMPLETE_MARKER).is_file()


@dataclass
class Tally:
    """Counts kept while the agent works, so a timeout still reports what was done."""

    tool_calls: Counter[str] = field(default_factory=Counter)
    steps: int = 0
    tool_errors: int = 0
    truncated: int = 0  # answers cut at max_tokens
    tokens: int = 0
    cost_usd: float = 0.0
    skill_invoked: bool | None = None
    # The run clock's split (skill_seconds, model_wait_seconds, ...), set when the run ends.
    clock: dict[str, float | int] = field(default_factory=dict)

    def add_usage(self, usage: Any) -> None:
        get = usage.get if isinstance(usage, dict) else (lambda k, d=0: getattr(usage, k, d))
        self.tokens += sum(
            int(get(k, 0) or 0)
            for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                      "cache_read_input_tokens")
        )


# -- inputs --------------------------------------------------------------------------------------


def resolve_inputs(files: list[str], inputs_root: Path, *, eval_id: int) -> list[tuple[Path, str]]:
    """(host file, path inside /workspace) for each eval input file; BadInput for any path that
    is absolute, climbs with `..`, is missing, or leaves the skill folder through a symlink."""
    root = Path(inputs_root).resolve()
    found: list[tuple[Path, str]] = []
    for rel in files:
        where = f"eval {eval_id}: input file '{rel}'"
        posix = PurePosixPath(rel.replace("\\", "/"))
        if posix.is_absolute() or (len(rel) > 1 and rel[1] == ":"):
            raise BadInput(f"{where} is an absolute path; list it relative to the skill folder, "
                           "e.g. evals/files/input.csv.")
        if ".." in posix.parts:
            raise BadInput(f"{where} climbs out with '..'; copy the file under evals/files/ in "
                           "the skill folder and list that path.")
        target = (root / posix).resolve()
        if not target.is_relative_to(root):
            raise BadInput(f"{where} is a symbolic link leading outside the skill folder; copy "
                           "the file itself under evals/files/.")
        if not target.is_file():
            raise BadInput(f"{where} does not exist in the skill folder {root}; add it or fix "
                           "the path.")
        if posix.parts[0] == OUTPUTS:
            raise BadInput(f"{where} lies under outputs/, where the agent's results go; move it "
                           "under evals/files/.")
        # Kept at its relative path inside /workspace, since eval prompts name it that way.
        found.append((target, posix.as_posix()))
    return found


def prepare_work(run_dir: Path, inputs: list[tuple[Path, str]]) -> Path:
    """A fresh run folder with run_dir/.work holding the inputs and an empty outputs/."""
    run_dir = Path(run_dir)
    if run_dir.exists():  # a partial folder from an interrupted attempt: start over
        shutil.rmtree(run_dir)
    work = run_dir / WORK
    (work / OUTPUTS).mkdir(parents=True)
    for src, name in inputs:
        dest = work / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    return work


def stage_skill(skill_dir: Path, run_dir: Path) -> Path:
    """A copy of the skill for the agent, without evals/: the expectations it is graded on and
    the expected outputs must not be readable from /skill."""
    dest = Path(run_dir) / SKILL_COPY
    for rel in files_of(skill_dir, include_evals=False):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(skill_dir) / rel, target)  # keeps the mode: scripts stay executable
    dest.mkdir(exist_ok=True)
    return dest


# -- transcript ----------------------------------------------------------------------------------


def _fence(text: str, lang: str = "") -> str:
    # A fence longer than any backtick run inside, so tool output can never close it early.
    ticks = "`" * max(3, _max_backticks(text) + 1)
    return f"{ticks}{lang}\n{text}\n{ticks}"


def _max_backticks(text: str) -> int:
    best = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        best = max(best, run)
    return best


class Transcript:
    """transcript.jsonl (one JSON object per line, Messages-API content blocks, so the structural
    checks find tool_use/tool_result anywhere) and a readable transcript.md built alongside."""

    def __init__(self, prompt: str, inputs: list[str]) -> None:
        self.lines: list[dict[str, Any]] = [{"type": "eval_prompt", "text": prompt, "files": inputs}]
        self.md: list[str] = ["# Transcript", "## Eval Prompt", prompt]
        if inputs:
            self.md += ["## Input Files", "\n".join(f"- {name}" for name in inputs)]
        self.step = 0

    def log(self, obj: dict[str, Any]) -> None:
        self.lines.append(obj)

    def system(self, text: str) -> None:
        self.log({"type": "system", "text": text})

    def assistant(self, blocks: list[dict[str, Any]], *, raw: dict[str, Any] | None = None,
                  usage: dict[str, Any] | None = None, new_step: bool = True) -> None:
        self.log(raw if raw is not None else {"type": "message", "role": "assistant",
                                              "content": blocks, "usage": usage or {}})
        if new_step or not self.step:
            self.step += 1
            self.md.append(f"## Step {self.step}")
        for block in blocks:
            if block.get("type") == "text" and block.get("text", "").strip():
                self.md.append(block["text"].strip())
            elif block.get("type") == "tool_use":
                self.md += [f"### Tool call: {block.get('name')}",
                            _fence(json.dumps(block.get("input"), indent=2, ensure_ascii=False),
                                   "json")]

    def tool_results(self, results: list[dict[str, Any]], *, raw: dict[str, Any] | None = None,
                     names: dict[str, str] | None = None) -> None:
        self.log(raw if raw is not None else {"type": "message", "role": "user", "content": results})
        for result in results:
            name = (names or {}).get(result.get("tool_use_id", ""), "tool")
            flag = " (error)" if result.get("is_error") else ""
            self.md += [f"### Tool result: {name}{flag}", _fence(_text_of(result.get("content")))]

    def context(self, text: str, *, raw: dict[str, Any]) -> None:
        """Text the harness put into the conversation (a skill's body, for one)."""
        self.log(raw)
        if text.strip():
            self.md += ["### Added to the conversation", _fence(text.strip())]

    def note(self, heading: str, text: str) -> None:
        self.log({"type": "note", "heading": heading, "text": text})
        self.md += [f"## {heading}", text]

    def error(self, status: str, text: str) -> None:
        self.log({"type": "error", "status": status, "text": text})
        self.md += ["## Error", f"Status: {status}", text]

    def markdown(self) -> str:
        return "\n\n".join(self.md) + "\n"

    def jsonl(self) -> str:
        return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in self.lines)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(c) for c in content)
    if isinstance(content, dict):
        return str(content.get("text", "")) if content.get("type", "text") == "text" else json.dumps(content)
    return "" if content is None else str(content)


# -- finishing -----------------------------------------------------------------------------------


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _collect_outputs(run_dir: Path, transcript: Transcript) -> tuple[list[str], int]:
    """Move .work/outputs into the run folder; drop symlinks (a grader reading one could be led
    out of the run); return the output files (harness files aside) and their size in chars."""
    work, outputs = run_dir / WORK, run_dir / OUTPUTS
    if outputs.exists():
        shutil.rmtree(outputs)
    if (work / OUTPUTS).is_dir() and not (work / OUTPUTS).is_symlink():
        os.replace(work / OUTPUTS, outputs)
    else:
        outputs.mkdir()
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(run_dir / SKILL_COPY, ignore_errors=True)
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
        transcript.note("Links, FIFOs, sockets and device nodes removed from outputs",
                        "\n".join(f"- {d}" for d in dropped))
    return files, chars



def finish_run(
    *,
    run_dir: Path,
    eval: Any,
    configuration: str,
    run_number: int,
    executor: str,
    transcript: Transcript,
    tally: Tally,
    status: str,
    error: str | None,
    started: float,
    ended: float,
    confined: bool | None = None,
    sandbox: str | None = None,
) -> RunRecord:
    """Write the complete run folder (timing.json last) and return its record."""
    run_dir = Path(run_dir)
    if error:
        transcript.error(status, error)
    files, output_chars = _collect_outputs(run_dir, transcript)
    markdown = transcript.markdown()
    write_text(run_dir / "transcript.jsonl", transcript.jsonl())
    write_text(run_dir / "transcript.md", markdown)
    expectations = list(eval.expectations)
    write_json(run_dir / "eval_metadata.json", {
        "eval_id": eval.id, "eval_name": eval.name, "prompt": eval.prompt,
        "assertions": [{"id": f"assertion-{i}", "text": t} for i, t in enumerate(expectations, 1)],
        "expectations": expectations,
    }, model=schemas.EvalMetadata)
    tool_calls = dict(sorted(tally.tool_calls.items()))
    duration = max(0.0, ended - started)
    record = RunRecord(
        run_dir=run_dir, eval_id=eval.id, configuration=configuration, run_number=run_number,
        status=status, error=error, skill_invoked=tally.skill_invoked, tokens=tally.tokens,
        duration_s=duration, tool_calls=tool_calls, transcript_chars=len(markdown),
        output_chars=output_chars, files_created=files, cost_usd=round(tally.cost_usd, 6),
        confined=confined, sandbox=sandbox,
    )
    write_json(run_dir / OUTPUTS / "metrics.json", {
        "tool_calls": tool_calls,
        "total_tool_calls": sum(tool_calls.values()),
        "total_steps": tally.steps,
        "files_created": files,
        "errors_encountered": tally.tool_errors + (1 if status != "ok" else 0),
        "output_chars": output_chars,
        "transcript_chars": len(markdown),
        # our extensions (output may add fields, docs/design.md §6)
        "skill_invoked": tally.skill_invoked,
        "status": status,
        "error": error,
        "executor": executor,
        "configuration": configuration,
        "run_number": run_number,
        "cost_usd": record.cost_usd,
        "truncated_answers": tally.truncated,
        "confined": confined,
        "sandbox": sandbox,
        **tally.clock,
    }, model=schemas.Metrics)
    write_json(run_dir / COMPLETE_MARKER, {
        "total_tokens": tally.tokens,
        "duration_ms": int(round(duration * 1000)),
        "total_duration_seconds": round(duration, 3),
        "executor_start": _iso(started),
        "executor_end": _iso(ended),
        "executor_duration_seconds": round(duration, 3),
    }, model=schemas.Timing)
    return record
