"""The Messages API simulator, driven through the real anthropic SDK over its transport (and once
over the loopback server): protocol, errors, determinism, and a world where skills matter."""

from __future__ import annotations

import asyncio
import re
from dataclasses import asdict

import anthropic
import httpx2
import pytest
import yaml

from optimizer.config import Sim
from optimizer.sim import Knobs, Service, Simulator, latent, serve
from optimizer.sim.meaning import negated
from optimizer.sim.text import bullets
from optimizer.tags import tag

SKILL = """---
name: csv-report
description: Summarise CSV sales files into a markdown report with totals per region.
---
# CSV report

Read the CSV first.

- Start the report with a `## Summary` heading.
- Give the `total_revenue` figure for every region.
- End with a `## Method` section.
"""
TASK = "Summarise the sales CSV into a markdown report at outputs/report.md with totals per region."
DESCRIPTION = "Summarise CSV sales files into a markdown report with totals per region."
LISTING = (
    "<available_skills>\n"
    f'<skill name="csv-report">{DESCRIPTION}</skill>\n'
    '<skill name="pdf-forms">Fill in PDF forms and flatten their fields.</skill>\n'
    "</available_skills>"
)
SKILL_TOOL = {
    "name": "Skill",
    "description": "Load a skill's instructions.",
    "input_schema": {
        "type": "object",
        "properties": {"skill": {"type": "string"}},
        "required": ["skill"],
    },
}
EXECUTOR_TOOLS = [
    {"type": "bash_20250124", "name": "bash"},
    {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
    SKILL_TOOL,
]
GRADING_SCHEMA = {
    "type": "object",
    "properties": {
        "expectations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "passed": {"type": "boolean"},
                    "evidence": {"type": "string"},
                },
                "required": ["text", "passed", "evidence"],
            },
        },
        "summary": {"type": "object"},
        "user_notes_summary": {
            "type": "object",
            "properties": {"uncertainties": {"type": "array"}},
        },
    },
    "required": ["expectations", "summary", "user_notes_summary"],
}


def client_for(sim: Simulator) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        api_key="sk-test",
        base_url="http://sim",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=sim.transport()),
    )


def forced(role: str, tool: str, prompt: str, schema: dict | None = None, sample: int = 0) -> dict:
    return {
        "model": "claude-opus-4-8",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": prompt}],
        "tools": [
            {"name": tool, "description": tool, "input_schema": schema or {"type": "object"}}
        ],
        "tool_choice": {"type": "tool", "name": tool},
        "extra_headers": {"x-optimizer-role": role, "x-optimizer-sample": str(sample)},
    }


async def tool_input(client: anthropic.AsyncAnthropic, request: dict) -> dict:
    message = await client.messages.create(**request)
    assert message.stop_reason == "tool_use"
    return next(b for b in message.content if b.type == "tool_use").input


async def run_executor(
    client: anthropic.AsyncAnthropic, skill: str | None, sample: int, task: str = TASK
) -> str:
    """A tiny agent loop: returns the text of the file the executor created."""
    system = "You are an agent working in /workspace." + (f"\n{LISTING}" if skill else "")
    tools = EXECUTOR_TOOLS if skill else EXECUTOR_TOOLS[:2]
    messages: list[dict] = [{"role": "user", "content": task}]
    written = ""
    for _ in range(6):
        reply = await client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=4096,
            system=system,
            tools=tools,
            messages=messages,
            extra_headers={"x-optimizer-role": "executor", "x-optimizer-sample": str(sample)},
        )
        messages.append(
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in reply.content],
            }
        )
        if reply.stop_reason != "tool_use":
            return written
        results = []
        for block in (b for b in reply.content if b.type == "tool_use"):
            if block.name == "Skill":
                assert block.input == {"skill": "csv-report"}
                output = skill or ""
            else:
                assert block.input["path"] == "/workspace/outputs/report.md"
                written, output = block.input["file_text"], "File created."
            results.append({"type": "tool_result", "tool_use_id": block.id, "content": output})
        messages.append({"role": "user", "content": results})
    raise AssertionError("the executor never finished")


def apply_edit(text: str, edit: dict) -> str:
    if edit["action"] == "write":
        return edit["content"]
    assert edit["action"] == "replace" and text.count(edit["old"]) == 1
    return text.replace(edit["old"], edit["new"])


def front_matter(text: str) -> str:
    return text.split("---\n")[1]


# --- protocol and determinism -------------------------------------------------------------------


async def test_same_request_and_sample_give_the_same_reply_and_samples_differ():
    sim = Simulator(seed=7)
    client = client_for(sim)
    first = await run_executor(client, SKILL, sample=0)
    again = await run_executor(client_for(Simulator(seed=7)), SKILL, sample=0)
    others = {await run_executor(client, None, sample=s) for s in range(6)}
    assert first == again and first.startswith("# Summarise")
    assert len(others) > 1
    assert sim.stats.by_role["executor"] > 0 and sim.stats.in_flight == 0


