"""The simulated grader, comparator and analyzer: replies in the exact field names of the seed
files, computed from the tagged sections of the prompt. Never sees which skill version is which."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping
from typing import Any

from optimizer.sim.latent import World, habits, topic_of
from optimizer.sim.meaning import counts, items_of
from optimizer.sim.support import section, support
from optimizer.sim.text import all_stems, facts, snippets, stems, strip_snippets
from optimizer.tags import parse_tags

Section = Callable[[str], "str | None"]
SHORT_OUTPUT = 200  # characters: below this a passing expectation is suspicious


def parse_files(text: str | None, seen: Mapping[str, str] | None = None) -> list[dict]:
    """`<file path=".." [binary="true"]>content</file>` entries, data sections included. An
    image attached to the request has the text the simulator could read in it (`seen`, by
    attachment key); any other binary has none. Converted office and PDF text is plain content."""
    seen = seen or {}
    return [
        {
            "path": attrs.get("path", "?"),
            "binary": attrs.get("binary") == "true",
            "content": seen.get(attrs.get("attachment", ""), "")
            if attrs.get("binary") == "true"
            else content.strip("\n"),
        }
        for attrs, content in parse_tags(text or "", "file")
    ]


def _expectations(get: Section) -> list[str]:
    raw = get("expectations") or ""
    tagged = [content.strip() for _, content in parse_tags(raw, "expectation")]
    return tagged or plain_lines(raw)


def plain_lines(raw: str) -> list[str]:
    """Untagged entries, one a line; a placeholder such as "(none)" is not an entry."""
    lines = [line.strip().lstrip("-* ").strip() for line in raw.splitlines()]
    return [line for line in lines if line and not re.fullmatch(r"\(.*\)", line)]


def _dimensions(get: Section) -> list[tuple[str, float, str]]:
    dims = []
    for attrs, content in parse_tags(get("rubric") or "", "dimension"):
        try:
            weight = float(attrs.get("weight", "1"))
        except ValueError:
            weight = 1.0
        dims.append((attrs.get("name", "quality"), weight, content.strip()))
    return dims


def _haystack(files: list[dict]) -> str:
    return "\n".join(f"{f['path']}\n{f['content']}" for f in files)


def check(
    expectation: str, files: list[dict], task: str = "", world: World | None = None
) -> tuple[bool, str]:
    """(passed, evidence) under the simulator's rule of support (sim/support.py)."""
    found = support(expectation, files, task, world)
    return found.passed, found.evidence


def _done_share(text: str, files: list[dict], world: World) -> float:
    """Of the habits a text names, the share whose sections the outputs hold; with none named,
    the share of the text's words the outputs carry."""
    topic = topic_of(text)
    named = [h for h in habits(world) if topic & h.cues]
    if not named:
        return _coverage(text, files)
    lines = [ln for f in files for ln in f["content"].split("\n") if ln.strip()]
    return sum(section(lines, h) is not None for h in named) / len(named)


def _dimension_score(name: str, desc: str, files: list[dict], world: World) -> tuple[int, str]:
    """A rubric dimension scores the sections of the habits it names (by their cue words) that
    the outputs hold: the content, not word overlap; a dimension naming none scores coverage."""
    topic = topic_of(name.replace("_", " ") + " " + desc)
    named = [h for h in habits(world) if topic & h.cues]
    if not named:
        coverage = _coverage(name.replace("_", " ") + " " + desc, files)
        return 1 + round(
            4 * coverage
        ), f"The outputs cover {coverage:.0%} of what '{name}' asks for."
    lines = [ln for f in files for ln in f["content"].split("\n") if ln.strip()]
    held = [h for h in named if section(lines, h) is not None]
    share = len(held) / len(named)
    shown = ", ".join(h.heading.lstrip("# ") for h in held) or "none"
    return 1 + round(4 * share), (
        f"{len(held)} of the {len(named)} things '{name}' rests on are "
        f"done in the outputs ({shown})."
    )


def _coverage(text: str, files: list[dict]) -> float:
    wanted = stems(text)
    return len(wanted & all_stems(_haystack(files))) / len(wanted) if wanted else 0.0


