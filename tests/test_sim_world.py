"""The simulated world does not reward restating what the judge checks (DESIGN §15): a checklist
of expectations gains no more than clear instructions for the behaviours it names, copied values
gain on their own eval only, general instructions gain on train and sealed evals alike, harmful
edits cost, and no passed expectation's evidence quotes the skill. Skills are read from folders
(a copy of the example and a made-up one), as the loop reads them."""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path

import pytest
from test_sim import TASK, client_for, forced, run_executor, tool_input

from optimizer.sim import Simulator, latent
from optimizer.sim.compose import compose_output
from optimizer.sim.support import support
from optimizer.sim.text import bullet_text, bullets, split_front_matter, stems
from optimizer.tags import tag

ROOT = Path(__file__).resolve().parents[1]
RUNS = 150  # per eval and skill: a pass rate's sampling sd is about 0.02 over two evals
NOISE = 0.04

INCIDENT_SKILL = """---
name: incident-update
description: Writes a short status update about a service incident for the whole company.
---
# Incident update

- Write the update in markdown at the path the user gives.
- Keep it to one screen.
"""
# Values sit in the input files (not in the prompts), as in a real incident; train and sealed evals
# check the same kinds of thing with different values.
INCIDENT_EVALS = {
    "skill_name": "incident-update",
    "evals": [
        {"id": 1, "prompt": "Write a status update on this morning's database outage from the "
         "notes in inputs/db.md to outputs/update.md.", "files": ["inputs/db.md"],
         "expectations": ["The update states the 40-minute duration", "The update names the fix",
                          "The update says which customers were affected",
                          "The update ends with next steps and owners"]},
        {"id": 2, "prompt": "Write a status update on the login failures from inputs/login.md to "
         "outputs/update.md.", "files": ["inputs/login.md"],
         "expectations": ["The update states that 1200 sign-ins failed",
                          "The update explains the root cause", "The update says who was affected",
                          "The update lists the next steps"]},
        {"id": 3, "prompt": "Write a status update on the stalled payment queue from "
         "inputs/queue.md to outputs/update.md.", "files": ["inputs/queue.md"],
         "expectations": ["The update states the 3-hour delay", "The update names the fix",
                          "The update says which customers were affected",
                          "The update ends with next steps and owners"]},
        {"id": 4, "prompt": "Write a status update on the broken search index from "
         "inputs/search.md to outputs/update.md.", "files": ["inputs/search.md"],
         "expectations": ["The update gives the 15% error rate", "The update explains the root cause",
                          "The update says who was affected", "The update lists the next steps"]},
    ],
}
TRAIN, SEALED = (1, 2), (3, 4)


def made_up_skill(tmp_path: Path) -> Path:
    folder = tmp_path / "incident-update"
    (folder / "evals").mkdir(parents=True)
    (folder / "SKILL.md").write_text(INCIDENT_SKILL)
    (folder / "evals" / "evals.json").write_text(json.dumps(INCIDENT_EVALS))
    return folder


def example_skill(tmp_path: Path) -> Path:
    return Path(shutil.copytree(ROOT / "examples" / "csv-report", tmp_path / "csv-report"))


def load(folder: Path) -> tuple[str, list[dict]]:
    return ((folder / "SKILL.md").read_text(),
            json.loads((folder / "evals" / "evals.json").read_text())["evals"])


def rate(skill: str, evals: list[dict], world: latent.World | None = None) -> float:
    """The judged pass rate of a skill over evals, run and judged by the world's own rules."""
    world = world or latent.World()
    lines = bullets(split_front_matter(skill)[1])
    passed = total = 0
    for ev in evals:
        for k in range(RUNS):
            output = compose_output(ev["prompt"], lines, random.Random(k), world)
            files = [{"path": "outputs/answer.md", "content": output}]
            for text in ev["expectations"]:
                passed += support(text, files, ev["prompt"], world).passed
                total += 1
    return passed / total


def with_lines(skill: str, lines: list[str], heading: str = "") -> str:
    return skill.rstrip("\n") + "\n" + (f"\n## {heading}\n\n" if heading else "") + \
        "\n".join(lines) + "\n"