async def test_streaming_tool_use_is_parsed_by_the_sdk_like_the_plain_reply():
    sim = Simulator(seed=1)
    client = client_for(sim)
    request = dict(
        model="claude-sonnet-4-6",
        max_tokens=4096,
        system=LISTING,
        tools=EXECUTOR_TOOLS,
        messages=[{"role": "user", "content": TASK}],
        extra_headers={"x-optimizer-role": "executor", "x-optimizer-sample": "1"},
    )
    plain = await client.messages.create(**request)
    async with client.messages.stream(**request) as stream:
        streamed = await stream.get_final_message()
    assert streamed.stop_reason == plain.stop_reason == "tool_use"
    assert [b.model_dump() for b in streamed.content] == [b.model_dump() for b in plain.content]
    assert streamed.content[0].input == {"skill": "csv-report"}


async def test_prompt_cache_usage_is_a_function_of_the_request_alone():
    """A cached prefix is read by most requests and written by the others; which, is drawn from
    the request itself, so the order calls arrive in never changes what any of them costs."""
    system = [
        {
            "type": "text",
            "text": "Long instructions. " * 500,  # 2,375 tokens, past the model's 2,048
            "cache_control": {"type": "ephemeral"},
        }
    ]
    kwargs = dict(model="claude-sonnet-4-6", max_tokens=50, system=system)
    asks = [[{"role": "user", "content": f"question {i}"}] for i in range(40)]

    async def usages(order: list[int]) -> dict[int, tuple]:
        client = client_for(Simulator())
        out = {}
        for i in order:
            u = (await client.messages.create(**kwargs, messages=asks[i])).usage
            out[i] = (u.input_tokens, u.cache_creation_input_tokens, u.cache_read_input_tokens)
        return out

    forward = await usages(list(range(40)))
    assert forward == await usages(list(reversed(range(40))))
    reads = [u for u in forward.values() if u[2] > 2300 and u[1] == 0]
    writes = [u for u in forward.values() if u[1] > 2300 and u[2] == 0]
    assert len(reads) + len(writes) == 40 and 20 <= len(reads) <= 38
    assert all(0 < u[0] < 20 for u in forward.values())  # only the question is uncached input


async def test_a_prefix_below_the_models_cacheable_minimum_is_billed_as_input():
    # About 1,070 tokens marked: past Opus 4.8's minimum of 1,024, short of Sonnet 4.6's 2,048.
    system = [{"type": "text", "text": "Short. " * 600, "cache_control": {"type": "ephemeral"}}]
    client = client_for(Simulator())
    for model, cached in (("claude-opus-4-8", True), ("claude-sonnet-4-6", False)):
        usage = (
            await client.messages.create(
                model=model,
                max_tokens=50,
                system=system,
                messages=[{"role": "user", "content": "q"}],
            )
        ).usage
        assert (usage.cache_creation_input_tokens + usage.cache_read_input_tokens > 0) is cached
        assert (usage.input_tokens > 900) is not cached


async def test_each_turn_of_a_conversation_marked_at_its_end_reads_the_turns_before_it():
    """The service looks back from a breakpoint for a prefix an earlier request wrote: a
    conversation marked at its last block reads its earlier turns, written by the turn before."""
    client = client_for(Simulator())
    turns: list[dict] = []
    read = []
    for number in range(12):
        text = f"tool result {number}: " + "data " * 600  # 3,000 characters a turn
        turns.append({"role": "user", "content": [{"type": "text", "text": text}]})
        marked = [
            *turns[:-1],
            {
                **turns[-1],
                "content": [{**turns[-1]["content"][0], "cache_control": {"type": "ephemeral"}}],
            },
        ]
        usage = (
            await client.messages.create(model="claude-sonnet-4-6", max_tokens=50, messages=marked)
        ).usage
        read.append(usage.cache_read_input_tokens)
        turns.append({"role": "assistant", "content": [{"type": "text", "text": f"step {number}"}]})
    # From the turn whose prefix first passes 2,048 tokens on, most turns read what came before.
    assert read[0] == 0 and sum(1 for r in read[3:] if r > 0) >= 6
    # Unmarked, the same conversation reads nothing.
    plain = await client.messages.create(
        model="claude-sonnet-4-6", max_tokens=50, messages=turns[:-1]
    )
    assert plain.usage.cache_read_input_tokens == 0


async def test_in_flight_requests_are_counted_for_the_concurrency_check():
    sim = Simulator(service=Service(latency_ms=30))
    client = client_for(sim)
    gate = asyncio.Semaphore(3)

    async def call(i: int) -> None:
        async with gate:
            await client.messages.create(
                model="claude-opus-4-8",
                max_tokens=10,
                messages=[{"role": "user", "content": str(i)}],
            )

    await asyncio.gather(*(call(i) for i in range(9)))
    assert sim.stats.max_in_flight == 3 and sim.stats.calls == 9 and sim.stats.in_flight == 0


