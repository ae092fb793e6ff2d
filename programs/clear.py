"""The composed CLEAR program: pathways -> agreement -> verifier -> adjudication -> task adapter -> Decision."""

from __future__ import annotations

import contextvars
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait

import dspy

from clearmed.programs.adjudication import Adjudicated, Mechanisms, adjudicate
from clearmed.programs.adjudication.calibrated import (
    CalibratedFallbackWarning,
    calibrated_fallback,
    calibrated_verify,
)
from clearmed.programs.adjudication.learned import LearnedModel, answer_holders, learned_verify
from clearmed.programs.adjudication.rules import gate_accepts
from clearmed.programs.assessors.agreement import CandidateAgreement
from clearmed.programs.assessors.guard_audit import ChallengeAudit, OverrideGuard
from clearmed.programs.assessors.source_quality import SourceQualityAssessor
from clearmed.programs.assessors.verifier import AggregationVerifier
from clearmed.programs.lm.context import Ledger, RunContext, activate, current, supports_concurrency
from clearmed.programs.lm.prompting import over_budget, refused_decision
from clearmed.programs.pathways.evidence_search import FollowUpSearch
from clearmed.programs.pathways.pathways import DynamicPathway, LocalPathway, ParametricPathway
from clearmed.programs.pathways.task_adapters import FormatGate, ResponseGenerator
from clearmed.programs.pathways.web_query import WebQueryWriter
from clearmed.retrieval.base import Retriever, WebSearch
from clearmed.retrieval.priors import QualityPriors
from clearmed.signatures.records import (
    AdjudicationStep,
    Agreement,
    Answer,
    AuditAssessment,
    CalibratedFallback,
    Decision,
    EvidenceBundle,
    FollowUpRound,
    GuardAssessment,
    LearnedVerdict,
    OptionScores,
    Question,
    RuleId,
    StepError,
    Thresholds,
    VerifierOutput,
    top_options,
)
from clearmed.signatures.records.question import OptionTexts, as_question
from clearmed.signatures.records.results import AgreementResult, PathwayResult, ResponseResult, VerifierResult
from clearmed.signatures.records.settings import ProgramSettings

# Guards each program's once-per-run warning flag when questions run on several threads (a module-level lock: a
# lock attribute would not survive the deep copies DSPy's optimizers make of a program).
_WARN_LOCK = threading.Lock()

# The pathways' worker threads: one long-lived pool for the process, shared by every program and question. A pool
# per question started three threads each time, and each new thread opened its own search-cache connection and JVM
# attachment; reused threads keep descriptors and threads flat however long a run is. The pool starts threads only
# as concurrent pathways need them (three per question in flight), up to this many; beyond it pathways queue, and
# since a pathway never waits on another pathway, queueing cannot deadlock.
_PATHWAY_WORKERS = 96
_POOL_LOCK = threading.Lock()
_PATHWAY_POOL: ThreadPoolExecutor | None = None


def pathway_pool() -> ThreadPoolExecutor:
    """The process's pathway pool, started on first use."""
    global _PATHWAY_POOL
    with _POOL_LOCK:
        if _PATHWAY_POOL is None:
            _PATHWAY_POOL = ThreadPoolExecutor(max_workers=_PATHWAY_WORKERS, thread_name_prefix="clearmed-pathway")
        return _PATHWAY_POOL


