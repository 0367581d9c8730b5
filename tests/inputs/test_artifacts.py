import copy
import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from optimizer import schemas as s
from optimizer.errors import BadInput
from optimizer.inputs.artifacts import (
    KINDS,
    check_artifact,
    kind_from_name,
    render_report,
    validate_for_write,
)

SEEDS = Path(__file__).parents[1] / "fixtures" / "seeds"

SEED_FORMS = {
    "001_evals.json": ("evals", "assertions (seed 001)"),
    "001_eval_metadata.json": ("eval_metadata", "assertions (seed 001)"),
    "001_grading.json": ("grading", "compact (seed 001)"),
    "001_benchmark.json": ("benchmark", "compact (seed 001)"),
    "001_timing.json": ("timing", "core (seed 001)"),
    "001_feedback.json": ("feedback", "full (seed 001)"),
    "001_comparison.json": ("comparison", "simple (seed 001)"),
    "001_history.json": ("history", "versions (seed 001)"),
    "002_evals.json": ("evals", "expectations (seed 002)"),
    "002_history.json": ("history", "iterations (seed 002)"),
    "002_grading.json": ("grading", "full (seed 002)"),
    "002_metrics.json": ("metrics", "full (seed 002)"),
    "002_timing.json": ("timing", "full (seed 002)"),
    "002_benchmark.json": ("benchmark", "full (seed 002)"),
    "002_comparison.json": ("comparison", "rubric (seed 002)"),
    "002_analysis.json": ("analysis", "full (seed 002)"),
    "004_evals.json": ("evals", "extended (seed 004)"),
    "004_structural.json": ("structural", "full (seed 004)"),
    "004_grading.json": ("grading", "extended (seed 004)"),
    "004_benchmark.json": ("benchmark", "run_summary fragment (seed 004)"),
    "004_eval_feedback_aggregate.json": ("eval_feedback_aggregate", "full (seed 004)"),
}
COMPACT = {"001_grading.json", "001_benchmark.json", "001_comparison.json", "004_benchmark.json"}
# a JSON path leads every problem: `$`, or a key with [index] / .key steps
PATH = re.compile(r'^(\$|[A-Za-z_][\w-]*(\[\d+\]|\["[^"]*"\]|\.[A-Za-z_][\w-]*)*): ')


def seed(name: str) -> dict:
    return json.loads((SEEDS / name).read_text())


def write(tmp_path: Path, name: str, data) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("name", sorted(SEED_FORMS))
def test_every_seed_example_is_accepted_and_named(name):
    report = check_artifact(SEEDS / name)
    assert (report.kind, report.form) == SEED_FORMS[name]
    assert report.ok and report.problems == []


@pytest.mark.parametrize("name", sorted(set(SEED_FORMS) - COMPACT))
def test_strict_accepts_full_forms(name):
    assert check_artifact(SEEDS / name, strict=True).ok


@pytest.mark.parametrize("name", sorted(COMPACT))
def test_strict_rejects_compact_forms(name):
    report = check_artifact(SEEDS / name, strict=True)
    assert not report.ok
    assert report.problems[0].startswith("$: ") and "--strict needs" in report.problems[0]


def test_kind_from_file_name():
    assert kind_from_name(Path("v1/eval-0/with_skill/run-1/grading.json")) == "grading"
    assert kind_from_name(Path("comparison/comparison-12.json")) == "comparison"
    assert kind_from_name(Path("002_eval_metadata.json")) == "eval_metadata"
    assert kind_from_name(Path("eval_feedback_aggregate.json")) == "eval_feedback_aggregate"
    assert kind_from_name(Path("notes.json")) is None
    assert kind_from_name(Path("assignment.json")) is None
    assert set(KINDS) >= {"evals", "benchmark", "history", "structural", "timing", "feedback"}


def test_unknown_name_without_kind_is_bad_input(tmp_path):
    path = write(tmp_path, "data.json", {})
    with pytest.raises(BadInput, match="--kind"):
        check_artifact(path)


def test_unknown_kind_is_bad_input():
    with pytest.raises(BadInput, match="not a kind"):
        check_artifact(SEEDS / "002_grading.json", kind="gradin")


def test_explicit_kind_overrides_the_name(tmp_path):
    path = write(tmp_path, "anything.json", seed("002_metrics.json"))
    assert check_artifact(path, kind="metrics").ok


# --- misnamed fields: named by JSON path, with the seed name as hint --------------------------


def test_benchmark_config_for_configuration(tmp_path):
    data = seed("002_benchmark.json")
    run = copy.deepcopy(data["runs"][0])
    run["run_number"] = 2
    run["config"] = run.pop("configuration")
    data["runs"].append(run)
    report = check_artifact(write(tmp_path, "benchmark.json", data))
    assert report.form == "full (seed 002)" and not report.ok
    assert report.problems == ["runs[1].config: unknown field; did you mean 'configuration'?"]


def test_benchmark_top_level_pass_rate(tmp_path):
    data = seed("002_benchmark.json")
    data["runs"][0]["pass_rate"] = data["runs"][0]["result"].pop("pass_rate")
    report = check_artifact(write(tmp_path, "benchmark.json", data))
    assert len(report.problems) == 1
    assert report.problems[0].startswith("runs[0].pass_rate: unknown field")
    assert "'result.pass_rate'" in report.problems[0]


@pytest.mark.parametrize(
    ("wrong", "right"), [("name", "text"), ("met", "passed"), ("details", "evidence")]
)
def test_grading_expectation_misnamings(tmp_path, wrong, right):
    data = seed("002_grading.json")
    data["expectations"][1][wrong] = data["expectations"][1].pop(right)
    report = check_artifact(write(tmp_path, "grading.json", data))
    assert report.problems == [f"expectations[1].{wrong}: unknown field; did you mean '{right}'?"]


