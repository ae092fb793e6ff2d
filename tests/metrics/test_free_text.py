"""The MedRBench-style judge, driven by DummyLM (dict mode keyed on the output-field header)."""

from __future__ import annotations

import dspy
from dspy.utils import DummyLM

from clearmed.metrics import FreeTextGrader, accuracy_summary, extract_final_answer
from clearmed.signatures.records import Answer, Decision, DecisionStatus, EvidenceBundle, Question

VERDICT_KEY = "`[[ ## verdict ## ]]`"
DIAGNOSIS = Question(
    id="medrbench-diagnosis:PMC1",
    text="FAKE case summary.\n\nBased on the case above, what is the final diagnosis?",
    answer_mode="free_text",
    gold_text="Pretend-itis",
    metadata={"task": "diagnosis"},
)
TREATMENT = DIAGNOSIS.model_copy(update={"id": "medrbench-treatment:PMC2", "metadata": {"task": "treatment"}})


def _judge_lm(verdict: str, rationale: str = "same disease") -> DummyLM:
    return DummyLM({VERDICT_KEY: {"verdict": verdict, "rationale": rationale}})


def test_verdict_is_parsed_and_only_correct_counts() -> None:
    for verdict, correct in (("correct", True), ("partially_correct", False), ("incorrect", False)):
        judgement = FreeTextGrader(_judge_lm(verdict)).grade(DIAGNOSIS, "Pretend-itis, acute")
        assert judgement.verdict == verdict
        assert judgement.correct is correct
        assert judgement.error is None
        assert judgement.rationale == "same disease"


def test_judge_sees_case_reference_and_the_final_answer_only() -> None:
    lm = _judge_lm("correct")
    FreeTextGrader(lm).grade(DIAGNOSIS, "### Reasoning: long thoughts\n### Answer: Pretend-itis")
    prompt = lm.history[-1]["messages"][-1]["content"]
    assert "FAKE case summary." in prompt
    assert "Pretend-itis" in prompt
    assert "long thoughts" not in prompt


def test_unparsable_verdict_is_recorded_not_raised() -> None:
    judgement = FreeTextGrader(_judge_lm("Right")).grade(DIAGNOSIS, "Pretend-itis")
    assert judgement.verdict is None
    assert not judgement.correct
    assert judgement.error is not None
    assert judgement.error.startswith("AdapterParseError")


class _BrokenEngine:
    """An LM engine whose endpoint is down."""

    def complete(self, request: object) -> object:
        raise RuntimeError("judge endpoint down")

    def __deepcopy__(self, memo: dict[int, object]) -> _BrokenEngine:
        return self


def test_lm_error_is_recorded() -> None:
    broken = dspy.LM("openai/fake-judge", engine=_BrokenEngine(), cache=False, num_retries=0)
    judgement = FreeTextGrader(broken).grade(DIAGNOSIS, "Pretend-itis")
    assert judgement.verdict is None
    assert "judge endpoint down" in (judgement.error or "")


def test_the_judge_uses_its_own_lm_not_the_global_one() -> None:
    judge_lm = _judge_lm("correct")
    main_lm = DummyLM({VERDICT_KEY: {"verdict": "incorrect", "rationale": "main model"}})
    with dspy.context(lm=main_lm):
        judgement = FreeTextGrader(judge_lm).grade(DIAGNOSIS, Answer.of_text("Pretend-itis"))
    assert judgement.verdict == "correct"
    assert len(judge_lm.history) == 1
    assert len(main_lm.history) == 0


def test_task_from_metadata_picks_the_treatment_prompt() -> None:
    lm = _judge_lm("correct")
    judgement = FreeTextGrader(lm).grade(TREATMENT, "antibiotics")
    assert judgement.task == "treatment"
    assert "reference treatment of a published case" in lm.history[-1]["messages"][0]["content"]


def test_no_answer_is_incorrect_without_a_judge_call() -> None:
    lm = _judge_lm("correct")
    judgement = FreeTextGrader(lm).grade(DIAGNOSIS, None)
    assert judgement.verdict == "incorrect"
    assert lm.history == []


def _decision(status: DecisionStatus, answer: Answer | None, question: Question = DIAGNOSIS) -> Decision:
    return Decision(
        question_id=question.id, status=status, answer=answer, bundle=EvidenceBundle(question=question, candidates=[])
    )


def test_score_decision_feeds_the_accuracy_summary() -> None:
    judge = FreeTextGrader(_judge_lm("partially_correct"))
    answered = judge.score_decision(DIAGNOSIS, _decision("answered", Answer.of_text("Pretend-osis")))
    assert answered.verdict == "partially_correct"
    assert not answered.correct
    assert answered.gold == "Pretend-itis"
    failed = judge.score_decision(TREATMENT, _decision("failed", None, TREATMENT))
    assert failed.failed
    assert failed.verdict is None
    summary = accuracy_summary([answered, failed])
    assert (summary.n, summary.correct, summary.partially_correct, summary.failed) == (2, 0, 1, 1)


def test_extract_final_answer() -> None:
    assert extract_final_answer("### Reasoning: x\n### Answer:\nOrbital\ncellulitis") == "Orbital cellulitis"
    assert extract_final_answer("  plain answer ") == "plain answer"
    assert extract_final_answer("### Answer: a\n### Answer: b") == "b"


def test_score_decision_judges_the_generated_response_when_there_is_one() -> None:
    lm = _judge_lm("correct")
    judge = FreeTextGrader(lm)
    decision = _decision("answered", Answer.of_text("Pretend-osis")).model_copy(
        update={"response": "### Reasoning: the findings fit\n### Answer: Pretend-itis"}
    )
    score = judge.score_decision(DIAGNOSIS, decision)
    assert score.predicted == "Pretend-itis"  # the response's final answer, not the short conclusion
    assert "Pretend-osis" not in lm.history[-1]["messages"][-1]["content"]
    short_only = judge.score_decision(DIAGNOSIS, _decision("answered", Answer.of_text("Pretend-osis")))
    assert short_only.predicted == "Pretend-osis"  # no response generated: the answer is judged
