"""The learned verifier (issue 47) on MIRAGE's four shared cells (MedQA, MMLU-Med x GPT-4, GPT-3.5), no LM call:

    python docs/experiments/learned_verifier.py [--corpus-passages 8] [--c 0.1] [--folds 5] [--partitions 20]
    python docs/experiments/learned_verifier.py --pilot-sizes 30,60,120,200 [--draws 20] [--rule]

Each cell's recorded CoT (parametric) and MedRAG (local) replies become the bundle the program would adjudicate
(`clearmed.recorded`, the dynamic pathway absent), and for every cell the table gives CoT, MedRAG, the
oracle (some pathway right), the chance level (a coin flip on each disagreement: the two pathways' mean), the
deterministic verifier and the learned verifier: fitted inside the cell, pooled over the four cells (per-cell terms),
and transferred (fitted on the two cells of the other benchmark, applied with its domain check, so it falls back,
and with the check off, so only its margin guards it). Learned rows are nested cross-validated, folds grouped by
question (`question_key`: across cells, and over MMLU-Med's repeats under two ids), repeated over `--partitions`
random grouped partitions (issue 56: one partition is one draw): each learned row is mean ± SD over them, with
gained / lost against the deterministic verifier and each pathway, the headroom share (row - better pathway) /
(oracle - better pathway), and how many partitions it is at or above the better pathway and the deterministic
verifier. The closing lines give, per learned row, the mean share over the cells, the pooled share (gains over the
summed headroom), gained / lost against the deterministic verifier pooled over the cells with the exact McNemar p,
and the per-cell claims as counts of partitions. `--pilot-sizes` instead draws pilots of K disputed questions from
each cell and scores their fits on the cell's other disputed questions (how big a pilot must be).

`--corpus-passages K` gives the local pathway the top K passages of the shared OpenStax and MedQuAD corpora for
the question (bm25s over their chunks), as a live local pathway over those corpora would read them, so the option
support feature has passages to score (MIRAGE did not record the 32 MedCorp snippets its MedRAG read).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from clearmed.api.questions import shared_source
from clearmed.benchmarks import load_benchmark
from clearmed.core.errors import UsageError
from clearmed.metrics import mcnemar_exact_p, mean_sd
from clearmed.optimize.verifier_fit import (
    DEFAULT_C,
    PARTITIONS,
    LearnedItem,
    applied_choices,
    cross_validated_choices,
    fit_learned,
    item_key,
    learned_items,
)
from clearmed.programs.adjudication.rules import heuristic_verify
from clearmed.recorded import read_recorded_pathway
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


def _pm(values: Sequence[float], fmt: str = "+.3f") -> str:
    """mean ± SD (sample), e.g. "+0.134 ± 0.046"."""
    mean, sd = mean_sd(values)
    return f"{format(mean, fmt)} ± {format(sd, fmt.lstrip('+'))}"


class Tally:
    """One verifier row of one cell over the partitions: accuracy, share, gained / lost against the deterministic
    verifier and against each pathway, how many disputed questions the model decided."""

    def __init__(self) -> None:
        self.accuracy: list[float] = []
        self.share: list[float] = []
        self.vs: dict[str, list[tuple[int, int]]] = {"deterministic": [], "CoT": [], "MedRAG": []}
        self.decided: list[int] = []
        self.gain_over_best: list[int] = []  # right answers over the better pathway's (the share's numerator)

    def add(self, cell: Cell, right: dict[str, bool], decided: int, deterministic: dict[str, bool]) -> None:
        n = len(cell.ids)
        self.accuracy.append(100 * sum(right.values()) / n)
        self.share.append(_share_of(cell, right))
        for name, other in (("deterministic", deterministic), ("CoT", cell.cot), ("MedRAG", cell.rag)):
            gained = sum(right[q] and not other[q] for q in cell.ids)
            lost = sum(other[q] and not right[q] for q in cell.ids)
            self.vs[name].append((gained, lost))
        self.decided.append(decided)
        self.gain_over_best.append(sum(right.values()) - max(sum(cell.cot.values()), sum(cell.rag.values())))


def _headroom(cell: Cell) -> int:
    return sum(cell.cot[q] or cell.rag[q] for q in cell.ids) - max(sum(cell.cot.values()), sum(cell.rag.values()))


def _fixed_row(cell: Cell, name: str, right: dict[str, bool]) -> str:
    n = len(cell.ids)
    parts = []
    for other in (cell.cot, cell.rag):
        gained = sum(right[q] and not other[q] for q in cell.ids)
        lost = sum(other[q] and not right[q] for q in cell.ids)
        parts.append(f"{gained} / {lost}, p = {p_text(mcnemar_exact_p(gained, lost))}")
    return (
        f"| {cell.name} | {name} | {100 * sum(right.values()) / n:.1f} | | {parts[0]} | {parts[1]} | "
        f"{_share_of(cell, right):+.2f} | | |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus-passages", type=int, default=0, metavar="K")
    parser.add_argument("--c", type=float, default=DEFAULT_C, help="inverse L2 strength")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=PARTITIONS, help="random grouped partitions (default 20)")
    parser.add_argument("--weights", action="store_true", help="print each within-cell fit's feature weights")
    parser.add_argument(
        "--pilot-sizes",
        help="instead of the table: pilots of these many disputed questions (comma-separated) drawn from each cell, "
        "fitted as tune fits them and scored on the cell's other disputed questions",
    )
    parser.add_argument("--draws", type=int, default=10, help="pilots drawn per size (--pilot-sizes)")
    parser.add_argument(
        "--rule", action="store_true", help="--pilot-sizes: also judge each pilot by tune's rule (slow: --partitions)"
    )
    args = parser.parse_args(argv)
    if args.partitions < 2:
        parser.error("--partitions must be at least 2: one partition is one draw")
    passages = _corpus_passages(args.corpus_passages)
    cells = []
    for bench in BENCHES:
        questions = load_benchmark(f"mirage-{bench}", source=shared_source(f"mirage-{bench}")).questions
        cells += [Cell(bench, model, questions, passages) for model in MODELS]
    if args.pilot_sizes:
        return _pilot_curve(cells, [int(k) for k in args.pilot_sizes.split(",")], args)
    every: list[LearnedItem] = [item for cell in cells for item in cell.items]
    names = (
        "learned, fitted in the cell (CV)",
        "learned, pooled over 4 cells (CV)",
        "learned, transfer, domain check (falls back)",
        "learned, transfer, margin only",
    )
    tallies: dict[tuple[str, str], Tally] = {(cell.name, name): Tally() for cell in cells for name in names}
    deterministic = {cell.name: {q: cell.det[q] == cell.gold[q] for q in cell.ids} for cell in cells}
    for seed in range(args.partitions):
        pooled = cross_validated_choices(every, folds=args.folds, c=args.c, seed=seed)
        transfer: dict[str, dict[str, tuple[str | None, bool]]] = {}
        unchecked: dict[str, dict[str, tuple[str | None, bool]]] = {}
        for bench in BENCHES:
            train = [item for cell in cells if cell.bench != bench for item in cell.items]
            test = [item for cell in cells if cell.bench == bench for item in cell.items]
            model = fit_learned(train, folds=args.folds, c=args.c, report=False, seed=seed).model
            transfer[bench] = applied_choices(model, test)
            unchecked[bench] = applied_choices(model, test, check_domain=False)
        for cell in cells:
            own = cross_validated_choices(cell.items, folds=args.folds, c=args.c, seed=seed)
            for name, choices in zip(names, (own, pooled, transfer[cell.bench], unchecked[cell.bench]), strict=True):
                decided = sum(choices[item_key(item)][1] for item in cell.items)
                tallies[cell.name, name].add(cell, cell.correct(choices), decided, deterministic[cell.name])
    r = args.partitions
    print(
        f"Learned rows: nested {args.folds}-fold cross-validation grouped by question (same stem and options), over "
        f"{r} random grouped partitions: mean ± SD; 'at or above' counts the partitions on which the row is at or "
        "above the better pathway / the deterministic verifier."
    )
    print()
    print(
        "| cell | verifier | accuracy | vs deterministic: gained / lost (mean) | vs CoT: gained / lost | "
        "vs MedRAG: gained / lost | share | at or above better pathway / deterministic | decided |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for cell in cells:
        n = len(cell.ids)
        oracle = {q: cell.cot[q] or cell.rag[q] for q in cell.ids}
        mean = (sum(cell.cot.values()) + sum(cell.rag.values())) / 2 / n
        print(
            f"| {cell.name} | CoT / MedRAG / oracle / chance | {100 * sum(cell.cot.values()) / n:.1f} / "
            f"{100 * sum(cell.rag.values()) / n:.1f} / {100 * sum(oracle.values()) / n:.1f} / {100 * mean:.1f} "
            "| | | | | | |"
        )
        print(_fixed_row(cell, "deterministic", deterministic[cell.name]))
        for name in names:
            t = tallies[cell.name, name]
            vs = {k: [f"{statistics.fmean(x[i] for x in v):.1f}" for i in (0, 1)] for k, v in t.vs.items()}
            above_best = sum(g >= 0 for g in t.gain_over_best)
            above_det = sum(g >= lost for g, lost in t.vs["deterministic"])
            print(
                f"| {cell.name} | {name} | {_pm(t.accuracy, '.1f')} | {' / '.join(vs['deterministic'])} | "
                f"{' / '.join(vs['CoT'])} | {' / '.join(vs['MedRAG'])} | {_pm(t.share, '+.2f')} | "
                f"{above_best} / {above_det} of {r} | {statistics.fmean(t.decided):.0f} / {len(cell.items)} |"
            )
        if args.weights:
            fit = fit_learned(cell.items, folds=args.folds, c=args.c, report=False)
            top = sorted(fit.weights.items(), key=lambda kv: -abs(kv[1]))[:8]
            print(
                f"<!-- {cell.name}: margin {fit.model.margin}; " + ", ".join(f"{k} {v:+.2f}" for k, v in top) + " -->"
            )
    print()
    headroom = sum(_headroom(cell) for cell in cells)
    print(
        f"deterministic: mean headroom share over the four cells "
        f"{statistics.fmean(_share_of(c, deterministic[c.name]) for c in cells):+.3f}"
    )
    for name in names:
        per_cell = [tallies[cell.name, name] for cell in cells]
        means = [statistics.fmean(t.share[i] for t in per_cell) for i in range(r)]
        pooled_share = [sum(t.gain_over_best[i] for t in per_cell) / headroom for i in range(r)]
        gained = [sum(t.vs["deterministic"][i][0] for t in per_cell) for i in range(r)]
        lost = [sum(t.vs["deterministic"][i][1] for t in per_cell) for i in range(r)]
        p = sorted(mcnemar_exact_p(g, lost_) for g, lost_ in zip(gained, lost, strict=True))
        every_cell_best = sum(all(t.gain_over_best[i] >= 0 for t in per_cell) for i in range(r))
        never_below = sum(
            all(t.vs["deterministic"][i][0] >= t.vs["deterministic"][i][1] for t in per_cell) for i in range(r)
        )
        print(
            f"{name}: mean headroom share {_pm(means)} (range {min(means):+.3f} to {max(means):+.3f}); pooled share "
            f"(gains over the summed headroom of {headroom}) {_pm(pooled_share)}; against the deterministic verifier, "
            f"pooled over the cells, {statistics.fmean(gained):.1f} gained / {statistics.fmean(lost):.1f} lost a "
            f"partition (exact p median {p_text(statistics.median(p))}, range {p_text(p[0])} to {p_text(p[-1])}, "
            f"below 0.05 on {sum(x < 0.05 for x in p)} of {r}); at or above the better pathway on every cell on "
            f"{every_cell_best} of {r} partitions, never below the deterministic verifier on any cell on "
            f"{never_below} of {r}"
        )
    return 0


def _pilot_curve(cells: Sequence[Cell], sizes: Sequence[int], args: argparse.Namespace) -> int:
    """How big a pilot must be: per cell and size, `--draws` random pilots of that many disputed questions (whole
    questions), each fitted and judged by tune's rule (`ship_verdict` over `--partitions` partitions), then scored
    on the cell's other disputed questions against the deterministic verifier. "always" ships every fit; "by the
    rule" counts a withheld fit as the deterministic verifier."""
    import random

    print(
        f"Pilots of K disputed questions, {args.draws} draws each ({args.partitions} partitions for the rule); net = "
        "gained - lost against the deterministic verifier on the cell's other disputed questions, mean ± SD over draws"
    )
    print()
    print("| cell | K | held out | shipped by the rule | net, always shipped | net, by the rule |")
    print("|---|---|---|---|---|---|")
    for cell in cells:
        for k in sizes:
            if k >= len(cell.items):
                continue
            always: list[float] = []
            ruled: list[float] = []
            shipped = refused = 0
            for draw in range(args.draws):
                order = sorted({item.question for item in cell.items})
                random.Random(draw).shuffle(order)
                chosen = set(order[:k])
                pilot = [item for item in cell.items if item.question in chosen]
                rest = [item for item in cell.items if item.question not in chosen]
                try:
                    fit = fit_learned(pilot, folds=args.folds, c=args.c, partitions=args.partitions, report=args.rule)
                except UsageError:  # fewer than MIN_QUESTIONS with a right answer among them: tune refuses it
                    refused += 1
                    ruled.append(0)
                    continue
                outcome = applied_choices(fit.model, rest)
                net = sum((outcome[item_key(i)][0] == i.gold) - (i.deterministic == i.gold) for i in rest)
                always.append(net)
                ruled.append(0 if fit.withheld else net)
                shipped += not fit.withheld
            held = len(cell.items) - k
            print(
                f"| {cell.name} | {k} | {held} | {f'{shipped} / {args.draws}' if args.rule else '-'}"
                f"{f' ({refused} refused)' if refused else ''} | "
                f"{_pm(always, '+.1f') if always else '-'} | {_pm(ruled, '+.1f') if args.rule else '-'} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
