"""The aggregation verifier (CLEAR 2.3.1): o0 = V(B), or the deterministic verifier when the LM's cannot stand."""

from __future__ import annotations

import dspy

from clearmed.programs.adjudication.rules import answer_for_route, heuristic_verify
from clearmed.programs.lm.context import current
from clearmed.programs.lm.parsing import format_options, parse_answer
from clearmed.programs.lm.prompting import (
    format_candidates,
    render_dynamic_evidence,
    render_local_evidence,
    render_question,
)
from clearmed.programs.lm.stage import VerifierResult, run_stage
from clearmed.signatures.clear import VerifyAggregate
from clearmed.signatures.records import NEEDS_MORE_SEARCH, Agreement, EvidenceBundle, StepError, VerifierOutput


class AggregationVerifier(dspy.Module):
    """Reads the evidence bundle and returns answer, route, rationale and confidence.

    In `heuristic` mode, or whenever the LM step fails, is unparseable or names a route the candidates
    cannot support, the deterministic verifier decides instead and the failure is kept in the output.
    """

    def __init__(self) -> None:
        super().__init__()
        self.verify = dspy.Predict(VerifyAggregate)

    def forward(self, bundle: EvidenceBundle, agreement: Agreement) -> VerifierResult:
        settings = current().settings
        quality = bundle.dynamic_quality()
        # Calibrated mode lands here only when it cannot decide; the caller (clear.LiveActions) warns once per run and
        # records why on the output (`calibrated_fallback`), which the run summary counts.
        if settings.verifier_mode in ("heuristic", "calibrated"):
            output, rule = heuristic_verify(bundle, agreement, quality)
            return VerifierResult(output=output, rule=rule)
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
        return VerifierResult(output=output, rule="verifier")

    @staticmethod
    def _fallback(bundle: EvidenceBundle, agreement: Agreement, error: StepError | None) -> VerifierResult:
        output, rule = heuristic_verify(bundle, agreement, bundle.dynamic_quality())
        return VerifierResult(output=output.model_copy(update={"error": error}), rule=rule)