# --- the executor world -------------------------------------------------------------------------


async def test_a_skill_with_snippets_makes_them_appear_far_more_often():
    client = client_for(Simulator(seed=3))
    wanted = ("## Summary", "total_revenue", "## Method")

    async def rate(skill: str | None) -> float:
        files = [await run_executor(client, skill, sample=s) for s in range(30)]
        return sum(all(w in f for w in wanted) for f in files) / len(files)

    with_skill, without = await rate(SKILL), await rate(None)
    # `## Summary` is a heading the summary habit writes: it comes with that habit's capability
    # (0.81 in world 0), so all three together: about 0.95 (the skill is called) x 0.97^3 x 0.81.
    assert with_skill >= 0.6 and without <= 0.1


async def test_a_negative_instruction_suppresses_its_snippet():
    skill = SKILL.replace("- End with", "- Never include `total_revenue` lines.\n- End with")
    client = client_for(Simulator(seed=4))
    files = [await run_executor(client, skill, sample=s) for s in range(10)]
    assert (
        sum("total_revenue" in f for f in files) <= 2 and sum("## Method" in f for f in files) >= 7
    )


async def test_claude_code_shaped_requests_are_recognised_without_our_headers():
    """As the Claude Code CLI sends them: no role header, its own tools, a working directory, the
    skill list in a mid-conversation system message, skill content as a user text block."""
    client = client_for(Simulator(seed=1))
    tools = [
        {"name": n, "description": n, "input_schema": {"type": "object"}}
        for n in ("Bash", "Edit", "Read", "Skill", "Write")
    ]
    listing = (
        "The following skills are available for use with the Skill tool:\n\n"
        f"- csv-report: {DESCRIPTION}\n- update-config: Configure the harness via settings.json.\n"
    )
    messages = [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "<system-reminder>\nToday's date is 2026-11-21.\n</system-reminder>",
                },
                {"type": "text", "text": TASK},
            ],
        },
        {"role": "system", "content": listing},
    ]
    request = dict(
        model="claude-sonnet-4-6",
        max_tokens=64000,
        system=[
            {"type": "text", "text": "You are Claude Code.\n - Primary working directory: /proj"}
        ],
        tools=tools,
    )
    for turn in range(3):
        async with client.messages.stream(**request, messages=messages) as stream:
            reply = await stream.get_final_message()
        block = reply.content[-1]
        messages.append(
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in reply.content],
            }
        )
        if turn == 0:
            assert block.name == "Skill" and block.input == {"skill": "csv-report"}
            body = SKILL.split("---\n", 2)[2]
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": block.id,
                            "content": "Launching skill: csv-report",
                        },
                        {
                            "type": "text",
                            "text": f"Base directory for this skill: /proj/.claude/skills/csv-report\n\n{body}",
                        },
                    ],
                }
            )
        elif turn == 1:
            assert block.name == "Write" and block.input["file_path"] == "/proj/outputs/report.md"
            assert "total_revenue" in block.input["content"]
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": block.id,
                            "content": "File created successfully",
                        }
                    ],
                }
            )
    assert reply.stop_reason == "end_turn" and reply.content[0].type == "text"


# --- judges ---------------------------------------------------------------------------------------


def grading_prompt(output: str) -> str:
    expectations = "\n".join(
        [
            tag(
                "expectation",
                "The report has a `## Summary` section with totals per region",
                id="E1",
            ),
            tag(
                "expectation", "The report gives the `median_order` value for each quarter", id="E2"
            ),
            tag("expectation", "Looks good", id="E3"),
        ]
    )
    rubric = (
        '<dimension name="regional_totals" weight="2.0">Totals per region are given</dimension>'
    )
    return "\n".join(
        [
            tag("task", TASK),
            tag("expectations", expectations),
            tag("rubric", rubric),
            tag("outputs", tag("file", output, path="outputs/report.md")),
            tag("transcript", "Read the skill, wrote the report."),
        ]
    )


