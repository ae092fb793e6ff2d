"""The calibrated verifier's pooling weights fitted by maximum likelihood (`clearmed tune --params calibrated_fit`).

The verifier pools the pathways' option distributions log-linearly,

    s(o) = w_p log p_parametric(o) + w_l log p_local(o) + (w_d + w_h * high share) log p_dynamic(o),

and searching the four weights for train accuracy (the removed `calibrated_weights` group) found weights that win
a handful of train questions by luck: accuracy is a step function of the weights (measured on the embedded model:
48.6% against the parametric pathway's 48.2% on 245 MMLU-Med train ids, and 2 points below it on the held-out
ids). The likelihood of the gold options under the pooled distribution (a
conditional logit over the options) is smooth and convex in the weights, so its maximum is stable, and it says
outright when a pathway adds nothing: its weight goes to 0. That is the fit here, with the weights held
non-negative, as CLEAR's pooling means them (a negative weight would vote against the options a pathway likes).

With evidence binding (`binding=True`, `clearmed tune --params binding_fit`) two more columns are fitted with the four:
per evidence pathway k, log p_k(o | q, P) - log p_k(o | P) where the run recorded the passage-only scores (disputed
questions under `[program] evidence_binding`; 0 elsewhere, as the pool adds no term there), weighted by the betas
`calibrated_local_binding` and `calibrated_dynamic_binding`. The passage-only scores are in the records, so the fit
makes no LM call.

Each question contributes the distributions the verifier pools for it (`programs.adjudication.calibrated.pool_inputs`),
as the pathways scored them; a pathway that generated its letter contributes nothing, as in the pool. Only
single-answer MCQs with gold count.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from clearmed.programs.adjudication.calibrated import (
    POOL_FLOOR,
    binding_inputs,
    binding_term,
    high_quality_share,
    pool_inputs,
)
from clearmed.signatures.records import Decision

__all__ = [
    "BINDING_FIELDS",
    "MIN_BINDING_QUESTIONS",
    "WEIGHT_FIELDS",
    "PoolFeatures",
    "PooledWeights",
    "binding_shortfall",
    "fit_pool_weights",
    "pool_features",
    "weights_by_likelihood",
]

# The calibrated verifier's four pooling-weight thresholds, in the order of the features' columns.
WEIGHT_FIELDS = (
    "calibrated_parametric_weight",
    "calibrated_local_weight",
    "calibrated_dynamic_weight",
    "calibrated_high_weight",
)

# Fewer disputed train questions with passage-only scores than this, and `binding_fit` is refused: two betas fitted on
# a handful of questions would be luck (the pooling weights' own lesson, docs/results.md).
MIN_BINDING_QUESTIONS = 20

# The binding term's betas (evidence binding), in the order of their columns after WEIGHT_FIELDS.
BINDING_FIELDS = ("calibrated_local_binding", "calibrated_dynamic_binding")


class PoolFeatures(BaseModel):
    """Per question and option, the pool's four log terms (one per weight; six with the binding terms), which options
    the question has, and the gold option's index. `bound`: questions with at least one binding term."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    logs: np.ndarray  # (questions, options, 4); 0 where the pathway is left out of the pool
    present: np.ndarray  # (questions, options) bool: a question with fewer options is padded
    gold: np.ndarray  # (questions,)
    question_ids: list[str]
    bound: int = 0


class PooledWeights(BaseModel):
    """A likelihood fit: the weights, the mean log-likelihood of the gold options, and on how many questions."""

    model_config = ConfigDict(extra="forbid")

    weights: dict[str, float]
    mean_log_likelihood: float
    questions: int = Field(ge=0)
    # With the binding terms: the questions that had one (disputed, passage-only scores recorded).
    bound_questions: int = Field(default=0, ge=0)


