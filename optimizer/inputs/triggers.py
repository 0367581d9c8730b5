"""Trigger evals ({query, should_trigger} lists): load, check, split into train, validation and a
sealed test. Never moves a query out of its split, and never stops at the first problem."""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from optimizer.errors import BadInput

TRIGGER_FILE = Path("evals") / "trigger_evals.json"
MAX_BYTES = 1024 * 1024
# train / validation / sealed test. Half to learn from, a quarter to choose with, a quarter kept
# for the final report; per class, so every split sees both kinds of query when it can.
FRACTIONS = (0.5, 0.25, 0.25)


@dataclass(frozen=True)
class Query:
    id: int
    query: str
    should_trigger: bool
    # In a fleet night, the sibling whose should-trigger request this is (a should-not query of
    # this skill); "" for the skill's own queries.
    owner: str = ""


@dataclass(frozen=True)
class TriggerSet:
    queries: list[Query]
    source: Path
    hash: str
    eval_config: dict = field(default_factory=dict)  # trigger files carry no settings of their own
    # In a fleet night, the siblings (name, description) every probe lists beside the distractors.
    rivals: tuple[tuple[str, str], ...] = ()

    def with_siblings(self, siblings: list[tuple[str, str, TriggerSet]]) -> TriggerSet:
        """This set with each sibling's should-trigger queries as should-not queries of its own
        (owner: the sibling), and the siblings as rivals: a description that starts taking a
        sibling's requests loses those queries. A query the skill already has is not repeated."""
        have = {_normal(q.query) for q in self.queries}
        queries = list(self.queries)
        for name, _description, theirs in siblings:
            for q in theirs.queries:
                if q.should_trigger and _normal(q.query) not in have:
                    have.add(_normal(q.query))
                    queries.append(Query(len(queries), q.query, False, owner=name))
        canonical = json.dumps([[q.query, q.should_trigger, q.owner] for q in queries])
        rivals = tuple((name, description) for name, description, _ in siblings)
        digest = hashlib.sha256(f"{canonical}{rivals}".encode()).hexdigest()[:16]
        return TriggerSet(queries, self.source, digest, self.eval_config, rivals)

    def by_id(self, query_id: int) -> Query:
        return next(q for q in self.queries if q.id == query_id)


@dataclass(frozen=True)
class Split:
    train: list[int]
    validation: list[int]
    test: list[int]
    note: str


# -- loading -------------------------------------------------------------------------------------


