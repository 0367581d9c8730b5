"""Order never leaks into results: twin runs whose model calls finish in opposite orders ask the
model exactly the same questions and write the same history.json (docs/design.md §12)."""

from __future__ import annotations

from collections import Counter

import pytest
from inprocess import EXAMPLE, Recording, cli, history, spread

pytestmark = pytest.mark.slow  # twin runs in two processes

RUN = (
    "run",
    str(EXAMPLE),
    "--provider",
    "sim",
    "--max-iterations",
    "2",
    "--set",
    "sim.seed=11",
    "--set",
    "execute.concurrency=4",
)


def twin(tmp_path, monkeypatch, reverse: bool) -> Recording:
    sim = Recording(seed=11, delay=spread(reverse))
    with monkeypatch.context() as patch:
        cli(patch, sim, *RUN, "--run-dir", str(tmp_path / ("b" if reverse else "a")))
    return sim


def test_twins_finishing_in_opposite_orders_ask_and_decide_the_same(tmp_path, monkeypatch):
    a = twin(tmp_path, monkeypatch, reverse=False)
    b = twin(tmp_path, monkeypatch, reverse=True)
    # The order the grader's questions finished in, each named by its body (runs of one sample
    # are many questions, for other evals and versions).
    order_a = [body for role, _, body in a.requests if role == "grader"]
    order_b = [body for role, _, body in b.requests if role == "grader"]
    assert sorted(order_a) == sorted(order_b)
    assert order_a != order_b, "the delays did not change the order in which calls finished"
    roles = Counter(role for role, _, _ in a.requests)
    assert roles["proposer"] >= 2 and roles["analyzer"] >= 1, roles
    for role in ("proposer", "analyzer", "comparator", "grader", "executor"):
        assert a.bodies(role) == b.bodies(role), f"the {role} was asked different questions"
    assert history(tmp_path / "a") == history(tmp_path / "b")
