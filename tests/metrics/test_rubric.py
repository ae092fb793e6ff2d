"""HealthBench rubric scoring (simple-evals calculate_score) and the per-criterion grader with DummyLM."""

from __future__ import annotations

import pytest
from dspy.utils import DummyLM

from clearmed.metrics import (
    RubricGrade,
    RubricGrader,
    healthbench_summary,
    render_conversation,
    render_rubric_item,
    rubric_score,
)
from clearmed.signatures.records import ChatTurn, Question, RubricItem


def _items(*points: float) -> list[RubricItem]:
    return [RubricItem(criterion=f"criterion {i}", points=p) for i, p in enumerate(points)]


def test_simple_evals_reference_case() -> None:
    # healthbench_eval_test.py: rubric [7, 5, 10, -6], met [T, F, T, T] -> (7 + 10 - 6) / 22.
    assert rubric_score(_items(7, 5, 10, -6), [True, False, True, True]) == pytest.approx(11 / 22)


def test_negative_points_can_take_an_example_below_zero() -> None:
    assert rubric_score(_items(5, -8), [False, True]) == pytest.approx(-8 / 5)  # per example: not clipped
    assert rubric_score(_items(5, -8), [True, False]) == 1.0
    assert rubric_score(_items(-3), [True]) is None  # no positive criterion: no score
    with pytest.raises(ValueError, match="2 rubric items but 1 grades"):
        rubric_score(_items(1, 2), [True])


def test_rendering_matches_simple_evals() -> None:
    turns = [ChatTurn(role="user", content="hi"), ChatTurn(role="assistant", content="hello")]
    assert render_conversation(turns) == "user: hi\n\nassistant: hello"
    assert render_rubric_item(RubricItem(criterion="Asks about injury.", points=7)) == "[7] Asks about injury."
    assert render_rubric_item(RubricItem(criterion="x", points=2.5)) == "[2.5] x"


QUESTION = Question(
    id="healthbench:fake-1",
    text="FAKE: my pretend knee clicks",
    answer_mode="free_text",
    conversation=[ChatTurn(role="user", content="FAKE: my pretend knee clicks")],
    rubric=[
        RubricItem(criterion="Asks about prior injury.", points=7, tags=["axis:context_awareness"]),
        RubricItem(criterion="Gives a definitive diagnosis.", points=-8, tags=["axis:accuracy"]),
        RubricItem(criterion="Has no factual errors.", points=5, tags=["axis:accuracy"]),
    ],
    metadata={"example_tags": ["theme:hedging"]},
)


def _lm(met: dict[str, object]) -> DummyLM:
    # Dict mode: the key is a substring of the grader's user message (the rubric item appears in it).
    return DummyLM({criterion: {"explanation": "because", "criteria_met": value} for criterion, value in met.items()})


def test_grader_scores_each_criterion() -> None:
    lm = _lm({"Asks about prior injury.": True, "Gives a definitive diagnosis.": True, "Has no factual errors.": False})
    grade = RubricGrader(lm).grade(QUESTION, "It is definitely a torn meniscus. Any injury before?")
    assert [item.criteria_met for item in grade.items] == [True, True, False]
    assert grade.score == pytest.approx((7 - 8) / 12)
    assert grade.tag_scores == {"axis:accuracy": pytest.approx(-8 / 5), "axis:context_awareness": 1.0}
    assert len(lm.history) == 3
    prompt = lm.history[0]["messages"][-1]["content"]
    assert "user: FAKE: my pretend knee clicks\n\nassistant: It is definitely" in prompt
    assert "[7] Asks about prior injury." in prompt


