"""The calibrated verifier (`verifier_mode = "calibrated"`): CLEAR's route chosen from the pathways' option
probabilities instead of an LM reading the bundle.

On a small backbone the LM verifier is the weakest reader in the program (measured on the embedded model: it
kept the parametric answer 42 times in 43 on MMLU-Med), while the pathways' scored option distributions carry
a usable confidence signal. This verifier pools those distributions log-linearly,

    s(o) = sum_k w_k * log p_k(o),   w_dynamic = dynamic_weight + high_quality_weight * (share of high pages),

and reads CLEAR's route off the pooled answer: every pathway agreeing -> consensus; the pooled answer shared
by two pathways -> consensus; held by one pathway alone -> that pathway's route (keep_parametric, keep_local,
accept_dynamic, which still faces the override guard). The weights are `Thresholds` fields that `clearmed tune`
fits by replay, with no LM call: replay recomputes this verifier from the recorded distributions.

A pathway that generated its letter instead of scoring (a hosted model without log-probabilities, or a scoring
pass that failed) is left out of the pool. When nothing can be pooled (no pathway scored, the pathways that scored
all weigh zero, or a multi-answer or free-text question, which this verifier never pools), the deterministic
verifier decides: the output records why
(`VerifierOutput.calibrated_fallback`, `calibrated_fallback`), the program warns once per run
(`CalibratedFallbackWarning`) and the run summary counts those questions.

Evidence binding (issue 56; TrustMargin, arXiv 2606.08397): on a disputed question the program may also record each
evidence pathway's p(o | P), its prompt scored with the question removed (`[program] evidence_binding`). The pool then
adds, per evidence pathway k with both scores,

    beta_k * [log p_k(o | q, P) - log p_k(o | P)],

support for o that comes from reading the passages *with this question*, not from what the passages say whatever the
question. The betas (`calibrated_local_binding`, `calibrated_dynamic_binding`) are fitted by replay with the pooling
weights (`optimize.pool_fit`, `clearmed tune --params binding_fit`); at 0 the pool is as before. A pathway with no
passage-only scores (an agreed question, or `Candidate.binding_fallback` says why) adds no term, and the output's
rationale names the missing terms a nonzero beta wanted.

It never asks for more search itself (pooling always has an answer to route to); the override guard and the
challenge audit still search.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from clearmed.programs.adjudication.rules import answer_for_route
from clearmed.signatures.records import (
    NEEDS_MORE_SEARCH,
    PATHWAYS,
    Agreement,
    CalibratedFallback,
    Confidence,
    EvidenceBundle,
    PathwayName,
    Route,
    RuleId,
    Thresholds,
    VerifierOutput,
    route_for,
    top_options,
)
from clearmed.signatures.records.routes import AnswerSource

__all__ = [
    "CalibratedFallbackWarning",
    "CalibratedRoute",
    "binding_inputs",
    "binding_term",
    "binding_weights",
    "calibrated_fallback",
    "calibrated_verify",
    "confidence_label",
    "high_quality_share",
    "pool",
    "pool_inputs",
    "pool_weights",
    "pooled_route",
]

POOL_FLOOR = 1e-6  # a zero probability would veto an option outright


Binding = Mapping[PathwayName, tuple[Mapping[str, float], Mapping[str, float]]]


def binding_term(with_question: Mapping[str, float], passage_only: Mapping[str, float], option: str) -> float:
    """log p(o | q, P) - log p(o | P) for one option (probabilities floored as the pool floors them)."""
    return math.log(max(with_question.get(option, 0.0), POOL_FLOOR)) - math.log(
        max(passage_only.get(option, 0.0), POOL_FLOOR)
    )


def pool(
    distributions: Mapping[PathwayName, Mapping[str, float]],
    weights: Mapping[PathwayName, float],
    binding: Binding | None = None,
    binding_weights: Mapping[PathwayName, float] | None = None,
) -> dict[str, float]:
    """Log-linear pooling of the pathways' option distributions (a pathway absent from either map is left out), plus
    each bound pathway's binding term (`binding`: its (p(o | q, P), p(o | P)); weighted by `binding_weights`)."""
    options = sorted({option for dist in distributions.values() for option in dist})
    if not options:
        return {}
    bound = binding or {}
    betas = binding_weights or {}
    scores = {
        option: sum(
            weights.get(pathway, 0.0) * math.log(max(dist.get(option, 0.0), POOL_FLOOR))
            for pathway, dist in distributions.items()
        )
        + sum(betas.get(pathway, 0.0) * binding_term(q, p, option) for pathway, (q, p) in bound.items())
        for option in options
    }
    top = max(scores.values())
    exp = {option: math.exp(score - top) for option, score in scores.items()}
    total = sum(exp.values())
    return {option: value / total for option, value in exp.items()}


