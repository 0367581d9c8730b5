"""evals.json: three dialects into one Eval shape, the content hash, every problem at once, the split."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from optimizer.config import load
from optimizer.errors import BadInput
from optimizer.inputs.evals import Eval, EvalSet, load_evals, sealed_count, split
from optimizer.schemas import FileExists

FIXTURES = Path(__file__).parents[1] / "fixtures" / "skills"
EXAMPLE = Path(__file__).parents[2] / "tests" / "fixtures" / "csv-report"


def write_skill(root: Path, evals: dict, name: str = "demo") -> Path:
    (root / "evals" / "files").mkdir(parents=True, exist_ok=True)
    (root / "SKILL.md").write_text(f"---\nname: {name}\ndescription: A demo.\n---\n\nDo it.\n")
    (root / "evals" / "files" / "in.csv").write_text("a\n1\n")
    (root / "evals" / "evals.json").write_text(json.dumps(evals))
    return root


# --- dialects ---------------------------------------------------------------------------------


def test_seed_002_expectations_dialect() -> None:
    es = load_evals(FIXTURES / "example-skill")
    assert es.dialect == "expectations" and es.skill_name == "example-skill"
    (e,) = es.evals
    assert e == Eval(
        id=1,
        name="eval-1",
        prompt="User's example prompt",
        expected_output="Description of expected result",
        files=["evals/files/sample1.pdf"],
        expectations=["The output includes X", "The skill used script Y"],
    )
    assert es.eval_config == {} and es.source == FIXTURES / "example-skill" / "evals" / "evals.json"


def test_seed_001_assertions_dialect() -> None:
    skill = FIXTURES / "example-skill"
    es = load_evals(skill, skill / "evals" / "assertions.json")
    assert es.dialect == "assertions"
    (e,) = es.evals
    assert (e.id, e.name, e.files) == (0, "eval-0", [])
    assert e.expectations == ["Output contains valid JSON", "All rows processed correctly"]


def test_seed_004_extended_dialect() -> None:
    es = load_evals(FIXTURES / "testing")
    assert es.dialect == "extended"
    assert es.eval_config == {
        "runs_per_eval": 3,
        "structural_gate": True,
        "judge_model": "claude-sonnet-4-5-20250929",
        "baseline_comparison": True,
    }
    (e,) = es.evals
    assert e.name == "Descriptive Eval Name" and e.expectations == []
    assert e.structural == [
        FileExists(
            id="S1",
            type="file_exists",
            description="Test file created",
            pattern="*.test.ts",
            critical=True,
        )
    ]
    assert e.critical_count == 1
    (dim,) = e.rubric
    assert (dim.name, dim.weight, sorted(dim.scoring)) == ("dimension_name", 2.0, ["1", "3", "5"])


def test_three_dialects_normalise_to_one_shape_and_one_hash(tmp_path: Path) -> None:
    base = {"id": 7, "prompt": "Profile evals/files/in.csv", "files": ["evals/files/in.csv"]}
    forms = {
        "expectations": {**base, "expectations": ["Has a table", "Names the file"]},
        "assertions": {
            **base,
            "assertions": [
                {"id": "a1", "text": "Has a table"},
                {"id": "a2", "text": "Names the file"},
            ],
        },
        "extended": {**base, "name": "eval-7", "expectations": ["Has a table", "Names the file"]},
    }
    loaded = {
        dialect: load_evals(write_skill(tmp_path / dialect, {"skill_name": "demo", "evals": [raw]}))
        for dialect, raw in forms.items()
    }
    assert {d: es.dialect for d, es in loaded.items()} == {d: d for d in forms}
    evals = [es.evals for es in loaded.values()]
    assert evals[0] == evals[1] == evals[2]
    assert len({es.hash for es in loaded.values()}) == 1


def test_eval_config_flows_into_settings() -> None:
    es = load_evals(EXAMPLE)
    loaded = load(None, eval_config=es.eval_config, env={})
    assert loaded.settings.evals.runs_per_eval == 3
    assert loaded.source("evals.runs_per_eval") == "evals.json eval_config"
    assert loaded.source("models.grader") == "default"  # no judge_model: config decides


# --- hash -------------------------------------------------------------------------------------


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    return write_skill(
        tmp_path / "demo",
        {
            "skill_name": "demo",
            "eval_config": {"runs_per_eval": 2},
            "evals": [
                {
                    "id": 1,
                    "prompt": "Do it",
                    "files": ["evals/files/in.csv"],
                    "expectations": ["Done"],
                }
            ],
        },
    )


def test_hash_is_16_hex_and_stable(demo: Path, tmp_path: Path) -> None:
    h = load_evals(demo).hash
    assert len(h) == 16 and int(h, 16) >= 0
    shutil.copytree(demo, tmp_path / "copy")
    assert load_evals(tmp_path / "copy").hash == h


def edit(demo: Path, change) -> None:
    path = demo / "evals" / "evals.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=4))


def test_hash_follows_content_not_settings_or_layout(demo: Path) -> None:
    h = load_evals(demo).hash
    edit(demo, lambda d: d["eval_config"].update(runs_per_eval=5))
    assert load_evals(demo).hash == h  # eval_config is settings
    edit(demo, lambda d: d["evals"][0].update(prompt="Do it now"))
    h2 = load_evals(demo).hash
    assert h2 != h
    (demo / "evals" / "files" / "in.csv").write_text("a\n2\n")
    assert load_evals(demo).hash != h2  # a changed input file changes what the eval asks


def test_every_problem_of_every_eval_is_reported(demo: Path) -> None:
    def break_all(d: dict) -> None:
        d["evals"] = [
            {
                "id": 1,
                "prompt": "",
                "expectations": ["x"],
                "files": ["../out.csv", "evals/files/no.csv"],
            },
            {"id": 1, "prompt": "p", "expectations": "x", "bogus": True},
            {
                "id": "3",
                "prompt": "p",
                "structural_expectations": [{"id": "S1", "type": "file_contains", "pattern": "*"}],
            },
            "not an eval",
        ]

    edit(demo, break_all)
    with pytest.raises(BadInput) as info:
        load_evals(demo)
    problems = [p.split(": ", 1)[1] for p in info.value.problems]
    expected = [
        "evals[0].prompt is empty",
        "evals[0].files[0] '../out.csv' leads outside",
        "evals[0].files[1] 'evals/files/no.csv' does not exist",
        'evals[1].expectations is "x", not a list',
        "evals[1].bogus is not a known field",
        "evals[1].id 1 repeats the id of evals[0]",
        'evals[2].id is "3"',
        "evals[2].structural_expectations[0]: give exactly one of 'match', 'match_any' or 'match_regex'",
        'evals[3] is "not an eval", not an object',
    ]
    for text in expected:
        assert any(p.startswith(text) for p in problems), (text, problems)
    assert len(problems) == len(expected)


def test_a_typo_in_a_structural_field_is_named_with_a_suggestion(demo: Path) -> None:
    edit(
        demo,
        lambda d: d["evals"][0].update(
            structural_expectations=[{"id": "S1", "type": "file_exists", "patern": "*.md"}]
        ),
    )
    with pytest.raises(BadInput) as info:
        load_evals(demo)
    text = "\n".join(info.value.problems)
    assert (
        "evals[0].structural_expectations[0].patern is not a known field; did you mean 'pattern'?"
        in text
    )
    assert "evals[0].structural_expectations[0].pattern is missing" in text


def test_load_writes_nothing(demo: Path) -> None:
    before = sorted((p, p.stat().st_mtime_ns) for p in demo.rglob("*"))
    load_evals(demo)
    assert sorted((p, p.stat().st_mtime_ns) for p in demo.rglob("*")) == before


# --- split ------------------------------------------------------------------------------------


def evalset(kinds: list[str]) -> EvalSet:
    """One eval per kind: 'j' judged only, 's' structural, 'r' rubric, 'sr' both."""
    evals = []
    for i, kind in enumerate(kinds):
        evals.append(
            Eval(
                id=i,
                name=f"eval-{i}",
                prompt="p",
                expectations=["x"],
                structural=[{"id": "S1", "type": "no_errors"}] if "s" in kind else [],
                rubric=(
                    [
                        {
                            "id": "Q1",
                            "name": "q",
                            "description": "d",
                            "scoring": {"1": "a", "3": "b", "5": "c"},
                        }
                    ]
                    if "r" in kind
                    else []
                ),
            )
        )
    return EvalSet(
        skill_name="demo", dialect="extended", evals=evals, hash="0" * 16, source=Path("e.json")
    )


def test_split_is_seeded() -> None:
    es = evalset(["j"] * 12)
    first = split(es, test_fraction=0.25, seed=3)
    assert split(es, test_fraction=0.25, seed=3) == first
    assert len({tuple(split(es, test_fraction=0.25, seed=s).test) for s in range(10)}) > 1


def test_split_is_stratified_by_kind_of_checks() -> None:
    es = evalset(["j", "j", "j", "j", "sr", "sr", "sr", "sr"])
    for seed in range(25):
        s = split(es, test_fraction=0.25, seed=seed)
        assert len(s.test) == 2
        assert sorted(es.by_id(i).stratum for i in s.test) == ["judged", "structural+rubric"], seed
        assert sorted(s.train + s.test) == es.ids and not set(s.train) & set(s.test)
        assert "stratified" in s.note and f"seed {seed}" in s.note


def test_split_gives_every_kind_its_share_by_largest_remainder() -> None:
    es = evalset(["j"] * 6 + ["s"] * 3 + ["r"] * 3)  # test 3 of 12: quotas 1.5, 0.75, 0.75
    for seed in range(20):
        test = split(es, test_fraction=0.25, seed=seed).test
        assert sorted(es.by_id(i).stratum for i in test) == ["judged", "rubric", "structural"]


def test_split_breaks_equal_remainders_by_seed_not_by_name() -> None:
    es = evalset(["s", "s", "r", "r"])  # test 1 of 4: quotas 0.5 and 0.5
    kinds = {
        es.by_id(split(es, test_fraction=0.25, seed=seed).test[0]).stratum for seed in range(20)
    }
    assert kinds == {"rubric", "structural"}


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_no_test_set_under_four_evals(n: int) -> None:
    s = split(evalset(["s"] * n), test_fraction=0.5, seed=0)
    assert s.test == [] and s.train == list(range(n))
    assert "fewer than 4 evals" in s.note and "no sealed test set" in s.note


@pytest.mark.parametrize(
    ("n", "fraction", "expected"),
    [
        (4, 0.25, 1),
        (5, 0.25, 1),
        (10, 0.25, 3),
        (8, 0.25, 2),
        (4, 0.9, 2),
        (6, 0.01, 1),
        (20, 0.0, 0),
    ],
)
def test_sealed_count(n: int, fraction: float, expected: int) -> None:
    assert sealed_count(n, fraction) == expected


def test_example_split_has_one_test_eval() -> None:
    es = load_evals(EXAMPLE)
    s = split(es, test_fraction=0.25, seed=0)
    assert len(s.test) == 1 and len(s.train) == 4