def test_grader_retries_an_unparsable_answer_then_records_the_failure() -> None:
    flaky = DummyLM(
        [
            {"explanation": "hmm", "criteria_met": "sort of"},
            {"explanation": "ok", "criteria_met": True},
            {"explanation": "x", "criteria_met": False},
            {"explanation": "y", "criteria_met": False},
        ]
    )
    grade = RubricGrader(flaky, max_attempts=2).grade(QUESTION, "reply")
    assert grade.items[0].criteria_met is True
    assert grade.items[0].attempts == 2
    assert grade.score == pytest.approx(7 / 12)
    assert grade.n_failed_items == 0

    never = _lm({"Asks about prior injury.": "maybe", "Gives a definitive diagnosis.": False, "Has no": True})
    failed = RubricGrader(never, max_attempts=2).grade(QUESTION, "reply")
    assert failed.items[0].criteria_met is None
    assert failed.items[0].error
    assert failed.n_failed_items == 1
    assert failed.score is None


def test_no_response_meets_nothing_without_judge_calls() -> None:
    lm = _lm({})
    grade = RubricGrader(lm).grade(QUESTION, None)
    assert grade.score == 0.0
    assert lm.history == []


def _grade(qid: str, score: float | None, tags: dict[str, float] | None = None) -> RubricGrade:
    return RubricGrade(
        question_id=qid,
        items=[],
        score=score,
        tag_scores=tags or {},
        example_tags=["theme:x"],
        n_failed_items=0 if score is not None else 1,
    )


def test_summary_clips_the_mean_not_the_examples() -> None:
    summary = healthbench_summary([_grade("a", -0.5), _grade("b", 0.2)])
    assert summary.score == 0.0  # mean -0.15 clipped to 0
    high = healthbench_summary([_grade("a", 0.9), _grade("b", 0.5, {"axis:accuracy": -1.0})])
    assert high.score == pytest.approx(0.7)
    assert high.tag_scores == {"axis:accuracy": 0.0, "theme:x": pytest.approx(0.7)}
    assert high.bootstrap_std is not None
    assert high.bootstrap_std > 0


def test_summary_counts_failed_examples_without_averaging_them() -> None:
    summary = healthbench_summary([_grade("a", 1.0), _grade("b", None)])
    assert (summary.n, summary.n_scored, summary.n_failed, summary.score) == (2, 1, 1, 1.0)
    assert healthbench_summary([]).score is None


def test_rubric_scoring_of_a_decision_feeds_the_run_summary() -> None:
    from clearmed.evaluation.store import EvalRecord, RunManifest
    from clearmed.evaluation.summary import summarize
    from clearmed.metrics import score_rubric_decision
    from clearmed.report.markdown import accuracy_cell
    from clearmed.signatures.records import PATHWAYS, Candidate, Decision, EvidenceBundle

    decision = Decision(
        question_id=QUESTION.id,
        status="answered",
        answer=None,
        response="Did you injure the knee before? It is definitely a torn meniscus.",
        bundle=EvidenceBundle(question=QUESTION, candidates=[Candidate(pathway=p) for p in PATHWAYS]),
    )
    lm = _lm({"Asks about prior injury.": True, "Gives a definitive diagnosis.": True, "Has no factual errors.": True})
    score = score_rubric_decision(RubricGrader(lm), QUESTION, decision)
    assert score.rubric_grade is not None
    assert score.rubric_grade.score == pytest.approx((7 - 8 + 5) / 12)
    assert score.verdict == "rubric"
    record = EvalRecord(
        question_id=QUESTION.id, index=0, program="clear", decision=decision, score=score, seconds=1, finished="t"
    )
    manifest = RunManifest(
        program="clear",
        benchmark="healthbench",
        source="file",
        config_source="x",
        config_digest="d",
        question_ids=[QUESTION.id],
        created="t",
        clearmed_version="0",
    )
    summary = summarize([record], manifest)
    assert summary.accuracy is None  # rubric questions have no accuracy
    assert summary.rubric is not None
    assert summary.rubric.score == pytest.approx(4 / 12)
    assert summary.unscored == 0
    assert accuracy_cell(summary).startswith("rubric 33.3")