def confidence_label(probability: float) -> Confidence:
    """The verifier's confidence scale, from the pooled probability of the chosen option."""
    if probability >= 0.8:
        return "high"
    if probability >= 0.5:
        return "medium"
    return "low"


@dataclass(frozen=True)
class CalibratedRoute:
    """The route, the pooled answer (one letter), its pooled probability and the whole pooled distribution."""

    route: Route
    letter: str | None
    probability: float
    combined: dict[str, float]


def pooled_route(
    answers: Mapping[PathwayName, tuple[str, ...] | None],
    distributions: Mapping[PathwayName, Mapping[str, float]],
    weights: Mapping[PathwayName, float],
    binding: Binding | None = None,
    binding_weights: Mapping[PathwayName, float] | None = None,
) -> CalibratedRoute:
    """CLEAR's route for the pooled answer; the answer itself is later taken from the candidate records.

    The route always names a pathway (or pair) whose own answer is the pooled choice when one exists; when no
    pathway chose it (pooling can favour a runner-up), the pathway whose answer the pool rates highest wins.
    """
    combined = pool(distributions, weights, binding, binding_weights)
    answered = {p: a for p, a in answers.items() if a}
    if not combined or not answered:
        return CalibratedRoute(NEEDS_MORE_SEARCH, None, 0.0, combined)  # no answer to route to
    letter = max(combined, key=combined.__getitem__)
    probability = combined[letter]
    holders = [p for p in PATHWAYS if answered.get(p) == (letter,)]
    if not holders:  # the pool chose no pathway's answer: the best-rated pathway answer stands
        best = max(answered, key=lambda p: sum(combined.get(o, 0.0) for o in answered[p]))
        return CalibratedRoute(route_for(best), answered[best][0], combined.get(answered[best][0], 0.0), combined)
    source: AnswerSource = "agreement" if len(holders) >= 2 else holders[0]
    return CalibratedRoute(route_for(source), letter, probability, combined)


def pool_inputs(bundle: EvidenceBundle) -> dict[PathwayName, dict[str, float]]:
    """The distribution each answered pathway brings to the pool: the one it scored (a generated letter has none)."""
    return {c.pathway: c.option_scores.probs for c in bundle.candidates if c.answer is not None and c.option_scores}


def binding_inputs(bundle: EvidenceBundle) -> dict[PathwayName, tuple[dict[str, float], dict[str, float]]]:
    """Each evidence pathway's (p(o | q, P), p(o | P)) where both were scored (single answer): what the binding term
    reads. Empty on an agreed question (no binding pass ran) and without `evidence_binding`."""
    return {
        c.pathway: (c.option_scores.probs, c.passage_only_scores.probs)
        for c in bundle.candidates
        if c.answer is not None
        and c.option_scores is not None
        and c.passage_only_scores is not None
        and not c.option_scores.per_option
        and not c.passage_only_scores.per_option
    }


def binding_weights(thresholds: Thresholds) -> dict[PathwayName, float]:
    """The binding term's beta per evidence pathway."""
    return {"local": thresholds.calibrated_local_binding, "dynamic": thresholds.calibrated_dynamic_binding}


