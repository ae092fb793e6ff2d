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
pass that failed) is left out of the pool unless `calibrated_generated_probability` is set: its letter then
stands for that probability, the rest spread evenly over the other options (`generated_distribution`). That
one tuned number is what a generated letter is worth; `clearmed tune --params calibrated_generated` fits it by
replay on runs recorded with it set. With `[program] stated_confidence` the pathways also state how likely their
letter is right, and that number, shrunk towards chance by `calibrated_stated_weight` (`--params
calibrated_stated`), stands for the letter instead (`generated_probability`), never below chance.

When nothing can be pooled (every pathway generated with no probability set, or a multi-answer or free-text
question, which this verifier never pools), the deterministic verifier decides: the output records why
(`VerifierOutput.calibrated_fallback`, `calibrated_fallback`), the program warns once per run
(`CalibratedFallbackWarning`) and the run summary counts those questions.

needs_more_search: when the pooled probability of the choice is below `calibrated_more_search_below`, the
verifier asks for one targeted follow-up search, and the live program re-scores the dynamic pathway on its
initial web passages plus the round's (`FollowUpRound.rescored`). Merging that round replaces the dynamic
candidate by the re-scored one (`rescored_candidate`; the original is kept on the round as `replaced`), so the
agreement, the verifier's second pooling, the route's answer and the guard's challenger all see the same dynamic
answer. It asks once per question, and only when re-scoring can change something (`rescorable`: a single-answer
MCQ whose dynamic pathway answered by scoring) and a follow-up may run; after that round, re-scored or not (the
search failed, found nothing new, or the backbone could not score), it decides from the distributions it has.
The follow-up search also still serves the override guard and the challenge audit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from clearmed.programs._formatting import top_options
from clearmed.programs.rules import answer_for_route, may_follow_up
from clearmed.signatures.records import (
    NEEDS_MORE_SEARCH,
    PATHWAYS,
    Agreement,
    Answer,
    CalibratedFallback,
    Candidate,
    Confidence,
    EvidenceBundle,
    FollowUpRound,
    PathwayName,
    Route,
    RuleId,
    Thresholds,
    VerifierOutput,
    route_for,
)
from clearmed.signatures.records.routes import AnswerSource

__all__ = [
    "CalibratedFallbackWarning",
    "CalibratedRoute",
    "calibrated_fallback",
    "calibrated_verify",
    "confidence_label",
    "generated_distribution",
    "generated_probability",
    "high_quality_share",
    "pool",
    "pool_inputs",
    "pooled_route",
    "rescorable",
    "rescored_candidate",
]

POOL_FLOOR = 1e-6  # a zero probability would veto an option outright
_CEILING = 0.99  # nor may a stated "1.0" veto every other option


def pool(
    distributions: Mapping[PathwayName, Mapping[str, float]], weights: Mapping[PathwayName, float]
) -> dict[str, float]:
    """Log-linear pooling of the pathways' option distributions (a pathway absent from either map is left out)."""
    options = sorted({option for dist in distributions.values() for option in dist})
    if not options:
        return {}
    scores = {
        option: sum(
            weights.get(pathway, 0.0) * math.log(max(dist.get(option, 0.0), POOL_FLOOR))
            for pathway, dist in distributions.items()
        )
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
    *,
    more_search_below: float = 0.0,
    allow_more_search: bool = True,
) -> CalibratedRoute:
    """CLEAR's route for the pooled answer; the answer itself is later taken from the candidate records.

    The route always names a pathway (or pair) whose own answer is the pooled choice when one exists; when no
    pathway chose it (pooling can favour a runner-up), the pathway whose answer the pool rates highest wins.
    """
    combined = pool(distributions, weights)
    answered = {p: a for p, a in answers.items() if a}
    if not combined or not answered:
        route: Route = NEEDS_MORE_SEARCH if allow_more_search else route_for("parametric")
        return CalibratedRoute(route, None, 0.0, combined)
    letter = max(combined, key=combined.__getitem__)
    probability = combined[letter]
    if allow_more_search and probability < more_search_below:
        return CalibratedRoute(NEEDS_MORE_SEARCH, letter, probability, combined)
    holders = [p for p in PATHWAYS if answered.get(p) == (letter,)]
    if not holders:  # the pool chose no pathway's answer: the best-rated pathway answer stands
        best = max(answered, key=lambda p: sum(combined.get(o, 0.0) for o in answered[p]))
        return CalibratedRoute(route_for(best), answered[best][0], combined.get(answered[best][0], 0.0), combined)
    source: AnswerSource = "agreement" if len(holders) >= 2 else holders[0]
    return CalibratedRoute(route_for(source), letter, probability, combined)


def generated_distribution(letters: tuple[str, ...], options: list[str], probability: float) -> dict[str, float]:
    """A generated single letter as a distribution: `probability` on it, the rest even over the other options.

    Empty when there is nothing to spread (not exactly one letter among the options, or a single option)."""
    if len(letters) != 1 or letters[0] not in options or len(options) < 2:
        return {}
    rest = (1.0 - probability) / (len(options) - 1)
    return {option: probability if option == letters[0] else rest for option in options}


def generated_probability(candidate: Candidate, n_options: int, thresholds: Thresholds) -> float:
    """What a generated letter is worth in the pool: its stated confidence, shrunk towards chance by
    `calibrated_stated_weight` (small models state 0.9 for nearly everything), or, with none stated,
    `calibrated_generated_probability` (0: the pathway is left out), never below chance (1/n)."""
    if n_options < 2:
        return thresholds.calibrated_generated_probability
    chance = 1.0 / n_options
    if candidate.stated_confidence is None:
        generated = thresholds.calibrated_generated_probability
        # Below chance the letter would count against itself: the tuner searches 0.25-0.95, and on 3-option
        # PubMedQA a generated "A" at 0.3 would leave 0.35 on each other option.
        return max(generated, chance) if generated > 0.0 else 0.0
    shrunk = chance + thresholds.calibrated_stated_weight * (candidate.stated_confidence - chance)
    return min(max(shrunk, chance), _CEILING)


