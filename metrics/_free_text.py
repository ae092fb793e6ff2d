"""Free-text outcome accuracy graded by an LLM (MedRBench's "LLM judge" protocol): one grading call per case, run
with the grader's own LM. A call that fails or cannot be parsed is recorded on the grade, never raised, except a fatal
refusal (a revoked key, an exhausted balance: `FatalServiceError`), which stops the run. A transient failure (a 503, a
timeout) marks the grade `transient`: the question is degraded and regraded on resume, not scored wrong."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from clearmed.core.errors import FatalServiceError
from clearmed.metrics._decision import QuestionScore, check_same_question
from clearmed.metrics._errors import describe_error, is_transient
from clearmed.signatures.records import Answer, Decision, Question
from clearmed.signatures.records.base import GradeVerdict

if TYPE_CHECKING:
    import dspy

GradingTask = Literal["diagnosis", "treatment"]
_ANSWER_MARKER = "### Answer"


class FreeTextGrade(BaseModel):
    """The judge's verdict on one candidate. `verdict is None` means no verdict: see `error`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    question_id: str
    task: GradingTask
    candidate: str | None
    verdict: GradeVerdict | None = None
    rationale: str = ""
    error: str | None = None
    transient: bool = False  # the judge failed in a way a retry may mend (see `error`)

    @property
    def correct(self) -> bool:
        """MedRBench accuracy is binary: only `correct` counts; `partially_correct` is wrong."""
        return self.verdict == "correct"


def extract_final_answer(text: str) -> str:
    """The text after the last "### Answer" heading (MedRBench output format), or the whole text.

    MedRBench also strips newlines and colons from what follows; so do we, so a heading written as
    "### Answer:" gives the same result.
    """
    if _ANSWER_MARKER not in text:
        return text.strip()
    tail = text.rsplit(_ANSWER_MARKER, 1)[1]
    return " ".join(tail.replace(":", " ").split())


def _task_of(question: Question, task: GradingTask | None) -> GradingTask:
    if task is not None:
        return task
    value = question.metadata.get("task")
    return "treatment" if value == "treatment" else "diagnosis"


class FreeTextGrader:
    """Runs `GradeDiagnosis` / `GradeTreatment` under `dspy.context(lm=grader_lm)`.

    `task=None` takes the task from `question.metadata["task"]` (the MedRBench loaders set it).
    """

    def __init__(self, grader_lm: dspy.BaseLM, *, task: GradingTask | None = None) -> None:
        self.grader_lm = grader_lm
        self.task = task
        # DSPy is loaded by the judge alone: scoring and tuning over stored runs never judge (tests/test_layers.py).
        import dspy

        from clearmed.signatures.grading import GradeDiagnosis, GradeTreatment

        self.predictors: dict[GradingTask, dspy.Predict] = {
            "diagnosis": dspy.Predict(GradeDiagnosis),
            "treatment": dspy.Predict(GradeTreatment),
        }

    def grade(self, question: Question, candidate: str | Answer | None) -> FreeTextGrade:
        task = _task_of(question, self.task)
        if question.gold_text is None:
            raise ValueError(f"{question.id}: no reference answer (gold_text) to judge against")
        text = candidate.display() if isinstance(candidate, Answer) else candidate
        text = extract_final_answer(text) if text else None
        if not text:
            # Nothing to judge: wrong without asking the judge, as an empty answer would be.
            return FreeTextGrade(
                question_id=question.id, task=task, candidate=None, verdict="incorrect", rationale="no answer"
            )
        case = f"{question.context}\n\n{question.text}" if question.context else question.text
        import dspy

        try:
            with dspy.context(lm=self.grader_lm):
                prediction = self.predictors[task](
                    case=case, reference_answer=question.gold_text, candidate_answer=text
                )
        except FatalServiceError:  # every later judgement would fail too: the run stops
            raise
        except Exception as exc:  # parse errors and LM errors alike become a recorded failure
            return FreeTextGrade(
                question_id=question.id,
                task=task,
                candidate=text,
                error=describe_error(exc),
                transient=is_transient(exc),
            )
        return FreeTextGrade(
            question_id=question.id,
            task=task,
            candidate=text,
            verdict=prediction.verdict,
            rationale=str(prediction.rationale).strip(),
        )

    def score_decision(self, question: Question, decision: Decision) -> QuestionScore:
        """Judge the decision's final generated response (its short answer when no response was generated) and
        return a `QuestionScore`.

        MedRBench's evaluator judges the final answer a model outputs; for CLEAR that is the response the task
        adapter writes, not the adjudicated short answer it expresses.
        """
        check_same_question(question, decision)
        candidate: str | None = None
        if decision.status == "answered":
            candidate = decision.response or (decision.answer.display() if decision.answer else None)
        judgement = self.grade(question, candidate) if decision.status == "answered" else None
        return QuestionScore(
            question_id=question.id,
            answer_mode=question.answer_mode,
            status=decision.status,
            correct=bool(judgement and judgement.correct),
            in_gold_set=bool(judgement and judgement.correct),
            unparsed=decision.status == "unparsed",
            failed=decision.status == "failed",
            predicted=judgement.candidate if judgement else None,
            gold=question.gold_text,
            verdict=judgement.verdict if judgement else None,
            judge_error=judgement.error if judgement else None,
            judge_transient=bool(judgement and judgement.transient),
        )
