"""The hand-labelled judge probes (tests/fixtures/judge_probes.jsonl): their shape, and how often the
simulated judge agrees with the careful human verdicts they carry (bench/judge_probes.py prints the
same agreement per kind and per skill)."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from optimizer.sim.support import support

ROOT = Path(__file__).resolve().parents[2]
PROBES = ROOT / "tests" / "fixtures" / "judge_probes.jsonl"

# The share of probes on which the simulated judge must give the human's verdict: 113 of 187
# (60.4 %) since it reads meaning (78 of 187 before); a ratchet, raised as the judge improves. The
# issue's target, 95 %, needs a judge that knows paraphrases a rule-based reader cannot
# (docs/simulator.md, "The judge against a careful human").
AGREEMENT_FLOOR = 0.58

# Every kind of probe the set covers, each a way a word-matching judge goes wrong.
KINDS = {
    "restatement",
    "word-list",
    "point-out",
    "prohibition",
    "count",
    "contradiction",
    "wrong-role",
    "section",
    "paraphrase",
    "format-limit",
    "specific-content",
}
MIN_PER_KIND, MIN_SKILLS, MIN_ROWS = 8, 12, 170


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "judge_probes", ROOT / "bench" / "judge_probes.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


bench = _bench()


def test_every_probe_has_its_fields_and_the_set_covers_every_kind():
    probes = bench.load(PROBES)  # raises on a missing or mistyped field, or a repeated id
    assert len(probes) >= MIN_ROWS
    assert len({p.id for p in probes}) == len(probes)
    assert all(p.id == p.id.strip().lower() and " " not in p.id for p in probes)
    assert all(
        p.task.strip() and p.expectation.strip() and p.answer.strip() and p.why.strip()
        for p in probes
    )
    per_kind = Counter(p.kind for p in probes)
    assert set(per_kind) == KINDS
    assert min(per_kind.values()) >= MIN_PER_KIND, per_kind
    assert len({p.skill for p in probes}) >= MIN_SKILLS
    for kind in KINDS:
        passes = sum(p.verdict for p in probes if p.kind == kind)
        # both verdicts, roughly half each: a kind all of one verdict is passed by a constant judge
        assert 0.35 <= passes / per_kind[kind] <= 0.65, (kind, passes, per_kind[kind])


def test_no_two_probes_share_an_answer_to_the_same_expectation():
    probes = bench.load(PROBES)
    pairs = Counter((p.expectation, p.answer) for p in probes)
    assert max(pairs.values()) == 1


def test_the_simulated_judge_agrees_with_the_human_verdicts_at_the_floor():
    probes = bench.load(PROBES)
    verdicts = bench.judge_all(support, probes)
    assert len(verdicts) == len(probes)
    assert bench.agreement(probes, verdicts) >= AGREEMENT_FLOOR


def test_agreement_counts_the_probes_where_the_judge_gives_the_human_verdict():
    probes = bench.load(PROBES)
    # a judge that says pass to everything agrees exactly on the passes
    always = bench.judge_all(lambda *_: type("V", (), {"passed": True})(), probes)
    assert bench.agreement(probes, always) == sum(p.verdict for p in probes) / len(probes)
    assert bench.agreement(probes, [p.verdict for p in probes]) == 1.0


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("not json", "not JSON"),
        (json.dumps({"id": "x"}), "'skill'"),
        (json.dumps({f: "x" for f in bench.FIELDS}), "'verdict'"),
    ],
)
def test_a_bad_probe_file_is_refused_in_one_sentence(tmp_path, capsys, line, named):
    path = tmp_path / "probes.jsonl"
    path.write_text(line + "\n")
    assert bench.main(["--file", str(path)]) == 2
    err = capsys.readouterr().err
    assert named in err and str(path) in err and err.count("\n") == 1


def test_a_repeated_id_and_a_judge_that_cannot_be_imported_are_refused(tmp_path, capsys):
    row = json.loads(PROBES.read_text().splitlines()[0])
    path = tmp_path / "probes.jsonl"
    path.write_text(json.dumps(row) + "\n" + json.dumps(row) + "\n")
    assert bench.main(["--file", str(path)]) == 2
    assert "repeats" in capsys.readouterr().err
    assert bench.main(["--judge", "optimizer.nowhere:judge"]) == 2
    assert "--judge" in capsys.readouterr().err


def test_the_bench_prints_the_tables_and_the_last_line(capsys):
    assert bench.main(["--show-disagreements"]) == 0
    out = capsys.readouterr().out.rstrip("\n").splitlines()
    probes = bench.load(PROBES)
    assert out[-1].startswith("judge probes: ") and out[-1].endswith("%)")
    assert f" of {len(probes)} agree (" in out[-1]
    assert any(line.startswith("kind ") for line in out) and any(
        line.startswith("skill ") for line in out
    )