def grade(
    get: Section, rng: random.Random, knobs: Any, seen: Mapping[str, str] | None = None
) -> dict:
    files = parse_files(get("outputs"), seen)
    task = get("task") or ""
    results: list[dict[str, Any]] = []
    for text in _expectations(get):
        found = support(text, files, task, knobs.world)
        passed, evidence = found.passed, found.evidence
        # A noisy judge misses support that is there, or accepts a near miss; it never passes an
        # expectation without quoting what it leant on.
        if rng.random() < knobs.judge_noise and (passed or found.partial):
            passed = not passed
            evidence += (
                " The judge accepted this as close enough."
                if passed
                else " The judge did not accept this as meeting the expectation."
            )
        results.append({"text": text, "passed": passed, "evidence": evidence})
    n_pass = sum(r["passed"] for r in results)
    total = len(results)
    out_chars = sum(len(f["content"]) for f in files)
    grading: dict[str, Any] = {
        "expectations": results,
        "summary": {
            "passed": n_pass,
            "failed": total - n_pass,
            "total": total,
            "pass_rate": round(n_pass / total, 4) if total else 0.0,
        },
    }
    dims = _dimensions(get)
    if dims:
        scores, weighted = {}, 0.0
        for name, weight, desc in dims:
            score, why = _dimension_score(name, desc, files, knobs.world)
            if rng.random() < knobs.judge_noise:
                score += rng.choice((-1, 1))
            score = min(5, max(1, score))
            scores[name] = {"score": score, "evidence": why}
            weighted += score * weight
        mean = weighted / (sum(w for _, w, _ in dims) or 1.0)
        grading["rubric_scores"] = scores
        grading["rubric_summary"] = {
            "weighted_mean": round(mean, 4),
            "max_possible": 5.0,
            "normalized": round(mean / 5, 4),
        }
    grading["user_notes_summary"] = _notes(get("user_notes") or "")
    grading["claims"] = _claims(files, out_chars)
    grading["eval_feedback"] = _eval_feedback(results, out_chars)
    return grading


def _notes(text: str) -> dict[str, list[str]]:
    """The agent's notes as a judge would sum them up: each bullet under a heading that names
    uncertainty, review or a workaround, in its list."""
    lists: dict[str, list[str]] = {"uncertainties": [], "needs_review": [], "workarounds": []}
    current = None
    for line in text.splitlines():
        if line.startswith("#"):
            head = line.lower()
            current = next(
                (
                    k
                    for k, w in (
                        ("uncertainties", "uncertain"),
                        ("needs_review", "review"),
                        ("workarounds", "workaround"),
                    )
                    if w in head
                ),
                None,
            )
        elif current and line.strip().startswith(("- ", "* ")):
            lists[current].append(line.strip()[2:].strip())
    return lists


def _claims(files: list[dict], out_chars: int) -> list[dict]:
    if not files:
        return [
            {
                "claim": "An output file was produced",
                "type": "factual",
                "verified": False,
                "evidence": "The outputs section is empty.",
            }
        ]
    first = files[0]
    lines = [line for line in first["content"].splitlines() if line.strip()]
    return [
        {
            "claim": f"{first['path']} was written",
            "type": "factual",
            "verified": True,
            "evidence": f"{len(files)} file(s), {out_chars} characters in all.",
        },
        {
            "claim": "The answer is structured with a title",
            "type": "quality",
            "verified": bool(lines) and lines[0].startswith("#"),
            "evidence": f"First line: {lines[0][:80]!r}" if lines else "The file is empty.",
        },
    ]


def _eval_feedback(results: list[dict], out_chars: int) -> dict:
    suggestions = []
    for r in results:
        # A count, a value or an item makes an expectation precise however few its words.
        precise = counts(r["text"]) or items_of(r["text"]) or facts(strip_snippets(r["text"]))
        n_words = len(stems(strip_snippets(r["text"]))) + len(snippets(r["text"]))
        if n_words <= 2 and not precise:
            suggestions.append(
                {
                    "assertion": r["text"],
                    "reason": (
                        f"Too vague to discriminate: only {n_words} content word(s), so almost any "
                        "answer on the topic passes or fails it by chance."
                    ),
                }
            )
        elif r["passed"] and out_chars < SHORT_OUTPUT:
            suggestions.append(
                {
                    "assertion": r["text"],
                    "reason": (
                        f"Passes although the output is only {out_chars} characters: it checks "
                        "presence, not quality."
                    ),
                }
            )
    overall = (
        "The expectations discriminate reasonably well."
        if not suggestions
        else f"{len(suggestions)} expectation(s) could be sharpened; see the suggestions."
    )
    return {"suggestions": suggestions, "overall": overall}


