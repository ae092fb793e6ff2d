"""Evidence binding measured (issue 56 item 6), from one live CLEAR run, no LM call:

    python docs/experiments/evidence_binding.py RUN_DIR [--partitions 20] [--folds 5]

RUN_DIR is a `clearmed eval --program clear` run with `[program] evidence_binding = true`, `mcq_decoding = "score"`
and the guard, audit and follow-up off (the command is in docs/results.md), so each verifier below is read off the
same recorded bundles as the verifier step alone would decide it:

- Direct: the parametric pathway's scored answer;
- deterministic: the deterministic verifier (`heuristic_verify`, no further search);
- calibrated: the calibrated verifier with the run's thresholds (the packaged, train-fitted pooling weights);
- calibrated, refitted: its four pooling weights fitted by likelihood on the other folds (cross-fitting);
- calibrated + binding: the four weights and the two betas fitted jointly on the other folds;
- learned: the learned verifier with the scored features, nested cross-validated (`verifier_fit`), without and with
  the binding feature group; it decides the disputed questions, the deterministic verifier the others.

Cross-fitted rows are mean ± SD over `--partitions` random partitions into `--folds` folds grouped by question
(`question_key`: a repeated question never straddles two folds), each question decided by a fit on the other folds
only. Paired rows compare with Direct and with the calibrated verifier on the same questions: gained / lost and the
exact McNemar p (of partition 0 for cross-fitted rows, with the mean gained / lost over all partitions beside it).
Disputed: questions whose pathways gave two or more distinct letters (the only ones that pay the binding pass);
headroom: some pathway right minus the best single pathway on them.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from clearmed.core.errors import UsageError
from clearmed.evaluation.store import EvalRecord, read_records
from clearmed.metrics import mcnemar_exact_p, mean_sd
from clearmed.optimize.pool_fit import BINDING_FIELDS, WEIGHT_FIELDS, fit_pool_weights, pool_features
from clearmed.optimize.splits import question_key
from clearmed.optimize.verifier_fit import LearnedItem, cross_validated_choices, item_key, learned_items
from clearmed.programs.adjudication.calibrated import calibrated_verify
from clearmed.programs.adjudication.learned import BINDING_FEATURES, answer_holders
from clearmed.programs.adjudication.rules import heuristic_verify
from clearmed.report.markdown import p_text
from clearmed.signatures.records import PATHWAYS, Decision, Thresholds

Choices = dict[str, bool]  # question id -> right


class Run:
    """The run's questions that reached adjudication, with what every verifier reads."""

    def __init__(self, folder: Path) -> None:
        last: dict[str, EvalRecord] = {}
        for record in read_records(folder):
            last[record.question_id] = record
        self.records = [
            r for r in last.values() if r.decision.agreement is not None and r.decision.bundle.question.gold_letters
        ]
        self.decisions: dict[str, Decision] = {r.question_id: r.decision for r in self.records}
        self.ids = list(self.decisions)
        self.gold = {qid: d.bundle.question.gold_letters[0] for qid, d in self.decisions.items()}
        self.groups = {qid: question_key(d.bundle.question) for qid, d in self.decisions.items()}
        self.disputed = {qid for qid, d in self.decisions.items() if len(answer_holders(d.bundle.initial())) >= 2}

    def right(self, letters: dict[str, str | None]) -> Choices:
        return {qid: letters.get(qid) == self.gold[qid] for qid in self.ids}

    def pathway(self, name: str) -> Choices:
        out = {}
        for qid, d in self.decisions.items():
            answer = d.bundle.candidate(name).answer  # type: ignore[arg-type]
            out[qid] = answer is not None and answer.letters == (self.gold[qid],)
        return out

    def deterministic(self) -> Choices:
        letters = {}
        for qid, d in self.decisions.items():
            bundle = d.bundle.initial()
            assert d.agreement is not None
            output, _ = heuristic_verify(bundle, d.agreement, bundle.dynamic_quality(), allow_more_search=False)
            letters[qid] = output.answer.letters[0] if output.answer and output.answer.letters else None
        return self.right(letters)

    def calibrated(self, thresholds: Callable[[str], Thresholds]) -> Choices:
        letters: dict[str, str | None] = {}
        for qid, d in self.decisions.items():
            bundle = d.bundle.initial()
            assert d.agreement is not None
            decided = calibrated_verify(bundle, d.agreement, thresholds(qid))
            if decided is None:  # nothing to pool: the deterministic verifier, as the program does
                output, _ = heuristic_verify(bundle, d.agreement, bundle.dynamic_quality(), allow_more_search=False)
            else:
                output = decided[0]
            letters[qid] = output.answer.letters[0] if output.answer and output.answer.letters else None
        return self.right(letters)

    def folds(self, folds: int, seed: int) -> list[set[str]]:
        """Question ids in `folds` folds grouped by question, the groups shuffled with `seed`, smallest fold first."""
        by_group: dict[str, list[str]] = {}
        for qid in self.ids:
            by_group.setdefault(self.groups[qid], []).append(qid)
        order = sorted(by_group)
        random.Random(seed).shuffle(order)
        members: list[set[str]] = [set() for _ in range(folds)]
        for group in order:
            min(members, key=len).update(by_group[group])
        return members

    def cross_fitted_calibrated(self, folds: int, seed: int, *, binding: bool) -> Choices:
        """Each question decided by pooling weights (and betas) fitted on the other folds only."""
        fitted: dict[str, Thresholds] = {}
        names = (*WEIGHT_FIELDS, *BINDING_FIELDS) if binding else WEIGHT_FIELDS
        for test in self.folds(folds, seed):
            train = [self.decisions[q] for q in self.ids if q not in test]
            w = fit_pool_weights(pool_features(train, binding=binding))
            update = {name: max(0.0, float(v)) for name, v in zip(names, w, strict=True)}
            thresholds = Thresholds(**update)
            fitted.update(dict.fromkeys(test, thresholds))
        return self.calibrated(fitted.__getitem__)

    def learned(self, items: Sequence[LearnedItem], folds: int, seed: int, fallback: Choices) -> Choices:
        """Nested cross-validated learned choices on the disputed questions; `fallback` (deterministic) elsewhere."""
        outcome = cross_validated_choices(items, folds=folds, seed=seed)
        right = dict(fallback)
        for item in items:
            letter, _ = outcome[item_key(item)]
            right[item.question_id] = letter == self.gold[item.question_id]
        return right


