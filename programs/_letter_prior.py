"""Letter-prior correction of the pathways' scored option distributions (`[thresholds] letter_prior_strength`).

A small backbone reading a fixed prompt prefers some letters whatever the question. Measured on the embedded model
over 300 held-out MMLU-Med questions: the local and dynamic pathways put their top choice on A for 47-51% of them
and the parametric pathway on B for 48%, where gold is about a quarter each. Dividing a pathway's distribution by
its letter prior (its mean scored distribution over train questions), raised to a strength,

    p'(o) ~ p(o) / prior(o) ** strength,

takes that preference out while keeping what the evidence moved. `clearmed tune --params letter_prior` fits each
pathway's prior on the train run (`fit_letter_priors`, the mean by option letter) and the strength by replay,
with zero LM calls.

The correction is applied at the start of adjudication, in the live program and in replay alike, and only to
single-answer MCQ candidates that scored their options. A corrected candidate's answer is the corrected argmax, so
agreement, every route, the guard and the audit read the corrected answer (correcting only inside the verifier's
pooling would let routing hand the uncorrected letter back). The candidate as scored is kept on it
(`Candidate.uncorrected`), and `uncorrected_candidates` restores it, so replay starts from what the pathways said.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from clearmed.programs._formatting import top_options
from clearmed.signatures.records import Answer, Candidate, EvidenceBundle, OptionScores, PathwayName, Thresholds

__all__ = [
    "corrected_bundle",
    "corrected_candidate",
    "corrected_scores",
    "correction_outcome",
    "fit_letter_priors",
    "uncorrected_candidates",
]

_FLOOR = 1e-6  # a prior letter the train questions never gave mass to must not divide by zero


def corrected_scores(scores: OptionScores, prior: Mapping[str, float], strength: float) -> OptionScores:
    """`scores` with the prior divided out at `strength`; the prior is restricted to this question's options
    (a letter the prior lacks counts as average) and renormalised, so a 5-option prior serves 4-option questions."""
    options = list(scores.probs)
    known = [prior[o] for o in options if o in prior]
    average = sum(known) / len(known) if known else 1.0
    weights = {o: max(prior.get(o, average), _FLOOR) for o in options}
    total = sum(weights.values())
    raw = {o: scores.probs[o] / (weights[o] / total) ** strength for o in options}
    norm = sum(raw.values())
    probs = {o: value / norm for o, value in raw.items()} if norm > 0 else dict(scores.probs)
    best = max(probs, key=probs.__getitem__)
    return scores.model_copy(update={"probs": probs, "letters": (best,)})


def _single_answer_scores(candidate: Candidate) -> OptionScores | None:
    """The distribution an answered candidate scored over its options (one answer); None for a generated, judged,
    failed or multi-answer candidate: those have no letter distribution to correct or average."""
    scores = candidate.option_scores
    if candidate.answer is None or scores is None or scores.per_option or not scores.probs:
        return None
    return scores


def corrected_candidate(candidate: Candidate, thresholds: Thresholds) -> Candidate:
    """The candidate with its distribution corrected and its answer the corrected choice; unchanged when there is
    nothing to correct (strength 0, no prior for its pathway, a generated, judged or multi-answer candidate)."""
    scored = _single_answer_scores(candidate)
    if scored is None or thresholds.letter_prior_strength <= 0.0 or candidate.pathway not in thresholds.letter_priors:
        return candidate
    original = candidate.model_copy(update={"uncorrected": None})
    scores = corrected_scores(scored, thresholds.letter_priors[candidate.pathway], thresholds.letter_prior_strength)
    return original.model_copy(
        update={
            "answer": Answer(letters=scores.letters),
            "option_scores": scores,
            "rationale": f"{original.rationale}; letter prior corrected: {top_options(scores.probs)}",
            "uncorrected": original,
        }
    )


def corrected_bundle(bundle: EvidenceBundle, thresholds: Thresholds) -> EvidenceBundle:
    """Every correctable candidate of a single-answer MCQ corrected; the same bundle object when none is."""
    if bundle.question.answer_mode != "single" or thresholds.letter_prior_strength <= 0.0:
        return bundle
    candidates = [corrected_candidate(c, thresholds) for c in bundle.candidates]
    if all(new is old for new, old in zip(candidates, bundle.candidates, strict=True)):
        return bundle
    return bundle.model_copy(update={"candidates": candidates})


def uncorrected_candidates(candidates: Iterable[Candidate]) -> list[Candidate]:
    """The candidates as their pathways scored them."""
    return [c.uncorrected if c.uncorrected is not None else c for c in candidates]


def correction_outcome(bundle: EvidenceBundle, strength: float) -> str:
    """The trail's line for a corrected bundle: which answers the correction changed."""
    changes = []
    for candidate in bundle.candidates:
        before = candidate.uncorrected
        if before is None or candidate.answer is None or before.answer is None:
            continue
        if before.answer.letters != candidate.answer.letters:
            changes.append(f"{candidate.pathway} {before.answer.display()} -> {candidate.answer.display()}")
    changed = "; ".join(changes) if changes else "no answer changed"
    return f"scored distributions divided by the backbone's letter prior (strength {strength:g}): {changed}"


def fit_letter_priors(
    bundles: Iterable[EvidenceBundle], *, min_questions: int = 20
) -> dict[PathwayName, dict[str, float]]:
    """Each pathway's letter prior: the mean of its uncorrected scored distributions over single-answer MCQs, by
    option letter (over the questions that have that letter), renormalised. A pathway scored on fewer than
    `min_questions` questions gets no prior: a mean of a handful of distributions is mostly their answers."""
    sums: dict[PathwayName, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    counts: dict[PathwayName, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    questions: dict[PathwayName, int] = defaultdict(int)
    for bundle in bundles:
        if bundle.question.answer_mode != "single":
            continue
        for candidate in uncorrected_candidates(bundle.candidates):
            scores = _single_answer_scores(candidate)
            if scores is None:
                continue
            questions[candidate.pathway] += 1
            for option, p in scores.probs.items():
                sums[candidate.pathway][option] += p
                counts[candidate.pathway][option] += 1
    priors: dict[PathwayName, dict[str, float]] = {}
    for pathway, by_option in sums.items():
        if questions[pathway] < min_questions:
            continue
        means = {o: max(total / counts[pathway][o], _FLOOR) for o, total in sorted(by_option.items())}
        norm = sum(means.values())
        priors[pathway] = {o: round(m / norm, 6) for o, m in means.items()}
    return priors
