"""Layer-1 structural checks of one run (seed 004 `structural.json`): deterministic, no model.
Never look outside the run's outputs/ folder for files, and never write into the run folder.

Rules, as documented for eval authors:
- A `pattern` is a glob relative to outputs/ (a leading `outputs/` is accepted and dropped). A
  pattern without `/` matches a file's name at any depth (`report.md` matches outputs/report.md
  and outputs/sub/report.md); with `/` it matches the whole relative path, where `*` stays
  within one folder and `**` spans any number of them (`**/*.md`, `sub/**/x.csv`).
- Harness files at the top of outputs/ (metrics.json, user_notes.md) are not outputs: skipped.
  Symlinks that lead outside outputs/ are skipped too.
- file_contains passes when any matched file contains `match`, any of `match_any`, or
  `match_regex` (searched over the whole file with re.MULTILINE, so `^`/`$` anchor at lines;
  `.` does not cross lines unless the pattern says `(?s)`).
- file_not_contains fails on the first match that is not exempt; a match is exempt when any
  `except_context` string occurs on the match's line(s) or within 2 lines before or after. No
  matching file means nothing contains it: a pass.
- no_errors reads transcript.jsonl (else transcript.md) for ERROR_PATTERNS in what tools and
  commands printed, plus tool results flagged `is_error: true`; results of file-reading tools
  are skipped, since a file that mentions an error is not an error of the run.
- custom_script runs with bash in the sandbox on a copy of the run, with OUTPUTS_DIR set to
  /workspace/outputs, at most CUSTOM_SCRIPT_TIMEOUT_S seconds; exit 0 passes.
"""

from __future__ import annotations

import operator
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import structlog

from optimizer import sandbox
from optimizer import schemas as s
from optimizer.errors import InfraFailure
from optimizer.grade.outputs import line_of, matching, output_files, quote, read_output
from optimizer.grade.scoring import pass_rate
from optimizer.grade.tool_errors import transcript_errors
from optimizer.inputs.evals import Eval

log = structlog.get_logger(__name__)

CONTEXT_LINES = 2
CUSTOM_SCRIPT_TIMEOUT_S = 30.0
OUTPUTS_INSIDE = "/workspace/outputs"
RUN_FAILED = "run failed: "

Matcher = s.FileContains | s.FileNotContains
Policy = sandbox.SandboxPolicy | None

_OPERATORS = {
    "==": operator.eq,
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
}


def check_run(
    eval: Eval,
    trial_dir: Path,
    policy: sandbox.SandboxPolicy | None = None,
    *,
    configuration: str,
    run_error: str | None = None,
    skill_dir: Path | None = None,
) -> s.Structural:
    """Every structural expectation of `eval` against trial_dir. `run_error` (the executor's error
    or timeout) fails them all with "run failed: <error>" without looking at the files."""
    trial_dir = Path(trial_dir)
    results = []
    for exp in eval.structural:
        if run_error is not None:
            passed, evidence = False, RUN_FAILED + run_error
        else:
            try:
                passed, evidence = _CHECKS[exp.type](exp, trial_dir, policy, skill_dir)
            except InfraFailure:
                raise  # the sandbox failed, not the run: the run is unscored (docs/design.md §7)
            except Exception as exc:  # a broken check is a failed check, never a crashed loop
                log.warning("structural.check_failed", id=exp.id, type=exp.type, error=str(exc))
                passed, evidence = False, f"check could not run: {exc}"
        results.append(
            s.StructuralResult(
                id=exp.id,
                text=exp.description or exp.id,
                type=exp.type,
                passed=passed,
                evidence=evidence,
                critical=exp.critical,
            )
        )
    passed_n = sum(r.passed for r in results)
    gate = all(r.passed for r in results if r.critical)
    log.debug(
        "structural.checked",
        eval_id=eval.id,
        configuration=configuration,
        passed=passed_n,
        total=len(results),
        gate_passed=gate,
    )
    summary = s.PassSummary(
        passed=passed_n,
        failed=len(results) - passed_n,
        total=len(results),
        pass_rate=round(pass_rate(passed_n, len(results)), 4),
    )
    return s.Structural(expectations=results, summary=summary, gate_passed=gate)