def rescorable(bundle: EvidenceBundle) -> bool:
    """Whether a follow-up round can re-score the dynamic pathway: a single-answer MCQ whose dynamic candidate
    answered by scoring its options. A judged, generated or failed dynamic candidate has no distribution to
    re-score like for like, so the calibrated verifier does not ask for a search that could change nothing."""
    scores = bundle.candidate("dynamic").option_scores
    return bundle.question.answer_mode == "single" and scores is not None and not scores.per_option


def rescored_candidate(original: Candidate, round_: FollowUpRound) -> Candidate:
    """The dynamic candidate after a round that re-scored it: its answer is the re-scored choice, and it saw the
    round's pages too. Everything else (search, query, model) is the pathway's own; a letter-prior correction of
    the original does not carry over (the new distribution is corrected afresh, `corrected_candidate`)."""
    scores = round_.rescored
    assert scores is not None, "only a re-scored round replaces the dynamic candidate"
    return original.model_copy(
        update={
            "answer": Answer(letters=scores.letters),
            "rationale": f"re-scored with {len(round_.passages)} follow-up results: {top_options(scores.probs)}",
            "raw_answer": ",".join(scores.letters),
            "passage_ids": [*original.passage_ids, *(p.id for p in round_.passages)],
            "option_scores": scores,
            "uncorrected": None,
        }
    )


def pool_inputs(bundle: EvidenceBundle, thresholds: Thresholds) -> dict[PathwayName, dict[str, float]]:
    """The distribution each answered pathway brings to the pool: its scored one, or for a generated letter the
    distribution `generated_probability` gives it (none when that is 0: the pathway is left out)."""
    options = list(bundle.question.options or {})
    distributions: dict[PathwayName, dict[str, float]] = {}
    for candidate in bundle.candidates:
        if candidate.answer is None:
            continue
        if candidate.option_scores is not None:
            distributions[candidate.pathway] = candidate.option_scores.probs
            continue
        probability = generated_probability(candidate, len(options), thresholds)
        generated = generated_distribution(candidate.answer.letters, options, probability) if probability else {}
        if generated:
            distributions[candidate.pathway] = generated
    return distributions


def high_quality_share(bundle: EvidenceBundle) -> float:
    """The share of the dynamic pathway's labelled web results rated high (0 with none labelled)."""
    quality = bundle.dynamic_quality()
    labelled = quality.n_high + quality.n_medium + quality.n_low
    return quality.n_high / labelled if labelled else 0.0


class CalibratedFallbackWarning(UserWarning):
    """Calibrated mode handed questions to the deterministic verifier (warned once per run; the summary counts)."""


def calibrated_fallback(bundle: EvidenceBundle, thresholds: Thresholds) -> CalibratedFallback | None:
    """Why the calibrated verifier cannot decide this bundle, so the deterministic verifier must; None when it can.

    It pools single-answer distributions only: multi-answer and free-text questions always fall back, and so does
    a question whose pathways all generated their letters while `calibrated_generated_probability` is 0."""
    mode = bundle.question.answer_mode
    if mode == "multi":
        return "several_answers"
    if mode == "free_text":
        return "free_text"
    return None if pool_inputs(bundle, thresholds) else "nothing_to_pool"


def calibrated_verify(
    bundle: EvidenceBundle, agreement: Agreement, thresholds: Thresholds, *, may_search: bool = True
) -> tuple[VerifierOutput, RuleId] | None:
    """The calibrated verifier's output for a single-answer MCQ bundle; None when it cannot decide
    (`calibrated_fallback` says why), so the caller falls back to the deterministic verifier.

    `may_search` is False when the follow-up mechanism is switched off: asking would only end in the
    deterministic fallback, so the verifier decides from what it has."""
    if calibrated_fallback(bundle, thresholds) is not None:
        return None
    answers: dict[PathwayName, tuple[str, ...] | None] = {
        c.pathway: c.answer.letters if c.answer is not None else None for c in bundle.candidates
    }
    distributions = pool_inputs(bundle, thresholds)
    high_share = high_quality_share(bundle)
    weights: dict[PathwayName, float] = {
        "parametric": thresholds.calibrated_parametric_weight,
        "local": thresholds.calibrated_local_weight,
        "dynamic": thresholds.calibrated_dynamic_weight + thresholds.calibrated_high_weight * high_share,
    }
    # One re-scoring round at most: once a needs_more_search round has run, re-scored or not, the verifier decides.
    asked = any(round_.trigger == NEEDS_MORE_SEARCH for round_ in bundle.followups)
    may_ask = (
        thresholds.calibrated_more_search_below > 0.0
        and may_search
        and not asked
        and may_follow_up(0, thresholds)
        and rescorable(bundle)
    )
    result = pooled_route(
        answers,
        distributions,
        weights,
        more_search_below=thresholds.calibrated_more_search_below,
        allow_more_search=may_ask,
    )
    output = VerifierOutput(
        answer=answer_for_route(result.route, bundle, agreement),
        route=result.route,
        rationale=f"pooled option probabilities: {top_options(result.combined)}",
        confidence=confidence_label(result.probability),
        mode="calibrated",
        raw_answer=result.letter,
        pooled={o: round(p, 6) for o, p in result.combined.items()},
    )
    return output, "calibrated"
