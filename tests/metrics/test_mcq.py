from __future__ import annotations

import pytest

from clearmed.metrics import score_mcq
from clearmed.signatures.records import Answer, Question

OPTIONS = {"A": "a", "B": "b", "C": "c", "D": "d"}
SINGLE = Question(id="s", text="q", options=OPTIONS, gold_letters=["B"])
MULTI = Question(id="m", text="q", answer_mode="multi", options=OPTIONS, gold_letters=["A", "C"])


@pytest.mark.parametrize(
    ("question", "letters", "correct", "in_gold_set"),
    [
        (SINGLE, ("B",), True, True),
        (SINGLE, ("A",), False, False),
        (SINGLE, ("B", "C"), False, False),
        (MULTI, ("A", "C"), True, True),
        (MULTI, ("C", "A"), True, True),
        (MULTI, ("A",), False, True),  # one right letter: only the lenient CLEAR rule credits it
        (MULTI, ("A", "B"), False, False),
        (MULTI, ("A", "C", "D"), False, False),
        (MULTI, ("D",), False, False),
    ],
)
def test_exact_set_and_in_gold_set(
    question: Question, letters: tuple[str, ...], correct: bool, in_gold_set: bool
) -> None:
    score = score_mcq(question, Answer.of_letters(*letters))
    assert (score.correct, score.in_gold_set, score.unparsed) == (correct, in_gold_set, False)
    assert score.multi == (question is MULTI)
    assert score.predicted == tuple(sorted(set(letters)))


def test_no_answer_or_text_answer_is_unparsed_and_wrong() -> None:
    for predicted in (None, Answer.of_text("probably B")):
        score = score_mcq(SINGLE, predicted)
        assert score.unparsed
        assert not score.correct
        assert not score.in_gold_set
        assert score.predicted is None


def test_free_text_and_unlabelled_questions_cannot_be_scored() -> None:
    free = Question(id="f", text="q", answer_mode="free_text", gold_text="x")
    with pytest.raises(ValueError, match="free-text"):
        score_mcq(free, Answer.of_text("x"))
    unlabelled = Question(id="u", text="q", options=OPTIONS)
    with pytest.raises(ValueError, match="no gold letters"):
        score_mcq(unlabelled, Answer.of_letters("A"))
