"""The simulated proposer: at configured rates, a good edit (an instruction that reaches the cause
of a frequent failure, in a sentence an author would write), an overfitting one (a failing
expectation or its values copied in), a harmful one (a working instruction dropped or a needed
habit contradicted) or a neutral rewording. Never touches the front matter in body mode."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from typing import Any

import yaml

from optimizer.sim.instruction import instruction_for, lower_first, one_line, values_in
from optimizer.sim.judges import failures, parse_files
from optimizer.sim.text import (
    bullet_indexes,
    bullet_text,
    facts,
    snippets,
    split_front_matter,
    stem,
    stems,
    strip_snippets,
    words,
)
from optimizer.tags import parse_tags
from optimizer.words import phrases, plural

Section = Callable[[str], "str | None"]
MAX_DESCRIPTION = 1024
_COPIED = re.compile(r"\bvalues\b.*\bgeneral\b", re.I | re.S)


def propose(get: Section, rng: random.Random, knobs: Any) -> dict:
    files = parse_files(get("skill_files"))
    main = next((f for f in files if f["path"].endswith("SKILL.md")), None)
    path, content = (main["path"], main["content"]) if main else ("SKILL.md", "")
    if not content.endswith("\n"):
        content += "\n"
    lost = " ".join(c for _, c in parse_tags(get("lost_attempts") or "", "attempt")).lower()
    for _ in range(3):  # what was tried from this parent and did not win is not proposed again
        kind = _kind(rng, knobs)
        if kind == "overfit" and _COPIED.search(get("previous_problems") or ""):
            # Told that its last proposal pasted the evals' values, an author writes the general
            # instruction instead (what a model asked to do so does, most of the time).
            kind = "good"
        if (get("target") or "body").strip().lower() == "description":
            found = _description(get, path, content, kind == "good", rng)
        else:
            found = _body(get, path, content, kind, rng, lost)
        if found["summary"].lower() not in lost:
            break
    return found


_one_line, _lower_first = one_line, lower_first


def _result(summary: str, rationale: str, edit: dict) -> dict:
    return {"summary": _one_line(summary), "rationale": rationale, "edits": [edit]}


def _edit(path: str, before: str, after: str, old: str, new: str) -> dict:
    # A replace is smaller to review, but only safe when its anchor is unique in the file.
    if old and before.count(old) == 1 and before.replace(old, new) == after:
        return {"path": path, "action": "replace", "old": old, "new": new}
    return {"path": path, "action": "write", "content": after}


# --- body ---------------------------------------------------------------------------------------


def _kind(rng: random.Random, knobs: Any) -> str:
    """good, overfit, harmful or neutral, at the knobs' rates (the rest are neutral)."""
    u = rng.random()
    for kind, rate in (
        ("good", knobs.proposal_quality),
        ("overfit", knobs.overfit_rate),
        ("harmful", knobs.harmful_rate),
    ):
        if u < rate:
            return kind
        u -= rate
    return "neutral"


def _format_line(items: list[str]) -> str:
    """A sentence that asks for named tokens, as an author describing a format writes it."""
    if len(items) == 1:
        item = items[0]
        if re.match(r"#+\s", item):
            return f"- Add a `{item}` section to every answer, with a few sentences under it."
        if item.startswith("|"):
            return f"- Lay the table out as `{item}`."
        if item.endswith(":"):
            return f"- State the `{item}` near the top of the answer."
        return f"- Give the `{item}` wherever the answer lists its entries."
    named = ", ".join(f"`{i}`" for i in items[:-1]) + f" and `{items[-1]}`"
    return f"- Include {named} in every answer, where the format calls for them."


