"""How often the simulated judge agrees with a careful human grader, on probes written by hand.

Each probe (one JSON object a line, tests/fixtures/judge_probes.jsonl by default) holds the user's
task, one expectation, the agent's answer (outputs/answer.md) and the verdict a careful human judge
gives. Every probe goes through the judge once; the script prints the agreement per probe kind and
per kind of skill (with the judge's false passes and false fails), then a last line
`judge probes: N of M agree (P%)`.

    python bench/judge_probes.py [--judge module:function] [--file probes.jsonl]
                                 [--show-disagreements]

The judge is called as `judge(expectation, [{"path": "outputs/answer.md", "content": answer}],
task)` and returns an object whose `.passed` is its verdict. `--file` runs a set written by someone
else through the same script."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILE = ROOT / "tests" / "fixtures" / "judge_probes.jsonl"
DEFAULT_JUDGE = "optimizer.sim.support:support"
FIELDS = {
    "id": str,
    "skill": str,
    "kind": str,
    "task": str,
    "expectation": str,
    "answer": str,
    "verdict": bool,
    "why": str,
}
ANSWER_PATH = "outputs/answer.md"

Judge = Callable[..., Any]


class BadInput(Exception):
    """One sentence naming the file, the field and the fix."""


@dataclass(frozen=True)
class Probe:
    id: str
    skill: str
    kind: str
    task: str
    expectation: str
    answer: str
    verdict: bool
    why: str


def load(path: Path) -> list[Probe]:
    """The probes of `path`, in file order; a bad line raises BadInput naming it."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise BadInput(f"{path}: cannot be read ({exc.strerror}); pass an existing file") from exc
    probes: list[Probe] = []
    seen: set[str] = set()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadInput(f"{where}: not JSON ({exc.msg}); write one object a line") from exc
        if not isinstance(row, dict):
            raise BadInput(f"{where}: not a JSON object; write one object a line")
        for field, kind in FIELDS.items():
            if not isinstance(row.get(field), kind):
                raise BadInput(f"{where}: field {field!r} must be a {kind.__name__}; set it")
        if row["id"] in seen:
            raise BadInput(f"{where}: field 'id' repeats {row['id']!r}; give each probe its own id")
        seen.add(row["id"])
        probes.append(Probe(**{field: row[field] for field in FIELDS}))
    if not probes:
        raise BadInput(f"{path}: holds no probes; write one JSON object a line")
    return probes


def resolve(spec: str) -> Judge:
    """`module:function` imported; BadInput when it cannot be."""
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise BadInput(f"--judge {spec!r}: not module:function; pass e.g. {DEFAULT_JUDGE}")
    try:
        judge = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise BadInput(
            f"--judge {spec!r}: cannot be imported ({exc}); pass module:function"
        ) from exc
    if not callable(judge):
        raise BadInput(f"--judge {spec!r}: is not a function; pass module:function")
    return judge  # type: ignore[no-any-return]


def verdict(judge: Judge, probe: Probe) -> bool:
    """The judge's verdict on one probe."""
    outputs = [{"path": ANSWER_PATH, "content": probe.answer}]
    return bool(judge(probe.expectation, outputs, probe.task).passed)


def judge_all(judge: Judge, probes: Sequence[Probe]) -> list[bool]:
    """The judge's verdicts, in the probes' order."""
    return [verdict(judge, p) for p in probes]


def agreement(probes: Sequence[Probe], verdicts: Sequence[bool]) -> float:
    """The share of probes where the judge's verdict is the human's."""
    return sum(p.verdict == v for p, v in zip(probes, verdicts, strict=True)) / len(probes)


def table(
    title: str, key: Callable[[Probe], str], probes: Sequence[Probe], verdicts: Sequence[bool]
) -> list[str]:
    """Per group (sorted by name): rows, agreeing rows and share, false passes, false fails."""
    groups: dict[str, list[tuple[Probe, bool]]] = {}
    for p, v in zip(probes, verdicts, strict=True):
        groups.setdefault(key(p), []).append((p, v))
    width = max(len(title), *(len(g) for g in groups))
    lines = [f"{title:<{width}}  rows  agree      %  false pass  false fail"]
    for name in sorted(groups):
        pairs = groups[name]
        agree = sum(p.verdict == v for p, v in pairs)
        false_pass = sum(v and not p.verdict for p, v in pairs)
        false_fail = sum(p.verdict and not v for p, v in pairs)
        lines.append(
            f"{name:<{width}}  {len(pairs):>4}  {agree:>5}  {100 * agree / len(pairs):>5.1f}"
            f"  {false_pass:>10}  {false_fail:>10}"
        )
    return lines


def disagreements(probes: Sequence[Probe], verdicts: Sequence[bool]) -> list[str]:
    lines = []
    for p, v in zip(probes, verdicts, strict=True):
        if p.verdict != v:
            human = "pass" if p.verdict else "fail"
            judged = "pass" if v else "fail"
            lines.append(
                f"{p.id} [{p.kind}] human {human}, judge {judged}: {p.expectation!r} ({p.why})"
            )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--judge", default=DEFAULT_JUDGE, help="module:function (default %(default)s)"
    )
    parser.add_argument("--file", type=Path, default=DEFAULT_FILE, help="the probes (JSON lines)")
    parser.add_argument(
        "--show-disagreements", action="store_true", help="list every probe the judge gets wrong"
    )
    args = parser.parse_args(argv)
    try:
        probes = load(args.file)
        judge = resolve(args.judge)
    except BadInput as exc:
        print(exc, file=sys.stderr)
        return 2
    verdicts = judge_all(judge, probes)
    print(
        f"judge {args.judge} on {args.file} ({sum(p.verdict for p in probes)} of {len(probes)} are passes)"
    )
    print()
    print("\n".join(table("kind", lambda p: p.kind, probes, verdicts)))
    print()
    print("\n".join(table("skill", lambda p: p.skill, probes, verdicts)))
    if args.show_disagreements:
        print()
        print("\n".join(disagreements(probes, verdicts)) or "no disagreements")
    agree = sum(p.verdict == v for p, v in zip(probes, verdicts, strict=True))
    print()
    print(f"judge probes: {agree} of {len(probes)} agree ({100 * agree / len(probes):.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
