import json
from pathlib import Path

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from optimizer import schemas as s

SEEDS = Path(__file__).parents[1] / "fixtures" / "seeds"

# every example of the three seeds, copied verbatim, and the model it must parse into
SEED_MODELS: dict[str, type[BaseModel]] = {
    "001_evals": s.EvalsFileRaw,
    "001_eval_metadata": s.EvalMetadata,
    "001_grading": s.CompactGrading,
    "001_benchmark": s.CompactBenchmark,
    "001_timing": s.Timing,
    "001_feedback": s.Feedback,
    "001_comparison": s.SimpleComparison,
    "001_history": s.HistoryVersions,
    "002_evals": s.EvalsFileRaw,
    "002_history": s.History,
    "002_grading": s.Grading,
    "002_metrics": s.Metrics,
    "002_timing": s.Timing,
    "002_benchmark": s.Benchmark,
    "002_comparison": s.Comparison,
    "002_analysis": s.Analysis,
    "004_evals": s.EvalsFileRaw,
    "004_quality_rubric": s.QualityRubric,
    "004_structural": s.Structural,
    "004_grading": s.Grading,
    "004_benchmark": s.BenchmarkFragment,
    "004_eval_feedback_aggregate": s.EvalFeedbackAggregate,
}


def seed(name: str) -> dict:
    return json.loads((SEEDS / f"{name}.json").read_text())


def test_every_fixture_has_a_model():
    on_disk = {p.stem for p in SEEDS.glob("*.json")}
    assert on_disk == set(SEED_MODELS) | {"004_structural_expectation"}


@pytest.mark.parametrize("name", sorted(SEED_MODELS))
def test_seed_example_parses(name):
    model = SEED_MODELS[name].model_validate(seed(name))
    dumped = model.model_dump(mode="json", exclude_none=True)
    # a round trip through the writer's dump keeps every seed field
    assert SEED_MODELS[name].model_validate(dumped) == model
    assert set(seed(name)) <= set(dumped)


def test_seed_004_structural_expectation_is_a_file_exists():
    check = TypeAdapter(s.StructuralExpectation).validate_python(seed("004_structural_expectation"))
    assert isinstance(check, s.FileExists)
    assert (check.id, check.pattern, check.critical) == ("S1", "*.test.ts", True)


# --- evals.json dialects ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "dialect"),
    [("002_evals", "expectations"), ("001_evals", "assertions"), ("004_evals", "extended")],
)
def test_detect_evals_dialect(name, dialect):
    assert s.detect_evals_dialect(seed(name)) == dialect


def test_expectation_texts_from_either_dialect():
    old = s.EvalsFileRaw.model_validate(seed("002_evals")).evals[0]
    new = s.EvalsFileRaw.model_validate(seed("001_evals")).evals[0]
    assert old.expectation_texts == ["The output includes X", "The skill used script Y"]
    assert new.expectation_texts == ["Output contains valid JSON", "All rows processed correctly"]


def test_extended_eval_fields():
    evals = s.EvalsFileRaw.model_validate(seed("004_evals"))
    assert evals.eval_config.runs_per_eval == 3 and evals.eval_config.structural_gate is True
    one = evals.evals[0]
    assert one.name == "Descriptive Eval Name"
    assert one.quality_rubric.dimensions[0].weight == 2.0
    assert one.quality_rubric.dimensions[0].scoring["5"].startswith("Description of score 5")


def test_eval_config_fields_left_unset_are_none():
    cfg = s.EvalConfig.model_validate({"judge_model": "m"})
    assert (cfg.runs_per_eval, cfg.structural_gate, cfg.baseline_comparison) == (None, None, None)


def test_eval_may_carry_expectations_and_structural_expectations():
    raw = {
        "id": 1,
        "prompt": "p",
        "expectations": ["says hi"],
        "structural_expectations": [{"id": "S1", "type": "no_errors"}],
    }
    one = s.EvalRaw.model_validate(raw)
    assert one.expectation_texts == ["says hi"]
    assert isinstance(one.structural_expectations[0], s.NoErrors)
    assert one.structural_expectations[0].critical is False


def test_eval_refuses_both_expectations_and_assertions():
    raw = {"id": 1, "prompt": "p", "expectations": ["a"], "assertions": [{"id": "1", "text": "a"}]}
    with pytest.raises(ValidationError, match="not both"):
        s.EvalRaw.model_validate(raw)


@pytest.mark.parametrize(
    "bad",
    [
        {"id": "1", "prompt": "p"},  # ids are integers, not strings
        {"id": 1, "prompt": "p", "expectation": ["typo"]},
        {"id": 1},
    ],
)
def test_eval_shape_errors(bad):
    with pytest.raises(ValidationError):
        s.EvalRaw.model_validate(bad)