class LiveActions:
    """AdjudicationActions backed by the program's LM modules and web search."""

    def __init__(self, program: CLEAR) -> None:
        self.program = program

    def verify(self, bundle: EvidenceBundle, agreement: Agreement) -> tuple[VerifierOutput, RuleId]:
        settings = self.program.settings
        fallback: CalibratedFallback | None = None
        if settings.verifier_mode == "calibrated":  # no LM call; replay recomputes it the same way
            calibrated = calibrated_verify(bundle, agreement, self.program.thresholds)
            if calibrated is not None:
                return calibrated
            fallback = calibrated_fallback(bundle, self.program.thresholds)
            if fallback is not None:
                self.program.warn_calibrated_fallback(fallback)
        learned: LearnedVerdict | None = None
        if settings.verifier_mode == "learned":  # no LM call: the fitted model, or its verdict on why it cannot decide
            decided = learned_verify(bundle, agreement, self.program.learned_model)
            if not isinstance(decided, LearnedVerdict):
                return decided
            learned = decided
        result: VerifierResult = self.program.verifier(bundle=bundle, agreement=agreement)
        if fallback is not None:  # the deterministic verifier decided in calibrated mode: the record says why
            return result.output.model_copy(update={"calibrated_fallback": fallback}), result.rule
        if learned is not None:  # the deterministic verifier decided in learned mode: the verdict says why
            return result.output.model_copy(update={"learned": learned}), result.rule
        return result.output, result.rule

    def follow_up(self, bundle: EvidenceBundle, trigger: str) -> FollowUpRound:
        round_: FollowUpRound = self.program.followup(bundle=bundle, trigger=trigger)
        return round_

    def assess_guard(self, bundle: EvidenceBundle, default: Answer, challenger: Answer) -> GuardAssessment | StepError:
        return self.program.guard(bundle=bundle, default=default, challenger=challenger)

    def assess_audit(self, bundle: EvidenceBundle, default: Answer, challenger: Answer) -> AuditAssessment | StepError:
        return self.program.audit(bundle=bundle, default=default, challenger=challenger)


