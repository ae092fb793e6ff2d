"""Record validation: bad questions are refused with a clear message; records round-trip through JSON."""

from __future__ import annotations

import pydantic
import pytest

from clearmed.signatures.records import (
    Answer,
    QualityAssessment,
    Question,
    SourceQuality,
    Thresholds,
)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"text": "   "}, "question text is empty"),
        ({"options": {"A": "x"}}, "at least two options"),
        ({"options": {"a": "x", "b": "y"}}, "single capital letters"),
        ({"options": {"A": "x", "B": " "}}, "empty text"),
        ({"options": {"A": "same", "B": "Same"}}, "same text"),
        ({"gold_letters": ["E"]}, "not among the options"),
        ({"gold_letters": ["A", "B"]}, "exactly one gold letter"),
        ({"answer_mode": "free_text"}, "cannot have options"),
        ({"options": None}, "at least two options"),
    ],
)
def test_bad_questions_are_refused_clearly(fields: dict, message: str) -> None:
    base = {"id": "q", "text": "Which?", "options": {"A": "x", "B": "y"}}
    with pytest.raises(pydantic.ValidationError, match=message):
        Question(**{**base, **fields})


def test_options_are_sorted_and_trimmed() -> None:
    question = Question(id="q", text=" Which? ", options={"B": " y ", "A": "x"}, gold_letters=["A"])
    assert list(question.options or {}) == ["A", "B"]
    assert question.options == {"A": "x", "B": "y"}
    assert question.text == "Which?"


def test_answer_holds_letters_or_text() -> None:
    assert Answer.of_letters("C", "A", "C").letters == ("A", "C")
    with pytest.raises(pydantic.ValidationError):
        Answer()
    with pytest.raises(pydantic.ValidationError):
        Answer(letters=("A",), text="x")
    with pytest.raises(pydantic.ValidationError):
        Answer.of_letters("AB")


def test_source_quality_counts_survive_a_json_round_trip() -> None:
    quality = SourceQuality(
        assessments=[
            QualityAssessment(passage_id="W1", label="high"),
            QualityAssessment(passage_id="W2", label="medium"),
            QualityAssessment(passage_id="W3", label="medium"),
        ]
    )
    dumped = quality.model_dump()
    assert (dumped["n_high"], dumped["n_medium"], dumped["n_low"]) == (1, 2, 0)
    assert SourceQuality.model_validate_json(quality.model_dump_json()) == quality


def test_thresholds_default_to_the_paper() -> None:
    thresholds = Thresholds()
    assert (thresholds.guard_min_high, thresholds.audit_min_high, thresholds.audit_min_medium) == (1, 1, 2)
    assert thresholds.max_followup_rounds == 1
    with pytest.raises(pydantic.ValidationError):
        Thresholds(guard_min_high=-1)
    with pytest.raises(pydantic.ValidationError):
        Thresholds(guard_min_hihg=2)  # typo: unknown fields are refused


@pytest.mark.parametrize(
    ("table", "key", "value"),
    [
        ("thresholds", "letter_prior_strength", 1.0),
        ("thresholds", "high_requires_prior", 0.5),
        ("thresholds", "calibrated_stated_weight", 0.5),
        ("program", "score_prompt", "plain"),
        ("program", "score_evidence_first", True),
        ("program", "stated_confidence", True),
        ("program", "query_includes_options", True),
    ],
)
def test_a_config_that_sets_a_removed_setting_is_refused_in_one_line(table: str, key: str, value: object) -> None:
    from clearmed.backbones.config import ConfigError
    from clearmed.config import parse_config

    backbone = {"main": {"kind": "openai_compatible", "model": "m", "api_base": "http://127.0.0.1:9/v1"}}
    with pytest.raises(ConfigError) as raised:
        parse_config({"backbones": backbone, table: {key: value}}, source="old.toml")
    message = str(raised.value)
    assert f"{table}.{key}: unknown key" in message
    assert "\n" not in message


RESULTS = (
    "PathwayResult",
    "QualityResult",
    "WebQueryResult",
    "SearchResult",
    "JudgeResult",
    "AgreementResult",
    "VerifierResult",
    "GateResult",
    "ResponseResult",
)


@pytest.mark.parametrize("name", RESULTS)
def test_what_the_steps_return_are_records_of_signatures_records(name: str) -> None:
    """The steps' results live with the other nouns (issue 49), not in the LM plumbing that runs a step."""
    import importlib

    records = importlib.import_module("clearmed.signatures.records")
    stage = importlib.import_module("clearmed.programs.lm.stage")
    result = getattr(records, name)
    assert result.__module__ == "clearmed.signatures.records.results"
    assert issubclass(result, records.Record)
    assert not hasattr(stage, name)
