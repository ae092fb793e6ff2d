"""The learned verifier (issue 47) on MIRAGE's four shared cells (MedQA, MMLU-Med x GPT-4, GPT-3.5), no LM call:

    python docs/experiments/learned_verifier.py [--corpus-passages 8] [--c 0.1] [--folds 5]

Each cell's recorded CoT (parametric) and MedRAG (local) replies become the bundle the program would adjudicate
(`clearmed.evaluation.recorded`, the dynamic pathway absent), and for every cell the table gives CoT, MedRAG, the
oracle (some pathway right), the chance level (a coin flip on each disagreement: the two pathways' mean), the
deterministic verifier and the learned verifier: fitted inside the cell, pooled over the four cells (per-cell terms),
and transferred (fitted on the two cells of the other benchmark, applied with its domain check, so it falls back,
and with the check off, so only its margin guards it). Learned rows are nested cross-validated, folds grouped by
question id across cells. Each row: accuracy, gained/lost against CoT and MedRAG with the exact McNemar p, and the
headroom share (row - better pathway) / (oracle - better pathway).

`--corpus-passages K` gives the local pathway the top K passages of the shared OpenStax and MedQuAD corpora for
the question (bm25s over their chunks), as a live local pathway over those corpora would read them, so the option
support feature has passages to score (MIRAGE did not record the 32 MedCorp snippets its MedRAG read).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from clearmed.benchmarks import load_benchmark
from clearmed.cli.evaluate import shared_source
from clearmed.evaluation.recorded import read_recorded_pathway
from clearmed.metrics import mcnemar_exact_p
from clearmed.optimize.verifier_fit import (
    DEFAULT_C,
    LearnedItem,
    applied_choices,
    cross_validated_choices,
    fit_learned,
    item_key,
    learned_items,
)
from clearmed.programs.adjudication.rules import heuristic_verify
from clearmed.report.markdown import p_text
from clearmed.signatures.records import Agreement, Candidate, EvidenceBundle, Passage, Question, StepError

MODELS = {"gpt-4-32k": "GPT-4", "gpt-35-turbo-16k": "GPT-3.5"}
BENCHES = {"medqa": "MedQA", "mmlu": "MMLU-Med"}


class Cell:
    """One benchmark x model: its questions' bundles, CoT / MedRAG / deterministic correctness, disputed items."""

    def __init__(
        self, bench: str, model: str, questions: list[Question], passages: Callable[[Question], list[Passage]]
    ):
        self.name = f"{BENCHES[bench]}, {MODELS[model]}"
        self.bench = bench
        source = shared_source(f"mirage-{bench}")
        prediction = source.parent / "prediction" / bench
        cot = read_recorded_pathway(prediction / "cot" / "OpenAI" / model, "parametric", questions)
        rag = read_recorded_pathway(prediction / "rag_32" / "OpenAI" / model / "medcorp" / "RRF-4", "local", questions)
        absent = Candidate(pathway="dynamic", error=StepError(stage="dynamic", kind="not_run", message="absent"))
        self.ids = [q.id for q in questions]
        self.gold = {q.id: (q.gold_letters or [""])[0] for q in questions}
        pairs = []
        self.cot: dict[str, bool] = {}
        self.rag: dict[str, bool] = {}
        self.det: dict[str, str | None] = {}
        for q in questions:
            a, b = cot.candidate(q), rag.candidate(q)
            self.cot[q.id] = a.answer is not None and a.answer.letters == (self.gold[q.id],)
            self.rag[q.id] = b.answer is not None and b.answer.letters == (self.gold[q.id],)
            both = a.answer is not None and b.answer is not None
            agreement = Agreement(parametric_local=(a.answer == b.answer) if both else None)
            bundle = EvidenceBundle(question=q, candidates=[a, b, absent], local_passages=passages(q))
            output, _ = heuristic_verify(bundle, agreement, bundle.dynamic_quality(), allow_more_search=False)
            self.det[q.id] = output.answer.letters[0] if output.answer and output.answer.letters else None
            pairs.append((bundle, agreement))
        self.items = learned_items(pairs)

    def correct(self, choices: dict[str, tuple[str | None, bool]]) -> dict[str, bool]:
        """Per question: right under the learned choices on the disputed items, the deterministic verifier's
        answer elsewhere."""
        letters = dict(self.det)
        for item in self.items:
            letters[item.question_id] = choices[item_key(item)][0]
        return {qid: letters[qid] == self.gold[qid] for qid in self.ids}


def _row(cell: Cell, name: str, right: dict[str, bool], decided: str = "") -> str:
    n = len(cell.ids)
    acc = {k: 100 * sum(v.values()) / n for k, v in (("cot", cell.cot), ("rag", cell.rag), ("row", right))}
    oracle = 100 * sum(cell.cot[q] or cell.rag[q] for q in cell.ids) / n
    best = max(acc["cot"], acc["rag"])
    parts = []
    for other in (cell.cot, cell.rag):
        gained = sum(right[q] and not other[q] for q in cell.ids)
        lost = sum(other[q] and not right[q] for q in cell.ids)
        parts.append(f"{gained} / {lost}, p = {p_text(mcnemar_exact_p(gained, lost))}")
    share = (acc["row"] - best) / (oracle - best) if oracle > best else 0.0
    below = " (below)" if acc["row"] < best - 1e-9 else ""
    return f"| {cell.name} | {name} | {acc['row']:.1f}{below} | {parts[0]} | {parts[1]} | {share:+.2f} | {decided} |"