STRUCTURAL = TypeAdapter(s.StructuralExpectation)


@pytest.mark.parametrize(
    ("raw", "cls"),
    [
        ({"id": "S", "type": "file_exists", "pattern": "*.py"}, s.FileExists),
        ({"id": "S", "type": "file_contains", "pattern": "*", "match": "x"}, s.FileContains),
        ({"id": "S", "type": "file_contains", "pattern": "*", "match_any": ["x"]}, s.FileContains),
        (
            {"id": "S", "type": "file_not_contains", "pattern": "*", "match_regex": "vi\\.fn"},
            s.FileNotContains,
        ),
        ({"id": "S", "type": "no_errors"}, s.NoErrors),
        ({"id": "S", "type": "file_count", "pattern": "*", "count": 2}, s.FileCount),
        ({"id": "S", "type": "custom_script", "script": "test -f out.txt"}, s.CustomScript),
    ],
)
def test_structural_types(raw, cls):
    assert isinstance(STRUCTURAL.validate_python(raw), cls)


def test_structural_defaults():
    count = STRUCTURAL.validate_python(
        {"id": "S", "type": "file_count", "pattern": "*", "count": 1}
    )
    assert count.operator == "=="
    nc = STRUCTURAL.validate_python(
        {"id": "S", "type": "file_not_contains", "pattern": "*", "match": "x"}
    )
    assert nc.except_context == []


@pytest.mark.parametrize(
    "raw",
    [
        {"id": "S", "type": "file_contains", "pattern": "*"},
        {"id": "S", "type": "file_contains", "pattern": "*", "match": "x", "match_regex": "y"},
        {"id": "S", "type": "file_count", "pattern": "*", "count": 1, "operator": "!="},
        {"id": "S", "type": "file_exists"},
        {"id": "S", "type": "file_exist", "pattern": "*"},
        {"id": "S", "type": "no_errors", "pattern": "*"},
        {"id": "S", "type": "file_contains", "pattern": "*", "match": "x", "except_context": []},
    ],
)
def test_structural_rejects(raw):
    with pytest.raises(ValidationError):
        STRUCTURAL.validate_python(raw)


def test_rubric_anchor_keys_are_1_to_5():
    dim = {"id": "Q1", "name": "n", "description": "d", "scoring": {"10": "x"}}
    with pytest.raises(ValidationError, match="keyed '1'..'5'"):
        s.RubricDimension.model_validate(dim)


# --- output models: extras pass, misnamings do not -------------------------------------------


def test_output_models_keep_added_fields():
    data = seed("002_grading")
    data["judge_model"] = "sim-1"
    grading = s.Grading.model_validate(data)
    assert grading.model_dump()["judge_model"] == "sim-1"


@pytest.mark.parametrize(
    ("model", "raw", "wrong"),
    [
        (s.GradedExpectation, {"name": "t", "passed": True, "evidence": "e"}, "name"),
        (s.GradedExpectation, {"text": "t", "met": True, "evidence": "e"}, "met"),
        (s.GradedExpectation, {"text": "t", "passed": True, "details": "e"}, "details"),
        (s.BenchmarkRun, {"config": "with_skill"}, "config"),
        (s.BenchmarkRun, {"pass_rate": 0.5}, "pass_rate"),
    ],
)
def test_misnamed_fields_fail_validation(model, raw, wrong):
    with pytest.raises(ValidationError) as info:
        model.model_validate(raw)
    err = info.value.errors()[0]
    assert err["type"] == "misnamed_field"
    assert wrong in err["ctx"]["found"]


def test_misnamed_even_alongside_the_right_name():
    run = seed("002_benchmark")["runs"][0]
    run["pass_rate"] = run["result"]["pass_rate"]
    with pytest.raises(ValidationError, match="'pass_rate' should be 'result.pass_rate'"):
        s.BenchmarkRun.model_validate(run)


def test_configuration_values():
    run = seed("002_benchmark")["runs"][0]
    run["configuration"] = "with-skill"
    with pytest.raises(ValidationError):
        s.BenchmarkRun.model_validate(run)


def test_grading_result_values():
    data = seed("002_history")
    data["iterations"][1]["grading_result"] = "win"
    with pytest.raises(ValidationError):
        s.History.model_validate(data)


def test_history_current_best_must_agree():
    data = seed("002_history")
    data["current_best"] = "v1"
    with pytest.raises(ValidationError, match="is_current_best"):
        s.History.model_validate(data)


