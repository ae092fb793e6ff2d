"""What an adjudication over two recorded pathways recovered: accuracy, gained/lost against each pathway alone
with the exact McNemar p, the route mix, LM calls and seconds per question, and the share of the headroom won.

    python docs/experiments/recorded_headroom.py CLEAR_RUN DIRECT_RUN MEDRAG_RUN

The three folders are run folders of one benchmark (`clearmed eval --pathway ...`, docs/results.md). Headroom is
(CLEAR - best single pathway) / (oracle - best single pathway), the oracle being "some pathway right". The chance
level is a coin flip between the two answers wherever they differ: it is right on every question both pathways get
right and on half of those only one gets right, which is exactly the two pathways' mean accuracy, so its share of
the headroom is negative whenever one pathway is better than the other."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from clearmed.evaluation import read_records
from clearmed.metrics import mcnemar_exact_p


def _correct(run_dir: Path) -> dict[str, bool]:
    return {r.question_id: bool(r.score and r.score.correct) for r in read_records(run_dir)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("clear", type=Path)
    parser.add_argument("direct", type=Path)
    parser.add_argument("medrag", type=Path)
    args = parser.parse_args(argv)
    records = list(read_records(args.clear))
    clear = {r.question_id: bool(r.score and r.score.correct) for r in records}
    direct, medrag = _correct(args.direct), _correct(args.medrag)
    ids = sorted(set(clear) & set(direct) & set(medrag))
    if not ids:
        print("the three runs share no question", file=sys.stderr)
        return 2
    n = len(ids)

    def pct(hits: int) -> float:
        return 100.0 * hits / n

    acc = {name: pct(sum(run[q] for q in ids)) for name, run in (("clear", clear), ("cot", direct), ("rag", medrag))}
    oracle = pct(sum(direct[q] or medrag[q] for q in ids))
    best = max(acc["cot"], acc["rag"])
    mean = (acc["cot"] + acc["rag"]) / 2
    print(f"n = {n}; CLEAR {acc['clear']:.1f}, CoT {acc['cot']:.1f}, MedRAG {acc['rag']:.1f}, oracle {oracle:.1f}")
    for name, other in (("CoT", direct), ("MedRAG", medrag)):
        gained = sum(clear[q] and not other[q] for q in ids)
        lost = sum(other[q] and not clear[q] for q in ids)
        print(f"against {name}: gained {gained}, lost {lost}, exact McNemar p = {mcnemar_exact_p(gained, lost):.3f}")
    share = (acc["clear"] - best) / (oracle - best) if oracle > best else 0.0
    chance_share = (mean - best) / (oracle - best) if oracle > best else 0.0
    print(f"headroom recovered: {share:+.2f} (a coin flip on each disagreement: {mean:.1f}, {chance_share:+.2f})")
    routes = Counter(str(r.decision.route) for r in records if r.question_id in set(ids))
    calls = sum(r.decision.lm_calls() for r in records) / len(records)
    seconds = sum(r.seconds for r in records) / len(records)
    print(f"routes: {dict(routes.most_common())}; LM calls/question {calls:.2f}; seconds/question {seconds:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