def _finds(exp: Matcher, text: str) -> Iterator[tuple[int, int, str]]:
    """(first line, last line, matched text) of every occurrence of the matcher in one file."""
    if exp.match_regex is not None:
        try:
            regex = re.compile(exp.match_regex, re.M)
        except re.error as exc:  # evals.py rejects these at load time; never crash here
            raise ValueError(f"invalid match_regex {exp.match_regex!r}: {exc}") from exc
        spans = ((m.start(), m.end(), m.group(0)) for m in regex.finditer(text))
    else:
        needles = [exp.match] if exp.match is not None else list(exp.match_any or ())
        spans = (
            (m.start(), m.end(), needle)
            for needle in needles
            if needle
            for m in re.finditer(re.escape(needle), text)
        )
    for start, end, hit in spans:
        yield line_of(text, start), line_of(text, max(start, end - 1)), hit


def _matcher_text(exp: Matcher) -> str:
    if exp.match_regex is not None:
        return f"regex {exp.match_regex!r}"
    if exp.match is not None:
        return repr(exp.match)
    return "any of " + ", ".join(repr(m) for m in exp.match_any or ())


def _no_files(trial_dir: Path, pattern: str) -> str:
    present = output_files(trial_dir)
    listing = ", ".join(present[:8]) + (" …" if len(present) > 8 else "") if present else "nothing"
    return f"No file under outputs/ matches {pattern!r} (outputs/ holds: {listing})"


def _file_exists(
    exp: s.FileExists, trial_dir: Path, _policy: Policy, _skill: Path | None
) -> tuple[bool, str]:
    files = matching(trial_dir, exp.pattern)
    if not files:
        return False, _no_files(trial_dir, exp.pattern)
    more = f" and {len(files) - 5} more" if len(files) > 5 else ""
    return True, "Found: " + ", ".join(files[:5]) + more


def _file_contains(
    exp: s.FileContains, trial_dir: Path, _policy: Policy, _skill: Path | None
) -> tuple[bool, str]:
    files = matching(trial_dir, exp.pattern)
    if not files:
        return False, _no_files(trial_dir, exp.pattern)
    for rel in files:
        text = read_output(trial_dir, rel)
        if text is None:
            continue
        for first, _, hit in _finds(exp, text):
            line = text.splitlines()[first - 1] if text else ""
            return True, f"Found {quote(hit)} in {rel} line {first}: {quote(line)}"
    return False, f"{_matcher_text(exp)} not found in {', '.join(files[:5])}"


def _file_not_contains(
    exp: s.FileNotContains, trial_dir: Path, _policy: Policy, _skill: Path | None
) -> tuple[bool, str]:
    files = matching(trial_dir, exp.pattern)
    if not files:
        return True, f"No file matches {exp.pattern!r}, so none contains {_matcher_text(exp)}"
    exempt = 0
    for rel in files:
        text = read_output(trial_dir, rel)
        if text is None:
            continue
        lines = text.splitlines()
        for first, last, hit in _finds(exp, text):
            window = "\n".join(lines[max(0, first - 1 - CONTEXT_LINES) : last + CONTEXT_LINES])
            if any(ctx and ctx in window for ctx in exp.except_context):
                exempt += 1
                continue
            line = lines[first - 1] if lines else ""
            return False, f"Found {quote(hit)} in {rel} line {first}: {quote(line)}"
    note = f" ({exempt} match(es) exempt by except_context)" if exempt else ""
    return True, f"{_matcher_text(exp)} not found in {', '.join(files[:5])}{note}"


