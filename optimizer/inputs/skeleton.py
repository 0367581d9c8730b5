"""`optimizer init`: the evals.json a new user starts from, and its guide evals/README.md, for an
existing skill; and the recognition of placeholders left untouched. Never overwrites a file.

The skeleton is seed 002's simple dialect (string `expectations`, no `assertions` ids, no
`eval_config`), the form skill-creator reads too. That dialect has no way to write a deterministic
check or a rubric, so a second eval shows those two kinds with seed 004's per-eval fields
(`structural_expectations`, `quality_rubric`); deleting it leaves the pure simple dialect. JSON has
no comments, and an extra key such as "_comment" is refused by every dialect's schema, so the
guidance is in the placeholders themselves (each starts with "TODO:") and in evals/README.md next
to the file, which no version of the skill sees (evals/ is left out of every snapshot)."""

from __future__ import annotations

import json
from pathlib import Path

from optimizer.errors import BadInput
from optimizer.inputs.evals import EVALS_FILE
from optimizer.inputs.skill import load_skill
from optimizer.schemas import Json, JsonObject

README = Path("evals") / "README.md"


def skeleton(skill_name: str) -> JsonObject:
    """One eval of each expectation kind: judged statements; then the six structural checks and
    a rubric. Every free-text value is a placeholder that names what to write there."""
    return {"skill_name": skill_name, "evals": [_judged_eval(), _checked_eval()]}


def _judged_eval() -> JsonObject:
    """Eval 1, in seed 002's simple dialect: a task and the statements a grader judges."""
    return {
        "id": 1,
        "prompt": "TODO: a task a real user would give this skill, in their words, e.g. "
        "'Summarise evals/files/notes.txt into outputs/summary.md for the team.'",
        "expected_output": "TODO: what a good result looks like, for a person reading the report.",
        "files": [],
        "expectations": [
            "TODO: one statement a grader can check in the output, e.g. 'outputs/summary.md "
            "lists the three action items'",
            "TODO: another statement; each is judged passed or failed, with evidence",
        ],
    }


def _checked_eval() -> JsonObject:
    """Eval 2, with seed 004's per-eval fields: the structural checks and a rubric, which the
    simple dialect has no way to write."""
    return {
        "id": 2,
        "prompt": "TODO: a second, different task. Aim for 10 to 20 of them (evals/README.md).",
        "expected_output": "TODO: what a good result of this task looks like.",
        "files": [],
        "structural_expectations": _structural_checks(),
        "quality_rubric": _rubric(),
    }


def _check(n: int, kind: str, what: str, **fields: Json) -> JsonObject:
    """One structural check S<n> of type `kind`, its description a placeholder saying `what`."""
    return {"id": f"S{n}", "type": kind, "description": f"TODO: {what}", **fields}


def _structural_checks() -> list[Json]:
    """One check of each of the six structural types, with the fields that type needs."""
    return [
        _check(1, "file_exists", "the output file was written", pattern="result.md", critical=True),
        _check(
            2,
            "file_contains",
            "the output has its title",
            pattern="result.md",
            match="# Result",
            critical=True,
        ),
        _check(
            3,
            "file_not_contains",
            "no filler text is left in the output",
            pattern="result.md",
            match_regex="(?i)lorem ipsum",
            except_context=[],
        ),
        _check(
            4,
            "file_count",
            "exactly one markdown file is written",
            pattern="*.md",
            count=1,
            operator="==",
        ),
        _check(5, "no_errors", "the run finished without tool errors"),
        _check(
            6,
            "custom_script",
            "a command of yours passes (exit 0)",
            script='test -s "$OUTPUTS_DIR/result.md"',
        ),
    ]


def _rubric() -> JsonObject:
    """A one-dimension quality rubric whose texts say what a 1, a 3 and a 5 look like."""
    return {
        "dimensions": [
            {
                "id": "Q1",
                "name": "usefulness",
                "weight": 1.0,
                "description": "TODO: one quality the judge scores from 1 to 5, and why it matters.",
                "scoring": {
                    "1": "TODO: what a poor result (1) looks like.",
                    "3": "TODO: what an acceptable result (3) looks like.",
                    "5": "TODO: what an excellent result (5) looks like.",
                },
            }
        ]
    }


