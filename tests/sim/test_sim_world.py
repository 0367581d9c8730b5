"""The simulated world cannot be bought (docs/design.md §15, docs/simulator.md): on three skills
written in other styles than the examples, with evals in plain sentences and clear instructions
written by hand (tests/fixtures/foreign), irrelevant padding, a line of cue words, a line of
headings and a verbatim checklist gain nothing over what clear instructions give; the judge
passes only content that satisfies an expectation; the proposer writes from what it is shown.
No expected answer here is built through the world's hidden causes."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from optimizer.sim import ceiling, latent
from optimizer.sim.compose import compose_output, instruction_lines
from optimizer.sim.expected import expectations, hand_written, pass_rate
from optimizer.sim.support import support
from optimizer.sim.world import Skill, load_chance

ROOT = Path(__file__).resolve().parents[2]
FOREIGN = ROOT / "tests" / "fixtures" / "foreign"
RUNS = 100  # per eval: a pass rate over ~20 expectations moves by about 0.01 between seeds
NOISE = 0.03

GARDEN = [
    "Water the tomatoes early in the morning so the leaves dry before noon.",
    "Mulch keeps the soil cool and holds moisture through the dry weeks of summer.",
    "Prune the roses back to an outward facing bud in late winter.",
    "Sow beans directly into warm soil after the last frost has passed.",
    "Slugs come out after rain, so check the lettuce beds in the evening.",
    "Stake the dahlias before they grow tall enough to fall over in the wind.",
    "Rainwater from the shed roof fills the barrel by the greenhouse door.",
]


SKILLS = hand_written(FOREIGN)
# The three skills the padding test was first measured on; each takes about a minute, so the
# other five are measured by bench/world_redteam.py (clear x10 and x50 are padding too).
PADDED = [s for s in SKILLS if s[0] in ("team-updates", "brand-styling", "webapp-checks")]
# Skills whose clear instructions say in other words what the expectations check ("their money
# back or a new item" for "a refund or a replacement"): the world's lexicon folds too few
# paraphrases for them to reach it (docs/simulator.md, "What it does not model").
LEXICON_GAP = ("doc-coauthoring", "mcp-builder", "theme-factory")
GAP = pytest.mark.xfail(reason="the world's lexicon misses this skill's paraphrases", strict=False)
CLEAR = [pytest.param(*s, id=s[0], marks=[GAP] if s[0] in LEXICON_GAP else []) for s in SKILLS]


def add(skill: str, lines: list[str]) -> str:
    return skill.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"


def garden(n: int) -> list[str]:
    return [GARDEN[k % len(GARDEN)].replace(".", f" (row {k})." if k else ".") for k in range(n)]


@pytest.mark.slow
@pytest.mark.parametrize("name,skill,clear,evals", PADDED, ids=[s[0] for s in PADDED])
def test_irrelevant_padding_never_raises_the_score_however_long_and_however_laid_out(
    name, skill, clear, evals
):
    v0 = pass_rate(skill, evals, runs=RUNS)
    for n in (20, 60, 166):
        assert pass_rate(add(skill, [f"- {s}" for s in garden(n)]), evals, runs=RUNS) <= v0 + NOISE
        assert pass_rate(add(skill, [" ".join(garden(n))]), evals, runs=RUNS) <= v0 + NOISE
    # Attention has no floor: more padding always costs clear instructions more.
    helped = add(skill, clear)
    costs = [
        pass_rate(add(helped, [f"- {s}" for s in garden(n)]), evals, runs=RUNS)
        for n in (0, 40, 160)
    ]
    assert costs[0] > costs[1] > costs[2]


@pytest.mark.slow
@pytest.mark.parametrize("name,skill,clear,evals", CLEAR)
def test_cue_words_headings_and_checklists_buy_nothing_clear_instructions_do_not(
    name, skill, clear, evals
):
    v0 = pass_rate(skill, evals, runs=RUNS)
    clearly = pass_rate(add(skill, clear), evals, runs=RUNS)
    assert clearly >= v0 + 0.15  # clear instructions help where a skill can help
    cues = (
        "summary outcome findings risks gaps caveats next steps owners cause fix impact "
        "customers affected structure sections order plain jargon figures values exact"
    )
    headings = (
        "`## Summary` `## Notes` `## Next steps` `## Cause and fix` `## Impact` `## Sections`"
    )
    checklist = [f"- Make sure that: {t}" for ev in evals for t in expectations(ev)]
    for gamed in ([f"- {cues}"], [f"- {headings}"], [cues], checklist):
        assert pass_rate(add(skill, gamed), evals, runs=RUNS) <= clearly + NOISE


def test_instructions_meet_expectations_by_meaning_not_by_their_words():
    world = latent.World()
    task = "Write this week's update for the payments team to outputs/update.md."
    expectation = "It says which customers were affected by the checkout errors"
    asked = {
        "verbatim": "- Make sure that it says which customers were affected by the checkout errors.",
        "paraphrase": "- Tell readers which clients were hit, and how.",
    }
    rates = {}
    for kind, line in asked.items():
        met = 0
        for k in range(300):
            output = compose_output(task, [line], random.Random(k), world)
            met += support(expectation, [{"path": "u.md", "content": output}], task, world).passed
        rates[kind] = met / 300
    assert abs(rates["verbatim"] - rates["paraphrase"]) <= 0.08, rates


# --- the judge checks content -------------------------------------------------------------------

REPORT = """# Incident INC-4411