async def test_grader_passes_what_is_there_and_fails_what_is_not():
    client = client_for(Simulator(knobs=Knobs(judge_noise=0.0)))
    output = "# Sales\n\n## Summary\nThe report covers totals per region.\n"
    grading = await tool_input(
        client, forced("grader", "submit_grading", grading_prompt(output), GRADING_SCHEMA)
    )
    verdicts = {e["text"][:20]: e["passed"] for e in grading["expectations"]}
    assert verdicts == {
        "The report has a `##": True,
        "The report gives the": False,
        "Looks good": False,
    }
    assert "outputs/report.md" in grading["expectations"][0]["evidence"]
    assert "median_order" in grading["expectations"][1]["evidence"]
    assert grading["summary"] == {"passed": 1, "failed": 2, "total": 3, "pass_rate": 0.3333}
    # "Totals" names the figures habit; its content is absent, whatever words the answer shares
    # with the dimension, and a heading alone is no content. With the content, it scores 5.
    assert grading["rubric_scores"]["regional_totals"]["score"] == 1
    assert grading["rubric_summary"]["max_possible"] == 5.0
    heading = output + "\n## Key figures\n"
    graded = await tool_input(
        client, forced("grader", "submit_grading", grading_prompt(heading), GRADING_SCHEMA)
    )
    assert graded["rubric_scores"]["regional_totals"]["score"] == 1
    figures = output + "\n## Key figures\nFrom the inputs on sales, as given:\n- North 120\n"
    graded = await tool_input(
        client, forced("grader", "submit_grading", grading_prompt(figures), GRADING_SCHEMA)
    )
    assert graded["rubric_scores"]["regional_totals"]["score"] == 5
    # No user_notes section in this request: the world sums up nothing, in the three lists.
    assert grading["user_notes_summary"] == {
        "uncertainties": [],
        "needs_review": [],
        "workarounds": [],
    }
    reasons = {s["assertion"]: s["reason"] for s in grading["eval_feedback"]["suggestions"]}
    assert reasons["Looks good"].startswith("Too vague") and grading["eval_feedback"]["overall"]


def comparison_prompt(first: str, second: str) -> str:
    expectations = "\n".join(
        tag("expectation", e)
        for e in ("The report has a `## Summary` section", "The `total_revenue` figure is there")
    )
    return "\n".join(
        [
            tag("task", TASK),
            tag("expectations", expectations),
            tag("output_a", tag("file", first, path="outputs/report.md")),
            tag("output_b", tag("file", second, path="outputs/report.md")),
        ]
    )


async def test_comparator_picks_the_better_side_unless_position_biased():
    good = "# Sales report\n\n## Summary\nThis section gives the figure per region.\ntotal_revenue: 120\n"
    bad = "# Report\n\nSome words.\n"
    fair = client_for(Simulator(knobs=Knobs(position_bias=0.0)))
    biased = client_for(Simulator(knobs=Knobs(position_bias=1.0)))
    request = forced("comparator", "submit_comparison", comparison_prompt(good, bad))
    assert (await tool_input(fair, request))["winner"] == "A"
    swapped = await tool_input(
        fair, forced("comparator", "submit_comparison", comparison_prompt(bad, good))
    )
    assert swapped["winner"] == "B"
    assert swapped["expectation_results"]["B"]["pass_rate"] == 1.0
    assert swapped["rubric"]["B"]["overall_score"] > swapped["rubric"]["A"]["overall_score"]
    for sample in range(4):
        prompt = comparison_prompt(bad, good)
        answer = await tool_input(
            biased, forced("comparator", "submit_comparison", prompt, sample=sample)
        )
        assert answer["winner"] == "A"


async def test_analyzer_suggests_instructions_for_failed_expectations():
    client = client_for(Simulator())
    prompt = "\n".join(
        [
            tag("winner_skill", tag("file", SKILL, path="SKILL.md")),
            tag(
                "loser_skill",
                tag(
                    "file",
                    SKILL.replace("- End with a `## Method` section.\n", ""),
                    path="SKILL.md",
                ),
            ),
            tag("comparisons", "A was more complete."),
            tag(
                "failed_expectations",
                tag("failure", "The report ends with `## Method`", eval="1", count="2"),
            ),
        ]
    )
    analysis = await tool_input(client, forced("analyzer", "submit_analysis", prompt))
    top = analysis["improvement_suggestions"][0]
    assert top["priority"] == "high" and top["category"] == "instructions"
    assert "`## Method`" in top["suggestion"]
    assert any("## Method" in s for s in analysis["winner_strengths"])


# --- proposer -------------------------------------------------------------------------------------


def proposal_prompt(lost: str = "", target: str = "body", extra: str = "") -> str:
    failures = "\n".join(
        [
            tag("failure", "The report lists the `median_order` value", eval="1", count="3"),
            tag("failure", "The report names the best region", eval="2", count="1"),
        ]
    )
    return "\n".join(
        [
            tag("target", target),
            tag("skill_files", tag("file", SKILL, path="SKILL.md")),
            tag("failed_expectations", failures),
            tag("judge_feedback", ""),
            tag("lost_attempts", lost),
            extra,
        ]
    )


async def test_a_good_proposal_adds_an_instruction_for_the_most_frequent_failure():
    client = client_for(Simulator(knobs=Knobs(proposal_quality=1.0)))
    proposal = await tool_input(client, forced("proposer", "submit_proposal", proposal_prompt()))
    new = apply_edit(SKILL, proposal["edits"][0])
    # The failing expectation as an author's instruction, from the grading's words alone (the
    # proposer never sees the world's hidden causes).
    assert "- List the `median_order` value.\n" in new
    assert "The report lists" not in new and "Make sure" not in new
    assert new.index("median_order") > new.index("## Method")  # after the last bullet
    assert front_matter(new) == front_matter(SKILL) and "median_order" in proposal["summary"]
    lost = tag("attempt", 'Add: "- List the `median_order` value." — lost: no gain')
    retry = await tool_input(client, forced("proposer", "submit_proposal", proposal_prompt(lost)))
    # What was tried and lost is not proposed again: the next failure is.
    assert "- Name the best region.\n" in apply_edit(SKILL, retry["edits"][0])
    assert "median" not in retry["summary"]


