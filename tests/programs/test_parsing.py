"""Answer parsing, the tolerant adapter and the format gate: each fallback, and each refusal."""

from __future__ import annotations

from typing import Literal

import dspy
import pytest

from clearmed.programs.adjudication.rules import gate_accepts
from clearmed.programs.lm.parsing import (
    TolerantChatAdapter,
    answers_agree,
    normalise_bool,
    normalise_literal,
    parse_answer,
    parse_letters,
)
from clearmed.signatures.records import ROUTE_TABLE as ROUTES
from clearmed.signatures.records import Answer, Question
from clearmed.testing import QUESTION

OPTIONS = {"A": "Hypothyroidism", "B": "Hyperthyroidism", "C": "Addison disease", "D": "Cushing syndrome"}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("B", ("B",)),
        (" B ", ("B",)),
        ("b", ("B",)),
        ("(B)", ("B",)),
        ("B)", ("B",)),
        ("B.", ("B",)),
        ("**B**", ("B",)),
        ("'B'", ("B",)),
        ("Answer: B", ("B",)),
        ("The answer is B", ("B",)),
        ("The correct answer is (C).", ("C",)),
        ("B) Hyperthyroidism", ("B",)),
        ("C. Addison disease is the cause", ("C",)),
        ("Hypothyroidism", ("A",)),
        ("cushing syndrome.", ("D",)),
        ("B\nbecause the TSH is low", ("B",)),
    ],
)
def test_single_answer_forms_that_name_one_option(raw: str, expected: tuple[str, ...]) -> None:
    assert parse_letters(raw, OPTIONS, "single") == expected


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "   ",
        "E",  # not an option
        "A, C",  # two letters for a single-answer question
        "I am not sure",
        "NONE",
        "It could be thyroid related",
        None,
    ],
)
def test_single_answer_refusals(raw: str | None) -> None:
    assert parse_letters(raw, OPTIONS, "single") is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("A, C", ("A", "C")),
        ("C, A", ("A", "C")),
        ("A and C", ("A", "C")),
        ("[A, C]", ("A", "C")),
        ("A;D", ("A", "D")),
        ("B", ("B",)),
        ("A, A", ("A",)),
    ],
)
def test_multi_answer_sets(raw: str, expected: tuple[str, ...]) -> None:
    assert parse_letters(raw, OPTIONS, "multi") == expected


def test_multi_answer_with_an_invalid_letter_is_refused() -> None:
    assert parse_letters("A, E", OPTIONS, "multi") is None


def test_parse_answer_free_text() -> None:
    question = Question(id="f", text="What is it?", answer_mode="free_text")
    answer = parse_answer("  Hypothyroidism ", question)
    assert answer == Answer.of_text("Hypothyroidism")
    assert parse_answer("none", question) is None
    assert parse_answer("", question) is None


@pytest.mark.parametrize(
    ("first", "second", "agree"),
    [
        (Answer.of_letters("A", "C"), Answer.of_letters("C", "A"), True),
        (Answer.of_letters("A"), Answer.of_letters("A", "C"), False),
        (Answer.of_text("Type 2 diabetes mellitus"), Answer.of_text("diabetes mellitus, type 2"), True),
        (Answer.of_text("Hypothyroidism"), Answer.of_text("Hyperthyroidism"), False),
        (Answer.of_letters("A"), None, None),
    ],
)
def test_answers_agree(first: Answer, second: Answer | None, agree: bool | None) -> None:
    assert answers_agree(first, second) is agree


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("consensus", "consensus"),
        ("Consensus", "consensus"),
        ("keep local", "keep_local"),
        ("Keep-Parametric", "keep_parametric"),
        ("**accept_dynamic**", "accept_dynamic"),
        ("'needs_more_search'", "needs_more_search"),
        ("consensus - all agree", "consensus"),
        ("something else", "something else"),
    ],
)
def test_normalise_literal(value: str, expected: str) -> None:
    assert normalise_literal(value, ROUTES) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [("Yes", "true"), ("no.", "false"), ("True", "true"), ("FALSE", "false"), ("maybe", "maybe")],
)
def test_normalise_bool(value: str, expected: str) -> None:
    assert normalise_bool(value) == expected


class _RouteSig(dspy.Signature):
    """Route."""

    question: str = dspy.InputField()
    route: Literal["consensus", "keep_local"] = dspy.OutputField()
    ok: bool = dspy.OutputField()


def test_tolerant_adapter_parses_loose_enums_and_booleans() -> None:
    completion = "[[ ## route ## ]]\nKeep Local\n\n[[ ## ok ## ]]\nYes\n\n[[ ## completed ## ]]"
    parsed = TolerantChatAdapter().parse(_RouteSig, completion)
    assert parsed == {"route": "keep_local", "ok": True}


def test_tolerant_adapter_handles_values_on_the_header_line() -> None:
    parsed = TolerantChatAdapter().parse(_RouteSig, "[[ ## route ## ]] Consensus\n[[ ## ok ## ]] no")
    assert parsed == {"route": "consensus", "ok": False}


def test_tolerant_adapter_still_refuses_unknown_values() -> None:
    with pytest.raises(dspy.AdapterParseError):
        TolerantChatAdapter().parse(_RouteSig, "[[ ## route ## ]]\nmaybe later\n[[ ## ok ## ]]\ntrue")


@pytest.mark.parametrize(
    ("mode", "answer", "accepted"),
    [
        ("single", Answer.of_letters("A"), True),
        ("single", Answer.of_letters("A", "B"), False),
        ("single", Answer.of_letters("E"), False),
        ("multi", Answer.of_letters("A", "B"), True),
        ("multi", Answer.of_letters("A", "F"), False),
        ("single", Answer.of_text("Hypothyroidism"), False),
        ("single", None, False),
    ],
)
def test_format_gate_validity(mode: str, answer: Answer | None, accepted: bool) -> None:
    question = QUESTION.model_copy(update={"answer_mode": mode})
    assert gate_accepts(answer, question) is accepted
