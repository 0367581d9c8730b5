"""The simulated world: which role a request plays and what that role answers, as a pure function
of (request body, seeded rng). Never reads a clock, a file, a global or the network."""

from __future__ import annotations

import base64
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

from optimizer.sim import analyst, inputs, judges, media, proposer
from optimizer.sim.compose import compose_output, instruction_lines, references
from optimizer.sim.latent import World
from optimizer.sim.meaning import concepts
from optimizer.sim.text import (
    REMINDER,
    asked_tool,
    block_text,
    first_user_text,
    fit,
    split_front_matter,
    stems,
    strip_reminders,
    system_text,
    tool_names,
    tool_schema,
    tool_uses,
)
from optimizer.tags import parse_tags, section

ROLES = ("executor", "grader", "comparator", "analyzer", "proposer", "trigger")
FORCED_TOOLS = {
    "submit_grading": "grader",
    "submit_comparison": "comparator",
    "submit_analysis": "analyzer",
    "submit_proposal": "proposer",
}
TOOL_OF_ROLE = {role: tool for tool, role in FORCED_TOOLS.items()}

SKILL_CALL_RATE = 0.95  # a relevant skill is still sometimes ignored, as by a real agent
LOAD_FLOOR = 0.02  # a skill about something else is loaded by mistake this often
LOAD_SHARE = 0.3  # share of the task's concepts a description must speak to for a sure load
LOAD_WORDS = 10  # a long task is matched on this many of its concepts at most
TRIGGER_THRESHOLD = 0.08  # Jaccard of stems: query vs. skill name + description
TRIGGER_FLIP = 0.05


@dataclass(frozen=True)
class Knobs:
    judge_noise: float = 0.05
    position_bias: float = 0.3
    proposal_quality: float = 0.6  # share of proposals that name the cause of a real failure
    overfit_rate: float = 0.15  # share that copy a failing expectation or its values
    harmful_rate: float = 0.1  # share that drop or contradict a useful instruction
    world: World = World()  # the hidden causes (sim/latent.py); the rest of proposals are neutral


@dataclass(frozen=True)
class Skill:
    name: str
    description: str


def detect_role(body: dict, headers: Mapping[str, str]) -> str:
    """Our client names the role in a header; the Claude Code CLI sends none, so infer it."""
    declared = (headers.get("x-optimizer-role") or "").strip().lower()
    if declared in ROLES:
        return declared
    names = tool_names(body)
    asked = asked_tool(body)
    if asked in FORCED_TOOLS:
        return FORCED_TOOLS[asked]
    if names and all(n.lower() == "skill" for n in names):
        return "trigger"
    types = [str(t.get("type", "")) for t in body.get("tools") or []]
    if {"Write", "Bash", "bash"} & set(names) or any(
        t.startswith(("bash_", "text_editor_")) for t in types
    ):
        return "executor"
    return "chat"


def reply(body: dict, role: str, rng: random.Random, uid: str, knobs: Knobs) -> tuple[list, str]:
    """(content blocks, stop_reason) of the assistant's turn."""
    if role in TOOL_OF_ROLE:
        name = asked_tool(body) or TOOL_OF_ROLE[role]
        answer = {
            "grader": judges.grade,
            "comparator": judges.compare,
            "analyzer": analyst.analyze,
            "proposer": proposer.propose,
        }[role](
            lambda tag: find_section(body, tag),
            rng,
            knobs,
            **({"seen": media.seen_images(body)} if role in ("grader", "comparator") else {}),
        )
        block = _tool_use(uid, 0, name, fit(answer, tool_schema(body, name)))
        return [block], "tool_use"
    if role == "executor":
        return _executor(body, rng, uid, knobs)
    if role == "trigger":
        return _trigger(body, rng, uid)
    return [_text("OK.")], "end_turn"


def find_section(body: dict, name: str) -> str | None:
    """A tagged section of the prompt; the first user message wins over the system prompt, whose
    instructions may quote a tag by way of example."""
    found = section(first_user_text(body), name)
    return found if found is not None else section(system_text(body), name)


def _text(text: str) -> dict:
    return {"type": "text", "text": text}


def _tool_use(uid: str, index: int, name: str, tool_input: dict) -> dict:
    return {
        "type": "tool_use",
        "id": f"toolu_sim_{uid[:16]}_{index}",
        "name": name,
        "input": tool_input,
    }


# --- skills as listed to an agent ---------------------------------------------------------------


def listed_skills(text: str) -> list[Skill]:
    """Skills offered in a prompt, in three forms: ours (`<skill name="x">desc</skill>`), the older
    Claude Code form (`<skill><name>x</name><description>…`) and Claude Code 2.1's
    "The following skills are available…" list of `- name: description` lines."""
    found: dict[str, Skill] = {}
    for attrs, content in parse_tags(text, "skill"):
        name = attrs.get("name") or (section(content, "name") or "").strip()
        desc = section(content, "description") if "name" not in attrs else content
        if name:
            found.setdefault(name, Skill(name, (desc or "").strip()))
    for m in re.finditer(
        r"skills are available[^\n]*\n((?:[ \t]*\n|- [^\n]*(?:\n|$))+)", text, re.I
    ):
        for line in m.group(1).splitlines():
            item = re.match(r"- ([\w.:/-]+): (.*)", line)
            if item:
                found.setdefault(item.group(1), Skill(item.group(1), item.group(2).strip()))
    return list(found.values())


