import asyncio
import json

import pytest

from optimizer.decide.comparison import ComparisonTally
from optimizer.model import StructuredAnswerError, make_client
from optimizer.schemas import Analysis
from optimizer.search.analyze import Pairing, analyze
from optimizer.search.proposal import EvalCost
from optimizer.sim import Simulator
from optimizer.store.files import read_json
from optimizer.tags import parse_tags, section

WINNER_MD = """---
name: revenue-report
description: Summarise revenue reports.
---
# Revenue report
- State the total revenue with its unit.
- Name every region in the report.
- Compare with the previous quarter.
"""
LOSER_MD = """---
name: revenue-report
description: Summarise revenue reports.
---
# Revenue report
- State the total revenue with its unit.
"""


async def no_wait(_seconds):
    await asyncio.sleep(0)


def skills(root):
    for label, text in (("v1", WINNER_MD), ("v0", LOSER_MD)):
        skill = root / label / "skill"
        (skill / "scripts").mkdir(parents=True)
        (skill / "SKILL.md").write_text(text)
        (skill / "scripts" / "check.py").write_text("print('ok')\n")
        (skill / "logo.png").write_bytes(b"\x89PNG\x00\x00binary")
    return root / "v1" / "skill", root / "v0" / "skill"


TALLY = ComparisonTally(
    child_wins=4,
    parent_wins=1,
    ties=1,
    inconsistent=2,
    errors=0,
    pairs=8,
    swap_consistency=0.75,
    reasons=[
        {
            "eval_id": 1,
            "run": 1,
            "verdict": "child",
            "output_a": "parent",
            "reasoning": "Output B names every region; output A names none.",
        }
    ],
)
FAILED = [
    (1, "The summary names the northern, southern and western regions", 2),
    (2, "The explanation gives the churn rate `7%`", 3),
]


@pytest.fixture
async def recorded(settings, store):
    sim, bodies = Simulator(seed=0), []
    original = sim.handle

    def handle(method, target, headers, raw):
        bodies.append(raw.decode())
        return original(method, target, headers, raw)

    sim.handle = handle
    client = make_client(settings, store, simulator=sim, sleep=no_wait)
    yield client, bodies
    await client.aclose()


async def test_analysis_json_from_the_unblinded_comparison(tmp_path, recorded):
    client, bodies = recorded
    winner, loser = skills(tmp_path)
    out = tmp_path / "v1" / "analysis.json"
    pair = Pairing(
        winner_skill=winner,
        loser_skill=loser,
        winner_label="v1",
        loser_label="v0",
        tally=TALLY,
        failed_expectations=FAILED,
        transcripts={"v1 eval-1 run-1": "Read SKILL.md\n" + "step\n" * 3000},
        costs=[EvalCost(eval_id=1, pass_rate=0.5, tokens=12_345, turns=7.0, runs=3)],
        repeated_work=["bash: python scripts/profile.py data.csv (in 3 evals)"],
    )
    result = await analyze(client, pair, out)
    assert isinstance(result, Analysis)
    data = Analysis.model_validate(read_json(out))
    assert data.comparison_summary.winner == "v1"
    assert data.comparison_summary.winner_skill == "v1/skill"
    assert data.comparison_summary.loser_skill == "v0/skill"
    assert data.improvement_suggestions and data.improvement_suggestions[0].priority == "high"
    assert data.instruction_following is not None and data.transcript_insights is not None
    (body,) = bodies
    text = json.loads(body)["messages"][0]["content"]
    assert str(tmp_path) not in body
    assert {a["path"] for a, _ in parse_tags(section(text, "winner_skill"), "file")} >= {
        "SKILL.md",
        "scripts/check.py",
    }
    assert 'binary="true"' in text and "\\x89PNG" not in text
    assert '<failure eval="2" count="3">' in text
    # The tally is told in the versions' names: the child (v1) won 4, the parent (v0) 1.
    assert "4 won by v1, 1 won by v0" in text and 'winner="v1" output_a="v0" boundary="' in text
    assert "characters cut" in text  # a long transcript is an excerpt
    # The proposer's evidence of cost reaches the analyzer too, and shapes its suggestions.
    assert "eval 1: pass rate 0.50, 12,345 tokens, 7.0 turns" in section(text, "eval_costs")
    assert "scripts/profile.py" in section(text, "repeated_work")
    assert any(
        s.category == "tools" and "scripts/profile.py" in s.suggestion
        for s in data.improvement_suggestions
    )


class Refusing:
    async def structured(self, role, **kw):
        raise StructuredAnswerError(
            role=role, tool_name=kw["tool_name"], first_error="bad", second_error="bad again"
        )


async def test_a_failed_analysis_writes_nothing(tmp_path, log_capture):
    winner, loser = skills(tmp_path)
    out = tmp_path / "v1" / "analysis.json"
    pair = Pairing(winner, loser, "v1", "v0", TALLY, FAILED, {})
    result = await analyze(Refusing(), pair, out)
    assert result is None and not out.exists()
    assert any(e["event"] == "analyze.failed" and e["log_level"] == "warning" for e in log_capture)