def _file_count(
    exp: s.FileCount, trial_dir: Path, _policy: Policy, _skill: Path | None
) -> tuple[bool, str]:
    files = matching(trial_dir, exp.pattern)
    n = len(files)
    ok = _OPERATORS[exp.operator](n, exp.count)
    listing = f" ({', '.join(files[:5])}{' …' if n > 5 else ''})" if files else ""
    return ok, f"{n} file(s) match {exp.pattern!r}{listing}; expected {exp.operator} {exp.count}"


# --- transcript ---------------------------------------------------------------------------------


def _no_errors(
    _exp: s.NoErrors, trial_dir: Path, _policy: Policy, _skill: Path | None
) -> tuple[bool, str]:
    if not any((trial_dir / n).is_file() for n in ("transcript.jsonl", "transcript.md")):
        return False, "No transcript.jsonl or transcript.md in the run folder to check"
    problems = transcript_errors(trial_dir)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        return False, "; ".join(problems[:3]) + more
    return True, "No error patterns in the transcript's tool results"


# --- custom script ------------------------------------------------------------------------------


class CheckTimedOut(InfraFailure):
    """A custom_script check that passed its time limit: its expectation, and so the run, is
    unscored, never failed (docs/design.md §7)."""

    def __init__(self, check: str, limit_s: float, output: str) -> None:
        self.check, self.limit_s = check, limit_s
        super().__init__(
            f"the custom_script check '{check}' passed its time limit of {limit_s:g} s "
            f"(a check's limit is at most {CUSTOM_SCRIPT_TIMEOUT_S:g} s), so its "
            f"expectation is unscored; output: {output}"
        )


def _custom_script(
    exp: s.CustomScript, trial_dir: Path, policy: Policy, skill_dir: Path | None
) -> tuple[bool, str]:
    policy = script_policy(policy)
    # A copy, so a script that writes can never change the finished run it judges.
    with tempfile.TemporaryDirectory(prefix="structural-") as tmp:
        work = Path(tmp) / "run"
        work.mkdir()
        if (trial_dir / "outputs").is_dir():
            shutil.copytree(trial_dir / "outputs", work / "outputs", symlinks=True)
        else:
            (work / "outputs").mkdir()
        # Set in the command, not the environment: the sandbox maps /workspace in a command to
        # wherever the run really is when bubblewrap is missing, but leaves variables alone.
        command = ["bash", "-c", f"export OUTPUTS_DIR={OUTPUTS_INSIDE}\n{exp.script}"]
        result = sandbox.run(command, work_dir=work, skill_dir=skill_dir, policy=policy)
    tail = quote((result.stdout + "\n" + result.stderr).strip()[-400:], 200)
    if result.infra:
        raise InfraFailure(f"the sandbox could not run the custom_script {exp.id}: {result.error}")
    if result.timed_out:  # a check that hangs cannot say whether the skill did its work
        raise CheckTimedOut(exp.id, policy.timeout_s, tail)
    if result.error:
        return False, f"script could not run: {result.error}"
    verdict = "exit 0" if result.exit_code == 0 else f"exit {result.exit_code}"
    return result.exit_code == 0, f"{verdict}; output: {tail}"


def script_policy(policy: sandbox.SandboxPolicy | None = None) -> sandbox.SandboxPolicy:
    """The sandbox policy of a custom_script: the given one (or the default) with its time limit
    capped at CUSTOM_SCRIPT_TIMEOUT_S, since a check must stay cheap."""
    if policy is None:
        return sandbox.SandboxPolicy(timeout_s=CUSTOM_SCRIPT_TIMEOUT_S)
    return replace(policy, timeout_s=min(policy.timeout_s, CUSTOM_SCRIPT_TIMEOUT_S))


# Each check takes its own kind of expectation: exp.type picks it.
_CHECKS: dict[str, Callable[..., tuple[bool, str]]] = {
    "file_exists": _file_exists,
    "file_contains": _file_contains,
    "file_not_contains": _file_not_contains,
    "no_errors": _no_errors,
    "file_count": _file_count,
    "custom_script": _custom_script,
}