def _short(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def _read(source: Path) -> object:
    if not source.is_file():
        raise BadInput(
            f"{source}: missing; write the trigger evals there (a JSON list of "
            '{"query": ..., "should_trigger": true|false}) or pass --evals PATH.'
        )
    if source.stat().st_size > MAX_BYTES:
        raise BadInput(
            f"{source}: over {MAX_BYTES // 1024} KB; trigger evals are short user requests."
        )
    try:
        return json.loads(source.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise BadInput(f"{source}: not UTF-8 text; save it as UTF-8 JSON.") from None
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"{source}: not valid JSON ({exc.msg} at line {exc.lineno}, column "
            f"{exc.colno}); fix the syntax there."
        ) from None


def _item_problems(source: Path, i: int, item: object) -> list[str]:
    at = f"{source}: [{i}]"
    if not isinstance(item, dict):
        return [
            f"{at} is {_short(item)}, not an object; write "
            '{"query": "...", "should_trigger": true}.'
        ]
    problems = [
        f"{at}.{key} is not a known field; use only query and should_trigger."
        for key in item
        if key not in ("query", "should_trigger")
    ]
    query, wanted = item.get("query"), item.get("should_trigger")
    if "query" not in item:
        problems.append(f"{at}.query is missing; add the user's request as text.")
    elif not isinstance(query, str):
        problems.append(f"{at}.query is {_short(query)}, not text; write the request in quotes.")
    elif not query.strip():
        problems.append(f"{at}.query is empty; write the user's request, or remove the item.")
    if "should_trigger" not in item:
        problems.append(f"{at}.should_trigger is missing; add true or false.")
    elif not isinstance(wanted, bool):
        problems.append(
            f"{at}.should_trigger is {_short(wanted)}, not true or false; write "
            "true or false without quotes."
        )
    return problems


def load(skill_dir: Path, path: Path | None = None) -> TriggerSet:
    """The trigger evals of a skill (default SKILL_DIR/evals/trigger_evals.json), or BadInput
    naming the file and the JSON path of every problem at once."""
    source = Path(path) if path is not None else Path(skill_dir) / TRIGGER_FILE
    data = _read(source)
    if not isinstance(data, list):
        raise BadInput(
            f"{source}: the top level is a JSON {type(data).__name__}, not a list; write "
            '[{"query": "...", "should_trigger": true}, ...].'
        )
    if not data:
        raise BadInput(
            f"{source}: an empty list; add queries that should and should not trigger the skill."
        )
    problems: list[str] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(data):
        problems += _item_problems(source, i, item)
        query = item.get("query") if isinstance(item, dict) else None
        if isinstance(query, str) and query.strip():
            first = seen.setdefault(_normal(query), i)
            if first != i:
                problems.append(
                    f"{source}: [{i}].query repeats [{first}].query; remove one, "
                    "since each query counts once."
                )
    classes = {item.get("should_trigger") for item in data if isinstance(item, dict)}
    for value, kind in ((True, "should"), (False, "should not")):
        if not problems and value not in classes:
            problems.append(
                f"{source}: no query has should_trigger {str(value).lower()}; add "
                f"requests that {kind} use the skill, since both classes are needed."
            )
    if problems:
        raise BadInput(*problems)
    queries = [
        Query(i, item["query"].strip(), item["should_trigger"]) for i, item in enumerate(data)
    ]
    canonical = json.dumps([[q.query, q.should_trigger] for q in queries], ensure_ascii=False)
    return TriggerSet(queries, source, hashlib.sha256(canonical.encode()).hexdigest()[:16])


def _counts(n: int) -> tuple[int, int]:
    """(validation, test) of one class of n queries: each split gets one as soon as the class has
    enough (2 give train + validation, 3 give one each); train always keeps the most."""
    if n < 2:
        return 0, 0
    if n == 2:
        return 1, 0
    val = max(1, math.floor(n * FRACTIONS[1] + 0.5))
    test = max(1, math.floor(n * FRACTIONS[2] + 0.5))
    return val, test


def split(tset: TriggerSet, *, seed: int) -> Split:
    """Seeded split stratified by class (see FRACTIONS and _counts); the same file and seed always
    give the same split."""
    rng = random.Random(f"{seed}:trigger-split")
    parts: dict[str, list[int]] = {"train": [], "validation": [], "test": []}
    mix = []
    for wanted in (True, False):
        ids = sorted(q.id for q in tset.queries if q.should_trigger is wanted)
        rng.shuffle(ids)
        val, test = _counts(len(ids))
        parts["test"] += ids[:test]
        parts["validation"] += ids[test : test + val]
        parts["train"] += ids[test + val :]
        mix.append(
            f"{'should' if wanted else 'should not'} trigger: {len(ids) - val - test} train, "
            f"{val} validation, {test} test"
        )
    note = (
        f"{len(tset.queries)} trigger queries split by class ({'; '.join(mix)}; seed {seed}); "
        "the test queries are sealed until the final report."
    )
    return Split(sorted(parts["train"]), sorted(parts["validation"]), sorted(parts["test"]), note)


def split_json(tset: TriggerSet, sp: Split) -> str:
    """What state.db keeps: the split and the queries themselves, so a run never rereads the file."""
    return json.dumps(
        {
            "train": sp.train,
            "validation": sp.validation,
            "test": sp.test,
            "note": sp.note,
            "source": str(tset.source),
            "hash": tset.hash,
            "queries": [
                {
                    "id": q.id,
                    "query": q.query,
                    "should_trigger": q.should_trigger,
                    **({"owner": q.owner} if q.owner else {}),
                }
                for q in tset.queries
            ],
            **({"rivals": [list(r) for r in tset.rivals]} if tset.rivals else {}),
        }
    )