def _skill_tool(body: dict) -> dict | None:
    return next(
        (t for t in body.get("tools") or [] if str(t.get("name", "")).lower() == "skill"), None
    )


def _skills_context(body: dict) -> str:
    tool = _skill_tool(body) or {}
    reminders = [
        m
        for msg in body["messages"]
        if msg.get("role") == "user"
        for m in REMINDER.findall(block_text(msg.get("content")))
    ]
    return "\n".join([system_text(body), str(tool.get("description", "")), *reminders])


def _skill_words(skill: Skill) -> set[str]:
    return stems(skill.name.replace("-", " ").replace("_", " ") + " " + skill.description)


def _named(skill: Skill, text: str) -> bool:
    return (
        re.search(rf"(?<![\w-]){re.escape(skill.name.lower())}(?![\w-])", text.lower()) is not None
    )


# --- executor -----------------------------------------------------------------------------------


def _task(body: dict) -> str:
    text = strip_reminders(first_user_text(body))
    tagged = section(text, "task")
    if tagged is not None:
        return tagged.strip()
    return re.sub(r"<(input_files)\b[^>]*>.*?</\1>", "", text, flags=re.S).strip()


def load_chance(task: str, skill: Skill) -> float:
    """How likely the agent loads a listed skill for a task: by how much of the task's meaning the
    skill's name and description speak to (concepts, so a paraphrase reads alike), from 2 % for
    a skill about something else to SKILL_CALL_RATE for one that covers a third of the task or
    more. A skill the task names is loaded at SKILL_CALL_RATE."""
    if _named(skill, task):
        return SKILL_CALL_RATE
    wanted = concepts(task)
    if not wanted:
        return LOAD_FLOOR
    shared = len(
        wanted & concepts(skill.name.replace("-", " ").replace("_", " ") + " " + skill.description)
    )
    share = shared / min(len(wanted), LOAD_WORDS)
    return LOAD_FLOOR + (SKILL_CALL_RATE - LOAD_FLOOR) * min(1.0, share / LOAD_SHARE)


def _relevant_skill(task: str, skills: list[Skill], rng: random.Random) -> Skill | None:
    """The listed skill the agent loads, if any: the one that speaks most to the task, loaded at
    its chance (one draw, whatever the list's length)."""
    if not skills:
        return None
    ranked = sorted(
        ((load_chance(task, s), -i, s) for i, s in enumerate(skills)),
        key=lambda r: r[:2],
        reverse=True,
    )
    return ranked[0][2] if rng.random() < ranked[0][0] else None


def _skill_body(body: dict, after: int) -> str:
    until = next((i for i, b in tool_uses(body) if i > after and inputs.is_read(b)), None)
    texts = [
        strip_reminders(block_text(m.get("content")))
        for m in body["messages"][after + 1 : until]
        if m.get("role") == "user"
    ]
    return split_front_matter("\n".join(texts).strip())[1]


def skill_instructions(body: dict, after: int) -> list[str]:
    """The instruction lines of the skill whose text came back after message `after`: any
    user-side text then is skill content (a tool_result for us, a text block for Claude Code)."""
    # The skill's text ends where the agent's next action (reading the inputs) begins.
    return instruction_lines(_skill_body(body, after))


def _write_call(body: dict, path: str, content: str, uid: str, index: int = 0) -> dict | None:
    for tool in body.get("tools") or []:
        kind, name = str(tool.get("type", "")), str(tool.get("name", ""))
        if kind.startswith("text_editor") or name == "str_replace_based_edit_tool":
            return _tool_use(
                uid, index, name, {"command": "create", "path": path, "file_text": content}
            )
    if "Write" in tool_names(body):
        return _tool_use(uid, index, "Write", {"file_path": path, "content": content})
    for name in ("bash", "Bash"):
        if name in tool_names(body):
            folder = path.rsplit("/", 1)[0]
            command = f"mkdir -p '{folder}' && cat > '{path}' <<'SIM_EOF'\n{content}SIM_EOF"
            return _tool_use(uid, index, name, {"command": command})
    return None


NOTES_RATE = 0.3  # of executor runs that leave user notes


