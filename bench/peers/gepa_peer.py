"""GEPA (gepa 0.1.4) on our world: its own `optimize` — epoch-shuffled minibatches, Pareto
candidate selection over the train evals, minibatch acceptance (strict improvement of the sum),
merge of frontier candidates on or off — with an adapter whose evaluate runs our executor and
grader on GEPA's minibatch, one new rollout per metric call.

The simulator cannot answer GEPA's reflection prompt (it plays our roles only), so our proposer
sits behind GEPA's proposal hook (`propose_new_texts`), shown the failures of the parent's runs on
GEPA's minibatch: the comparison is of search and selection. The one component is SKILL.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from peers.arena import Arena, BudgetSpent

COMPONENT = "SKILL.md"


class SkillAdapter:
    """GEPAAdapter: a data instance is a train eval id; a candidate is {"SKILL.md": text}."""

    def __init__(self, arena: Arena) -> None:
        self.arena = arena
        self.proposed = 0
        self.rejected = 0

    def evaluate(self, batch: list[int], candidate: dict[str, str], capture_traces: bool = False):
        from gepa.core.adapter import EvaluationBatch

        label = self.arena.add(candidate[COMPONENT])
        scores = self.arena.sync(self.arena.evaluate(label, list(batch)))
        values = [scores[e] for e in batch]
        traces = [{"label": label, "eval": e, "score": scores[e]} for e in batch]
        return EvaluationBatch(
            outputs=traces, scores=values, trajectories=traces if capture_traces else None
        )

    def make_reflective_dataset(
        self, candidate: dict[str, str], eval_batch: Any, components_to_update: list[str]
    ) -> Mapping[str, Sequence[Mapping[str, Any]]]:
        return {name: list(eval_batch.trajectories or []) for name in components_to_update}

    def propose_new_texts(
        self,
        candidate: dict[str, str],
        reflective_dataset: Mapping[str, Sequence[Mapping[str, Any]]],
        components_to_update: list[str],
    ) -> dict[str, str]:
        records = [r for name in components_to_update for r in reflective_dataset.get(name, [])]
        parent = self.arena.add(candidate[COMPONENT])
        evals = sorted({int(r["eval"]) for r in records}) or self.arena.train
        self.proposed += 1
        child = self.arena.sync(self.arena.propose(parent, evals))
        if child is None:  # a rejected proposal: GEPA sees the parent again and rejects it
            self.rejected += 1
            return dict(candidate)
        return {COMPONENT: self.arena.skill_md(child)}


class _Spent:
    """GEPA's stop callback: the arena's budget, checked between iterations."""

    def __init__(self, arena: Arena) -> None:
        self.arena = arena

    def __call__(self, gepa_state: Any) -> bool:
        return self.arena.spent()


def run_gepa(arena: Arena, *, use_merge: bool, seed: int) -> tuple[str, str]:
    import gepa

    adapter = SkillAdapter(arena)
    train = list(arena.train)
    try:
        result = gepa.optimize(
            seed_candidate={COMPONENT: arena.skill_md("v0")},
            trainset=train,
            valset=train,
            adapter=adapter,
            candidate_selection_strategy="pareto",
            reflection_minibatch_size=min(3, len(train)),
            use_merge=use_merge,
            stop_callbacks=[_Spent(arena)],
            seed=seed,
            raise_on_exception=False,
            logger=_Quiet(),
            display_progress_bar=False,
        )
    except BudgetSpent:  # spent while GEPA scored its seed candidate: nothing was searched
        return arena.add(arena.skill_md("v0")), "budget spent on the seed's evaluation"
    best = result.best_candidate
    text = best[COMPONENT] if isinstance(best, dict) else str(best)
    note = (
        f"{len(result.candidates)} candidates kept, {adapter.proposed} proposals "
        f"({adapter.rejected} rejected)"
    )
    return arena.add(text), note


class _Quiet:
    def log(self, message: str) -> None:
        pass


async def gepa_merge_off(arena: Arena, budget_usd: float) -> tuple[str, str]:
    return await arena.in_thread(run_gepa, arena, use_merge=False, seed=arena.settings.loop.seed)


async def gepa_merge_on(arena: Arena, budget_usd: float) -> tuple[str, str]:
    return await arena.in_thread(run_gepa, arena, use_merge=True, seed=arena.settings.loop.seed)