def test_misnamings_in_benchmark_run_expectations(tmp_path):
    data = seed("002_benchmark.json")
    data["runs"][0]["expectations"][0]["met"] = True
    report = check_artifact(write(tmp_path, "benchmark.json", data))
    assert report.problems == ["runs[0].expectations[0].met: unknown field; did you mean 'passed'?"]


def test_misnamings_in_compact_grading_too(tmp_path):
    data = seed("001_grading.json")
    data["expectations"][0]["name"] = data["expectations"][0].pop("text")
    report = check_artifact(write(tmp_path, "grading.json", data))
    assert report.form == "compact (seed 001)"
    assert report.problems == ["expectations[0].name: unknown field; did you mean 'text'?"]


def test_other_problems_are_still_reported_with_a_misnaming(tmp_path):
    data = seed("002_benchmark.json")
    data["runs"][0]["config"] = data["runs"][0].pop("configuration")
    data["runs"][0]["result"]["tokens"] = "many"
    del data["metadata"]["skill_name"]
    report = check_artifact(write(tmp_path, "benchmark.json", data))
    assert report.problems[0] == "runs[0].config: unknown field; did you mean 'configuration'?"
    assert "metadata.skill_name: required field is missing" in report.problems
    assert any(p.startswith("runs[0].result.tokens: ") for p in report.problems)
    assert not any(p.startswith("runs[0].configuration") for p in report.problems)


def test_evals_typos_and_structural_types(tmp_path):
    data = seed("004_evals.json")
    data["eval_config"]["runs_per_evals"] = 2
    data["evals"][0]["structural_expectations"].append(
        {"id": "S2", "type": "file_contians", "pattern": "*", "match": "x"}
    )
    data["evals"][0]["structural_expectations"].append({"id": "S3", "pattern": "*"})
    report = check_artifact(write(tmp_path, "evals.json", data))
    assert report.problems == [
        "eval_config.runs_per_evals: unknown field; did you mean 'runs_per_eval'?",
        "evals[0].structural_expectations[1].type: unknown 'file_contians'; "
        "did you mean 'file_contains'?",
        "evals[0].structural_expectations[2].type: required field is missing",
    ]


def test_value_errors_name_their_path(tmp_path):
    data = seed("002_history.json")
    data["iterations"][2]["grading_result"] = "win"
    data["iterations"][0]["expectation_pass_rate"] = 1.5
    report = check_artifact(write(tmp_path, "history.json", data))
    assert [p.split(":")[0] for p in report.problems] == [
        "iterations[0].expectation_pass_rate",
        "iterations[2].grading_result",
    ]
    assert "1.5" in report.problems[0]


def test_every_problem_starts_with_a_json_path(tmp_path):
    data = seed("002_comparison.json")
    data["winner"] = "C"
    data["rubric"]["A"]["content"]["odd key"] = 4.5
    del data["output_quality"]["B"]
    data["expectation_results"]["A"]["details"][0]["met"] = True
    report = check_artifact(write(tmp_path, "comparison-1.json", data), strict=True)
    assert len(report.problems) == 4
    for problem in report.problems:
        assert PATH.match(problem), problem
    assert 'rubric.A.content["odd key"]: ' in "\n".join(report.problems)


def test_top_level_not_an_object(tmp_path):
    report = check_artifact(write(tmp_path, "grading.json", [1, 2]))
    assert not report.ok and report.problems == ["$: expected a JSON object, got an array"]


# --- unreadable input is BadInput ---------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "empty"),
        (b"  \n", "empty"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "binary"),
        (b"\xff\xfe{}", "binary"),
        (b"\x00" * 8, "binary"),
        (b'{"pass_rate": 0.5,', "not valid JSON"),
        (b'{"pass_rate": NaN}', "NaN"),
    ],
)
def test_unreadable_files_are_bad_input(tmp_path, content, words):
    path = tmp_path / "grading.json"
    path.write_bytes(content)
    with pytest.raises(BadInput, match=words) as info:
        check_artifact(path)
    assert str(path) in str(info.value)
    assert info.value.exit_code == 2


def test_missing_file_and_folder_are_bad_input(tmp_path):
    with pytest.raises(BadInput, match="no such file"):
        check_artifact(tmp_path / "grading.json")
    (tmp_path / "timing.json").mkdir()
    with pytest.raises(BadInput, match="not a regular file"):
        check_artifact(tmp_path / "timing.json")


def test_oversized_file_is_bad_input(tmp_path):
    path = tmp_path / "benchmark.json"
    with path.open("wb") as handle:
        handle.truncate(10 * 1024 * 1024 + 1)
    with pytest.raises(BadInput, match="10 MB"):
        check_artifact(path)


# --- writing and printing -----------------------------------------------------------------


def test_validate_for_write_picks_the_full_form():
    assert isinstance(validate_for_write("grading", seed("002_grading.json")), s.Grading)
    assert isinstance(validate_for_write("history", seed("001_history.json")), s.HistoryVersions)
    assert isinstance(validate_for_write(s.Structural, seed("004_structural.json")), s.Structural)
    with pytest.raises(ValidationError):
        validate_for_write("grading", seed("001_grading.json"))


def test_render_report(tmp_path):
    ok = render_report(check_artifact(SEEDS / "002_grading.json"))
    assert ok.endswith("grading, full (seed 002): ok")
    data = seed("002_benchmark.json")
    data["runs"][0]["config"] = data["runs"][0].pop("configuration")
    lines = render_report(check_artifact(write(tmp_path, "benchmark.json", data))).splitlines()
    assert lines[0].endswith("1 problem")
    assert lines[1] == "  runs[0].config: unknown field; did you mean 'configuration'?"