def _leaves(data: Json) -> list[tuple[str, Json]]:
    """(JSON path such as evals[0].prompt, value) of every scalar, in document order."""
    out: list[tuple[str, Json]] = []
    stack: list[tuple[str, Json]] = [("", data)]
    while stack:
        at, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{at}.{k}" if at else str(k), v) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((f"{at}[{i}]", v) for i, v in reversed(list(enumerate(value))))
        else:
            out.append((at, value))
    return out


# Recognised by exact text, so a user's own words are never taken for a placeholder.
PLACEHOLDERS = frozenset(v for _, v in _leaves(skeleton("x")) if str(v).startswith("TODO:"))


def untouched(data: Json) -> list[str]:
    """The JSON paths whose value is still a placeholder of the skeleton."""
    return [at for at, v in _leaves(data) if isinstance(v, str) and v in PLACEHOLDERS]


def placeholder_sentence(source: Path, fix: str) -> str | None:
    """One sentence naming the evals file, how many placeholders it still holds, the first one's
    place and the fix; None when none is left."""
    try:
        found = untouched(json.loads(Path(source).read_text(encoding="utf-8-sig")))
    except (OSError, ValueError):
        return None
    if not found:
        return None
    many = f"{len(found)} fields still hold" if len(found) > 1 else "1 field still holds"
    return (
        f"{source}: {many} the placeholder text `optimizer init` wrote (the first: {found[0]}); "
        f"{fix}."
    )


def plan(skill_dir: Path) -> tuple[Path, JsonObject, Path, str | None]:
    """(evals.json path, its content, README path, README text or None to keep the user's own);
    BadInput, with nothing written, when the skill has problems or evals.json exists."""
    skill = load_skill(skill_dir)
    target = skill_dir / EVALS_FILE
    if target.exists() or target.is_symlink():
        raise BadInput(
            f"{target}: already exists, and `optimizer init` never overwrites it; edit "
            "it, or move it away and run init again."
        )
    if target.parent.exists() and not target.parent.is_dir():
        raise BadInput(
            f"{target.parent}: a file where the evals folder goes; rename it, then run init again."
        )
    readme = skill_dir / README
    return target, skeleton(skill.name), readme, None if readme.exists() else GUIDE


GUIDE = """\
# How to write these evals

`evals.json` was written by `optimizer init` as a starting point. Every value that starts with
`TODO:` is a placeholder: replace it, or delete what you do not need. `optimizer validate` and
`optimizer run` both refuse while any is left, and say how many and where the first is.

**An eval** is one task: `prompt` (what a user would ask, in their words), `expected_output` (what
success looks like, for people), `files` (input files, paths relative to the skill folder; keep
them in `evals/files/`). The agent writes its results into `outputs/`; name the file in the prompt.

**Judged expectations** (`expectations`, eval 1): statements about the output that a grader model
marks passed or failed, with evidence. Make each one fail on a wrong output: "lists the three
action items" beats "is helpful".

**Structural checks** (`structural_expectations`, eval 2): deterministic, no model. `pattern` is a
glob inside `outputs/`. `critical: true` makes a failure skip the judge (the structural gate).

| type | fields | passes when |
|---|---|---|
| `file_exists` | `pattern` | a file matches |
| `file_contains` | `pattern`, one of `match`, `match_any`, `match_regex` | a matching file contains it |
| `file_not_contains` | the same, and `except_context` | no matching file contains it |
| `file_count` | `pattern`, `count`, `operator` (`==`, `>=`, `<=`, `>`, `<`) | the count holds |
| `no_errors` | none | the run's tools printed no errors |
| `custom_script` | `script` (bash, `$OUTPUTS_DIR` is the outputs folder) | it exits 0 |

**A rubric** (`quality_rubric`, eval 2): dimensions the judge scores 1 to 5; describe what 1, 3
and 5 look like. With a rubric, a run scores 0.4 × pass rate + 0.6 × rubric.

An eval needs at least one of the three; mixing them is fine. Eval 1 alone is skill-creator's
simple form (seed 002); `structural_expectations` and `quality_rubric` are seed 004's additions.

**How many:** 10 to 20 evals, as different from one another as your users' requests. A quarter
is sealed away as a test the loop never sees; with fewer than 5 evals in a split, intervals
are wide and the sealed test means little (`validate` says how many to add).

Then: `optimizer validate SKILL_DIR`, and `optimizer run SKILL_DIR --detach` with
ANTHROPIC_API_KEY set (or `--provider sim` for a simulated night that costs nothing).
"""
