"""The aggregation verifier (CLEAR 2.3.1): o0 = V(B), or the deterministic verifier when the LM's cannot stand.

The LM verifier decides by the CLEAR code's decision policy (`signatures.clear.VERIFIER_POLICY`) and returns its
structured verdict beside the letter and the route (`VerifierVerdict`). Recorded pathways are shown as the code's
verifier saw them (`methods/clear/verifier.py`): each candidate's raw reply cut at 800 characters, and up to six
local documents of 1,000 characters each; where the backbone's window does not hold them, `run_stage` leaves out
the lowest-ranked passages and records it, as for any prompt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import get_args

import dspy

from clearmed.programs.adjudication.rules import answer_for_route, heuristic_verify, verifier_letter
from clearmed.programs.lm.context import current
from clearmed.programs.lm.parsing import format_options, normalise_literal, parse_answer
from clearmed.programs.lm.prompting import (
    RankedEvidence,
    drop_order,
    format_candidates,
    format_passages,
    render_dynamic_evidence,
    render_local_evidence,
    render_question,
    select_passages,
    truncate_words,
)
from clearmed.programs.lm.stage import run_stage
from clearmed.signatures.clear import VerifyAggregate
from clearmed.signatures.records import (
    NEEDS_MORE_SEARCH,
    Agreement,
    Candidate,
    EvidenceBundle,
    StepError,
    SupportScope,
    VerifierOutput,
    VerifierVerdict,
)
from clearmed.signatures.records.results import VerifierResult

# What the CLEAR code's verifier shows of recorded runs (`_compact_candidate`, `_compact_local_docs`, max_local_docs).
RECORDED_REPLY_CHARS = 800
RECORDED_LOCAL_DOCS = 6
RECORDED_DOC_CHARS = 1000
# A live pathway's rationale, as the verifier has always seen it.
RATIONALE_WORDS = 60


def cut_chars(text: str, limit: int) -> str:
    """At most `limit` characters, ending in "..." when cut (as the code's `_truncate`)."""
    text = text.strip()
    return text if len(text) <= limit else text[: max(0, limit - 3)].rstrip() + "..."


def candidates_view(candidates: Sequence[Candidate]) -> str:
    """Each candidate as the verifier reads it: a recorded one by its raw reply (800 characters), a live one by its
    rationale (60 words)."""
    shown = []
    for candidate in candidates:
        if candidate.recorded_from is not None and candidate.raw_answer:
            rationale = cut_chars(candidate.raw_answer, RECORDED_REPLY_CHARS)
        else:
            rationale = truncate_words(candidate.rationale, RATIONALE_WORDS)
        shown.append(candidate.model_copy(update={"rationale": rationale}))
    # Each text is cut here already; the word limit is one no cut text reaches.
    return format_candidates(shown, rationale_words=RECORDED_REPLY_CHARS)


def local_view(bundle: EvidenceBundle) -> str:
    """The local evidence the verifier reads: a recorded local pathway's documents at the code's lengths, else the
    configured view (`verifier_passages`, `passage_words`)."""
    if bundle.candidate("local").recorded_from is None or not bundle.local_passages:
        return render_local_evidence(bundle)
    cited = {pid for candidate in bundle.candidates for pid in candidate.cited_passage_ids}
    passages = [
        passage.model_copy(update={"text": cut_chars(passage.text, RECORDED_DOC_CHARS)})
        for passage in select_passages(bundle.local_passages, cited, RECORDED_LOCAL_DOCS)
    ]
    return RankedEvidence(format_passages(passages, None), drop_order(passages, cited))


def read_verdict(fields: Mapping[str, object]) -> VerifierVerdict:
    """The structured verdict from the prediction's fields; a field left out or written as no known scope is None."""
    scope = fields.get("support_scope")
    allowed: tuple[SupportScope, ...] = get_args(SupportScope)
    read = normalise_literal(scope, allowed) if isinstance(scope, str) else None
    flags = {name: fields.get(name) for name in VerifierVerdict.model_fields if name != "support_scope"}
    return VerifierVerdict(
        **{name: value if isinstance(value, bool) else None for name, value in flags.items()},
        support_scope=next((value for value in allowed if value == read), None),
    )


class AggregationVerifier(dspy.Module):
    """Reads the evidence bundle and returns answer, route, structured verdict, rationale and confidence.

    In `heuristic` mode, or whenever the LM step fails, is unparseable or names a route the candidates cannot
    support (and, under `answer_source = "verifier"`, gives no valid letter of its own), the deterministic verifier
    decides instead and the failure is kept in the output.
    """

    def __init__(self) -> None:
        super().__init__()
        self.verify = dspy.Predict(VerifyAggregate)

    def forward(self, bundle: EvidenceBundle, agreement: Agreement) -> VerifierResult:
        settings = current().settings
        quality = bundle.dynamic_quality()
        # Calibrated mode lands here only when it cannot decide; the caller (clear.LiveActions) warns once per run and
        # records why on the output (`calibrated_fallback`), which the run summary counts.
        if settings.verifier_mode != "lm":
            output, rule = heuristic_verify(bundle, agreement, quality)
            return VerifierResult(output=output, rule=rule)
        question = bundle.question
        result = run_stage(
            "verifier",
            self.verify,
            question=render_question(question),
            options=format_options(question),
            candidates=candidates_view(bundle.candidates),
            local_evidence=local_view(bundle),
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
            verdict=read_verdict(pred.toDict()),
        )
        own_letter = settings.answer_source == "verifier" and verifier_letter(output, bundle) is not None
        backed = output.route == NEEDS_MORE_SEARCH or answer_for_route(output.route, bundle, agreement) is not None
        if not (backed or own_letter):
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