def pool_features(decisions: Iterable[Decision], *, binding: bool = False) -> PoolFeatures:
    """The fit's inputs from stored decisions (the pathways' distributions as they scored them); with ``binding``, the
    two binding columns after the four (`BINDING_FIELDS`)."""
    rows: list[list[list[float]]] = []
    gold: list[int] = []
    ids: list[str] = []
    bound_count = 0
    fields = len(WEIGHT_FIELDS) + (len(BINDING_FIELDS) if binding else 0)
    for decision in decisions:
        if decision.agreement is None:  # a question that crashed before its pathways answered
            continue
        bundle = decision.bundle.initial()  # as the verifier pooled it: before any follow-up round
        question = bundle.question
        options = list(question.options or {})
        if question.answer_mode != "single" or not question.gold_letters or question.gold_letters[0] not in options:
            continue
        distributions = pool_inputs(bundle)
        if not distributions:
            continue
        share = high_quality_share(bundle)
        bound = binding_inputs(bundle) if binding else {}
        bound_count += bool(bound)
        row = []
        for option in options:
            logs = {p: math.log(max(d.get(option, 0.0), POOL_FLOOR)) for p, d in distributions.items()}
            dynamic = logs.get("dynamic", 0.0)
            columns = [logs.get("parametric", 0.0), logs.get("local", 0.0), dynamic, share * dynamic]
            if binding:
                columns += [binding_term(*bound[p], option) if p in bound else 0.0 for p in ("local", "dynamic")]
            row.append(columns)
        rows.append(row)
        gold.append(options.index(question.gold_letters[0]))
        ids.append(question.id)
    width = max((len(r) for r in rows), default=0)
    logs_array = np.zeros((len(rows), width, fields))
    present = np.zeros((len(rows), width), dtype=bool)
    for i, row in enumerate(rows):
        logs_array[i, : len(row)] = row
        present[i, : len(row)] = True
    return PoolFeatures(
        logs=logs_array, present=present, gold=np.array(gold, dtype=int), question_ids=ids, bound=bound_count
    )


def fit_pool_weights(
    features: PoolFeatures, *, non_negative: bool = True, l2: float = 1e-3, steps: int = 3000
) -> np.ndarray:
    """Maximum-likelihood weights (projected gradient descent on the mean negative log-likelihood plus a small L2
    term, from all weights 1). Convex, so the start only sets how fast it gets there."""
    x, present, y = features.logs, features.present, features.gold
    w = np.ones(x.shape[2])
    if not len(y):
        return w
    rows = np.arange(len(y))
    for step in range(steps):
        p = _pooled(x, present, w)
        grad = (np.einsum("no,nok->nk", p, x) - x[rows, y]).mean(axis=0) + 2 * l2 * w
        w = w - 0.5 / (1 + step / 500) * grad
        if non_negative:
            w = np.maximum(w, 0.0)
    return w


def _pooled(x: np.ndarray, present: np.ndarray, w: np.ndarray) -> np.ndarray:
    s = np.where(present, x @ w, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def weights_by_likelihood(decisions: Iterable[Decision], *, binding: bool = False) -> PooledWeights:
    """The four pooling thresholds fitted on `decisions` (train records only), with the fit's likelihood; with
    ``binding``, the two binding betas fitted jointly with them."""
    features = pool_features(decisions, binding=binding)
    names = (*WEIGHT_FIELDS, *BINDING_FIELDS) if binding else WEIGHT_FIELDS
    w = fit_pool_weights(features)
    if len(features.gold):
        p = _pooled(features.logs, features.present, w)[np.arange(len(features.gold)), features.gold]
        mean_ll = float(np.log(np.maximum(p, POOL_FLOOR)).mean())
    else:
        mean_ll = 0.0
    return PooledWeights(
        weights={name: round(float(v), 4) for name, v in zip(names, w, strict=True)},
        mean_log_likelihood=round(mean_ll, 6),
        questions=len(features.gold),
        bound_questions=features.bound,
    )


def binding_shortfall(bound: int) -> str:
    """Why `binding_fit` is refused on ``bound`` questions with binding terms (one line)."""
    return (
        f"--params binding_fit: {bound} train questions have passage-only scores; the fit needs at least "
        f"{MIN_BINDING_QUESTIONS} disputed ones (record the runs with [program] evidence_binding = true and "
        'mcq_decoding = "score" on a backbone with log-probabilities)'
    )
