"""Which pathways agree (CLEAR 2.3.1): letter sets for MCQ; for free text the normaliser, or one LM judgement."""

from __future__ import annotations

from typing import Literal

import dspy

from clearmed.programs.lm.context import current
from clearmed.programs.lm.parsing import answers_agree
from clearmed.programs.lm.prompting import render_question
from clearmed.programs.lm.stage import run_stage
from clearmed.signatures.clear import AssessAgreement
from clearmed.signatures.records import Agreement, Answer, EvidenceBundle, PathwayName
from clearmed.signatures.records.results import AgreementResult


def letter_agreement(bundle: EvidenceBundle, method: Literal["letters", "normaliser"] = "letters") -> Agreement:
    """Pairwise agreement by letter-set equality (MCQ) or the free-text normaliser."""
    parametric, local, dynamic = (bundle.candidate(name).answer for name in ("parametric", "local", "dynamic"))
    return Agreement(
        parametric_local=answers_agree(parametric, local),
        parametric_dynamic=answers_agree(parametric, dynamic),
        local_dynamic=answers_agree(local, dynamic),
        method=method,
    )


class CandidateAgreement(dspy.Module):
    """MCQ: letter sets. Free text: the normaliser, or one LM judgement of all three pairs when configured."""

    def __init__(self) -> None:
        super().__init__()
        self.judge = dspy.Predict(AssessAgreement)

    def forward(self, bundle: EvidenceBundle) -> AgreementResult:
        question = bundle.question
        if question.is_mcq:
            return AgreementResult(agreement=letter_agreement(bundle))
        normalised = letter_agreement(bundle, "normaliser")
        answers: dict[PathwayName, Answer | None] = {c.pathway: c.answer for c in bundle.candidates}
        if current().settings.agreement_mode != "lm" or sum(a is not None for a in answers.values()) < 2:
            return AgreementResult(agreement=normalised)

        def text(name: PathwayName) -> str:
            answer = answers.get(name)
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
            return AgreementResult(agreement=normalised, error=result.error)
        pred = result.prediction

        def judged(first: PathwayName, second: PathwayName, value: bool) -> bool | None:
            # A pair with a missing answer has no agreement value, whatever the LM said.
            return None if answers.get(first) is None or answers.get(second) is None else bool(value)

        agreement = Agreement(
            parametric_local=judged("parametric", "local", pred.parametric_equals_local),
            parametric_dynamic=judged("parametric", "dynamic", pred.parametric_equals_dynamic),
            local_dynamic=judged("local", "dynamic", pred.local_equals_dynamic),
            method="lm",
        )
        return AgreementResult(agreement=agreement)