async def test_no_kind_of_proposal_repeats_what_was_tried_from_this_parent_and_did_not_win():
    # Summaries as the product lists them, "summary — the decision's reason", joined by "; ".
    for knobs in (Knobs(proposal_quality=0.0, overfit_rate=1.0), Knobs(proposal_quality=0.0)):
        client = client_for(Simulator(knobs=knobs))
        for sample in range(6):
            first = await tool_input(
                client, forced("proposer", "submit_proposal", proposal_prompt(), sample=sample)
            )
            lost = tag("attempt", f"{first['summary']} — tie: Δ = +0.010 is inconclusive")
            again = forced("proposer", "submit_proposal", proposal_prompt(lost), sample=sample)
            assert (await tool_input(client, again))["summary"] != first["summary"], knobs


async def test_a_harmful_proposal_drops_an_instruction_or_adds_a_prohibition_from_the_text_alone():
    client = client_for(
        Simulator(knobs=Knobs(proposal_quality=0.0, overfit_rate=0.0, harmful_rate=1.0))
    )
    for sample in range(8):
        request = forced("proposer", "submit_proposal", proposal_prompt(), sample=sample)
        new = apply_edit(SKILL, (await tool_input(client, request))["edits"][0])
        lost_bullet = len(bullets(new)) < len(bullets(SKILL))
        added = [b for b in bullets(new) if b not in bullets(SKILL)]
        # The careless edit is written from the skill's words or a careless author's stock
        # phrases, never from the world's own negation of a hidden habit.
        assert lost_bullet or (len(added) == 1 and negated(added[0]))
        assert not {b.strip("- ") for b in added} & {h.against for h in latent.HABITS}
        assert front_matter(new) == front_matter(SKILL)


async def test_good_proposals_raise_the_graded_pass_rate():
    client = client_for(Simulator(seed=5, knobs=Knobs(judge_noise=0.0, proposal_quality=1.0)))
    expectation = "The report lists the `median_order` value"
    proposal = await tool_input(client, forced("proposer", "submit_proposal", proposal_prompt()))
    improved = apply_edit(SKILL, proposal["edits"][0])

    async def pass_rate(skill: str) -> float:
        passed = 0
        for sample in range(24):
            output = await run_executor(client, skill, sample)
            prompt = "\n".join(
                [
                    tag("expectations", tag("expectation", expectation)),
                    tag("outputs", tag("file", output, path="outputs/report.md")),
                ]
            )
            grading = await tool_input(
                client, forced("grader", "submit_grading", prompt, sample=sample)
            )
            passed += grading["expectations"][0]["passed"]
        return passed / 24

    # The new line is the last of four: followed about 0.94 x 0.95 (the skill is called) = 0.89.
    assert await pass_rate(SKILL) == 0.0 and await pass_rate(improved) >= 0.7


async def test_description_proposals_add_missed_query_words_and_keep_yaml_valid():
    queries = tag(
        "query", "turn my quarterly spreadsheet into a revenue dashboard", should_trigger="true"
    )
    prompt = proposal_prompt(target="description", extra=tag("missed_queries", queries))
    good = await tool_input(
        client_for(Simulator(knobs=Knobs(proposal_quality=1.0))),
        forced("proposer", "submit_proposal", prompt),
    )
    bad = await tool_input(
        client_for(Simulator(knobs=Knobs(proposal_quality=0.0))),
        forced("proposer", "submit_proposal", prompt),
    )
    for proposal in (good, bad):
        edit = proposal["edits"][0]
        assert edit["action"] == "write" and edit["content"].endswith(SKILL.split("---\n", 2)[2])
        meta = yaml.safe_load(front_matter(edit["content"]))
        assert meta["name"] == "csv-report" and len(meta["description"]) <= 1024
    good_desc = yaml.safe_load(front_matter(good["edits"][0]["content"]))["description"]
    bad_desc = yaml.safe_load(front_matter(bad["edits"][0]["content"]))["description"]
    assert "spreadsheet" in good_desc and "dashboard" in good_desc
    query = "turn my quarterly spreadsheet into a revenue dashboard"
    before = await trigger_calls(client_for(Simulator()), LISTING, query)
    listing = LISTING.replace(DESCRIPTION, good_desc)
    assert good_desc in listing
    after = await trigger_calls(client_for(Simulator()), listing, query)
    assert before.count("csv-report") <= 1 and after.count("csv-report") >= 8
    assert len(bad_desc) < len(DESCRIPTION)


# --- trigger probe --------------------------------------------------------------------------------


