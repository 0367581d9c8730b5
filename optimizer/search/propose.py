"""The proposer: one call that turns a parent version and its evidence into a candidate skill
folder, checked before it may become a version (the request is built here; what a proposal is
made of is proposal.py, its edits are applied by edits.py). Never writes outside the candidate
folder, and never shows the proposer the evals or anything of the sealed test split."""

from __future__ import annotations

import shutil
from pathlib import Path

import structlog

from optimizer.inputs import skill as skills
from optimizer.model.prompts import load_prompt
from optimizer.schemas import ProposalAnswer
from optimizer.search import copied
from optimizer.search.edits import apply_edits
from optimizer.search.proposal import Candidate, EvalCost, Feedback, Rejected
from optimizer.tags import data, tag
from optimizer.words import clip

log = structlog.get_logger()

SHOWN_FILE_CHARS = 20_000
MAX_EVIDENCE_CHARS = 60_000  # what the proposer reads about the runs, beside the skill itself


def bullet_lines(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items) or "(none)"


def build_request(parent: Path, feedback: Feedback, target: str) -> str:
    """The skill's files, then the evidence in priority order within MAX_EVIDENCE_CHARS: what
    failed and how the failing runs went first, the author's and the judges' words after; a
    section that no longer fits is replaced by a note saying so."""
    files = skills.files_of(parent, include_evals=False)
    shown = []
    for rel, content in files.items():
        if isinstance(content, bytes):
            shown.append(tag("file", f"(binary, {len(content)} bytes)", path=rel, binary="true"))
        else:
            text = (
                content
                if len(content) <= SHOWN_FILE_CHARS
                else (
                    content[:SHOWN_FILE_CHARS]
                    + f"\n[… {len(content) - SHOWN_FILE_CHARS:,} characters truncated …]"
                )
            )
            shown.append(data("file", text, path=rel))
    failures = (
        "\n".join(
            tag("failure", f.text, eval=f.eval_id, count=f.count, evidence=f.evidence[:300])
            for f in feedback.failures
        )
        or "(none: every expectation passed)"
    )
    excerpts = (
        "\n".join(
            data("failing_run", f.excerpt, eval=f.eval_id, expectation=f.text[:120])
            for f in feedback.failures
            if f.excerpt
        )
        or "(none)"
    )
    attempts = "\n".join(data("attempt", a) for a in feedback.lost_attempts) or "(none)"
    evidence = [
        tag("failed_expectations", failures),
        tag("transcript_excerpts", excerpts),
        tag("eval_costs", render_costs(feedback.costs)),
        data("repeated_work", bullet_lines(feedback.repeated_work)),
        tag("human_feedback", bullet_lines(feedback.human_feedback)),
        # Models wrote these, from outputs the skill produced: data, like the outputs.
        data("judge_feedback", bullet_lines(feedback.judge_feedback)),
        data("analysis_suggestions", bullet_lines(feedback.analysis_suggestions)),
        tag("lost_attempts", attempts),
    ]
    if target == "description":
        queries = "\n".join(
            tag("query", q, should_trigger=str(s).lower()) for q, s in feedback.missed_queries
        )
        evidence.insert(0, tag("missed_queries", queries or "(none)"))
    return "\n\n".join(
        [
            tag("target", target),
            tag("skill_files", "\n".join(shown)),
            *_within(evidence, MAX_EVIDENCE_CHARS),
        ]
    )


def render_costs(costs: list[EvalCost]) -> str:
    # Tokens and turns, not seconds: wall time depends on what else ran at once, and nothing
    # sent to a model may depend on timing (docs/design.md §12); tokens and turns measure the same cost.
    lines = [
        f"eval {c.eval_id}: pass rate {c.pass_rate:.2f}, {c.tokens:,.0f} tokens, "
        f"{c.turns:.1f} turns (mean of {c.runs} runs)"
        for c in costs
    ]
    return "\n".join(lines) or "(none)"


def _within(sections: list[str], budget: int) -> list[str]:
    """The sections in order while they fit; each later one becomes a one-line note."""
    kept, left = [], budget
    for text in sections:
        if len(text) <= left:
            kept.append(text)
            left -= len(text)
            continue
        name = text[1 : text.index(">")].split()[0]
        kept.append(
            tag(name, f"[… not shown: {len(text):,} characters, over the evidence limit …]")
        )
        left = 0  # a later, smaller section never jumps ahead of a more important one
    return kept


async def propose(
    client,
    *,
    parent: Path,
    feedback: Feedback,
    target: str,
    dest: Path,
    sample: int,
    values: frozenset[str] = frozenset(),
    wording: copied.EvalWording = copied.EvalWording(),
) -> Candidate | Rejected:
    """Ask once; on problems ask once more with them; then give up (a counted, logged rejection).
    A candidate that copies any of the train evals' specific `values` into the skill is such a
    problem (search/copied.py), and so is one that restates the evals' `wording`: sent back once,
    then refused, never accepted."""
    # Imported here: the model package's errors import the anthropic SDK (2 s of CPU), which a
    # command that reads this module and never asks the proposer does not need.
    from optimizer.model import StructuredAnswerError

    system = load_prompt("proposer").render()
    request = build_request(parent, feedback, target)
    messages: list[dict] = [{"role": "user", "content": request}]
    problems: list[str] = []
    for attempt in (0, 1):
        if problems:
            messages = [
                {
                    "role": "user",
                    "content": request
                    + "\n\n"
                    + tag(
                        "previous_problems",
                        bullet_lines(problems)
                        + "\nYour previous proposal was rejected for these reasons; propose again without them.",
                    ),
                }
            ]
        try:
            answer = await client.structured(
                "proposer",
                system=system,
                messages=messages,
                schema=ProposalAnswer,
                tool_name="submit_proposal",
                sample=sample * 2 + attempt,
            )
        except StructuredAnswerError as exc:
            problems = [f"the answer did not fit the proposal form: {exc}"]
            continue
        problems = apply_edits(parent, dest, answer, target=target)
        if not problems and (found := copied.copied(parent, dest, values)):
            problems = [copied.problem(found)]
        if not problems and (said := copied.restated(parent, dest, wording)):
            problems = [copied.restated_problem(said)]
        if not problems:
            return Candidate(dest, _summary(answer), answer.rationale)
        log.info("proposal.rejected", attempt=attempt + 1, problems=problems)
    shutil.rmtree(dest, ignore_errors=True)
    return Rejected(problems)


def _summary(answer: ProposalAnswer) -> str:
    """The first non-blank line of the summary; a blank one is no reason to lose a proposal."""
    for text in (answer.summary, answer.rationale):
        line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        if line:
            return clip(line, 200)
    return clip("edits " + ", ".join(sorted({e.path for e in answer.edits})), 200)


def proposal_markdown(label: str, parent_label: str, candidate: Candidate, diff: str) -> str:
    return (
        f"# {label}: {candidate.summary}\n\nParent: {parent_label}\n\n## Rationale\n\n"
        f"{candidate.rationale.strip()}\n\n## Diff against {parent_label}\n\n```diff\n{diff}```\n"
    )