class CLEAR(dspy.Module):
    """Cross-source evidence adjudication for one question at a time.

    Evidence backends, LMs per role, settings and thresholds are plain attributes: they come from the
    config, are never saved with the program's DSPy state, and survive optimizers' `reset_copy()` because
    each stage picks its LM from the run context inside `forward`.
    """

    def __init__(
        self,
        retriever: Retriever | None = None,
        web_search: WebSearch | None = None,
        *,
        settings: ProgramSettings | None = None,
        thresholds: Thresholds | None = None,
        quality_priors: QualityPriors | None = None,
        role_lms: dict[str, dspy.BaseLM] | None = None,
    ) -> None:
        super().__init__()
        self.gate = FormatGate()
        self.quality = SourceQualityAssessor(quality_priors)
        # One query writer for the dynamic pathway, QPIS and the follow-up: one prompt for optimizers to tune.
        self.web_query = WebQueryWriter()
        self.parametric = ParametricPathway(self.gate)
        self.local = LocalPathway(retriever, self.gate)
        self.dynamic = DynamicPathway(web_search, self.quality, self.gate, self.web_query)
        self.agreement = CandidateAgreement()
        self.verifier = AggregationVerifier()
        self.followup = FollowUpSearch(web_search, self.quality, self.web_query)
        self.guard = OverrideGuard()
        self.audit = ChallengeAudit()
        self.responder = ResponseGenerator()
        self.settings = settings or ProgramSettings()
        self.thresholds = thresholds or Thresholds()
        self.role_lms = dict(role_lms or {})
        # The config's priors: features and label ceilings for the quality assessment.
        self.quality_priors = quality_priors
        self.program_name = "clear"
        # Run-level: a program evaluates one run's questions, and says once that calibrated mode fell back.
        self.calibrated_fallback_warned = False
        # The learned verifier's fitted model (`verifier_mode = "learned"`), from a tune artifact (--program-artifact).
        self.learned_model: LearnedModel | None = None

    def warn_calibrated_fallback(self, reason: CalibratedFallback) -> None:
        """Once per run (per program): calibrated mode left a question to the deterministic verifier."""
        with _WARN_LOCK:
            if self.calibrated_fallback_warned:
                return
            self.calibrated_fallback_warned = True
        warnings.warn(
            f"verifier_mode = 'calibrated' fell back to the deterministic (heuristic) verifier ({reason}): "
            "multi-answer and free-text questions, and questions whose pathways generated their letters "
            "(no log-probabilities), are routed without pooling; warned once per run, the run summary counts them",
            CalibratedFallbackWarning,
            stacklevel=2,
        )

    # ------------------------------------------------------------------------------------------ pathways

    def _parallel(self, context: RunContext) -> bool:
        mode = self.settings.parallel_pathways
        if mode != "auto":
            return mode == "on"
        # Remote backends take concurrent calls; an in-process engine that serialises its calls does not.
        lm = context.lm_for("parametric")[1]
        return lm is None or supports_concurrency(lm)

    def _run_pathways(self, question: Question) -> list[PathwayResult]:
        calls: list[Callable[[], PathwayResult]] = [
            lambda: self.parametric(question=question),
            lambda: self.local(question=question),
            lambda: self.dynamic(question=question),
        ]
        if not self._parallel(current()):
            return [call() for call in calls]
        pool = pathway_pool()
        # Each task runs in a copy of this context, so dspy settings and the run context follow it.
        futures = [pool.submit(contextvars.copy_context().run, call) for call in calls]
        try:
            return [future.result() for future in futures]
        finally:
            # A pathway that raised (a fatal refusal) leaves its siblings running on the shared pool: wait for
            # them, as the pool's `with` block used to, so none outlives its question's run context.
            wait(futures)

    def gather(self, question: Question) -> tuple[EvidenceBundle, list[AdjudicationStep]]:
        """B = Aggregate(q, C, S): the three candidates, their evidence and the dynamic quality labels."""
        parametric, local, dynamic = self._run_pathways(question)
        bundle = EvidenceBundle(
            question=question,
            candidates=[parametric.candidate, local.candidate, dynamic.candidate],
            local_passages=local.passages,
            dynamic_passages=dynamic.passages,
            source_quality=dynamic.quality,
        )
        steps = [
            AdjudicationStep(
                mechanism="pathways",
                trigger=c.pathway,
                outcome=f"{c.pathway}: {c.answer.display() if c.answer else 'no answer'}",
                answer=c.answer,
                error=c.error,
            )
            for c in bundle.candidates
        ]
        if (query_step := dynamic.query_writer_step()) is not None:
            steps.append(query_step)
        if dynamic.quality_error is not None:
            steps.append(
                AdjudicationStep(
                    mechanism="pathways",
                    trigger="source quality",
                    outcome=f"quality labels from {dynamic.quality.origin}",
                    error=dynamic.quality_error,
                )
            )
        return bundle, steps

    def bind_evidence(self, bundle: EvidenceBundle) -> tuple[EvidenceBundle, AdjudicationStep | None]:
        """Evidence binding (issue 56): on a disputed single-answer MCQ (two or more distinct letters), each answered
        evidence pathway's prompt scored once more with the question removed, p(o | P), recorded on its candidate
        (`passage_only_scores`, or `binding_fallback`: why not) and in the trail. An agreed question pays nothing."""
        question = bundle.question
        if question.answer_mode != "single" or not question.options or len(answer_holders(bundle)) < 2:
            return bundle, None
        readers = {
            "local": (self.local.reader, bundle.local_passages),
            "dynamic": (self.dynamic.reader, bundle.dynamic_passages),
        }
        candidates, said = [], []
        for candidate in bundle.candidates:
            if candidate.pathway not in readers or candidate.answer is None:
                candidates.append(candidate)
                continue
            if candidate.passage_only_scores is not None:  # a recorded pathway that brought its own: not scored again
                candidates.append(candidate)
                said.append(f"{candidate.pathway}: p(o | P) as recorded")
                continue
            reader, passages = readers[candidate.pathway]
            bound = reader.passage_only(question, passages, candidate)
            if isinstance(bound, OptionScores):
                update: dict[str, object] = {"passage_only_scores": bound}
                said.append(f"{candidate.pathway}: p(o | P) {top_options(bound.probs)}")
            else:
                update = {"binding_fallback": bound}
                said.append(f"{candidate.pathway}: no binding term ({bound})")
            candidates.append(candidate.model_copy(update=update))
        if not said:
            return bundle, None
        step = AdjudicationStep(mechanism="pathways", trigger="evidence binding", outcome="; ".join(said))
        return bundle.model_copy(update={"candidates": candidates}), step

    # ------------------------------------------------------------------------------------------ forward

    def forward(self, question: Question | str, options: OptionTexts | None = None) -> dspy.Prediction:
        """Adjudicate one question: a `Question`, or its text with its options (a list, lettered A, B, ...)."""
        question = as_question(question, options)
        refusal = over_budget(question, self.settings)
        if refusal is not None:
            decision = refused_decision(question, refusal, self.program_name, self.thresholds)
            return dspy.Prediction(decision=decision, answer=None, route=None)
        context = RunContext(settings=self.settings, role_lms=self.role_lms, ledger=Ledger())
        with activate(context):
            decision = self._decide(question, context)
        return dspy.Prediction(decision=decision, answer=decision.answer, route=decision.route)

    def _decide(self, question: Question, context: RunContext) -> Decision:
        bundle, steps = self.gather(question)
        agreed: AgreementResult = self.agreement(bundle=bundle)
        agreement: Agreement = agreed.agreement
        if agreed.error is not None:
            steps.append(AdjudicationStep(mechanism="agreement", outcome="normaliser used", error=agreed.error))
        if self.settings.evidence_binding:
            bundle, binding = self.bind_evidence(bundle)
            if binding is not None:
                steps.append(binding)
        mechanisms = Mechanisms(
            guard=self.settings.enable_guard,
            audit=self.settings.enable_audit,
            followup=self.settings.enable_followup,
            answer_source=self.settings.answer_source,
        )
        result = adjudicate(bundle, agreement, self.thresholds, LiveActions(self), mechanisms)
        steps.extend(result.steps)
        return self._finish(question, result, steps, context)

    def _finish(
        self, question: Question, result: Adjudicated, steps: list[AdjudicationStep], context: RunContext
    ) -> Decision:
        common = {
            "question_id": question.id,
            "bundle": result.bundle,
            # the agreement adjudication started from, as the bundle's candidates are the pathways' own
            "agreement": result.agreement,
            "verifier_outputs": result.verifier_outputs,
            "thresholds": self.thresholds,
            "program": self.program_name,
        }
        if result.answer is None:
            errors = "; ".join(
                f"{c.pathway}: {c.error.message}" for c in result.bundle.candidates if c.error is not None
            )
            return Decision(
                status="failed",
                rationale=result.rationale,
                deciding_rule=result.rule,
                steps=steps,
                usage=context.ledger.rows,
                error=f"no pathway could answer the question ({errors or 'no detail'})",
                **common,  # type: ignore[arg-type]
            )
        response = None
        if question.is_mcq:
            valid = gate_accepts(result.answer, question)
            steps.append(
                AdjudicationStep(
                    mechanism="format_gate",
                    rule="format_gate",
                    outcome="valid option set" if valid else "not a valid option set for this question",
                    answer=result.answer,
                )
            )
        else:
            generated: ResponseResult = self.responder(
                bundle=result.bundle, conclusion=result.answer, rationale=result.rationale
            )
            response = generated.response or result.answer.display()
            valid = True
            steps.append(
                AdjudicationStep(
                    mechanism="response",
                    outcome="response generated" if generated.error is None else "conclusion returned as is",
                    error=generated.error,
                )
            )
        return Decision(
            status="answered" if valid else "unparsed",
            answer=result.answer if valid else None,
            route=result.route,
            rationale=result.rationale,
            confidence=result.confidence,
            deciding_rule=result.rule,
            response=response,
            steps=steps,
            usage=context.ledger.rows,
            **common,  # type: ignore[arg-type]
        )