def _executor(body: dict, rng: random.Random, uid: str, knobs: Knobs) -> tuple[list, str]:
    task = _task(body)
    uses = tool_uses(body)
    skill_calls = [i for i, b in uses if str(b.get("name", "")).lower() == "skill"]
    acted = [
        b
        for _, b in uses
        if str(b.get("name", "")).lower() not in ("skill", "read") and not inputs.is_read(b)
    ]
    match = re.search(r"outputs/([\w./-]+\.\w+)", task)
    relative = f"outputs/{match.group(1)}" if match else "outputs/answer.md"
    if acted:
        return [_text(f"Done: I wrote {relative}.")], "end_turn"
    skill_tool = _skill_tool(body)
    if skill_tool and not skill_calls:
        best = _relevant_skill(task, listed_skills(_skills_context(body)), rng)
        if best:
            return [_tool_use(uid, 0, skill_tool["name"], {"skill": best.name})], "tool_use"
    # The Claude Code CLI names its (host) working folder; our executor works in /workspace.
    cwd = re.search(
        r"[Ww]orking directory:\s*(/\S+)", system_text(body) + "\n" + first_user_text(body)
    )
    folder = cwd.group(1) if cwd else "/workspace"
    paths = inputs.listed(system_text(body) + "\n" + first_user_text(body))
    views = inputs.read_calls(tool_names(body), paths, folder)
    if views and not inputs.already_read(body):
        # The inputs first, as an agent reads them: the answer can carry only what they hold.
        calls = [_tool_use(uid, k, name, args) for k, (name, args) in enumerate(views)]
        return calls, "tool_use"
    instructions = skill_instructions(body, skill_calls[0]) if skill_calls else []
    if skill_calls and "str_replace_based_edit_tool" in tool_names(body):
        # The skill's own files the task needs, read once the inputs are (ours shows them under
        # /skill); their lines join the skill's instructions.
        shown = inputs.results(body)
        wanted = [
            inputs.SKILL_ROOT + p for p in references(_skill_body(body, skill_calls[0]), task)
        ]
        unread = [p for p in wanted if p not in shown]
        if unread:
            calls = [
                _tool_use(uid, k, "str_replace_based_edit_tool", {"command": "view", "path": p})
                for k, p in enumerate(unread)
            ]
            return calls, "tool_use"
        instructions += [ln for p in wanted for ln in instruction_lines(shown[p])]
    content = compose_output(task, instructions, rng, knobs.world, inputs.text_read(body))
    path = f"{folder.rstrip('/')}/{relative}"
    writer = media.BINARY_WRITERS.get(PurePosixPath(relative).suffix.lower())
    # A binary output (a PNG, a PDF, a docx) goes through the shell, the one tool that writes
    # bytes; it carries the composed text, which the simulated judges then read back.
    call = (_binary_call(body, path, writer(content), uid) if writer else None) or _write_call(
        body, path, content, uid
    )
    if call is None:
        return [_text(content)], "end_turn"
    blocks = [_text(f"I will write {relative}."), call]
    # Asked for notes (our executor's prompt names the file), the agent sometimes has some. Drawn
    # from the request's own key, apart from the output's draws: how many draws an answer takes
    # depends on the skill, and must not decide whether notes are written.
    if "user_notes.md" in system_text(body) and random.Random(f"notes:{uid}").random() < NOTES_RATE:
        folder = path.rsplit("/outputs/", 1)[0]
        notes = _write_call(body, f"{folder}/outputs/user_notes.md", _notes(task, relative), uid, 1)
        blocks += [notes] if notes else []
    return blocks, "tool_use"


def _binary_call(body: dict, path: str, raw: bytes, uid: str) -> dict | None:
    for name in ("bash", "Bash"):
        if name in tool_names(body):
            folder = path.rsplit("/", 1)[0]
            encoded = base64.encodebytes(raw).decode("ascii")
            command = f"mkdir -p '{folder}' && base64 -d > '{path}' <<'SIM_EOF'\n{encoded}SIM_EOF"
            return _tool_use(uid, 0, name, {"command": command})
    return None


def _notes(task: str, relative: str) -> str:
    words = sorted(stems(task))[:3]
    return (
        "## Uncertainties\n"
        f"- The task did not define {', '.join(words) or 'its terms'}; I took the usual meaning.\n"
        "## Workarounds\n(none)\n"
        f"## Needs review\n- Check the figures in {relative}.\n"
    )


# --- trigger probe ------------------------------------------------------------------------------


def trigger_score(query: str, skill: Skill) -> float:
    if _named(skill, query):
        return 1.0
    q, s = stems(query), _skill_words(skill)
    return len(q & s) / len(q | s) if q | s else 0.0


def _trigger(body: dict, rng: random.Random, uid: str) -> tuple[list, str]:
    query = strip_reminders(first_user_text(body))
    scored = sorted(
        (
            (trigger_score(query, s), -i, s)
            for i, s in enumerate(listed_skills(_skills_context(body)))
        ),
        key=lambda r: r[:2],
        reverse=True,
    )
    best = scored[0] if scored else (0.0, 0, None)
    runner_up = scored[1][0] if len(scored) > 1 else 0.0
    call = best[0] >= TRIGGER_THRESHOLD and best[0] > runner_up
    if best[0] > 0 and rng.random() < TRIGGER_FLIP:
        call = not call
    tool = _skill_tool(body)
    if call and tool and best[2] is not None:
        return [_tool_use(uid, 0, tool["name"], {"skill": best[2].name})], "tool_use"
    return [_text("I can answer this directly; no skill is needed.")], "end_turn"