def without_binding(items: Sequence[LearnedItem]) -> list[LearnedItem]:
    """The items with the binding feature group zeroed (a constant column: the fit gives it no weight)."""
    out = []
    for item in items:
        features = {o: {**row, **dict.fromkeys(BINDING_FEATURES, 0.0)} for o, row in item.features.items()}
        out.append(LearnedItem(**{**item.__dict__, "features": features}))
    return out


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def paired(a: Choices, b: Choices) -> tuple[int, int, float]:
    gained = sum(a[q] and not b[q] for q in a)
    lost = sum(b[q] and not a[q] for q in a)
    return gained, lost, mcnemar_exact_p(gained, lost)


def pct(choices: Choices) -> float:
    return 100.0 * sum(choices.values()) / len(choices)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args(argv)
    run = Run(args.run)
    n = len(run.ids)
    if n < 2 * args.folds:
        print(f"{args.run}: {n} questions adjudicated; too few to cross-fit", file=sys.stderr)
        return 2
    direct = run.pathway("parametric")
    deterministic = run.deterministic()
    shipped = run.calibrated(lambda qid: run.decisions[qid].thresholds)
    partitions = range(args.partitions)
    refitted = [run.cross_fitted_calibrated(args.folds, s, binding=False) for s in partitions]
    bound = [run.cross_fitted_calibrated(args.folds, s, binding=True) for s in partitions]
    pairs = [(d.bundle.initial(), d.agreement) for d in run.decisions.values() if d.agreement is not None]
    items = learned_items(pairs)
    try:
        learned_plain = [run.learned(without_binding(items), args.folds, s, deterministic) for s in partitions]
        learned_bound = [run.learned(items, args.folds, s, deterministic) for s in partitions]
    except UsageError as refused:  # too few disputed questions for a nested fit
        print(f"learned verifier not cross-validated: {refused}", file=sys.stderr)
        learned_plain = learned_bound = []

    disputed = sorted(run.disputed)
    each = {p: run.pathway(p) for p in PATHWAYS}
    best = max(sum(each[p][q] for q in disputed) for p in PATHWAYS)
    oracle = sum(any(each[p][q] for p in PATHWAYS) for q in disputed)
    bound_questions = sum(
        1 for q in disputed if any(c.passage_only_scores is not None for c in run.decisions[q].bundle.candidates)
    )
    seconds = [r.seconds for r in run.records]
    agreed_seconds = [r.seconds for r in run.records if r.question_id not in run.disputed]
    disputed_seconds = [r.seconds for r in run.records if r.question_id in run.disputed]
    binding_seconds = [
        sum(u.seconds for u in run.decisions[q].usage if u.stage in ("local_binding", "dynamic_binding"))
        for q in disputed
    ]

    print(f"{args.run}: {n} questions; disputed {len(disputed)} (binding scores on {bound_questions}); "
          f"on them the best pathway is right on {best}, some pathway on {oracle} (headroom {oracle - best})")  # fmt: skip
    print(f"seconds per question: mean {statistics.fmean(seconds):.1f}, median {statistics.median(seconds):.1f}; "
          f"agreed {_mean(agreed_seconds):.1f}, disputed {_mean(disputed_seconds):.1f}, of which the binding passes "
          f"{_mean(binding_seconds):.1f}")  # fmt: skip
    print()
    print("| verifier | accuracy % | vs Direct: gained / lost, p | vs calibrated: gained / lost, p | headroom share |")
    print("|---|---|---|---|---|")

    def share(choices: Choices) -> float:
        got = sum(choices[q] for q in disputed)
        return (got - best) / (oracle - best) if oracle > best else 0.0

    def fixed(name: str, choices: Choices) -> None:
        d, c = paired(choices, direct), paired(choices, shipped)
        print(f"| {name} | {pct(choices):.1f} | {d[0]} / {d[1]}, {p_text(d[2])} | {c[0]} / {c[1]}, {p_text(c[2])} "
              f"| {share(choices):+.3f} |")  # fmt: skip

    def mean_pair(rows: list[tuple[int, int, float]]) -> str:
        return f"{statistics.fmean(r[0] for r in rows):.1f} / {statistics.fmean(r[1] for r in rows):.1f}"

    def spread(name: str, runs: list[Choices]) -> None:
        accs = [pct(c) for c in runs]
        d = [paired(c, direct) for c in runs]
        c = [paired(x, shipped) for x in runs]
        shares = [share(x) for x in runs]
        acc, acc_sd = mean_sd(accs)
        share_mean, share_sd = mean_sd(shares)
        print(f"| {name} | {acc:.1f} ± {acc_sd:.1f} | {mean_pair(d)} (partition 0: {d[0][0]} / {d[0][1]}, "
              f"{p_text(d[0][2])}) | {mean_pair(c)} (partition 0: {c[0][0]} / {c[0][1]}, {p_text(c[0][2])}) | "
              f"{share_mean:+.3f} ± {share_sd:.3f} |")  # fmt: skip

    fixed("Direct (parametric pathway)", direct)
    fixed("deterministic", deterministic)
    fixed("calibrated (packaged weights)", shipped)
    spread("calibrated, weights cross-fitted", refitted)
    spread("calibrated + binding, cross-fitted", bound)
    if learned_plain:
        spread("learned, scored features", learned_plain)
        spread("learned, scored + binding features", learned_bound)
    agreed = [q for q in run.ids if q not in run.disputed]
    changed = sum(any(c[q] != shipped[q] for c in bound) for q in agreed)
    print(f"\nagreed questions ({len(agreed)}) whose answer binding changed on any partition: {changed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