The checkout service failed for 40 minutes on Tuesday.

- Payments in the EU region were declined.
- Card refunds were delayed.
- The on-call team restored service at 10:40.

Brand colour used for the banner: #D97757.
"""
LONG = REPORT + "\n" + " ".join(["More detail follows about the timeline."] * 40) + "\n"
PROBES = [
    # (expectation, output, passes): a table a person can read, written by hand.
    ("Mentions ticket INC-4411", REPORT, True),
    ("Mentions ticket INC-4412", REPORT, False),
    ("States that 1200 sign-ins failed", REPORT, False),
    ("Gives the 40 minutes the outage lasted", REPORT, True),
    ("Uses the brand colour #d97757", REPORT, True),
    ("Uses the brand colour #141413", REPORT, False),
    ("Uses exactly 3 bullet points", REPORT, True),
    ("Uses exactly 5 bullet points", REPORT, False),
    ("Has at most 4 bullet points", REPORT, True),
    ("Is under 200 words", REPORT, True),
    ("Is under 200 words", LONG, False),
    ("Is at most 20 words", REPORT, False),
    ("Does not speculate about the root cause", REPORT, True),
    (
        "Does not speculate about the root cause",
        REPORT + "\nThe root cause was probably a bad deploy.\n",
        False,
    ),
    ("Does not mention ticket INC-4411", REPORT, False),
    ("Never names a customer", REPORT, True),
    ("The update says refunds were delayed", REPORT, True),
    ("The update says which customers were affected", "# Update\n\n## Impact\n", False),
    ("The update has a `## Impact` section", "# Update\n\n## Impact\n", False),
    (
        "The update has a `## Impact` section",
        "# Update\n\n## Impact\nEU card payments failed.\n",
        True,
    ),
]


@pytest.mark.parametrize("expectation,output,passes", PROBES)
def test_the_judge_passes_only_what_the_output_satisfies(expectation, output, passes):
    task = "Write an update on the checkout outage to outputs/update.md."
    found = support(expectation, [{"path": "outputs/update.md", "content": output}], task)
    assert found.passed is passes, found.evidence


def test_a_count_the_skill_sets_is_kept_and_extra_sections_cost_focus():
    world = latent.World()
    task = "Write the weekly update for the search team to outputs/update.md."
    short = ["- Keep the update under 60 words."]
    for k in range(20):
        output = compose_output(task, short, random.Random(k), world)
        assert support("Is under 60 words", [{"path": "u", "content": output}], task, world).passed
    assert latent.focus(world, 8) < latent.focus(world, 4) < latent.focus(world, 3) == 1.0


def test_prose_is_read_as_instructions_and_headings_and_code_are_not():
    body = "Intro line one. Second sentence here.\n\n## Steps\n\n- Do a thing.\n\n```\nx = 1\n```\n"
    assert instruction_lines(body) == ["Intro line one.", "Second sentence here.", "- Do a thing."]


def test_a_skill_is_loaded_by_what_its_description_means():
    skill = Skill("team-updates", "Writes internal communications such as weekly progress updates.")
    assert load_chance("Write the payments team's weekly update from the notes.", skill) >= 0.9
    assert load_chance("Draft this week's progress update for the data team.", skill) >= 0.9
    assert load_chance("Plot a histogram of the rainfall data in data.csv.", skill) <= 0.1


@pytest.mark.slow
def test_the_simulator_states_its_worlds_ceiling_for_any_evals():
    name, skill, clear, evals = SKILLS[0]
    listed = [(str(e["id"]), expectations(e), e["prompt"]) for e in evals]
    default = ceiling.ceiling(listed)
    assert 0 < default.mean < 1 and set(default.per_eval) == {str(e["id"]) for e in evals}
    # Where habits cause expectations, the world's capabilities set the ceiling.
    habitual = [
        ("1", ["The update explains the root cause", "Ends with the next steps and owners"])
    ]
    assert ceiling.ceiling(habitual).mean != ceiling.ceiling(habitual, latent.World(world=2)).mean
    # The clear instructions stay at or below the best possible skill.
    assert pass_rate(add(skill, clear), evals, runs=RUNS) <= default.mean + NOISE


def test_the_proposer_writes_from_the_failures_words_never_from_their_hidden_cause():
    from optimizer.sim.instruction import instruction_for

    failure = "The update says which customers were affected by the outage"
    fix = instruction_for(failure)
    assert fix == "- Say which customers were affected by the outage."
    assert all(h.instruction not in fix for h in latent.HABITS)
    # One eval's value is left out; a value several evals fail on is a convention and stays.
    assert instruction_for("The update states that 1200 sign-ins failed") == (
        "- State that sign-ins failed."
    )
    assert "#d97757" in (instruction_for("Headings are coloured #d97757", {"#d97757"}) or "")
    # Text that looks like a placeholder is text: never read as a quoted part, never a crash.
    assert instruction_for("The report mentions q0q and `x`") == "- Mention q0q and `x`."
    assert instruction_for("The `a` has q1q") == "- Give the `a` q1q."
    # An acronym is no verb: the author's instruction is read from "declares".
    assert instruction_for("The CSS declares a brand variable") == "- Declare a brand variable."


def test_a_quoted_value_two_evals_fail_on_is_a_convention_as_a_bare_one_is():
    from optimizer.sim.proposer import _shared_facts

    failed = [("Names `0.9.2` as the version", 1, "1"), ("Mentions `0.9.2`", 2, "2")]
    assert _shared_facts(failed) == {"0.9.2"}
    assert _shared_facts(failed[:1]) == set()


def test_no_role_but_the_agent_and_the_judge_reads_the_worlds_hidden_causes():
    """The proposer and the analyzer write from what a real one sees (the skill, the gradings'
    words); only the agent (compose) and the judge (support) act on the world's hidden causes."""
    hidden = re.compile(
        r"\b(?:World|HABITS|habits|read_instruction|route|need|draw|capability|base_rate|"
        r"named_habits|knobs\.world|\.against|\.cues)\b"
    )
    for role in ("proposer.py", "analyst.py", "drafter.py"):
        source = (Path(latent.__file__).parent / role).read_text()
        code = re.sub(r'""".*?"""|#.*', "", source, flags=re.S)
        assert not hidden.findall(code), (role, sorted(set(hidden.findall(code))))
