"""Cross-source aggregation (CLEAR 2.3.1): which pathways agree, and the aggregation verifier o0 = V(B)."""

from __future__ import annotations

import dspy

from clearmed.programs.answers import answers_agree, format_options, parse_answer
from clearmed.programs.formatting import (
    format_candidates,
    format_passages,
    format_quality_counts,
    render_question,
)
from clearmed.programs.rules import answer_for_route, heuristic_verify
from clearmed.programs.run_context import current
from clearmed.programs.stage import run_stage
from clearmed.signatures.clear import JudgeAgreement, VerifyAggregate
from clearmed.signatures.records import (
    NEEDS_MORE_SEARCH,
    Agreement,
    EvidenceBundle,
    Passage,
    QualityLabel,
    StepError,
    VerifierOutput,
)


def letter_agreement(bundle: EvidenceBundle, method: str = "letters") -> Agreement:
    """Pairwise agreement by letter-set equality (MCQ) or the free-text normaliser."""
    parametric, local, dynamic = (bundle.candidate(name).answer for name in ("parametric", "local", "dynamic"))
    return Agreement(
        parametric_local=answers_agree(parametric, local),
        parametric_dynamic=answers_agree(parametric, dynamic),
        local_dynamic=answers_agree(local, dynamic),
        method=method,  # type: ignore[arg-type]
    )


class CandidateAgreement(dspy.Module):
    """MCQ: letter sets. Free text: the normaliser, or one LM judgement of all three pairs when configured."""

    def __init__(self) -> None:
        super().__init__()
        self.judge = dspy.Predict(JudgeAgreement)

    def forward(self, bundle: EvidenceBundle) -> dspy.Prediction:
        question = bundle.question
        if question.is_mcq:
            return dspy.Prediction(agreement=letter_agreement(bundle), error=None)
        normalised = letter_agreement(bundle, "normaliser")
        answers = {c.pathway: c.answer for c in bundle.candidates}
        if current().settings.agreement_mode != "lm" or sum(a is not None for a in answers.values()) < 2:
            return dspy.Prediction(agreement=normalised, error=None)

        def text(name: str) -> str:
            answer = answers.get(name)  # type: ignore[call-overload]
            return answer.display() if answer is not None else "(no answer)"

        result = run_stage(
            "agreement",
            self.judge,
            question=render_question(question),
            parametric_answer=text("parametric"),
            local_answer=text("local"),
            dynamic_answer=text("dynamic"),
        )
        if result.prediction is None:
            return dspy.Prediction(agreement=normalised, error=result.error)
        pred = result.prediction

        def judged(first: str, second: str, value: bool) -> bool | None:
            # A pair with a missing answer has no agreement value, whatever the LM said.
            return None if answers.get(first) is None or answers.get(second) is None else bool(value)  # type: ignore[call-overload]

        agreement = Agreement(
            parametric_local=judged("parametric", "local", pred.parametric_equals_local),
            parametric_dynamic=judged("parametric", "dynamic", pred.parametric_equals_dynamic),
            local_dynamic=judged("local", "dynamic", pred.local_equals_dynamic),
            method="lm",
        )
        return dspy.Prediction(agreement=agreement, error=None)


def select_passages(passages: list[Passage], cited: set[str], limit: int | None) -> list[Passage]:
    """At most `limit` passages, the ones a pathway cited first, then by retrieval order."""
    if limit is None or len(passages) <= limit:
        return passages
    ranked = sorted(passages, key=lambda p: (p.id not in cited, passages.index(p)))
    return sorted(ranked[:limit], key=passages.index)


def _cited(bundle: EvidenceBundle) -> set[str]:
    return {pid for candidate in bundle.candidates for pid in candidate.cited_passage_ids}


def render_local_evidence(bundle: EvidenceBundle) -> str:
    settings = current().settings
    passages = select_passages(bundle.local_passages, _cited(bundle), settings.verifier_passages)
    return format_passages(passages, settings.passage_words)


def render_dynamic_evidence(bundle: EvidenceBundle, min_quality: QualityLabel | None = None) -> str:
    """Initial and follow-up web evidence with quality labels, and the quality counts over all of it.

    `min_quality` shows the text of only those passages labelled at least that good (see `format_passages`).
    """
    settings = current().settings
    cited = _cited(bundle)
    passages = select_passages(bundle.dynamic_passages, cited, settings.verifier_passages)
    for round_ in bundle.followups:
        passages += select_passages(round_.passages, cited, settings.verifier_passages)
    shown = format_passages(passages, settings.passage_words, min_quality=min_quality)
    return f"{shown}\n{format_quality_counts(bundle.dynamic_quality())}"


class AggregationVerifier(dspy.Module):
    """Reads the evidence bundle and returns answer, route, rationale and confidence.

    In `heuristic` mode, or whenever the LM step fails, is unparseable or names a route the candidates
    cannot support, the deterministic verifier decides instead and the failure is kept in the output.
    """

    def __init__(self) -> None:
        super().__init__()
        self.verify = dspy.Predict(VerifyAggregate)

    def forward(self, bundle: EvidenceBundle, agreement: Agreement) -> dspy.Prediction:
        settings = current().settings
        quality = bundle.dynamic_quality()
        if settings.verifier_mode == "heuristic":
            output, rule = heuristic_verify(bundle, agreement, quality)
            return dspy.Prediction(output=output, rule=rule)
        question = bundle.question
        result = run_stage(
            "verifier",
            self.verify,
            question=render_question(question),
            options=format_options(question),
            candidates=format_candidates(bundle.candidates),
            local_evidence=render_local_evidence(bundle),
            dynamic_evidence=render_dynamic_evidence(bundle),
        )
        if result.prediction is None:
            return self._fallback(bundle, agreement, result.error)
        pred = result.prediction
        output = VerifierOutput(
            answer=parse_answer(pred.answer, question),
            route=pred.route,
            rationale=str(pred.rationale or ""),
            confidence=pred.confidence,
            raw_answer=pred.answer,
        )
        if output.route != NEEDS_MORE_SEARCH and answer_for_route(output.route, bundle, agreement) is None:
            error = StepError(
                stage="verifier",
                kind="invalid_answer",
                message=f"route {output.route} is not supported by the candidates (no such answer or agreement)",
                raw_output=str(pred.route),
            )
            return self._fallback(bundle, agreement, error)
        return dspy.Prediction(output=output, rule="verifier")

    @staticmethod
    def _fallback(bundle: EvidenceBundle, agreement: Agreement, error: StepError | None) -> dspy.Prediction:
        output, rule = heuristic_verify(bundle, agreement, bundle.dynamic_quality())
        return dspy.Prediction(output=output.model_copy(update={"error": error}), rule=rule)