def _body(get: Section, path: str, content: str, kind: str, rng: random.Random, lost: str) -> dict:
    _, body = split_front_matter(content)
    head = content[: len(content) - len(body)]
    lines = body.split("\n")
    marks = bullet_indexes(lines)
    last = marks[-1] if marks else None
    reported = sorted(failures(get("failed_expectations")), key=lambda f: -f[1])
    # Counted before one wording from several evals is one entry: that makes a value a convention.
    shared = _shared_facts(reported)
    failed = _unique(reported)

    def insert(new_lines: list[str]) -> tuple[str, str, str]:
        at = last + 1 if last is not None else len(lines) - (lines[-1] == "")
        pad = [] if last is not None else [""]
        after = head + "\n".join(lines[:at] + pad + new_lines + lines[at:])
        anchor = lines[last] + "\n" if last is not None else ""
        return after, anchor, anchor + "\n".join(new_lines) + "\n"

    def unseen(line: str) -> bool:
        said = bullet_text(line).lower().rstrip(".")  # a summary joins its lines with "; "
        return said not in lost and said not in body.lower()

    # One line per cause, with every failure it would fix: a cause behind failures in several
    # evals outranks any one of them, which is what finding the cause means.
    fixes: dict[str, list[tuple[str, int, str]]] = {}
    for text, count, eval_id in failed:
        fix = instruction_for(text, shared)
        # A format the skill already names failed because it was missed, not because it is
        # missing: asking again is no fix.
        named = (
            snippets(text)
            and not facts(strip_snippets(text))
            and all(s in body for s in snippets(text))
        )
        if fix is not None and not named and unseen(fix) and _one_line(text).lower() not in lost:
            fixes.setdefault(fix, []).append((text, count, eval_id))
    causes = sorted(fixes.items(), key=lambda f: -sum(n for _, n, _ in f[1]))
    if kind == "good" and causes:
        # A careful author often fixes the two most frequent causes in one pass.
        chosen = causes[: 2 if len(causes) > 1 and rng.random() < 0.7 else 1]
        after, old, new = insert([f for f, _ in chosen])
        why = "; ".join(
            f'"{_one_line(t)}" failed in {plural(n, "run")} of eval {e or "?"}'
            for _, cases in chosen
            for t, n, e in cases[:3]
        )
        return _result(
            "Ask for what the failing expectations need: "
            + phrases(bullet_text(f) for f, _ in chosen),
            f"{why}. The new instruction asks for the work behind the failure, in words that fit "
            "any task of this kind rather than one eval's values.",
            _edit(path, content, after, old, new),
        )
    # The edit a careless author makes: one eval's own wording and values, copied in (values
    # first: one eval's figures are what a careless author copies), never a copy already tried.
    ranked = sorted(failed, key=lambda f: not facts(strip_snippets(f[0])))
    copied = [f for f in ranked if unseen(_copy(f[0])) and _one_line(f[0]).lower() not in lost]
    if kind == "overfit" and copied:
        copied = copied[:2]
        after, old, new = insert([_copy(t) for t, _, _ in copied])
        return _result(
            "Add instructions for failing expectations: "
            + "; ".join(f'"{_one_line(t)}"' for t, _, _ in copied),
            "The skill never asked for these explicitly.",
            _edit(path, content, after, old, new),
        )
    if kind == "harmful" and (marks or failed):
        return _harm(path, content, head, lines, marks, rng, insert)
    return _neutral(path, content, head, lines, marks, rng)


def _copy(text: str) -> str:
    values = facts(strip_snippets(text))
    if values and not snippets(text):
        return f"- State {', '.join(values)} in the answer."
    return f"- Make sure that {_lower_first(_one_line(text)).rstrip('.')}."


def _harm(
    path: str,
    content: str,
    head: str,
    lines: list[str],
    marks: list[int],
    rng: random.Random,
    insert: Callable,
) -> dict:
    """A careless author's edit, from the skill's text alone (the proposer never knows which
    instruction does the work): drop an instruction as noise, or "tighten" the skill by turning
    one of its instructions into a prohibition, or by asking to leave out what an author guesses
    is padding."""
    if marks and rng.random() < 0.5:
        i = rng.choice(marks)
        after = head + "\n".join(lines[:i] + lines[i + 1 :])
        return _result(
            f"Simplify: remove '{bullet_text(lines[i])}'",
            "Shorter skills are followed more reliably, and the agent does this anyway.",
            _edit(path, content, after, lines[i] + "\n", ""),
        )
    if marks and rng.random() < 0.5:
        said = bullet_text(lines[rng.choice(marks)]).rstrip(".")
        line = f"- Do not {_lower_first(said)}; it makes answers longer than they need to be."
    else:
        line = f"- {rng.choice(CARELESS)}"
    after, old, new = insert([line])
    return _result(
        f"Tighten: {bullet_text(line)}",
        "Long answers dilute the important parts.",
        _edit(path, content, after, old, new),
    )


# What a careless author cuts to make answers shorter: written as an author writes it, not read
# from the world.
CARELESS = (
    "Skip caveats, open questions and notes on missing data; they distract the reader.",
    "Leave out any summary or recap at the end; the details speak for themselves.",
    "No need to propose follow-up work; the reader plans it.",
    "Keep to the facts asked for; do not explain causes or fixes.",
    "Do not spell out who is affected; the reader knows the audience.",
    "Write plain paragraphs; avoid splitting the answer under headings.",
    "Round figures freely; do not copy them digit for digit.",
    "Use the team's own terms without explaining them.",
)


