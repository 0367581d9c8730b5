"""The analyst notes of a benchmark, computed without a model: runs a judge or an executor failed
or a gate stopped, evals the skill hurts, expectations that do not discriminate or are flaky, a
skill never invoked, and what the skill costs. Each note is tied to an eval and an expectation
where it has one, in a fixed order."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from optimizer import schemas as s
from optimizer import words
from optimizer.grade.config_stats import (
    CONFIG_ORDER,
    Item,
    config_of,
    config_summary,
    delta_string,
    eval_means,
)
from optimizer.grade.outcome import GATE_SKIPPED

# Each configuration's graded runs, read by name.
_ByConfig = Mapping[s.Configuration, Sequence[Item]]


@dataclass(frozen=True)
class Note:
    # judge_error, exec_error, gated, skill_hurts, non_discriminating, flaky, skill_not_invoked, cost
    kind: str
    eval_id: int | None
    expectation: str | None
    text: str


def _results(item: Item) -> list[tuple[str, bool]]:
    """The expectations a run really evaluated: none for failed or unjudged runs, and not the
    judged ones a gate skipped."""
    if item[2].status in ("exec_error", "judge_error", "unscored"):
        return []
    return [(e.text, e.passed) for e in item[2].grading.expectations if e.evidence != GATE_SKIPPED]


def analyst_notes(
    evals: Sequence[Any], outcomes_by_config: Mapping[str, Sequence[Item]]
) -> list[Note]:
    """Observations a benchmark reader needs, in a fixed order, each tied to an eval and an
    expectation where it has one (the daemon's eval-feedback aggregate counts them)."""
    items = {c: list(outcomes_by_config.get(c) or []) for c in CONFIG_ORDER}
    names: dict[int, str] = {e.id: e.name for e in evals}
    ids = sorted(names)
    notes = [*_failure_notes(items), *_hurt_notes(items, names, ids)]
    per = _results_by_eval(items)
    notes += _non_discriminating_notes(per, ids)
    notes += _flaky_notes(per, ids)
    notes += _not_invoked_notes(items, ids)
    notes += _cost_notes(items)
    return notes


def _failure_notes(items: _ByConfig) -> list[Note]:
    """One note per kind of failed run (judge error, executor error, gate), naming the runs."""
    notes: list[Note] = []
    for status, kind, what in (
        ("judge_error", "judge_error", "a judge error, excluded from the means"),
        ("exec_error", "exec_error", "an executor error or a timeout, scored 0"),
        ("gated", "gated", "a failed structural gate, so the judge was skipped"),
    ):
        bad = sorted(
            (it[0].id, config_of(it), it[1].run_number)
            for c in CONFIG_ORDER
            for it in items[c]
            if it[2].status == status
        )
        if bad:
            where = ", ".join(f"eval {i} {c} run {n}" for i, c, n in bad[:10])
            where += f", and {len(bad) - 10} more" if len(bad) > 10 else ""  # not cut silently
            notes.append(
                Note(kind, None, None, f"{words.plural(len(bad), 'run')} had {what}: {where}")
            )
    return notes


def _hurt_notes(items: _ByConfig, names: Mapping[int, str], ids: Sequence[int]) -> list[Note]:
    """The evals whose mean score is lower with the skill than without it."""
    notes: list[Note] = []
    means = {c: eval_means(items[c]) for c in CONFIG_ORDER}
    for i in ids:
        ws, wo = means["with_skill"].get(i), means["without_skill"].get(i)
        # Hurts only where the means it prints differ: "0.20, without_skill 0.20" is no harm.
        if ws and wo and f"{ws[0]:.2f}" != f"{wo[0]:.2f}" and ws[0] < wo[0]:
            notes.append(
                Note(
                    "skill_hurts",
                    i,
                    None,
                    (
                        f"Eval {i} ({names[i]}): the skill hurts - with_skill scores {ws[0]:.2f} on average, "
                        f"without_skill {wo[0]:.2f}"
                    ),
                )
            )
    return notes


# (eval id, configuration) -> expectation text -> whether it passed, run by run
_Results = dict[tuple[int, str], dict[str, list[bool]]]


def _results_by_eval(items: _ByConfig) -> _Results:
    """Each expectation's results over the runs of one eval and configuration, in run order."""
    per: _Results = defaultdict(lambda: defaultdict(list))
    for c in CONFIG_ORDER:
        for it in items[c]:
            for text, passed in _results(it):
                per[(it[0].id, c)][text].append(passed)
    return per


def _non_discriminating_notes(per: _Results, ids: Sequence[int]) -> list[Note]:
    """Expectations that pass in every run of both configurations: they cannot tell the skill's
    value apart."""
    notes: list[Note] = []
    for i in ids:
        with_results = per.get((i, "with_skill"), {})
        without_results = per.get((i, "without_skill"), {})
        for text in with_results:
            if text in without_results and all(with_results[text]) and all(without_results[text]):
                notes.append(
                    Note(
                        "non_discriminating",
                        i,
                        text,
                        (
                            f"Eval {i}: expectation '{text}' passes in every run of both configurations "
                            "- does not discriminate the skill's value"
                        ),
                    )
                )
    return notes


def _flaky_notes(per: _Results, ids: Sequence[int]) -> list[Note]:
    """Expectations that both pass and fail over the runs of one configuration."""
    notes: list[Note] = []
    for i in ids:
        for c in CONFIG_ORDER:
            for text, results in per.get((i, c), {}).items():
                if len(results) >= 2 and len(set(results)) == 2:
                    notes.append(
                        Note(
                            "flaky",
                            i,
                            text,
                            (
                                f"Eval {i}: expectation '{text}' is flaky in {c} - passed {sum(results)} "
                                f"of {len(results)} runs"
                            ),
                        )
                    )
    return notes


def _not_invoked_notes(items: _ByConfig, ids: Sequence[int]) -> list[Note]:
    """The evals whose with_skill runs (those that ran and were scored) never invoked the skill."""
    notes: list[Note] = []
    for i in ids:
        runs = [
            it
            for it in items["with_skill"]
            if it[0].id == i and it[2].status not in ("exec_error", "unscored")
        ]
        missed = sorted(
            it[1].run_number for it in runs if getattr(it[1], "skill_invoked", None) is False
        )
        if missed:
            notes.append(
                Note(
                    "skill_not_invoked",
                    i,
                    None,
                    (
                        f"Eval {i}: the skill was never invoked in {len(missed)} of "
                        f"{words.plural(len(runs), 'with_skill run')} "
                        f"({'run' if len(missed) == 1 else 'runs'} {', '.join(map(str, missed))})"
                    ),
                )
            )
    return notes


def _cost_notes(items: _ByConfig) -> list[Note]:
    """What the skill costs in time and tokens and what it changes in pass rate, when both
    configurations have runs."""
    if not (items["with_skill"] and items["without_skill"]):
        return []
    a, b = config_summary(items["with_skill"]), config_summary(items["without_skill"])
    dt = delta_string("time_seconds", a.time_seconds.mean - b.time_seconds.mean)
    dk = delta_string("tokens", a.tokens.mean - b.tokens.mean)
    dp = delta_string("pass_rate", a.pass_rate.mean - b.pass_rate.mean)
    return [
        Note(
            "cost",
            None,
            None,
            (
                f"The skill costs {dt} s and {dk} tokens per run on average, and changes the pass rate "
                f"by {dp}"
            ),
        )
    ]
