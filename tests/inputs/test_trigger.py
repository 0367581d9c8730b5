"""Trigger evals as an author writes them, the split, the distractor set, the probe against the
simulated router (errors included) and the metrics, checked by hand-computed numbers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from optimizer.errors import BadInput
from optimizer.inputs import triggers as trigger
from optimizer.inputs.skillmd import DESCRIPTION_MAX, NAME_RE, parse_skill_md
from optimizer.model import make_client
from optimizer.search import probe
from optimizer.sim import Simulator
from optimizer.sim.protocol import error_reply


async def no_wait(_seconds: float) -> None:
    """Retries in these tests do not wait."""


ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "tests" / "fixtures" / "csv-report"
DESCRIPTION = parse_skill_md((EXAMPLE / "SKILL.md").read_text()).description


def write(tmp_path: Path, data) -> Path:
    path = tmp_path / "trigger_evals.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(BadInput) as caught:
        trigger.load(path.parent, path)
    return caught.value.problems


# -- loading -------------------------------------------------------------------------------------


def test_the_example_loads_with_both_classes_and_near_misses():
    tset = trigger.load(EXAMPLE)
    assert len(tset.queries) >= 16
    assert {q.should_trigger for q in tset.queries} == {True, False}
    convert = next(q for q in tset.queries if q.query.startswith("Convert this CSV to JSON"))
    assert convert.should_trigger is False


def test_every_problem_is_named_by_file_and_json_path(tmp_path):
    path = write(
        tmp_path,
        [
            {"query": "Summarise sales.csv", "should_trigger": True},
            {"query": "   ", "should_trigger": False},
            {"query": "Plot it", "should_trigger": "yes"},
            {"should_trigger": True},
            {"query": "summarise   SALES.csv", "should_trigger": True},
            {"query": "Draw", "should_trigger": False, "note": "x"},
            "just a string",
        ],
    )
    found = problems(path)
    assert f"{path}: [1].query is empty; write the user's request, or remove the item." in found
    assert any(
        p.startswith(f'{path}: [2].should_trigger is "yes", not true or false') for p in found
    )
    assert f"{path}: [3].query is missing; add the user's request as text." in found
    assert any(p.startswith(f"{path}: [4].query repeats [0].query") for p in found)
    assert any(p.startswith(f"{path}: [5].note is not a known field") for p in found)
    assert any(p.startswith(f'{path}: [6] is "just a string", not an object') for p in found)


@pytest.mark.parametrize(
    "data, words",
    [
        ({"queries": []}, "not a list"),
        ([], "an empty list"),
        (
            [{"query": "a", "should_trigger": True}, {"query": "b", "should_trigger": True}],
            "no query has should_trigger false",
        ),
        ('[{"query": ', "not valid JSON"),
    ],
)
def test_the_file_as_a_whole_is_checked(tmp_path, data, words):
    assert words in problems(write(tmp_path, data))[0]


def test_a_missing_file_says_where_it_was_looked_for(tmp_path):
    found = problems(tmp_path / "evals" / "trigger_evals.json")
    assert "trigger_evals.json: missing" in found[0] and "--evals" in found[0]


# -- the split -----------------------------------------------------------------------------------


def test_the_split_is_seeded_disjoint_and_stratified():
    tset = trigger.load(EXAMPLE)
    sp = trigger.split(tset, seed=0)
    assert sp == trigger.split(tset, seed=0)
    assert sp != trigger.split(tset, seed=1)
    parts = [sp.train, sp.validation, sp.test]
    assert sorted(sum(parts, [])) == [q.id for q in tset.queries]
    for part in parts:
        assert {tset.by_id(i).should_trigger for i in part} == {True, False}
    assert len(sp.train) >= len(tset.queries) / 2 - 1


@pytest.mark.parametrize(
    "n, expected", [(1, (1, 0, 0)), (2, (1, 1, 0)), (3, (1, 1, 1)), (4, (2, 1, 1)), (8, (4, 2, 2))]
)
def test_small_classes_fill_train_then_validation_then_test(n, expected):
    queries = [trigger.Query(i, f"q{i}", True) for i in range(n)] + [trigger.Query(99, "no", False)]
    sp = trigger.split(trigger.TriggerSet(queries, Path("x"), "h"), seed=3)
    positive = lambda ids: sum(i != 99 for i in ids)  # noqa: E731
    assert (positive(sp.train), positive(sp.validation), positive(sp.test)) == expected


# -- distractors and the request -----------------------------------------------------------------


def test_the_shipped_distractors_are_valid_skills():
    pool = probe.distractors()
    assert len(pool) >= 25 and len({name for name, _ in pool}) == len(pool)
    for name, description in pool:
        assert NAME_RE.fullmatch(name)
        assert 40 < len(description) <= DESCRIPTION_MAX and not re.search(r"[<>]", description)


def test_rivals_and_position_depend_on_the_query_and_run_never_on_the_description():
    q = trigger.Query(0, "Summarise sales.csv", True)
    a = probe.offered("csv-report", "one description", q, 1, seed=0)
    b = probe.offered("csv-report", "another description", q, 1, seed=0)
    assert [n for n, _ in a] == [n for n, _ in b]
    assert len(a) == probe.DISTRACTORS_PER_REQUEST + 1
    assert [n for n, _ in a].count("csv-report") == 1
    other_runs = {
        tuple(n for n, _ in probe.offered("csv-report", "d", q, r, seed=0)) for r in range(1, 6)
    }
    assert len(other_runs) > 1


def test_a_distractor_with_the_skills_own_name_is_never_listed_twice():
    q = trigger.Query(0, "Make slides", True)
    names = [n for n, _ in probe.offered("pptx-deck", "mine", q, 1, seed=0)]
    assert names.count("pptx-deck") == 1


# -- the probe -----------------------------------------------------------------------------------


async def test_the_probe_triggers_on_a_matching_query_and_not_on_a_near_miss(client):
    yes = trigger.Query(
        0,
        "Please write a markdown report that profiles the columns of "
        "this tabular data export, a short data overview.",
        True,
    )
    no = trigger.Query(1, "Convert this CSV to JSON: data/orders.csv -> data/orders.json", False)
    outcomes: dict = {}
    for q in (yes, no):
        for n in (1, 2, 3):
            hit = await probe.probe_one(client, "csv-report", DESCRIPTION, q, n, seed=0)
            outcomes.setdefault(q.id, {})[n] = hit.triggered
    # The simulated router flips a decision now and then, as a real one would: rates, not runs.
    m = probe.metrics(outcomes, {0: yes, 1: no}, [0, 1], samples=100)
    assert m["per_query"]["0"]["rate"] >= 0.5 and m["per_query"]["1"]["rate"] < 0.5
    assert m["pass_rate"] == 1.0


class FailingFor(Simulator):
    """The simulated service, answering HTTP 500 to every trigger request for chosen queries."""

    def __init__(self, failing: set[str], **kw):
        super().__init__(**kw)
        self.failing = failing

    def handle(self, method, target, headers, raw):
        body = json.loads(raw or b"null") if raw else None
        if isinstance(body, dict) and body.get("messages"):
            if body["messages"][0].get("content") in self.failing:
                return error_reply(500, "api_error", "Internal server error (forced by the test)")
        return super().handle(method, target, headers, raw)


async def test_a_failed_probe_is_missing_data_not_a_negative(settings, store):
    settings = settings.model_copy(
        update={"llm": settings.llm.model_copy(update={"max_attempts": 2})}
    )
    q = trigger.Query(0, "Summarise sales.csv as a markdown report", True)
    client = make_client(settings, store, simulator=FailingFor({q.query}), sleep=no_wait)
    try:
        answer = await probe.probe_one(client, "csv-report", DESCRIPTION, q, 1, seed=0)
    finally:
        await client.aclose()
    assert answer.triggered is None
    assert "failed after 2 attempts" in answer.error
    probe.record(store, "v0", "train", answer)
    assert probe.recorded(store, "v0") == {0: {1: None}}


# -- metrics -------------------------------------------------------------------------------------


QUERIES = {i: trigger.Query(i, f"q{i}", i < 4) for i in range(8)}  # 0-3 should, 4-7 should not


def test_metrics_by_hand():
    outcomes = {
        0: {1: True, 2: True, 3: False},  # rate 2/3: passes
        1: {1: True, 2: False, 3: False},  # rate 1/3: missed
        2: {1: None, 2: None, 3: None},  # every probe failed: missing, not a miss
        3: {1: True, 2: None, 3: True},  # one failure left out: rate 1
        4: {1: False, 2: False, 3: False},
        5: {1: True, 2: True, 3: False},  # a false trigger
        6: {1: False, 2: False, 3: False},
        7: {},  # never probed: missing
    }
    m = probe.metrics(outcomes, QUERIES, list(range(8)), samples=500)
    assert m["queries"] == 6 and m["missing_queries"] == 2 and m["probe_errors"] == 4
    # tp = {0, 3}, fn = {1}, fp = {5}, tn = {4, 6}
    assert (m["pass_rate"], m["precision"], m["recall"], m["f1"]) == (
        0.6667,
        0.6667,
        0.6667,
        0.6667,
    )
    assert m["per_query"]["1"] == {
        "rate": 0.3333,
        "runs": 3,
        "passed": False,
        "should_trigger": True,
    }
    assert "2" not in m["per_query"] and m["constant_signal"] is False
    for key in ("pass_rate", "precision", "recall", "f1"):
        low, high = m["ci"][key]
        assert low <= m[key] <= high
    assert m == probe.metrics(outcomes, QUERIES, list(range(8)), samples=500)


@pytest.mark.parametrize("value, kind", [(False, "never"), (True, "always")])
def test_a_description_that_never_or_always_triggers_is_a_constant_signal(value, kind):
    outcomes = {i: {1: value, 2: value} for i in range(8)}
    m = probe.metrics(outcomes, QUERIES, list(range(8)), samples=100)
    assert m["constant_signal"] == kind
    assert m["pass_rate"] == 0.5
    assert (m["precision"] is None) is (kind == "never")
