"""How much any log-linear pooling of the pathways could gain on a run's questions, with zero LM calls.

The calibrated verifier pools the pathways' scored distributions log-linearly, and `clearmed tune` can search the
weights for accuracy (`calibrated_weights`) or fit them by maximum likelihood (`calibrated_fit`,
`optimize.pool_fit`). This script asks what the best pooling of a run's pathways scores, in sample and under
k-fold cross-validation, against the parametric pathway alone, with the weights fitted by likelihood
(non-negative, as CLEAR uses them, and unconstrained, to see which way a pathway points).

Two readings of the pooled choice are reported:
- `free`: the pooled argmax over all options (not CLEAR: it can choose an option no pathway chose);
- `clear`: CLEAR's rule, the pooled choice among the pathways' own answers
  (`programs.adjudication.calibrated.pooled_route`).

Only questions that all three pathways scored count. Run it on train records: it is a diagnostic of a backbone's
pathways, not a way to pick settings on test ids.

    python docs/experiments/pooling_headroom.py --run ~/.cache/clearmed/runs/issue16/mmlu/clear-train-n245 [--folds 5]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from clearmed.evaluation import read_records
from clearmed.optimize.pool_fit import WEIGHT_FIELDS, PoolFeatures, fit_pool_weights, pool_features

PATHWAY_COLUMNS = 3  # parametric, local, dynamic; the fourth column is the dynamic pathway's quality term


@dataclass(frozen=True)
class PoolingFit:
    """One row of the table: how the weights were constrained, how the choice was read, and what it scored."""

    weights: str
    rule: str
    fitted: dict[str, float]
    in_sample: float
    cross_validated: float


def all_three_scored(features: PoolFeatures) -> PoolFeatures:
    """The questions every pathway brought a distribution for (a pathway left out of the pool has zero terms)."""
    keep = (features.logs[:, :, :PATHWAY_COLUMNS] != 0).any(axis=1).all(axis=1)
    return subset(features, np.flatnonzero(keep))


def subset(features: PoolFeatures, rows: np.ndarray) -> PoolFeatures:
    return PoolFeatures(
        logs=features.logs[rows],
        present=features.present[rows],
        gold=features.gold[rows],
        question_ids=[features.question_ids[i] for i in rows],
    )


def choices(features: PoolFeatures, w: np.ndarray, *, rule: str) -> np.ndarray:
    pooled = np.where(features.present, features.logs @ w, -np.inf)
    if rule == "free":
        return pooled.argmax(axis=1)
    own = np.where(features.present[:, :, None], features.logs[:, :, :PATHWAY_COLUMNS], -np.inf).argmax(axis=1)
    return np.array([max(set(t.tolist()), key=lambda o: float(pooled[i, o])) for i, t in enumerate(own)])


def accuracy(features: PoolFeatures, w: np.ndarray, *, rule: str) -> float:
    return float((choices(features, w, rule=rule) == features.gold).mean())


def cross_validated(features: PoolFeatures, *, folds: int, repeats: int, non_negative: bool, rule: str) -> float:
    n = len(features.gold)
    hits = []
    for repeat in range(repeats):
        order = np.random.RandomState(repeat).permutation(n)
        right = 0
        for held in np.array_split(order, folds):
            w = fit_pool_weights(subset(features, np.setdiff1d(order, held)), non_negative=non_negative)
            right += int((choices(subset(features, held), w, rule=rule) == features.gold[held]).sum())
        hits.append(right / n)
    return float(np.mean(hits))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, type=Path, help="a finished eval run folder (train ids)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5, help="cross-validation repeats with reshuffled folds")
    parser.add_argument("--json", type=Path, help="write the table as JSON too")
    args = parser.parse_args()
    decisions = (record.decision for record in read_records(args.run))
    features = all_three_scored(pool_features(decisions))
    n = len(features.gold)
    if n < 2 * args.folds:
        raise SystemExit(f"{args.run}: {n} questions all three pathways scored, too few for {args.folds} folds")
    parametric_alone = np.zeros(len(WEIGHT_FIELDS))
    parametric_alone[0] = 1.0
    direct = accuracy(features, parametric_alone, rule="free")
    rows = []
    for non_negative in (True, False):
        w = fit_pool_weights(features, non_negative=non_negative)
        for rule in ("clear", "free"):
            rows.append(
                PoolingFit(
                    weights="non-negative" if non_negative else "unconstrained",
                    rule=rule,
                    fitted={name: round(float(v), 3) for name, v in zip(WEIGHT_FIELDS, w, strict=True)},
                    in_sample=accuracy(features, w, rule=rule),
                    cross_validated=cross_validated(
                        features, folds=args.folds, repeats=args.repeats, non_negative=non_negative, rule=rule
                    ),
                )
            )
    print(f"{args.run}: {n} questions; parametric pathway alone {100 * direct:.1f}%")
    print("| weights | choice | fitted w (parametric, local, dynamic, high share) | in sample % | cross-validated % |")
    print("|---|---|---|---|---|")
    for row in rows:
        w_text = ", ".join(f"{v:+.2f}" for v in row.fitted.values())
        print(
            f"| {row.weights} | {row.rule} | {w_text} | {100 * row.in_sample:.1f} | {100 * row.cross_validated:.1f} |"
        )
    if args.json:
        table = {"questions": n, "parametric": direct, "rows": [asdict(row) for row in rows]}
        args.json.write_text(json.dumps(table, indent=2))


if __name__ == "__main__":
    main()