async def trigger_calls(client, listing: str, query: str, samples: int = 10) -> list[str | None]:
    """The skill each sample of a trigger probe calls (None: answered without a skill)."""
    called = []
    for sample in range(samples):
        reply = await client.messages.create(
            model="claude-opus-4-8",
            max_tokens=200,
            system=f"Answer the user.\n{listing}",
            tools=[SKILL_TOOL],
            messages=[{"role": "user", "content": query}],
            extra_headers={"x-optimizer-sample": str(sample)},  # no role header: inferred
        )
        called.append(next((b.input["skill"] for b in reply.content if b.type == "tool_use"), None))
    return called


async def test_trigger_routes_matching_queries_to_the_skill_and_others_nowhere():
    client = client_for(Simulator(seed=2))
    matching = await trigger_calls(
        client, LISTING, "Summarise this sales CSV into a report by region"
    )
    unrelated = await trigger_calls(client, LISTING, "What is the capital city of France?")
    assert matching.count("csv-report") >= 8 and unrelated.count(None) >= 9


# --- errors and faults ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("429", anthropic.RateLimitError),
        ("529", anthropic.OverloadedError),
        ("500", anthropic.InternalServerError),
        ("timeout", anthropic.APITimeoutError),
        ("truncate", anthropic.APIConnectionError),
    ],
)
async def test_forced_errors_raise_the_sdk_exception_of_the_real_service(kind, error):
    sim = Simulator()
    with pytest.raises(error) as caught:
        await client_for(sim).messages.create(
            model="claude-opus-4-8",
            max_tokens=10,
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"x-sim-force-error": kind},
        )
    if kind == "429":
        assert caught.value.response.headers["retry-after"] == "0"
    assert sim.stats.faults_injected[kind] == 1


async def test_spend_limit_and_truncated_stream_and_malformed_tool_input():
    client = client_for(Simulator())
    with pytest.raises(anthropic.RateLimitError, match="usage limits") as caught:
        await client.messages.create(
            model="claude-opus-4-8",
            max_tokens=10,
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"x-sim-force-error": "429-spend"},
        )
    assert "spend limit" in str(caught.value)
    async with client.messages.stream(
        model="claude-opus-4-8",
        max_tokens=50,
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"x-sim-force-error": "truncate"},
    ) as stream:
        assert (await stream.get_final_message()).stop_reason is None  # no message_stop came
    request = forced("grader", "submit_grading", grading_prompt("# R\n"), GRADING_SCHEMA)
    clean = await tool_input(client, request)
    broken = await tool_input(
        client,
        dict(request, extra_headers={**request["extra_headers"], "x-sim-force-error": "malformed"}),
    )
    assert "expectations" not in broken and clean["expectations"]
    # Re-asked with the validation error appended, the grader gives the fault-free answer.
    reask = dict(
        request,
        messages=request["messages"]
        + [
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "submit_grading", "input": broken}
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "is_error": True,
                        "content": "expectations: Field required",
                    }
                ],
            },
        ],
    )
    assert await tool_input(client, reask) == clean


async def test_random_faults_never_change_a_successful_reply():
    plain = client_for(Simulator(seed=9))
    sim = Simulator(seed=9, service=Service(fault_rate=0.5))
    faulty = client_for(sim)
    request = dict(
        model="claude-opus-4-8",
        max_tokens=4096,
        system=LISTING,
        tools=EXECUTOR_TOOLS,
        messages=[{"role": "user", "content": TASK}],
    )
    for sample in range(12):  # at half the attempts failing, 12 samples draw 2 faults or more
        headers = {"x-optimizer-role": "executor", "x-optimizer-sample": str(sample)}
        expected = await plain.messages.create(**request, extra_headers=headers)
        for _ in range(40):
            try:
                got = await faulty.messages.create(**request, extra_headers=headers)
                break
            except (anthropic.APIStatusError, anthropic.APIConnectionError):
                continue
        assert got.model_dump() == expected.model_dump()
    assert sum(sim.stats.faults_injected.values()) >= 2


async def test_bad_requests_are_refused_like_the_real_service():
    transport = Simulator().transport()
    async with httpx2.AsyncClient(transport=transport, base_url="http://sim") as http:
        keyless = await http.post(
            "/v1/messages", json={"model": "claude-opus-4-8", "max_tokens": 5, "messages": []}
        )
        missing = await http.post(
            "/v1/messages",
            headers={"x-api-key": "k"},
            json={"model": "claude-opus-4-8", "messages": [{"role": "user", "content": "x"}]},
        )
        unknown = await http.get("/v2/nothing")
        root = await http.get("/")
    assert keyless.status_code == 401 and keyless.json()["error"]["type"] == "authentication_error"
    assert (
        missing.status_code == 400
        and missing.json()["error"]["message"] == "max_tokens: Field required"
    )
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found_error"
    assert root.status_code == 200 and root.json() == {}
    count = await client_for(Simulator()).messages.count_tokens(
        model="claude-opus-4-8", messages=[{"role": "user", "content": "hello " * 40}]
    )
    assert count.input_tokens > 40