def _corpus_passages(k: int) -> Callable[[Question], list[Passage]]:
    """The top K passages for a question's text and options from the shared OpenStax and MedQuAD corpora (half from
    each; bm25s, the indexes kept in the system's temporary folder)."""
    if k <= 0:
        return lambda question: []
    import tempfile

    from clearmed.retrieval.config import CorpusConfig
    from clearmed.retrieval.factory import build_retriever

    cache = Path(tempfile.gettempdir()) / "clearmed-learned-verifier"
    retrievers = [
        build_retriever(CorpusConfig(preset=name, index_dir=cache / name)) for name in ("openstax", "medquad")
    ]

    def passages(question: Question) -> list[Passage]:
        query = " ".join([question.text, *(question.options or {}).values()])
        return [p for retriever in retrievers for p in retriever.retrieve(query, max(1, k // 2))]

    return passages


def _share_of(cell: Cell, right: dict[str, bool]) -> float:
    n = len(cell.ids)
    best = max(sum(cell.cot.values()), sum(cell.rag.values())) / n
    oracle = sum(cell.cot[q] or cell.rag[q] for q in cell.ids) / n
    return (sum(right.values()) / n - best) / (oracle - best)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus-passages", type=int, default=0, metavar="K")
    parser.add_argument("--c", type=float, default=DEFAULT_C, help="inverse L2 strength")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--weights", action="store_true", help="print each within-cell fit's feature weights")
    args = parser.parse_args(argv)
    passages = _corpus_passages(args.corpus_passages)
    cells = []
    for bench in BENCHES:
        questions = load_benchmark(f"mirage-{bench}", source=shared_source(f"mirage-{bench}")).questions
        cells += [Cell(bench, model, questions, passages) for model in MODELS]
    every: list[LearnedItem] = [item for cell in cells for item in cell.items]
    pooled = cross_validated_choices(every, folds=args.folds, c=args.c)
    transfer: dict[str, dict[str, tuple[str | None, bool]]] = {}
    unchecked: dict[str, dict[str, tuple[str | None, bool]]] = {}
    for bench in BENCHES:
        train = [item for cell in cells if cell.bench != bench for item in cell.items]
        test = [item for cell in cells if cell.bench == bench for item in cell.items]
        model = fit_learned(train, folds=args.folds, c=args.c, report=False).model
        transfer[bench] = applied_choices(model, test)
        unchecked[bench] = applied_choices(model, test, check_domain=False)
    print("| cell | verifier | accuracy | vs CoT: gained / lost, p | vs MedRAG: gained / lost, p | share | decided |")
    print("|---|---|---|---|---|---|---|")
    shares: dict[str, list[float]] = {}
    against: list[str] = []
    for cell in cells:
        n = len(cell.ids)
        oracle = {q: cell.cot[q] or cell.rag[q] for q in cell.ids}
        print(_row(cell, "CoT", cell.cot))
        print(_row(cell, "MedRAG", cell.rag))
        print(_row(cell, "oracle", oracle))
        mean = (sum(cell.cot.values()) + sum(cell.rag.values())) / 2 / n
        print(f"| {cell.name} | chance (coin flip) | {100 * mean:.1f} | | | | |")
        deterministic = {q: cell.det[q] == cell.gold[q] for q in cell.ids}
        print(_row(cell, "deterministic", deterministic))
        own = cross_validated_choices(cell.items, folds=args.folds, c=args.c)
        rows = {
            "learned, fitted in the cell (CV)": own,
            "learned, pooled over 4 cells (CV)": pooled,
            "learned, transfer, domain check (falls back)": transfer[cell.bench],
            "learned, transfer, margin only": unchecked[cell.bench],
        }
        for name, choices in rows.items():
            right = cell.correct(choices)
            decided = sum(choices[item_key(item)][1] for item in cell.items)
            print(_row(cell, name, right, f"{decided} / {len(cell.items)}"))
            shares.setdefault(name, []).append(_share_of(cell, right))
            if choices is own:
                gained = sum(right[q] and not deterministic[q] for q in cell.ids)
                lost = sum(deterministic[q] and not right[q] for q in cell.ids)
                p = mcnemar_exact_p(gained, lost)
                against.append(f"{cell.name}: {gained} / {lost}, p = {p_text(p)}")
        shares.setdefault("deterministic", []).append(_share_of(cell, deterministic))
        if args.weights:
            fit = fit_learned(cell.items, folds=args.folds, c=args.c, report=False)
            top = sorted(fit.weights.items(), key=lambda kv: -abs(kv[1]))[:8]
            print(
                f"<!-- {cell.name}: margin {fit.model.margin}; " + ", ".join(f"{k} {v:+.2f}" for k, v in top) + " -->"
            )
    print()
    print("learned (fitted in the cell) against the deterministic verifier, gained / lost: " + "; ".join(against))
    for name, values in shares.items():
        print(
            f"mean headroom share, {name}: {sum(values) / len(values):+.3f}  ({', '.join(f'{v:+.2f}' for v in values)})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