# --- comparator ---------------------------------------------------------------------------------


def _side(
    get: Section, expectations: list[str], files: list[dict], dims_text: str, world: World
) -> dict:
    task = get("task") or ""
    details: list[dict[str, Any]] = [
        {"text": e, "passed": check(e, files, task, world)[0]} for e in expectations
    ]
    passed = sum(d["passed"] for d in details)
    rate = passed / len(details) if details else 0.0
    coverage = _done_share(dims_text, files, world) if files else 0.0
    lines = [line for f in files for line in f["content"].splitlines() if line.strip()]
    organization = 1 + min(4, sum(line.startswith("#") for line in lines) + (len(lines) >= 5))
    formatting = 2 + min(3, len(lines) // 4) if lines else 1
    content = {"correctness": 1 + round(4 * rate), "completeness": 1 + round(4 * coverage)}
    content["accuracy"] = round((content["correctness"] + content["completeness"]) / 2)
    structure = {
        "organization": organization,
        "formatting": formatting,
        "usability": round((organization + formatting) / 2),
    }
    content_score = round(sum(content.values()) / 3, 1)
    structure_score = round(sum(structure.values()) / 3, 1)
    return {
        "score": 0.7 * rate + 0.3 * coverage if details else coverage,
        "rubric": {
            "content": content,
            "structure": structure,
            "content_score": content_score,
            "structure_score": structure_score,
            "overall_score": round(content_score + structure_score, 1),
        },
        "quality": {
            "score": max(1, min(10, round(content_score + structure_score))),
            "strengths": [f"Meets: {d['text']}" for d in details if d["passed"]][:3]
            or (["Produces an answer file"] if files else ["Nothing notable"]),
            "weaknesses": [f"Misses: {d['text']}" for d in details if not d["passed"]][:3]
            or ([] if files else ["No output files"]),
        },
        "expectations": {
            "passed": passed,
            "total": len(details),
            "pass_rate": round(rate, 4),
            "details": details,
        },
    }


def compare(
    get: Section, rng: random.Random, knobs: Any, seen: Mapping[str, str] | None = None
) -> dict:
    expectations = _expectations(get)
    dims_text = " ".join(
        [get("task") or "", *expectations, *(f"{n} {d}" for n, _, d in _dimensions(get))]
    )
    a = _side(get, expectations, parse_files(get("output_a"), seen), dims_text, knobs.world)
    b = _side(get, expectations, parse_files(get("output_b"), seen), dims_text, knobs.world)
    diff = a["score"] - b["score"]
    winner = "TIE" if abs(diff) <= 0.05 else ("A" if diff > 0 else "B")
    if rng.random() < knobs.position_bias:
        winner = "A"  # the first answer read looks better to a tired judge
    reasoning = (
        f"Output A scores {a['score']:.2f} and output B {b['score']:.2f} on the expectations and "
        f"coverage of the task; "
        + ("neither is clearly better." if winner == "TIE" else f"output {winner} is preferred.")
    )
    return {
        "winner": winner,
        "reasoning": reasoning,
        "rubric": {"A": a["rubric"], "B": b["rubric"]},
        "output_quality": {"A": a["quality"], "B": b["quality"]},
        "expectation_results": {"A": a["expectations"], "B": b["expectations"]},
    }


# --- failures, as the analyzer and the proposer read them ------------------------------------


def failures(raw: str | None) -> list[tuple[str, int, str]]:
    """(text, count, eval id) of `<failure eval=".." count="..">` entries, or plain lines."""
    tagged = parse_tags(raw or "", "failure")
    if tagged:
        out = []
        for attrs, content in tagged:
            try:
                count = int(attrs.get("count", "1"))
            except ValueError:
                count = 1
            out.append((content.strip(), count, attrs.get("eval", "")))
        return out
    return [(line, 1, "") for line in plain_lines(raw or "")]