# --- loopback server ------------------------------------------------------------------------------


@pytest.mark.slow
async def test_loopback_server_serves_the_real_sdk_and_streams():
    sim = Simulator(seed=1)
    server, port = serve(sim)
    try:
        async with httpx2.AsyncClient() as http:
            assert (await http.get(f"http://127.0.0.1:{port}/")).status_code == 200
        client = anthropic.AsyncAnthropic(
            api_key="sk-test", base_url=f"http://127.0.0.1:{port}", max_retries=0
        )
        request = dict(
            model="claude-opus-4-8",
            max_tokens=4096,
            system=LISTING,
            tools=EXECUTOR_TOOLS,
            messages=[{"role": "user", "content": TASK}],
        )
        plain = await client.messages.create(**request)
        async with client.messages.stream(**request) as stream:
            streamed = await stream.get_final_message()
        assert [b.model_dump() for b in plain.content] == [b.model_dump() for b in streamed.content]
        with pytest.raises(anthropic.APIConnectionError):
            await client.messages.create(**request, extra_headers={"x-sim-force-error": "timeout"})
        with pytest.raises(anthropic.OverloadedError):
            await client.messages.create(**request, extra_headers={"x-sim-force-error": "529"})
        await client.close()
    finally:
        server.shutdown()
        server.server_close()
    assert sim.stats.by_role["executor"] == 4


# --- an honest world: support, not topic words; habits generalise, copied values do not --------


async def grade_once(client, expectations: list[str], output: str, sample: int) -> list[dict]:
    prompt = "\n".join(
        [
            tag("expectations", "\n".join(tag("expectation", e) for e in expectations)),
            tag("outputs", tag("file", output, path="outputs/report.md")),
        ]
    )
    grading = await tool_input(client, forced("grader", "submit_grading", prompt, sample=sample))
    return grading["expectations"]


async def test_a_pass_always_quotes_its_support_from_the_output_even_for_a_noisy_judge():
    client = client_for(Simulator(seed=3, knobs=Knobs(judge_noise=0.5)))
    # The case that fooled the old judge: topic words everywhere, the colour nowhere.
    topical = "# Page\n\nThis answer covers short, html, page, colour, declares.\n"
    assert not any(
        [
            (await grade_once(client, ["The page uses the colour #d97757"], topical, k))[0][
                "passed"
            ]
            for k in range(40)
        ]
    )
    expectations = [
        "The report has a `## Summary` heading",
        "The report gives `total_revenue`",
        "The report names the best region",
        "The report states 12 regions",
    ]
    passes = 0
    for sample in range(16):
        output = await run_executor(client, SKILL, sample)
        for result in await grade_once(client, expectations, output, sample):
            if result["passed"]:
                passes += 1
                quotes = re.findall(r'"([^"]+)"', result["evidence"])
                assert quotes and all(q in output for q in quotes), result
            if result["text"].endswith("12 regions"):
                # A value comes as written or with the section that carries the inputs' figures.
                assert not result["passed"] or "12" in output or "## Key figures" in output
    assert passes >= 16


SPECIFIC = {"1": "#faf9f5", "2": "#0b0b0b", "3": "#123456", "4": "#abcdef"}
TRAIN, TEST = ("1", "2"), ("3", "4")
# SKILL without the word "figure", which would half switch on the habit that carries every value
# from the inputs, and with it the colours of every eval, before any edit.
PLAIN = SKILL.replace(" figure", "")


def world_expectations(eval_id: str) -> list[str]:
    return [
        "The report has a `## Notes` section",
        "The report has a `## Summary` heading",
        f"The report names the colour {SPECIFIC[eval_id]}",
    ]


async def proposal_from_train(quality: float, kind: str, adding: str = "") -> dict:
    """The first proposal of `kind` (by sample) whose edit adds a line with `adding`."""
    failures = "\n".join(
        tag("failure", text, eval=e, count="3")
        for e in TRAIN
        for text in world_expectations(e)[::2]
    )
    prompt = "\n".join(
        [
            tag("target", "body"),
            tag("skill_files", tag("file", PLAIN, path="SKILL.md")),
            tag("failed_expectations", failures),
            tag("lost_attempts", ""),
        ]
    )
    client = client_for(
        Simulator(knobs=Knobs(proposal_quality=quality, overfit_rate=1.0 - quality))
    )
    for sample in range(20):
        proposal = await tool_input(
            client, forced("proposer", "submit_proposal", prompt, sample=sample)
        )
        added = proposal["edits"][0].get("new", "")
        if proposal["summary"].startswith(kind) and adding in added:
            return proposal
    raise AssertionError(f"no {kind!r} proposal in 20 samples")