def checklist(skill: str, evals: list[dict]) -> str:
    """The restating edit of the issue: one "Make sure that" line per expectation, at the end."""
    lines = [f"- Make sure that {e[0].lower()}{e[1:]}" for ev in evals for e in ev["expectations"]]
    return with_lines(skill, lines, "Checklist")


def clear_equivalent(skill: str, checklist_skill: str, world: latent.World) -> str:
    """The same behaviours the checklist names, asked for clearly and early: each habit it reaches
    by its instruction, each item it names by a plain line, and nothing else."""
    body = split_front_matter(checklist_skill)[1]
    added = bullets(body)[len(bullets(split_front_matter(skill)[1])):]
    habits: dict[str, str] = {}
    items: list[str] = []
    for line in added:
        ask = latent.read_instruction(world, bullet_text(line))
        habits.update({h.key: h.instruction for h, _ in ask.habits})
        items += [i for i in ask.items if i not in items]
    lines = [f"- {text}" for text in habits.values()]
    lines += [f"- Give {', '.join(f'`{i}`' for i in items)} in the answer."] if items else []
    front, rest = split_front_matter(skill)
    first = rest.index("\n- ")  # before the skill's own instructions: early, as a careful author
    return f"---\n{front}\n---" + rest[:first] + "\n" + "\n".join(lines) + rest[first:]


def split(evals: list[dict], ids: tuple[int, ...]) -> list[dict]:
    return [e for e in evals if e["id"] in ids]


@pytest.mark.parametrize("make", [made_up_skill, example_skill])
def test_a_restating_checklist_gains_nothing_beyond_the_behaviours_it_names(tmp_path, make):
    skill, evals = load(make(tmp_path))
    world = latent.World()
    train = split(evals, TRAIN) if make is made_up_skill else evals[:4]
    sealed = split(evals, SEALED) if make is made_up_skill else evals[4:]
    restated = checklist(skill, train)
    clear = clear_equivalent(skill, restated, world)
    for evs in (train, sealed):
        # Restating is at best as good as asking clearly for what it names; never better.
        assert rate(restated, evs, world) <= rate(clear, evs, world) + NOISE
    assert rate(restated, train, world) <= latent.ceiling(
        [(e["id"], e["expectations"]) for e in train], world).mean + NOISE


def test_a_checklist_of_what_no_behaviour_causes_gains_nothing(tmp_path):
    # No hidden causes in this world: an expectation without cue words is the task's alone, and a
    # chart property on a markdown answer is one of them.
    world = latent.World(transfer=0.0)
    bound = ["The update thanks the on-call team", "The update mentions the status page link",
             "The chart is accessible to colour-blind readers"]
    assert all(latent.need(world, e).habit is None and not latent.need(world, e).items for e in bound)
    evals = [{**e, "expectations": bound} for e in INCIDENT_EVALS["evals"]]
    skill = (made_up_skill(tmp_path) / "SKILL.md").read_text()
    base, restated = rate(skill, evals, world), rate(checklist(skill, evals[:1]), evals, world)
    assert abs(restated - base) <= 0.02 and base > 0  # met sometimes, by the task alone


def test_copied_values_gain_on_train_only_and_a_general_instruction_on_both(tmp_path):
    skill, evals = load(made_up_skill(tmp_path))
    train, sealed = split(evals, TRAIN), split(evals, SEALED)
    copied = with_lines(skill, ["- State 40 and 1200 in the answer."])  # the proposer's copy
    general = with_lines(skill, [f"- {h.instruction}" for h in latent.HABITS
                                 if h.key in ("figures", "causes", "impact", "actions")])
    base = {n: rate(skill, evs) for n, evs in (("train", train), ("sealed", sealed))}
    gains = {name: {n: rate(s, evs) - base[n] for n, evs in (("train", train), ("sealed", sealed))}
             for name, s in (("copied", copied), ("general", general))}
    # One value expectation of four per eval: a copy that is followed gains about 0.2 there.
    assert gains["copied"]["train"] >= 0.12 and abs(gains["copied"]["sealed"]) <= 0.02
    assert gains["general"]["train"] >= 0.3 and gains["general"]["sealed"] >= 0.3