def high_quality_share(bundle: EvidenceBundle) -> float:
    """The share of the dynamic pathway's labelled web results rated high (0 with none labelled)."""
    quality = bundle.dynamic_quality()
    labelled = quality.n_high + quality.n_medium + quality.n_low
    return quality.n_high / labelled if labelled else 0.0


class CalibratedFallbackWarning(UserWarning):
    """Calibrated mode handed questions to the deterministic verifier (warned once per run; the summary counts)."""


def pool_weights(bundle: EvidenceBundle, thresholds: Thresholds) -> dict[PathwayName, float]:
    """Each pathway's weight in the pool; the dynamic one's grows with the share of high-quality web results."""
    return {
        "parametric": thresholds.calibrated_parametric_weight,
        "local": thresholds.calibrated_local_weight,
        "dynamic": thresholds.calibrated_dynamic_weight
        + thresholds.calibrated_high_weight * high_quality_share(bundle),
    }


def calibrated_fallback(bundle: EvidenceBundle, thresholds: Thresholds) -> CalibratedFallback | None:
    """Why the calibrated verifier cannot decide this bundle, so the deterministic verifier must; None when it can.

    It pools single-answer distributions only: multi-answer and free-text questions always fall back, and so does
    a question none of whose pathways scored its options, or whose scored pathways all weigh zero (the shipped
    weights give the local and dynamic pathways none: with the parametric scoring pass failed, the pool would be
    uniform and its first maximum, letter A, would be the answer)."""
    mode = bundle.question.answer_mode
    if mode == "multi":
        return "several_answers"
    if mode == "free_text":
        return "free_text"
    weights = pool_weights(bundle, thresholds)
    betas = binding_weights(thresholds)
    weighed = sum(weights[pathway] for pathway in pool_inputs(bundle))
    weighed += sum(betas.get(pathway, 0.0) for pathway in binding_inputs(bundle))
    return None if weighed > 0 else "nothing_to_pool"


def calibrated_verify(
    bundle: EvidenceBundle, agreement: Agreement, thresholds: Thresholds
) -> tuple[VerifierOutput, RuleId] | None:
    """The calibrated verifier's output for a single-answer MCQ bundle; None when it cannot decide
    (`calibrated_fallback` says why), so the caller falls back to the deterministic verifier."""
    if calibrated_fallback(bundle, thresholds) is not None:
        return None
    answers: dict[PathwayName, tuple[str, ...] | None] = {
        c.pathway: c.answer.letters if c.answer is not None else None for c in bundle.candidates
    }
    bound, betas = binding_inputs(bundle), binding_weights(thresholds)
    result = pooled_route(answers, pool_inputs(bundle), pool_weights(bundle, thresholds), bound, betas)
    output = VerifierOutput(
        answer=answer_for_route(result.route, bundle, agreement),
        route=result.route,
        rationale=f"pooled option probabilities: {top_options(result.combined)}{_binding_note(bundle, bound, betas)}",
        confidence=confidence_label(result.probability),
        mode="calibrated",
        raw_answer=result.letter,
        pooled={o: round(p, 6) for o, p in result.combined.items()},
    )
    return output, "calibrated"


def _binding_note(bundle: EvidenceBundle, bound: Binding, betas: Mapping[PathwayName, float]) -> str:
    """The binding terms pooled, and, on a disputed question, those a nonzero beta wanted but the record lacks (with
    the recorded reason)."""
    used = [p for p in bound if betas.get(p, 0.0) > 0]
    disputed = len({c.answer.letters for c in bundle.candidates if c.answer is not None}) > 1
    missing = [
        f"{c.pathway} ({c.binding_fallback or 'not recorded'})"
        for c in bundle.candidates
        if disputed and c.answer is not None and betas.get(c.pathway, 0.0) > 0 and c.pathway not in bound
    ]
    parts = ([f"binding {', '.join(used)}"] if used else []) + (
        [f"no binding term for {', '.join(missing)}"] if missing else []
    )
    return "; " + "; ".join(parts) if parts else ""