async def split_pass_rates(skill: str) -> dict[str, float]:
    client = client_for(Simulator(seed=11, knobs=Knobs(judge_noise=0.0)))
    rates = {}
    for name, ids in (("train", TRAIN), ("test", TEST)):
        passed = total = 0
        for eval_id in ids:
            # 16 samples: one expectation of three moves by about 0.3; 8 left sampling noise of
            # about 0.1 on either side.
            for sample in range(16):
                output = await run_executor(client, skill, sample)
                results = await grade_once(client, world_expectations(eval_id), output, sample)
                passed += sum(r["passed"] for r in results)
                total += len(results)
        rates[name] = passed / total
    return rates


@pytest.mark.slow
async def test_copying_train_values_gains_on_train_only_and_a_general_habit_gains_on_both():
    parrot = await proposal_from_train(0.0, "Add instructions for failing expectations")
    # A general habit: an instruction for what every eval expects (a `## Notes` section).
    general = await proposal_from_train(
        1.0, "Ask for what the failing expectations need", adding="## Notes"
    )
    parroted = apply_edit(PLAIN, parrot["edits"][0])
    generalised = apply_edit(PLAIN, general["edits"][0])
    assert "#faf9f5" in parroted and "#faf9f5" not in generalised and "#0b0b0b" not in generalised
    base, copied, habit = [await split_pass_rates(s) for s in (PLAIN, parroted, generalised)]
    # One of three expectations per eval moves: a gain is about 0.3, sampling noise about 0.05.
    assert copied["train"] - base["train"] >= 0.2 and abs(copied["test"] - base["test"]) <= 0.1
    assert habit["train"] - base["train"] >= 0.2 and habit["test"] - base["test"] >= 0.2


async def test_a_value_that_fails_in_two_evals_is_a_convention_and_stays_in_the_general_edit():
    failures = "\n".join(
        tag("failure", "The page uses the brand colour #d97757", eval=e, count="2")
        for e in ("1", "3")
    )
    prompt = "\n".join(
        [
            tag("target", "body"),
            tag("skill_files", tag("file", SKILL, path="SKILL.md")),
            tag("failed_expectations", failures),
            tag("lost_attempts", ""),
        ]
    )
    proposal = await tool_input(
        client_for(Simulator(knobs=Knobs(proposal_quality=1.0))),
        forced("proposer", "submit_proposal", prompt),
    )
    assert "#d97757" in apply_edit(SKILL, proposal["edits"][0])


async def test_the_analyzer_asks_for_what_a_failure_checks_or_restates_it_when_wrong():
    """From the failure's words alone (the analyzer never sees the world's hidden causes)."""
    failure = tag("failure", "The report explains the root cause of the drop", eval="2", count="3")
    prompt = "\n".join(
        [
            tag("winner_skill", tag("file", SKILL, path="SKILL.md")),
            tag("loser_skill", tag("file", SKILL, path="SKILL.md")),
            tag("comparisons", "A was more complete."),
            tag("failed_expectations", failure),
        ]
    )
    right, wrong = [
        (
            await tool_input(
                client_for(Simulator(knobs=Knobs(proposal_quality=q))),
                forced("analyzer", "submit_analysis", prompt),
            )
        )["improvement_suggestions"][0]
        for q in (1.0, 0.0)
    ]
    assert right["suggestion"] == 'Add an instruction: "Explain the root cause of the drop."'
    assert (
        wrong["suggestion"]
        == "Add an explicit instruction: The report explains the root cause of the drop"
    )


def test_the_analyzer_quotes_the_skills_words_never_the_worlds_stems():
    from optimizer.sim.analyst import _effect

    said = _effect("Use pypdfium2 for advanced references.")
    assert said == "it asks the agent for advanced, pypdfium2, references"
    assert "advanc," not in said and "referenc" not in said.replace("references", "")


def test_every_sim_setting_reaches_the_simulator_the_cli_builds():
    # Every setting off its default: one that from_settings forgot would arrive as the default.
    settings = Sim(
        seed=3, latency_ms=1.0, fault_rate=0.2, judge_noise=0.1, position_bias=0.4,
        proposal_quality=0.5, overfit_rate=0.2, harmful_rate=0.2, world=3, habits=5,
        infeasible=0.2, position_cost=0.1, length_cost=0.03, focus_cost=0.07, batch_delay_s=0.1,
        fail_role="grader", fail_match="zzz",
    )  # fmt: skip
    assert all(v != Sim.model_fields[k].default for k, v in settings.model_dump().items())
    sim = Simulator.from_settings(settings)
    answers = {k: v for k, v in asdict(sim.knobs).items() if k != "world"}  # World: nested
    held = {"seed": sim.seed, **answers, **asdict(sim.knobs.world), **asdict(sim.service)}
    assert held == settings.model_dump()
    assert sim.batches.delay_s == settings.batch_delay_s
    # `Simulator()`, which the tests build, is the world of the default settings.
    default, plain = Simulator.from_settings(Sim()), Simulator()
    assert default.seed == plain.seed and default.knobs == plain.knobs
    assert default.service == plain.service
