"""Where an eval added by `optimizer evals` goes: train or the sealed test, by a hash of its own
prompt. Never move an eval that was already placed: adding evals must not reshuffle the others."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from optimizer.errors import BadInput
from optimizer.schemas import CandidatesFile


class Added(Protocol):
    """What placing an added eval reads of it (inputs.evals.Eval), named here so that the two
    modules do not import each other."""

    @property
    def id(self) -> int: ...

    @property
    def prompt(self) -> str: ...


class Split(BaseModel):
    """train and sealed test eval ids; evals.split makes it (re-exported there)."""

    model_config = ConfigDict(frozen=True)
    train: list[int]
    test: list[int] = Field(default_factory=list)
    note: str


CANDIDATES_FILE = "candidates.json"


def fraction(prompt: str, seed: int) -> float:
    """A number in [0, 1) fixed by the prompt (whitespace folded) and the run's seed alone."""
    text = f"{seed}\0{' '.join(prompt.split())}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big") / 2**64


def side(prompt: str, *, test_fraction: float, seed: int) -> Literal["train", "test"]:
    return "test" if fraction(prompt, seed) < test_fraction else "train"


def read_candidates(path: Path) -> CandidatesFile | None:
    """candidates.json, or None when there is none; BadInput naming the file when it is broken
    (a broken file would silently move the added evals into the split of the others)."""
    if not path.is_file():
        return None
    try:
        return CandidatesFile.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, ValidationError, UnicodeDecodeError) as exc:
        first = str(exc).splitlines()[0]
        raise BadInput(
            f"{path}: not a valid candidates file ({first}); restore it from a copy, or "
            "move it away (the evals it added then join the seeded split)."
        ) from None


def accepted_ids(evals_dir: Path) -> tuple[int, ...]:
    """Ids of the evals that `optimizer evals` appended (accepted new_eval candidates), sorted."""
    found = read_candidates(evals_dir / CANDIDATES_FILE)
    if found is None:
        return ()
    return tuple(
        sorted(
            {
                c.eval_id
                for c in found.candidates
                if c.kind == "new_eval" and c.status == "accepted" and c.eval_id is not None
            }
        )
    )


def place(base: Split, grown: list[Added], *, test_fraction: float, seed: int) -> Split:
    """The base split with each added eval put where its hash says. The sealed test never takes
    more than half of all evals (selection needs train evals): past that, the added evals with the
    highest hash go to train instead."""
    if not grown:
        return base
    ranked = sorted(grown, key=lambda e: (fraction(e.prompt, seed), e.id))
    total = len(base.train) + len(base.test) + len(grown)
    room = max(0, total // 2 - len(base.test))
    sealed = [e.id for e in ranked if fraction(e.prompt, seed) < test_fraction][:room]
    train = sorted([*base.train, *(e.id for e in grown if e.id not in sealed)])
    test = sorted([*base.test, *sealed])
    note = (
        f"{base.note} {len(grown)} added eval(s) placed by their hash: "
        f"{len(grown) - len(sealed)} in train, {len(sealed)} sealed."
    )
    return Split(train=train, test=test, note=note)
