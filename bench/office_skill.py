"""A public office skill on the simulator: `optimizer benchmark` with and without the skill on
three evals whose outputs are Word files, and what the judge cited from inside them.

The skill itself is not in this repository (anthropics/skills' docx skill is not open source):
pass a copy. Its evals are ours, in bench/office/docx-evals.json.

    git clone https://github.com/anthropics/skills /tmp/skills
    PYTHONPATH=. python bench/office_skill.py --skill /tmp/skills/skills/docx
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EVALS = ROOT / "bench" / "office" / "docx-evals.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skill", type=Path, required=True, help="a copy of a docx skill folder")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not (args.skill / "SKILL.md").is_file():
        print(f"{args.skill}/SKILL.md not found: pass the folder of a skill copy", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        skill = Path(tmp) / args.skill.name
        shutil.copytree(args.skill, skill)
        (skill / "evals").mkdir(exist_ok=True)
        shutil.copy(EVALS, skill / "evals" / "evals.json")
        out = Path(tmp) / "bench"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "optimizer",
                "benchmark",
                str(skill),
                "--provider",
                "sim",
                "--runs",
                str(args.runs),
                "--out",
                str(out),
            ],
            check=True,
            capture_output=True,
        )
        report(out)
    return 0


def report(out: Path) -> None:
    bench = json.loads((out / "benchmark.json").read_text())
    print("| configuration | pass rate (mean) | stddev | runs |\n|---|---|---|---|")
    for config in ("with_skill", "without_skill"):
        s = bench["run_summary"][config]
        print(
            f"| {config} | {s['pass_rate']['mean']:.3f} | {s['pass_rate']['stddev']:.3f} | "
            f"{s.get('scored_runs', '')} |"
        )
    cited = []
    for grading in sorted(out.glob("eval-*/*/run-*/grading.json")):
        for e in json.loads(grading.read_text())["expectations"]:
            if e["passed"] and ".docx" in e["evidence"]:
                cited.append((grading.parent.parent.name, e["text"], e["evidence"]))
    print(f"\n{len(cited)} passed expectations cite a .docx; the first three:")
    for config, text, evidence in cited[:3]:
        print(f"- [{config}] {text} <- {evidence[:160]}")


if __name__ == "__main__":
    sys.exit(main())
