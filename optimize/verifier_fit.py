"""The learned verifier fitted on recorded runs (`clearmed tune --params learned_fit`; `programs.adjudication.learned`).

Each disputed question (two or more distinct single-letter answers) gives one row per competing answer: its features
(`answer_features`, computed from the bundle as the live program computes them) and whether it is the gold answer.
A regularised logistic regression (scikit-learn, the `learned` extra) fits them by maximum likelihood; a question
none of whose competing answers is right is left out of the fit, since no choice among them matters.

Cross-validation folds group the rows BY QUESTION (`optimize.splits.question_key`: the same stem and options, whatever
the id) across cells: the GPT-4 and GPT-3.5 cells hold the same questions, and MMLU-Med repeats 63 questions under two
ids; a split by rows lets the fit read how the other model fared on the same question (the shared anchors measured
+0.18 instead of the honest +0.10 that way). The margin, below which the deterministic verifier decides, is chosen
on out-of-fold probabilities inside the training questions: the largest accuracy of "learned where sure,
deterministic elsewhere", ties going to the larger margin, so where the fit finds nothing the margin is 0.5 and the
verifier is the deterministic one. The cross-validated figures are nested: each outer fold's model and margin were
chosen on the other folds alone.

One partition is one draw: the figures are reported over `PARTITIONS` random grouped partitions
(`repeated_cross_validation`), as mean ± SD, with each claim as the fraction of partitions on which it holds. A fit
ships (`ship_verdict`) only when, over those partitions of its own pilot, it gains on the deterministic verifier on
average and is at or above it on at least `SHIP_AT_OR_ABOVE` of them; otherwise tune writes it withheld, and it
falls back on every question.

A fit refuses to see any id it was asked to skip (`skip_ids`: the held-out part of a benchmark), in one line.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from clearmed.core.errors import UsageError
from clearmed.metrics import mean_sd
from clearmed.optimize.splits import question_key
from clearmed.programs.adjudication.learned import (
    LearnedDomain,
    LearnedModel,
    answer_features,
    answer_holders,
    domain_of,
    feature_names,
    feature_row,
    question_cell,
)
from clearmed.programs.adjudication.rules import heuristic_verify
from clearmed.signatures.records import PATHWAYS, Agreement, EvidenceBundle, PathwayName

__all__ = [
    "MARGINS",
    "PARTITIONS",
    "SHIP_AT_OR_ABOVE",
    "CellScore",
    "LearnedFit",
    "LearnedItem",
    "PartitionScore",
    "RepeatedCV",
    "applied_choices",
    "cross_validate",
    "cross_validated_choices",
    "fit_learned",
    "item_key",
    "learned_items",
    "repeated_cross_validation",
    "ship_verdict",
]

# The margins the fit chooses among (distance of the chosen answer's probability from 0.5); 0.5: always fall back.
MARGINS: tuple[float, ...] = (0.0, 0.02, 0.04, 0.06, 0.08, 0.1, 0.12, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)
DEFAULT_C = 0.1  # inverse L2 strength on standardised features: a few hundred rows per cell, a dozen-odd features
MIN_QUESTIONS = 20  # fewer decided disputed questions, and the fit mostly memorises them
PARTITIONS = 20  # random grouped partitions a figure is reported over (issue 56: one partition is one draw)
# A fit ships when, over PARTITIONS grouped partitions of its own pilot, its nested cross-validated accuracy on the
# disputed questions beats the deterministic verifier's on average AND is at or above it on at least this share of
# the partitions; otherwise it is withheld (the artifact falls back on every question).
SHIP_AT_OR_ABOVE = 0.8


@dataclass(frozen=True)
class LearnedItem:
    """One disputed question as the fit sees it: its competing answers' features, gold and the deterministic
    verifier's choice (what a fallback gives)."""

    question_id: str
    cell: str
    domain: tuple[str, str, str]
    features: dict[str, dict[str, float]]
    gold: str | None
    deterministic: str | None
    group: str = ""  # the question (`question_key`): one group in every fold and split; "": the id

    @property
    def question(self) -> str:
        """What the folds group by: the question's text and options, else its id."""
        return self.group or self.question_id

    def right_pathways(self) -> list[PathwayName]:
        """The pathways whose answer is the gold (read off the holder flags of the gold's row)."""
        row = self.features.get(self.gold or "")
        return [p for p in PATHWAYS if row is not None and row.get(f"holds_{p}", 0.0) > 0]