def test_meaningful_nulls_survive_exclude_none():
    history = s.History.model_validate(seed("002_history"))
    first = history.model_dump(mode="json", exclude_none=True)["iterations"][0]
    assert list(first)[:2] == ["version", "parent"] and first["parent"] is None
    agg = s.EvalFeedbackAggregate.model_validate(seed("004_eval_feedback_aggregate"))
    dumped = agg.model_dump(mode="json", exclude_none=True)
    assert dumped["suggestions"][1]["assertion"] is None


def test_rubric_score_is_1_to_5():
    with pytest.raises(ValidationError):
        s.RubricScore.model_validate({"score": 6, "evidence": "e"})


def test_without_skill_summary_is_optional():
    summary = seed("004_benchmark")["run_summary"]
    parsed = s.RunSummary.model_validate(summary)
    assert parsed.without_skill is None and parsed.with_skill.consistency == 0.96
    assert parsed.with_skill.rubric_dimensions["tdd_philosophy"].mean == 4.2


# -- our own files: selection.json and trigger.json --------------------------------------------


def _benchmark_selection() -> dict:
    import random

    from optimizer.config import Selection
    from optimizer.decide.comparison import Asked, ComparisonTally, Measured
    from optimizer.decide.step import decide

    child = {e: [0.6, 0.7, 0.65] for e in range(5)}
    parent = {e: [0.5, 0.55, 0.6] for e in range(5)}
    tally = ComparisonTally(
        child_wins=6, parent_wins=1, ties=2, inconsistent=3, pairs=12, swap_consistency=0.75
    )
    measured, asked = Measured(child, parent, tally), Asked(first_runs=3)
    d = decide(measured, asked, selection=Selection(), rng=random.Random(0))
    return {**d.model_dump(mode="json"), "stage": "benchmark", "parent": "v0"}


def _trigger_metrics() -> dict:
    from optimizer.inputs.triggers import Query
    from optimizer.search import probe

    queries = {i: Query(i, f"q{i}", i < 2) for i in range(4)}
    outcomes = {0: {1: True, 2: True}, 1: {1: False, 2: None}, 2: {1: False}, 3: {}}
    return probe.metrics(outcomes, queries, [0, 1, 2, 3], samples=50)


def test_selection_json_of_each_stage_validates_against_its_model():
    import random

    from optimizer.config import Selection
    from optimizer.decide.keep import queries as decide_description

    assert isinstance(
        s.SelectionFile.model_validate(_benchmark_selection()).root, s.BenchmarkSelection
    )
    screened = {
        "decision": "lost",
        "reason": "stopped at screening",
        "stage": "screening",
        "parent": "v0",
    }
    assert isinstance(s.SelectionFile.model_validate(screened).root, s.ScreenSelection)
    m = _trigger_metrics()
    chosen = decide_description(m, m, 0.5, 0.5, selection=Selection(), rng=random.Random(0))
    written = {**chosen, "stage": "probe", "parent": "v0"}  # as state.record_decision writes it
    probe_file = s.SelectionFile.model_validate(written).root
    assert isinstance(probe_file, s.ProbeSelection)
    # The parent's label and both sides' metrics live side by side; neither replaces the other.
    assert probe_file.parent == "v0" and probe_file.parent_metrics.f1 == m["f1"]


@pytest.mark.parametrize("change", [{"surprise": 1}, {"decision": "promoted"}, {"evals": "ten"}])
def test_selection_json_refuses_a_field_its_model_does_not_know(change):
    with pytest.raises(ValidationError):
        s.SelectionFile.model_validate({**_benchmark_selection(), **change})


def test_record_decision_validates_before_writing(tmp_path):
    from types import SimpleNamespace

    from optimizer.search.state import record_decision

    version = tmp_path / "v1"
    run = SimpleNamespace(ws=SimpleNamespace(version=lambda label: tmp_path / label))
    with pytest.raises(ValidationError):
        record_decision(run, "v1", "v0", "benchmark", {**_benchmark_selection(), "stray": True})
    assert not (version / "selection.json").exists()


def test_trigger_json_validates_against_its_model():
    m = _trigger_metrics()
    s.TriggerFile.model_validate({"version": "v0", "probe": "api", "train": m, "validation": m})
    with pytest.raises(ValidationError):
        s.TriggerFile.model_validate(
            {"version": "v0", "probe": "api", "train": m, "validation": {**m, "accuracy": 1.0}}
        )


def test_the_files_verdicts_are_the_decisions_verdicts():
    """The seed contract cannot import decide/ (shared modules import only each other), so its
    copy of the verdict Literal is held to decide/verdict.Verdict here."""
    from typing import get_args

    from optimizer.decide.verdict import Verdict

    assert get_args(s.Decided) == get_args(Verdict)
