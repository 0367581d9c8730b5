"""The simulated proposer: good edits (the general habit behind a frequent failure) with
probability proposal_quality, plausible bad ones otherwise (dropping or muting an instruction, or
copying one eval's expectation and values into the skill: overfitting, which gains on that eval
and nowhere else). Never touches the front matter in body mode."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from typing import Any

import yaml

from optimizer.sim.judges import failures, parse_files
from optimizer.sim.text import (
    NEGATIVE,
    TASK_VALUES,
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

Section = Callable[[str], "str | None"]
MAX_DESCRIPTION = 1024


def propose(get: Section, rng: random.Random, knobs: Any) -> dict:
    files = parse_files(get("skill_files"))
    main = next((f for f in files if f["path"].endswith("SKILL.md")), None)
    path, content = (main["path"], main["content"]) if main else ("SKILL.md", "")
    if not content.endswith("\n"):
        content += "\n"
    good = rng.random() < knobs.proposal_quality
    if (get("target") or "body").strip().lower() == "description":
        return _description(get, path, content, good, rng)
    return _body(get, path, content, good, rng)


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _lower_first(text: str) -> str:
    first = text.split(" ", 1)[0]
    return text[0].lower() + text[1:] if first[:1].isupper() and first[1:].islower() else text


def _result(summary: str, rationale: str, edit: dict) -> dict:
    return {"summary": _one_line(summary), "rationale": rationale, "edits": [edit]}


def _edit(path: str, before: str, after: str, old: str, new: str) -> dict:
    # A replace is smaller to review, but only safe when its anchor is unique in the file.
    if old and before.count(old) == 1 and before.replace(old, new) == after:
        return {"path": path, "action": "replace", "old": old, "new": new}
    return {"path": path, "action": "write", "content": after}


# --- body ---------------------------------------------------------------------------------------


def _body(get: Section, path: str, content: str, good: bool, rng: random.Random) -> dict:
    _, body = split_front_matter(content)
    head = content[: len(content) - len(body)]
    lines = body.split("\n")
    marks = bullet_indexes(lines)
    last = marks[-1] if marks else None
    reported = sorted(failures(get("failed_expectations")), key=lambda f: -f[1])
    # Shared values are counted before the same wording from several evals becomes one entry:
    # that wording failing in two evals is exactly what makes its value a convention.
    shared = _shared_facts(reported)
    failed = _unique(reported)
    lost = " ".join(c for _, c in parse_tags(get("lost_attempts") or "", "attempt")).lower()
    fresh = [f for f in failed if _general(f[0], shared).lower() not in lost + " " + body.lower()]

    def insert(new_lines: list[str]) -> tuple[str, str, str]:
        at = last + 1 if last is not None else len(lines) - (lines[-1] == "")
        pad = [] if last is not None else [""]
        after = head + "\n".join(lines[:at] + pad + new_lines + lines[at:])
        anchor = lines[last] + "\n" if last is not None else ""
        return after, anchor, anchor + "\n".join(new_lines) + "\n"

    if failed and good and fresh:
        # A good author generalises: one task's values stay out of the skill, the habit goes in.
        chosen = fresh[: 2 if len(fresh) > 1 and rng.random() < 0.5 else 1]
        added = [f"- Whatever the task, {_lower_first(_general(t, shared))}; readers of every "
                 "answer look for it." for t, _, _ in chosen]
        after, old, new = insert(added)
        names = "; ".join(f'"{_one_line(t)}"' for t, _, _ in chosen)
        why = "; ".join(f"failed in {n} run(s) of eval {e or '?'}" for _, n, e in chosen)
        return _result(
            f"Generalise from failing expectations: {names}",
            f"These expectations {why}; the skill now asks for the habit behind them in every "
            "task, not for one eval's values.",
            _edit(path, content, after, old, new),
        )
    specific = [f for f in fresh if _general(f[0], shared) != _one_line(f[0])]
    if failed and not good and specific and rng.random() < 0.5:
        # The overfitting edit a careless author makes: the eval's own wording and values.
        chosen = specific[:2]
        after, old, new = insert([f"- Make sure that {_lower_first(_one_line(t))}"
                                  for t, _, _ in chosen])
        return _result(
            "Add instructions for failing expectations: "
            + "; ".join(f'"{_one_line(t)}"' for t, _, _ in chosen),
            "The skill never asked for these explicitly.",
            _edit(path, content, after, old, new),
        )
    if failed and not good:
        carriers = [i for i in marks if snippets(lines[i]) and not NEGATIVE.search(lines[i])]
        if carriers and rng.random() < 0.5:
            i = rng.choice(carriers)
            after = head + "\n".join(lines[:i] + lines[i + 1 :])
            return _result(
                f"Simplify: remove '{bullet_text(lines[i])}'",
                "Shorter skills are followed more reliably.",
                _edit(path, content, after, lines[i] + "\n", ""),
            )
        if carriers:
            snippet = rng.choice(snippets(lines[rng.choice(carriers)]))
            vague = f"- Keep the answer short; skip `{snippet}`."
        else:
            vague = "- Keep the answer short."
        after, old, new = insert([vague])
        return _result(
            "Tighten: keep the answer short",
            "Long answers dilute the important parts.",
            _edit(path, content, after, old, new),
        )
    return _neutral(path, content, head, lines, marks, rng)


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
        for fact in facts(strip_snippets(text)):
            evals_of.setdefault(fact, set()).add(eval_id)
    return {fact for fact, evals in evals_of.items() if len(evals) >= 2}


def _general(text: str, shared: set[str]) -> str:
    """The expectation without the values only one eval names, asking for the task's own."""
    line = _one_line(text)
    specific = [f for f in facts(strip_snippets(line)) if f not in shared]
    for fact in specific:
        line = re.sub(rf"[\"'\u201c]?{re.escape(fact)}[\"'\u201d]?", "", line, count=1)
    if not specific:
        return line
    line = re.sub(r"\s+", " ", line).replace("( ", "(")
    line = re.sub(r"\(\s*[,;]?\s*\)|\s+([,;:.)])", r"\1", line).strip(" ,;:")
    return f"{line} {TASK_VALUES}"


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
        added = list(dict.fromkeys(w for q in positive for w in words(q) if stem(w) not in known))[
            :12
        ]
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
    if new == old:
        new = (
            f"Use this skill to {_lower_first(old)}"
            if old and not old.startswith("Use this")
            else old
        )
    front_out = _set_description(front or (f"name: {name}" if name else ""), new or old)
    after = f"---\n{front_out}\n---\n{body}"
    return _result(
        summary,
        f"{len(positive)} missed should-trigger and {len(negative)} false-trigger queries.",
        {"path": path, "action": "write", "content": after},
    )