def test_harmful_edits_cost_and_the_best_skill_reaches_the_ceiling(tmp_path):
    skill, evals = load(made_up_skill(tmp_path))
    needed = [h for h in latent.HABITS if h.key in ("figures", "causes", "impact", "actions")]
    best = with_lines(skill, [f"- {h.instruction}" for h in needed])
    harmed = with_lines(best, [f"- {needed[1].against}"])
    padded = with_lines(best, [f"- Check the spelling of word {n} before you save." for n in range(20)])
    limit = latent.ceiling([(e["id"], e["expectations"]) for e in evals]).mean
    assert rate(skill, evals) < rate(best, evals) <= limit + 0.02
    assert rate(best, evals) >= limit - 0.05  # four clear lines in a short skill: near the limit
    assert rate(harmed, evals) <= rate(best, evals) - 0.1
    assert rate(padded, evals) <= rate(best, evals) - 0.1  # a long skill costs attention
    # A world where more expectations are beyond reach has a lower ceiling.
    harder = latent.ceiling([(e["id"], e["expectations"]) for e in evals],
                            latent.World(infeasible=0.9)).mean
    assert harder < limit


def test_every_habit_is_named_and_negated_clearly_by_its_own_sentences():
    world = latent.World()
    for habit in latent.HABITS:
        asks = [latent.read_instruction(world, c) for c in latent.clauses(habit.instruction)]
        assert (habit, 1.0) in [pair for a in asks if not a.negative for pair in a.habits]
        against = [latent.read_instruction(world, c) for c in latent.clauses(habit.against)]
        assert (habit, 1.0) in [pair for a in against if a.negative for pair in a.habits]
        assert not stems(habit.text) & habit.cues  # a section never restates its instruction


def _restates(quote: str, skill: str) -> bool:
    """A quoted passage that holds a line of the skill, or most of one line's content words."""
    for line in bullets(split_front_matter(skill)[1]):
        text, words = bullet_text(line), stems(bullet_text(line))
        if len(text) >= 12 and text in quote:
            return True
        if len(words) >= 3 and len(words & stems(quote)) / len(words) >= 0.6:
            return True
    return False


async def test_no_passed_expectation_quotes_the_skill_over_a_hundred_graded_runs(tmp_path):
    """Through the SDK, the executor and the grader roles: the checklist skill (the worst case)
    with the made-up evals' expectations, 112 graded runs (the task is the one the listed skill
    is called for)."""
    skill, evals = load(made_up_skill(tmp_path))
    restated = checklist(skill, evals).replace("name: incident-update", "name: csv-report")
    client = client_for(Simulator(seed=4, judge_noise=0.1))
    graded = passes = 0
    for ev in evals:
        for sample in range(28):
            output = await run_executor(client, restated, sample)
            prompt = "\n".join([
                tag("task", TASK),
                tag("expectations", "\n".join(tag("expectation", e) for e in ev["expectations"])),
                tag("outputs", tag("file", output, path="outputs/report.md")),
            ])
            grading = await tool_input(client, forced("grader", "submit_grading", prompt,
                                                      sample=sample))
            graded += 1
            for result in grading["expectations"]:
                if result["passed"]:
                    passes += 1
                    quotes = re.findall(r'"([^"]+)"', result["evidence"])
                    assert quotes and all(q in output for q in quotes), result
                    assert not any(_restates(q, restated) for q in quotes), result
    assert graded >= 100 and passes >= 50


def test_the_simulator_states_its_worlds_ceiling_for_any_evals():
    evals = [(str(e["id"]), e["expectations"]) for e in INCIDENT_EVALS["evals"]]
    default, other = Simulator().ceiling(evals), Simulator(world=2).ceiling(evals)
    assert default == latent.ceiling(evals) and other == latent.ceiling(evals, latent.World(world=2))
    assert 0 < default.mean < 1 and default.mean != other.mean and set(default.per_eval) == {"1", "2", "3", "4"}
