"""`optimizer evals mine` on a synthetic ~/.claude/projects: N session files of the CLI's shape, a
share of them using the skill, a secret planted in every task. Prints how long mining takes, how many
tasks come back as prompts word for word (but for the masked secret and the copied file's path), and
how many secrets leak into candidates.json or evals/files (must be 0). Never a timed test."""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
import time
from pathlib import Path

from optimizer import logs
from optimizer.grow import mine

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "csv-report"
FILLER = 40  # records of other work per session (tool calls and answers), as a real session has


def _record(kind: str, sid: str, cwd: Path, n: int, content) -> str:  # type: ignore[no-untyped-def]
    return (
        json.dumps(
            {
                "type": kind,
                "sessionId": sid,
                "cwd": str(cwd),
                "uuid": f"{sid}-{n}",
                "timestamp": f"2026-11-20T09:{n // 60:02d}:{n % 60:02d}.000Z",
                "message": {"role": kind, "content": content},
            }
        )
        + "\n"
    )


def build(root: Path, sessions: int, share: float) -> dict[str, str]:
    """The projects tree; returns session id -> the task as the candidate should read."""
    project = root / "work"
    (project / "data").mkdir(parents=True)
    shutil.copy(EXAMPLE / "evals" / "files" / "sales.csv", project / "data" / "sales.csv")
    folder = root / "projects" / "-work"
    folder.mkdir(parents=True)
    expected = {}
    every = max(1, round(1 / share)) if share > 0 else 0
    for i in range(sessions):
        sid = f"s{i:06d}"
        secret = f"sk-ant-api03-Bench{i:06d}SecretKeyPlanted0123"
        task = f"Report {i}: profile data/sales.csv into outputs/report.md (key {secret})"
        lines = [_record("user", sid, project, 0, task)]
        uses = bool(every) and i % every == 0
        if uses:
            lines.append(
                _record(
                    "assistant",
                    sid,
                    project,
                    1,
                    [
                        {
                            "type": "tool_use",
                            "id": f"t{i}",
                            "name": "Skill",
                            "input": {"skill": "csv-report"},
                        }
                    ],
                )
            )
            expected[sid] = task.replace("data/sales.csv", "evals/files/sales.csv").replace(
                secret, "[redacted]"
            )
        for n in range(2, FILLER):
            lines.append(
                _record(
                    "assistant",
                    sid,
                    project,
                    n,
                    [{"type": "text", "text": f"step {n} of the work"}],
                )
            )
        (folder / f"{sid}.jsonl").write_text("".join(lines), encoding="utf-8")
    return expected


def measure(sessions: int, share: float) -> tuple[int, int, int, float, int]:
    with tempfile.TemporaryDirectory(prefix="bench-mine-") as tmp:
        root = Path(tmp)
        expected = build(root, sessions, share)
        skill = root / "skill"
        shutil.copytree(EXAMPLE, skill)
        started = time.perf_counter()
        mined = mine.mine(skill, root / "projects", None)
        seconds = time.perf_counter() - started
        data = json.loads((skill / "evals" / "candidates.json").read_text())
        exact = sum(
            1
            for c in data["candidates"]
            if expected.get(c["origin"]["session_id"]) == c["eval"]["prompt"]
        )
        written = "".join(
            p.read_text(errors="replace") for p in (skill / "evals").rglob("*") if p.is_file()
        )
        leaks = written.count("SecretKeyPlanted")
        return sessions, mined.uses, exact, seconds, leaks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, nargs="+", default=[100, 1000])
    parser.add_argument(
        "--share", type=float, default=0.05, help="share of sessions that use the skill"
    )
    args = parser.parse_args()
    logs.configure(None, console=True, level=logging.WARNING)
    print(
        f"evals mine, heuristics only; {FILLER} records a session; share using the skill {args.share:.0%}"
    )
    print(
        f"{'sessions':>9} {'uses':>5} {'prompt = task':>14} {'seconds':>8} {'ms/session':>11} {'secrets leaked':>15}"
    )
    for n in args.sessions:
        sessions, uses, exact, seconds, leaks = measure(n, args.share)
        print(
            f"{sessions:>9} {uses:>5} {exact:>10}/{uses:<3} {seconds:>8.2f} {1000 * seconds / sessions:>11.2f} {leaks:>15}"
        )


if __name__ == "__main__":
    main()
