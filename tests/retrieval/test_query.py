"""Web queries within a backend's limit: the deterministic salient-term query and the word-boundary cut."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clearmed.programs.pathways.web_query import cut_at_word, salient_query, without_option_letters

VIGNETTE = (
    "A 23-year-old woman comes to the physician because of fatigue and shortness of breath on exertion for "
    "3 months. She has heavy menstrual bleeding. Her hemoglobin is 8.9 g/dL and mean corpuscular volume is "
    "68 fL. Serum ferritin is low. Which of the following is the most likely diagnosis?"
)


def test_salient_query_puts_what_is_asked_first_and_keeps_findings() -> None:
    query = salient_query(VIGNETTE, 400)
    assert query.startswith("diagnosis")
    for finding in ("fatigue", "menstrual", "ferritin", "hemoglobin"):
        assert finding in query
    for noise in ("comes", "physician", "Which", "following"):
        assert noise not in query.split()


def test_salient_query_respects_the_limit_at_a_word_boundary() -> None:
    long = VIGNETTE * 6
    query = salient_query(long, 120)
    assert len(query) <= 120
    assert all(word in long for word in query.split())  # whole words of the question, never invented


@pytest.mark.parametrize(("text", "limit", "expected"), [
    ("alpha beta gamma", 10, "alpha beta"),
    ("alpha beta gamma", 16, "alpha beta gamma"),
    ("supercalifragilistic", 5, "super"),  # one word longer than the limit: cut, never returned whole
])  # fmt: skip
def test_cut_at_word(text: str, limit: int, expected: str) -> None:
    assert cut_at_word(text, limit) == expected


def test_every_shared_medqa_question_fits_tavilys_limit(shared_data: Path) -> None:
    path = shared_data / "benchmarks" / "medqa" / "dev.jsonl"
    if not path.is_file():
        pytest.skip("shared MedQA file absent")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    longest = max(len(salient_query(row["question"], 400)) for row in rows)
    assert longest <= 400
    assert sum(len(row["question"]) > 400 for row in rows) > len(rows) // 2  # the limit does bite on MedQA


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("Option A hypothyroidism vs (B) Graves disease", "hypothyroidism vs Graves disease"),
        ("A. hypothyroidism B) Graves C: Addison", "hypothyroidism Graves Addison"),
        ("answer: C cortisol deficiency", "cortisol deficiency"),
        ("vitamin A deficiency night blindness", "vitamin A deficiency night blindness"),
        ("hepatitis B serology in type C patients", "hepatitis B serology in type C patients"),
        ("(A) (B)", ""),
    ],
)
def test_written_queries_lose_option_letters_but_not_medical_letters(written: str, expected: str) -> None:
    assert without_option_letters(written, "ABCDE") == expected


def test_letters_that_are_not_options_stay() -> None:
    assert without_option_letters("(F) factor", "ABCD") == "(F) factor"