def _unique(failed: list[tuple[str, int, str]]) -> list[tuple[str, int, str]]:
    """One entry per expectation text: the same wording failing in two evals is one habit."""
    seen: dict[str, tuple[str, int, str]] = {}
    for text, count, eval_id in failed:
        seen.setdefault(_one_line(text).lower(), (text, count, eval_id))
    return list(seen.values())


def _shared_facts(failed: list[tuple[str, int, str]]) -> set[str]:
    """Values that failing expectations of two or more evals name: a convention of the skill
    (a brand colour every page must use), not one task's answer."""
    evals_of: dict[str, set[str]] = {}
    for text, _, eval_id in failed:
        for fact in values_in(text):
            evals_of.setdefault(fact, set()).add(eval_id)
    return {fact for fact, evals in evals_of.items() if len(evals) >= 2}


def _neutral(
    path: str, content: str, head: str, lines: list[str], marks: list[int], rng: random.Random
) -> dict:
    if not marks:
        after = content.rstrip("\n") + "\n\n- Follow the steps above in order.\n"
        return _result(
            "Reword: state that the steps are ordered",
            "No failures to address.",
            {"path": path, "action": "write", "content": after},
        )
    i = rng.choice(marks)
    text = bullet_text(lines[i])
    bullet = re.match(r"\s*(?:[-*]|\d+\.)\s+", lines[i])
    assert bullet is not None  # marks are bullet lines (text.bullet_indexes)
    prefix = bullet.group(0)
    reworded = text[7:] if text.startswith("Always ") else "Always " + _lower_first(text)
    new_line = prefix + reworded
    after = head + "\n".join(lines[:i] + [new_line] + lines[i + 1 :])
    return _result(
        f"Reword: '{_one_line(text)}'",
        "No failures to address; a small rewording.",
        _edit(path, content, after, lines[i] + "\n", new_line + "\n"),
    )


# --- description --------------------------------------------------------------------------------


def _quote(text: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9(][^:#\n\"'\\{}\[\]]*[^:\s]", text):
        return text
    return json.dumps(text, ensure_ascii=False)


def _set_description(front: str, description: str) -> str:
    out, skipping, placed = [], False, False
    for line in front.split("\n"):
        if skipping and (line.startswith((" ", "\t")) or not line.strip()):
            continue
        skipping = False
        if line.startswith("description:"):
            out.append(f"description: {_quote(description)}")
            skipping, placed = True, True
        else:
            out.append(line)
    if not placed:
        out.append(f"description: {_quote(description)}")
    return "\n".join(out)


def _drop_words(text: str, doomed: set[str]) -> str:
    kept = [t for t in text.split() if stem(re.sub(r"[^a-z0-9]", "", t.lower())) not in doomed]
    return re.sub(r"\s+([,.;])", r"\1", " ".join(kept)).strip(" ,;")


def _description(get: Section, path: str, content: str, good: bool, rng: random.Random) -> dict:
    front, body = split_front_matter(content)
    meta = (yaml.safe_load(front) if front else None) or {}
    meta = meta if isinstance(meta, dict) else {}
    old = _one_line(str(meta.get("description") or ""))
    name = str(meta.get("name") or "")
    queries = [
        (a.get("should_trigger", "true").lower() == "true", _one_line(q))
        for a, q in parse_tags(get("missed_queries") or "", "query")
    ]
    positive = [q for wanted, q in queries if wanted]
    negative = [q for wanted, q in queries if not wanted]
    known = stems(name.replace("-", " ") + " " + old)
    new = old
    if good:
        added = [w for q in positive for w in words(q) if stem(w) not in known]
        added = list(dict.fromkeys(added))[:12]
        if added:
            new = f"{old.rstrip('. ')}. Use it for requests about {', '.join(added)}."
        keep = stems(" ".join(positive) + " " + name.replace("-", " "))
        new = _drop_words(new, stems(" ".join(negative)) - keep)
        summary = "Description: cover the missed queries" if queries else "Description: reword"
    else:
        own = words(old)
        doomed = {stem(w) for w in rng.sample(own, k=max(1, len(own) // 3))} if own else set()
        new = _drop_words(old, doomed)
        summary = "Description: make it shorter"
    new = re.sub(r"[<>]", "", new)
    if len(new) > MAX_DESCRIPTION:
        new = new[:MAX_DESCRIPTION].rsplit(" ", 1)[0]
    if new == old and old and not old.startswith("Use this"):
        new = f"Use this skill to {_lower_first(old)}"
    front_out = _set_description(front or (f"name: {name}" if name else ""), new or old)
    after = f"---\n{front_out}\n---\n{body}"
    return _result(
        summary,
        f"{len(positive)} missed should-trigger and {len(negative)} false-trigger queries.",
        {"path": path, "action": "write", "content": after},
    )