def learned_items(pairs: Iterable[tuple[EvidenceBundle, Agreement]]) -> list[LearnedItem]:
    """The disputed single-answer questions among `(bundle, agreement)` pairs (as the verifier saw them: the
    initial bundle), with their features."""
    items = []
    for bundle, agreement in pairs:
        question = bundle.question
        if question.answer_mode != "single" or len(answer_holders(bundle)) < 2:
            continue
        output, _ = heuristic_verify(bundle, agreement, bundle.dynamic_quality(), allow_more_search=False)
        deterministic = output.answer.letters[0] if output.answer is not None and output.answer.letters else None
        gold = question.gold_letters[0] if question.gold_letters and len(question.gold_letters) == 1 else None
        items.append(
            LearnedItem(
                question_id=question.id,
                cell=question_cell(bundle),
                domain=domain_of(bundle),
                features=answer_features(bundle),
                gold=gold,
                deterministic=deterministic,
                group=question_key(question),
            )
        )
    return items


class CellScore(BaseModel):
    """Cross-validated accuracy on one cell's disputed questions (benchmark and backbone), on one partition."""

    model_config = ConfigDict(extra="forbid")

    cell: str
    questions: int
    learned_correct: int
    deterministic_correct: int
    decided: int = Field(description="questions the learned verifier decided (the rest fell back)")
    gained: int = Field(0, description="right where the deterministic verifier was wrong")
    lost: int = Field(0, description="wrong where the deterministic verifier was right")
    best_pathway_correct: int = Field(0, description="the better pathway's right answers on these questions")
    oracle_correct: int = Field(0, description="questions on which some pathway was right")

    @property
    def headroom(self) -> int:
        return self.oracle_correct - self.best_pathway_correct

    @property
    def share(self) -> float:
        """(learned - better pathway) / (oracle - better pathway) on these questions; 0 with no headroom."""
        return (self.learned_correct - self.best_pathway_correct) / self.headroom if self.headroom > 0 else 0.0


class PartitionScore(BaseModel):
    """One random grouped partition's nested cross-validated scores, per cell."""

    model_config = ConfigDict(extra="forbid")

    seed: int
    cells: list[CellScore]

    @property
    def gain(self) -> int:
        """Right answers over the deterministic verifier's, summed over the cells."""
        return sum(c.learned_correct - c.deterministic_correct for c in self.cells)

    @property
    def pooled_share(self) -> float:
        """The gains over the better pathway of each cell, over the summed headroom."""
        headroom = sum(c.headroom for c in self.cells)
        return sum(c.learned_correct - c.best_pathway_correct for c in self.cells) / headroom if headroom else 0.0


class RepeatedCV(BaseModel):
    """The nested cross-validation repeated over random grouped partitions: one figure per partition, so a figure is
    a distribution (mean ± SD) and a claim the fraction of partitions on which it holds."""

    model_config = ConfigDict(extra="forbid")

    folds: int
    partitions: list[PartitionScore]

    def cells(self) -> list[str]:
        return [c.cell for c in self.partitions[0].cells] if self.partitions else []

    def of_cell(self, cell: str) -> list[CellScore]:
        return [c for part in self.partitions for c in part.cells if c.cell == cell]

    def gain(self) -> tuple[float, float]:
        """Mean and SD over the partitions of the right answers gained over the deterministic verifier."""
        return mean_sd([part.gain for part in self.partitions])

    def at_or_above(self) -> int:
        """Partitions on which the learned verifier is at or above the deterministic one (summed over the cells)."""
        return sum(part.gain >= 0 for part in self.partitions)

    def pooled_share(self) -> tuple[float, float]:
        return mean_sd([part.pooled_share for part in self.partitions])


def ship_verdict(repeated: RepeatedCV) -> str:
    """Why a fit is withheld, in one line; "" when it ships (`SHIP_AT_OR_ABOVE`)."""
    n = len(repeated.partitions)
    questions = sum(c.questions for c in repeated.partitions[0].cells) if n else 0
    mean, sd = repeated.gain()
    above = repeated.at_or_above()
    if n and mean > 0 and above >= SHIP_AT_OR_ABOVE * n:
        return ""
    return (
        f"learned fit withheld: over {n} grouped partitions of its {questions} disputed pilot questions it gains "
        f"{mean:+.1f} ± {sd:.1f} on the deterministic verifier, at or above it on {above} of {n} (it ships at a mean "
        f"above 0 and at or above on {SHIP_AT_OR_ABOVE:.0%}); the artifact's learned verifier falls back on every "
        "question"
    )


class LearnedFit(BaseModel):
    """A fit and its report: the model, each feature's weight (per standard deviation), the nested cross-validated
    accuracy per cell over random grouped partitions, whether it ships, and what it was fitted on."""

    model_config = ConfigDict(extra="forbid")

    model: LearnedModel
    weights: dict[str, float]
    repeated: RepeatedCV | None = None
    withheld: str = Field("", description="why the fit does not ship (`ship_verdict`); empty: it ships")
    questions: int
    folds: int
    c: float


def _sklearn() -> Any:
    try:
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        raise UsageError('the learned verifier\'s fit needs scikit-learn: pip install -e ".[learned]"') from None
    return LogisticRegression


