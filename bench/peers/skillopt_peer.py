"""SkillOpt (skillopt 0.2.0) on our world: its own ReflACTTrainer — epochs of rollout → reflect →
aggregate → select (the textual learning rate: at most `learning_rate` edits a step, cosine decay)
→ apply → the validation gate (accept only a strict improvement) — with an environment adapter per
its docs/guide/new-benchmark.md whose rollout runs our executor and grader, one new run per item.

Three places where SkillOpt asks its optimizer model are not answerable by the simulator:
- reflection (the analyst prompts): our proposer sits behind `EnvAdapter.reflect`, one proposal
  per minibatch of failed items, turned into SkillOpt's replace / delete / insert_after edits;
- patch merging and edit ranking: the backend (the guide's module contract, on the claude_chat
  slot) answers that it cannot, and SkillOpt's own fallbacks run (concatenate failure patches
  first; keep the first `learning_rate` edits). Those calls cost nothing here, which flatters it;
- the meta skill and the slow update are optimizer-model stages with no fallback: off."""

from __future__ import annotations

import difflib
import tempfile
from pathlib import Path
from typing import Any

from peers.arena import Arena, BudgetSpent


def patch_edits(before: str, after: str) -> list[dict[str, str]]:
    """SkillOpt edits that turn `before` into `after`, one per changed block of lines."""
    old, new = before.splitlines(), after.splitlines()
    edits: list[dict[str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        content = "\n".join(new[j1:j2])
        if tag == "replace":
            edits.append({"op": "replace", "target": "\n".join(old[i1:i2]), "content": content})
        elif tag == "delete":
            edits.append({"op": "delete", "target": "\n".join(old[i1:i2]), "content": ""})
        elif tag == "insert" and i1 > 0:
            edits.append({"op": "insert_after", "target": old[i1 - 1], "content": content})
        elif tag == "insert":
            edits.append(
                {
                    "op": "replace",
                    "target": old[0] if old else "",
                    "content": content + "\n" + (old[0] if old else ""),
                }
            )
    return edits


def _adapter_class() -> type:
    from skillopt.envs.base import EnvAdapter

    class SkillEnv(EnvAdapter):
        """Items are train eval ids; SkillOpt's selection set is the train split too (the
        sealed test stays unseen, as for every method)."""

        def __init__(self, arena: Arena, minibatch_size: int) -> None:
            self.arena = arena
            self.minibatch_size = minibatch_size
            self.analyst_workers = 1
            self.failure_only = True
            self.edit_budget = 4
            self.proposals = 0

        def build_train_env(self, batch_size: int, seed: int, **kwargs: Any) -> list[int]:
            import random

            items = list(self.arena.train)
            random.Random(seed).shuffle(items)
            return items[:batch_size]

        def build_eval_env(self, env_num: int, split: str, seed: int, **kwargs: Any) -> list[int]:
            items = list(self.arena.train)
            return items[:env_num] if env_num else items

        def rollout(
            self, env_manager: list[int], skill_content: str, out_dir: str, **kwargs: Any
        ) -> list[dict]:
            label = self.arena.add(skill_content)
            scores = self.arena.sync(self.arena.evaluate(label, list(env_manager)))
            # Our score is a pass rate or rubric blend in [0, 1]: the guide allows a float as
            # `hard`; the gate compares means of it.
            return [
                {
                    "id": str(e),
                    "hard": scores[e],
                    "soft": scores[e],
                    "label": label,
                    "task_type": "skill",
                }
                for e in env_manager
            ]

        def reflect(
            self, results: list[dict], skill_content: str, out_dir: str, **kwargs: Any
        ) -> list[dict | None]:
            failed = [r for r in results if float(r["soft"]) < 1.0]
            patches: list[dict | None] = []
            for i in range(0, len(failed), self.minibatch_size):
                group = failed[i : i + self.minibatch_size]
                parent = self.arena.add(skill_content)
                self.proposals += 1
                child = self.arena.sync(self.arena.propose(parent, [int(r["id"]) for r in group]))
                if child is None:
                    continue
                edits = patch_edits(skill_content, self.arena.skill_md(child))
                if edits:
                    patches.append(
                        {
                            "patch": {"edits": edits, "reasoning": "our proposer"},
                            "source_type": "failure",
                        }
                    )
            return patches

        def get_task_types(self) -> list[str]:
            return ["skill"]

    return SkillEnv


def _unanswerable(*args: Any, **kwargs: Any) -> tuple[str, dict]:
    raise RuntimeError("the simulator plays no SkillOpt optimizer prompt (merge, ranking)")


def _stand_in_prompts() -> None:
    """skillopt 0.2.0's wheel ships none of its prompt files (skillopt/prompts/*.md), and its
    aggregate and ranking stages load one before they ask the optimizer model. The backend above
    refuses those calls whatever the prompt says, so a stand-in text lets the stages reach their
    own fallbacks."""
    import os

    from skillopt import prompts

    for name in ("merge_failure", "merge_success", "merge_final", "ranking"):
        path = os.path.join(prompts._PROMPTS_DIR, f"{name}.md")
        if not os.path.isfile(path):
            prompts._cache.setdefault(path, f"(skillopt 0.2.0 ships no {name}.md)")


def config(arena: Arena, out_root: Path, skill_init: Path, seed: int) -> dict:
    """SkillOpt's configs/_base_/default.yaml where it applies, flattened as its loader does."""
    from skillopt.config import flatten_config

    n = len(arena.train)
    return flatten_config(
        {
            "model": {
                "backend": "claude",
                "optimizer": "sim",
                "target": "sim",
                "optimizer_backend": "claude_chat",
                "target_backend": "claude_chat",
                "reasoning_effort": "",
                "rewrite_reasoning_effort": "",
            },
            # batch_size 40 in the base config: here the whole train split, one step an epoch.
            "train": {
                "num_epochs": 4,
                "train_size": n,
                "batch_size": n,
                "accumulation": 1,
                "seed": seed,
            },
            "gradient": {
                "minibatch_size": 8,
                "merge_batch_size": 8,
                "analyst_workers": 1,
                "failure_only": True,
            },
            "optimizer": {
                "learning_rate": 4,
                "min_learning_rate": 2,
                "lr_scheduler": "cosine",
                "lr_control_mode": "fixed",
                "skill_update_mode": "patch",
                "use_slow_update": False,
                "use_meta_skill": False,
                "use_skill_aware_reflection": False,
            },
            "evaluation": {
                "use_gate": True,
                "gate_metric": "hard",
                "sel_env_num": 0,
                "test_env_num": 0,
                "eval_test": False,
            },
            "env": {"name": "skill", "skill_init": str(skill_init), "out_root": str(out_root)},
        }
    )


def run_skillopt(arena: Arena, seed: int) -> tuple[str, str]:
    import contextlib
    import io

    from skillopt.engine.trainer import ReflACTTrainer
    from skillopt.model import claude_backend

    env = _adapter_class()(arena, minibatch_size=8)
    _stand_in_prompts()
    with tempfile.TemporaryDirectory() as tmp:
        init = Path(tmp) / "initial.md"
        init.write_text(arena.skill_md("v0"), encoding="utf-8")
        cfg = config(arena, Path(tmp) / "out", init, seed)
        original = claude_backend.chat_optimizer
        claude_backend.chat_optimizer = _unanswerable
        stopped = "4 epochs done"
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # its progress lines, not our table
                ReflACTTrainer(cfg, env).train()
        except BudgetSpent:
            stopped = "stopped by the budget"
        finally:
            claude_backend.chat_optimizer = original
        best = Path(cfg["out_root"]) / "best_skill.md"
        text = best.read_text(encoding="utf-8") if best.is_file() else arena.skill_md("v0")
    return arena.add(text), f"{stopped}, {env.proposals} proposals"


async def skillopt(arena: Arena, budget_usd: float) -> tuple[str, str]:
    return await arena.in_thread(run_skillopt, arena, arena.settings.loop.seed)
