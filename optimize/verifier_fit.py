"""The learned verifier fitted on recorded runs (`clearmed tune --params learned_fit`; `programs.adjudication.learned`).

Each disputed question (two or more distinct single-letter answers) gives one row per competing answer: its features
(`answer_features`, computed from the bundle as the live program computes them) and whether it is the gold answer.
A regularised logistic regression (scikit-learn, the `learned` extra) fits them by maximum likelihood; a question
none of whose competing answers is right is left out of the fit, since no choice among them matters. Cross-validation
folds group the rows BY QUESTION ID across cells: the GPT-4 and GPT-3.5 cells hold the same questions, and a split by
rows lets the fit read how the other model fared on the same question (the shared anchors measured +0.18 instead of
the honest +0.10 that way).

The margin, below which the deterministic verifier decides, is chosen on out-of-fold probabilities inside the
training questions: the largest accuracy of "learned where sure, deterministic elsewhere", ties going to the larger
margin, so where the fit finds nothing the margin is 0.5 and the verifier is the deterministic one. The reported
cross-validated figures are nested: each outer fold's model and margin were chosen on the other folds alone.

A fit refuses to see any id it was asked to skip (`skip_ids`: the held-out part of a benchmark), in one line.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from clearmed.core.errors import UsageError
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
from clearmed.signatures.records import Agreement, EvidenceBundle

__all__ = [
    "MARGINS",
    "CellScore",
    "LearnedFit",
    "LearnedItem",
    "applied_choices",
    "cross_validate",
    "cross_validated_choices",
    "fit_learned",
    "item_key",
    "learned_items",
]

# The margins the fit chooses among (distance of the chosen answer's probability from 0.5); 0.5: always fall back.
MARGINS: tuple[float, ...] = (0.0, 0.02, 0.04, 0.06, 0.08, 0.1, 0.12, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)
DEFAULT_C = 0.1  # inverse L2 strength on standardised features: a few hundred rows per cell, a dozen-odd features
MIN_QUESTIONS = 20  # fewer decided disputed questions, and the fit mostly memorises them


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
            )
        )
    return items


class CellScore(BaseModel):
    """Cross-validated accuracy on one cell's disputed questions (benchmark and backbone)."""

    model_config = ConfigDict(extra="forbid")

    cell: str
    questions: int
    learned_correct: int
    deterministic_correct: int
    decided: int = Field(description="questions the learned verifier decided (the rest fell back)")


class LearnedFit(BaseModel):
    """A fit and its report: the model, each feature's weight (per standard deviation), the cross-validated
    accuracy per cell, and what it was fitted on."""

    model_config = ConfigDict(extra="forbid")

    model: LearnedModel
    weights: dict[str, float]
    cross_validated: list[CellScore]
    questions: int
    folds: int
    c: float


def _sklearn() -> tuple[Any, Any]:
    try:
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import GroupKFold
    except ImportError:
        raise UsageError('the learned verifier\'s fit needs scikit-learn: pip install -e ".[learned]"') from None
    return LogisticRegression, GroupKFold


