"""How the simulated agent reads a skill the way a model does (docs/simulator.md, "The agent"): a
format the skill rules out is kept out wherever the rule stands, a file the skill names for every
task is read for every task, and an instruction that names a value of the task by what it is
brings that value into the answer. And how the judge reads a prohibition: broken only by what it
forbids. Expected answers are read off the outputs, never built from the world's hidden causes."""

from __future__ import annotations

import random
import re

from optimizer.sim.compose import compose_output, references
from optimizer.sim.latent import World
from optimizer.sim.support import support

WORLD = World()
TASK = "Reply in outputs/reply.md to: 'My order #58213 arrived with a cracked teapot. Refund me.'"
SKILL = [
    "- Open by saying sorry for what went wrong.",
    "- Say plainly what we will do next for the customer.",
    "- Offer a refund or a replacement.",
    "- Sign the reply as the team.",
]
LISTED = re.compile(r"(?m)^[ \t]*(?:[-*•]|\d+[.)])[ \t]+")


def outputs(lines: list[str], task: str = TASK, runs: int = 40) -> list[str]:
    return [compose_output(task, lines, random.Random(k), WORLD) for k in range(runs)]


def test_a_format_the_skill_rules_out_is_kept_out_wherever_the_rule_stands():
    told = outputs(SKILL)
    assert sum(bool(LISTED.search(o)) for o in told) >= 35  # the agent lists as it writes
    padding = [f"- Keep the tone warm in reply number {k} of the week." for k in range(30)]
    for rule in ("- Write the reply with no bullet points.", "Write it in plain prose."):
        for lines in ([rule, *SKILL], [*SKILL, *padding, rule]):
            ruled = outputs(lines)
            kept = sum(not LISTED.search(o) for o in ruled)
            assert kept >= 0.9 * len(ruled), (rule, kept)
            judged = [
                support("Has no bullet points", [{"path": "r.md", "content": o}], TASK).passed
                for o in ruled
            ]
            assert sum(judged) == kept  # the judge reads the same answers as a reader would


def test_a_denied_format_is_read_from_its_words():
    from optimizer.sim.reading import denied_forms

    assert denied_forms("Keep it under 120 words, with no bullet points.") == {"bullets"}
    assert denied_forms("Never use tables.") == {"table"}
    assert denied_forms("Write it as prose.") == {"bullets"}
    assert denied_forms("Use bullet points for the steps.") == frozenset()


def test_a_file_named_for_every_task_is_read_for_every_task_and_one_named_for_some_for_those():
    body = (
        "Our policy is in policy.md.\n"
        "For the Harbour Fog theme, see `themes/harbour-fog.md`.\n"
        "Save the reply to outputs/reply.md, as SKILL.md says.\n"
    )
    assert references(body, "Answer the customer about their late order.") == ["policy.md"]
    assert references(body, "Style the landing page in Harbour Fog.") == [
        "policy.md",
        "themes/harbour-fog.md",
    ]


def test_an_instruction_naming_a_task_value_by_what_it_is_brings_the_value():
    asked = outputs([*SKILL, "- Quote back the order number the customer gave."])
    untold = outputs(SKILL)
    told_rate = sum("#58213" in o for o in asked) / len(asked)
    untold_rate = sum("#58213" in o.split("\n", 3)[-1] for o in untold) / len(untold)
    assert told_rate >= untold_rate + 0.4, (told_rate, untold_rate)
    judged = [
        support("Mentions order #58213", [{"path": "r.md", "content": o}], TASK).passed
        for o in asked
    ]
    assert sum(judged) >= 0.8 * sum("#58213" in o for o in asked)


def test_a_prohibition_is_broken_by_what_it_forbids_not_by_sharing_its_subject():
    calm = "# Reply\n\nCustomers often write in when a parcel is late. We are on it today.\n"
    blaming = "# Reply\n\nThe customer is to blame: they blamed us, but the customer packed it.\n"
    files = [{"path": "r.md", "content": calm}]
    assert support("Does not blame the customer", files, TASK).passed
    files = [{"path": "r.md", "content": blaming}]
    assert not support("Does not blame the customer", files, TASK).passed


def test_one_thing_per_other_thing_pairs_them_and_sets_no_count():
    from optimizer.sim.meaning import counts

    assert counts("Close with a brief note, one bullet per item.") == []
    assert counts("Add a table with one row per column.") == []
    note = ["- Close with a brief note, one bullet per item, naming each colour."]
    listed = [o for o in outputs([*SKILL, *note]) if len(LISTED.findall(o)) >= 2]
    assert len(listed) >= 30  # the agent still lists: no limit of one bullet was read
    assert [c.n for c in counts("Has exactly one heading")] == [1]


def _passes(expectation: str, answers: list[str], task: str = TASK) -> int:
    return sum(support(expectation, [{"path": "a.md", "content": o}], task).passed for o in answers)


def test_a_format_asked_for_is_written_wherever_the_line_stands():
    review = "Review our Notion MCP server and list what to fix in outputs/review.md."
    asked = "- Go through naming, annotations and errors, and number the findings."
    padding = [f"- Keep the tone warm in review number {k} of the week." for k in range(30)]
    expectation = "The findings are a numbered list"
    assert _passes(expectation, outputs(SKILL, review), review) == 0  # listed, never numbered
    for lines in ([asked, *SKILL], [*SKILL, *padding, asked]):
        assert _passes(expectation, outputs(lines, review), review) >= 36
    ruled = [asked, "- Never use numbered lists."]
    assert _passes(expectation, outputs(ruled, review), review) == 0  # ruled out wins


def test_a_number_of_questions_asked_by_the_skill_or_the_task_is_written():
    from optimizer.sim.meaning import measure

    task = "Help me start a design doc for rate limiting our public API in outputs/doc.md."
    asked = "- Open by asking between five and ten questions and number them."
    before = outputs(SKILL, task)
    assert _passes("Asks between 5 and 10 clarifying questions", before, task) == 0
    told = outputs([asked, *SKILL], task)
    held = [5 <= measure(o, "questions") <= 10 for o in told]
    assert sum(held) >= 36
    assert _passes("Asks between 5 and 10 clarifying questions", told, task) == sum(held)
    assert _passes("The questions are numbered", told, task) >= 36
    tasked = "Write 10 evaluation questions for our Jira MCP server in outputs/evals.xml."
    answers = outputs(SKILL, tasked)
    assert _passes("Contains exactly 10 questions", answers, tasked) >= 30


def test_a_range_is_read_as_two_bounds_and_a_colour_is_no_count():
    from optimizer.sim.meaning import counts

    def said(text: str) -> list[str]:
        return [c.words() for c in counts(text)]

    assert said("Asks between 5 and 10 clarifying questions") == [
        ">= 5 questions",
        "<= 10 questions",
    ]
    assert said("give a numbered list of five to twenty ideas") == [">= 5 bullets", "<= 20 bullets"]
    assert said("Write 10 evaluation questions for our Jira server") == ["== 10 questions"]
    assert said("Use 3-5 bullets") == [">= 3 bullets", "<= 5 bullets"]
    assert said("Uses #d97757 for headings") == []
    assert said("Keep it under 200 words per section") == ["< 200 words"]
