"""What an adjudication over two recorded pathways recovered: accuracy, gained/lost against each pathway alone
with the exact McNemar p, the route mix, LM calls and seconds per question, and the share of the headroom won,
under two scoring conventions side by side.

    python docs/experiments/recorded_headroom.py CLEAR_RUN DIRECT_RUN MEDRAG_RUN

The three folders are run folders of one benchmark (`clearmed eval --pathway ...`, docs/results.md). Headroom is
(CLEAR - best single pathway) / (oracle - best single pathway), the oracle being "some pathway right". The chance
level is a coin flip between the two answers wherever they differ: it is right on every question both pathways get
right and on half of those only one gets right, which is exactly the two pathways' mean accuracy, so its share of
the headroom is negative whenever one pathway is better than the other.

Scoring conventions: clearmed scores a question with no answer (a reply that names no option, a refusal) wrong;
MIRAGE's `evaluate.py` (`locate_answer`) reads such a reply as "A", right whenever the gold is A. Both are printed
for every row, and the gains over each pathway that are refusal recoveries (the pathway gave no answer) are counted
apart: under MIRAGE's convention such a gain survives only where the gold is not A.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from clearmed.evaluation import EvalRecord, read_records
from clearmed.metrics import mcnemar_exact_p
from clearmed.report.markdown import p_text

CONVENTIONS = ("clearmed", "mirage")


def correct_under(record: EvalRecord, convention: str) -> bool:
    """Right under a convention: clearmed's (no answer is wrong) or MIRAGE's (no answer is "A")."""
    score = record.score
    if score is None:
        return False
    if convention == "mirage" and record.decision.answer is None:
        return (score.gold or "").replace(" ", "") == "A"
    return score.correct


def _answered(run: list[EvalRecord]) -> dict[str, bool]:
    return {r.question_id: r.decision.answer is not None for r in run}


def _table(runs: Mapping[str, list[EvalRecord]], convention: str) -> dict[str, dict[str, bool]]:
    return {name: {r.question_id: correct_under(r, convention) for r in run} for name, run in runs.items()}


def report(clear: list[EvalRecord], direct: list[EvalRecord], medrag: list[EvalRecord]) -> list[str]:
    """The report's lines (empty when the three runs share no question)."""
    runs = {"clear": clear, "cot": direct, "rag": medrag}
    ids = sorted(set.intersection(*({r.question_id for r in run} for run in runs.values())))
    if not ids:
        return []
    n = len(ids)
    lines = [f"n = {n}"]
    lines.append(f"{'scoring':<10} {'CLEAR':>6} {'CoT':>6} {'MedRAG':>6} {'oracle':>6} {'headroom':>9} {'coin':>6}")
    answered = {name: _answered(run) for name, run in runs.items()}
    for convention in CONVENTIONS:
        right = _table(runs, convention)
        acc = {name: 100.0 * sum(right[name][q] for q in ids) / n for name in runs}
        oracle = 100.0 * sum(right["cot"][q] or right["rag"][q] for q in ids) / n
        best, mean = max(acc["cot"], acc["rag"]), (acc["cot"] + acc["rag"]) / 2
        share = (acc["clear"] - best) / (oracle - best) if oracle > best else 0.0
        coin = (mean - best) / (oracle - best) if oracle > best else 0.0
        lines.append(
            f"{convention:<10} {acc['clear']:>6.1f} {acc['cot']:>6.1f} {acc['rag']:>6.1f} {oracle:>6.1f} "
            f"{share:>+9.2f} {coin:>+6.2f}"
        )
    for name, label in (("cot", "CoT"), ("rag", "MedRAG")):
        parts = []
        for convention in CONVENTIONS:
            right = _table(runs, convention)
            gained = [q for q in ids if right["clear"][q] and not right[name][q]]
            lost = sum(right[name][q] and not right["clear"][q] for q in ids)
            refusals = sum(not answered[name][q] for q in gained)
            p = mcnemar_exact_p(len(gained), lost)
            parts.append(
                f"{convention}: gained {len(gained)} ({refusals} where {label} gave no answer), lost {lost}, p = {p_text(p)}"
            )
        lines.append(f"against {label}: " + "; ".join(parts))
    unanswered = {label: sum(not answered[name][q] for q in ids) for name, label in (("cot", "CoT"), ("rag", "MedRAG"))}
    lines.append(f"no answer: CoT {unanswered['CoT']}, MedRAG {unanswered['MedRAG']}")
    chosen = set(ids)
    routes = Counter(str(r.decision.route) for r in clear if r.question_id in chosen)
    rules = Counter(r.decision.deciding_rule for r in clear if r.question_id in chosen)
    calls = sum(r.decision.lm_calls() for r in clear) / len(clear)
    seconds = sum(r.seconds for r in clear) / len(clear)
    lines.append(f"routes: {dict(routes.most_common())}; LM calls/question {calls:.2f}; seconds/question {seconds:.2f}")
    lines.append(f"deciding rules: {dict(rules.most_common())}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("clear", type=Path)
    parser.add_argument("direct", type=Path)
    parser.add_argument("medrag", type=Path)
    args = parser.parse_args(argv)
    lines = report(*(list(read_records(folder)) for folder in (args.clear, args.direct, args.medrag)))
    if not lines:
        print("the three runs share no question", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