def _design(items: Sequence[LearnedItem], cells: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of the questions whose gold is among their competing answers: features, labels, question groups."""
    x, y, groups = [], [], []
    for item in items:
        if item.gold not in item.features:
            continue
        for letter, row in item.features.items():
            x.append(feature_row(row, item.cell, cells))
            y.append(letter == item.gold)
            groups.append(item.question_id)
    return np.array(x, dtype=float), np.array(y, dtype=int), np.array(groups)


def _outcome(model: LearnedModel, item: LearnedItem, *, check_domain: bool = True) -> tuple[str | None, bool]:
    """The letter the learned verifier (with its fallback) gives, and whether the learned model decided."""
    if check_domain and model.domain.misses(item.domain):
        return item.deterministic, False
    choice = model.choose(model.probabilities(item.features, item.cell))
    return (choice, True) if choice is not None else (item.deterministic, False)


def _folds(items: Sequence[LearnedItem], folds: int) -> list[tuple[list[int], list[int]]]:
    """Fold indices over `items`, grouped by question id (a question in two cells stays in one fold)."""
    _, group_k_fold = _sklearn()
    ids = np.array([item.question_id for item in items])
    n = min(folds, len(set(ids.tolist())))
    splitter = group_k_fold(n_splits=n)
    return [(list(a), list(b)) for a, b in splitter.split(np.zeros(len(items)), groups=ids)]


def _raw_fit(items: Sequence[LearnedItem], cells: Sequence[str], c: float, margin: float) -> LearnedModel:
    logistic, _ = _sklearn()
    x, y, _ = _design(items, cells)
    if len(set(y.tolist())) < 2:
        raise UsageError(f"the learned fit has {len(items)} disputed questions with no right-and-wrong pair to learn")
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    regression = logistic(C=c, max_iter=2000).fit((x - mean) / scale, y)
    return LearnedModel(
        features=feature_names(cells),
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


def _choose_margin(items: Sequence[LearnedItem], cells: Sequence[str], c: float, folds: int) -> float:
    """The margin that maximises the out-of-fold accuracy of "learned where sure, else deterministic" on `items`;
    ties go to the larger margin (0.5: the fit never beat the deterministic verifier)."""
    probabilities: list[dict[str, float]] = [{} for _ in items]
    for train, test in _folds(items, folds):
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
) -> LearnedFit:
    """Fit the learned verifier on `items` (refused if any is a skipped id): the margin by out-of-fold choice, the
    model on all of them, and (with `report`) the nested cross-validated accuracy per cell."""
    _refuse_skipped(items, skip_ids)
    decided = [item for item in items if item.gold in item.features]
    if len(decided) < MIN_QUESTIONS:
        raise UsageError(
            f"the learned fit needs at least {MIN_QUESTIONS} disputed questions whose gold is one of the competing "
            f"answers; these runs have {len(decided)}"
        )
    cells = sorted({item.cell for item in items})
    margin = _choose_margin(items, cells, c, folds)
    model = _raw_fit(items, cells, c, margin)
    return LearnedFit(
        model=model,
        weights={name: round(w, 4) for name, w in zip(model.features, model.coef, strict=True)},
        cross_validated=cross_validate(items, folds=folds, c=c) if report else [],
        questions=len(items),
        folds=folds,
        c=c,
    )


def cross_validate(items: Sequence[LearnedItem], *, folds: int = 5, c: float = DEFAULT_C) -> list[CellScore]:
    """The nested cross-validated accuracy on `items`, per cell (`cross_validated_choices`)."""
    outcome = cross_validated_choices(items, folds=folds, c=c)
    scores = []
    for cell in sorted({item.cell for item in items}):
        mine = [item for item in items if item.cell == cell]
        chosen = [outcome[item_key(item)] for item in mine]
        scores.append(
            CellScore(
                cell=cell,
                questions=len(mine),
                learned_correct=sum(letter == item.gold for (letter, _), item in zip(chosen, mine, strict=True)),
                deterministic_correct=sum(item.deterministic == item.gold for item in mine),
                decided=sum(decided for _, decided in chosen),
            )
        )
    return scores


def item_key(item: LearnedItem) -> str:
    """An item's key in the choice maps: its cell and question id (one question is an item in each cell)."""
    return f"{item.cell}#{item.question_id}"


def cross_validated_choices(
    items: Sequence[LearnedItem], *, folds: int = 5, c: float = DEFAULT_C
) -> dict[str, tuple[str | None, bool]]:
    """Per item key (`cell` + id), the nested cross-validated letter and whether the model decided."""
    outcome: dict[str, tuple[str | None, bool]] = {}
    for train, test in _folds(items, folds):
        fit = fit_learned([items[i] for i in train], folds=folds, c=c, report=False)
        for i in test:
            outcome[item_key(items[i])] = _outcome(fit.model, items[i])
    return outcome


def applied_choices(
    model: LearnedModel, items: Sequence[LearnedItem], *, check_domain: bool = True
) -> dict[str, tuple[str | None, bool]]:
    """A fitted model applied to other questions (transfer): per item key, its letter and whether it decided."""
    return {item_key(i): _outcome(model, i, check_domain=check_domain) for i in items}