def _design(items: Sequence[LearnedItem], cells: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of the questions whose gold is among their competing answers: features, labels, question groups."""
    x, y, groups = [], [], []
    for item in items:
        if item.gold not in item.features:
            continue
        for letter, row in item.features.items():
            x.append(feature_row(row, item.cell, cells))
            y.append(letter == item.gold)
            groups.append(item.question)
    return np.array(x, dtype=float), np.array(y, dtype=int), np.array(groups)


def _outcome(model: LearnedModel, item: LearnedItem, *, check_domain: bool = True) -> tuple[str | None, bool]:
    """The letter the learned verifier (with its fallback) gives, and whether the learned model decided."""
    if check_domain and model.domain.misses(item.domain):
        return item.deterministic, False
    choice = model.choose(model.probabilities(item.features, item.cell))
    return (choice, True) if choice is not None else (item.deterministic, False)


def _folds(items: Sequence[LearnedItem], folds: int, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """Fold indices over `items`, grouped by question (`LearnedItem.question`: a question in two cells, or repeated
    under two ids, stays in one fold): the questions shuffled with `seed`, each put in the fold with fewest items."""
    by_question: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        by_question.setdefault(item.question, []).append(index)
    order = sorted(by_question)
    random.Random(seed).shuffle(order)
    n = min(folds, len(order))
    if n < 2:
        raise UsageError(f"cross-validation needs at least 2 questions, these items hold {len(order)}")
    members: list[list[int]] = [[] for _ in range(n)]
    for question in order:
        smallest = min(range(n), key=lambda fold: len(members[fold]))
        members[smallest].extend(by_question[question])
    every = set(range(len(items)))
    return [(sorted(every - set(test)), sorted(test)) for test in members]


def _raw_fit(items: Sequence[LearnedItem], cells: Sequence[str], c: float, margin: float) -> LearnedModel:
    logistic = _sklearn()
    x, y, _ = _design(items, cells)
    if len(set(y.tolist())) < 2:
        raise UsageError(f"the learned fit has {len(items)} disputed questions with no right-and-wrong pair to learn")
    mean, scale = x.mean(axis=0), x.std(axis=0)
    names = feature_names(cells)
    # The pathways whose scored feature varied in the fit: a question whose holder lacks its scores falls back,
    # rather than read 0 where the fit read a probability (`learned_decision`).
    scored: list[PathwayName] = [p for p in PATHWAYS if scale[names.index(f"scored_{p}")] > 0]
    scale[scale == 0] = 1.0
    regression = logistic(C=c, max_iter=2000).fit((x - mean) / scale, y)
    return LearnedModel(
        features=names,
        scored=scored,
        mean=mean.tolist(),
        scale=scale.tolist(),
        coef=regression.coef_[0].tolist(),
        intercept=float(regression.intercept_[0]),
        cells=list(cells),
        margin=margin,
        domain=LearnedDomain(
            benchmarks=sorted({i.domain[0] for i in items}),
            formats=sorted({i.domain[1] for i in items}),
            backbones=sorted({i.domain[2] for i in items}),
        ),
    )


def _choose_margin(items: Sequence[LearnedItem], cells: Sequence[str], c: float, folds: int, seed: int = 0) -> float:
    """The margin that maximises the out-of-fold accuracy of "learned where sure, else deterministic" on `items`;
    ties go to the larger margin (0.5: the fit never beat the deterministic verifier)."""
    probabilities: list[dict[str, float]] = [{} for _ in items]
    for train, test in _folds(items, folds, seed):
        model = _raw_fit([items[i] for i in train], cells, c, 0.0)
        for i in test:
            probabilities[i] = model.probabilities(items[i].features, items[i].cell)
    best, best_correct = 0.5, -1
    for margin in sorted(MARGINS, reverse=True):
        probe = LearnedModel.model_construct(margin=margin)
        correct = sum(
            (probe.choose(p) or item.deterministic) == item.gold for p, item in zip(probabilities, items, strict=True)
        )
        if correct > best_correct:
            best, best_correct = margin, correct
    return best


def _fit(items: Sequence[LearnedItem], c: float, folds: int, seed: int = 0) -> LearnedModel:
    """The model on `items`, its margin chosen on their out-of-fold probabilities (no size check: `fit_learned`)."""
    cells = sorted({item.cell for item in items})
    return _raw_fit(items, cells, c, _choose_margin(items, cells, c, folds, seed))


def _refuse_skipped(items: Sequence[LearnedItem], skip_ids: Iterable[str]) -> None:
    seen = sorted({item.question_id for item in items} & set(skip_ids))
    if seen:
        raise UsageError(
            f"the learned fit was given {len(seen)} question(s) it was asked to skip ({', '.join(seen[:3])}): "
            "held-out ids never go into a fit"
        )


def fit_learned(
    items: Sequence[LearnedItem],
    *,
    skip_ids: Iterable[str] = (),
    folds: int = 5,
    c: float = DEFAULT_C,
    report: bool = True,
    partitions: int | None = None,
    seed: int = 0,
) -> LearnedFit:
    """Fit the learned verifier on `items` (refused if any is a skipped id): the margin by out-of-fold choice, the
    model on all of them, and (with `report`) the nested cross-validated accuracy per cell over `partitions` random
    grouped partitions, and whether the fit ships (`ship_verdict`)."""
    _refuse_skipped(items, skip_ids)
    decided = [item for item in items if item.gold in item.features]
    if len(decided) < MIN_QUESTIONS:
        raise UsageError(
            f"the learned fit needs at least {MIN_QUESTIONS} disputed questions whose gold is one of the competing "
            f"answers; these runs have {len(decided)}"
        )
    model = _fit(items, c, folds, seed)  # `seed`: the partition of the margin's out-of-fold choice
    count = PARTITIONS if partitions is None else partitions
    repeated = repeated_cross_validation(items, partitions=count, folds=folds, c=c) if report else None
    return LearnedFit(
        model=model,
        weights={name: round(w, 4) for name, w in zip(model.features, model.coef, strict=True)},
        repeated=repeated,
        withheld=ship_verdict(repeated) if repeated is not None else "",
        questions=len(items),
        folds=folds,
        c=c,
    )


def cross_validate(
    items: Sequence[LearnedItem], *, folds: int = 5, c: float = DEFAULT_C, seed: int = 0
) -> list[CellScore]:
    """The nested cross-validated accuracy on `items`, per cell, on the grouped partition drawn with `seed`."""
    return cell_scores(items, cross_validated_choices(items, folds=folds, c=c, seed=seed))


def cell_scores(items: Sequence[LearnedItem], outcome: dict[str, tuple[str | None, bool]]) -> list[CellScore]:
    """Per cell: the learned choices (`outcome`, by `item_key`) against the deterministic verifier, the better
    pathway and the oracle on the cell's disputed questions."""
    scores = []
    for cell in sorted({item.cell for item in items}):
        mine = [item for item in items if item.cell == cell]
        chosen = [outcome[item_key(item)] for item in mine]
        learned = [letter == item.gold for (letter, _), item in zip(chosen, mine, strict=True)]
        deterministic = [item.deterministic == item.gold for item in mine]
        right = [set(item.right_pathways()) for item in mine]
        scores.append(
            CellScore(
                cell=cell,
                questions=len(mine),
                learned_correct=sum(learned),
                deterministic_correct=sum(deterministic),
                decided=sum(decided for _, decided in chosen),
                gained=sum(a and not b for a, b in zip(learned, deterministic, strict=True)),
                lost=sum(b and not a for a, b in zip(learned, deterministic, strict=True)),
                best_pathway_correct=max(sum(p in r for r in right) for p in PATHWAYS),
                oracle_correct=sum(bool(r) for r in right),
            )
        )
    return scores


def repeated_cross_validation(
    items: Sequence[LearnedItem], *, partitions: int = PARTITIONS, folds: int = 5, c: float = DEFAULT_C
) -> RepeatedCV:
    """`cross_validate` on `partitions` random grouped partitions (seeds 0, 1, ...)."""
    return RepeatedCV(
        folds=folds,
        partitions=[
            PartitionScore(seed=seed, cells=cross_validate(items, folds=folds, c=c, seed=seed))
            for seed in range(partitions)
        ],
    )


def item_key(item: LearnedItem) -> str:
    """An item's key in the choice maps: its cell and question id (one question is an item in each cell)."""
    return f"{item.cell}#{item.question_id}"


def cross_validated_choices(
    items: Sequence[LearnedItem], *, folds: int = 5, c: float = DEFAULT_C, seed: int = 0
) -> dict[str, tuple[str | None, bool]]:
    """Per item key (`cell` + id), the nested cross-validated letter and whether the model decided: each outer
    fold decided by a model and margin fitted on the other folds alone (grouped partition drawn with `seed`)."""
    outcome: dict[str, tuple[str | None, bool]] = {}
    for train, test in _folds(items, folds, seed):
        model = _fit([items[i] for i in train], c, folds, seed)
        for i in test:
            outcome[item_key(items[i])] = _outcome(model, items[i])
    return outcome


def applied_choices(
    model: LearnedModel, items: Sequence[LearnedItem], *, check_domain: bool = True
) -> dict[str, tuple[str | None, bool]]:
    """A fitted model applied to other questions (transfer): per item key, its letter and whether it decided."""
    return {item_key(i): _outcome(model, i, check_domain=check_domain) for i in items}
