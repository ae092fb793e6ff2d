"""Text hygiene at the record boundary: control characters and secrets."""

from __future__ import annotations

import pytest

from clearmed.core.sanitize import clean_text, redact_secrets
from clearmed.signatures.records import Decision, EvidenceBundle, Passage, Provenance, StepError
from clearmed.testing import QUESTION


def test_clean_text_removes_controls_and_invisible_characters() -> None:
    assert clean_text("a\x00b\x1b[31mc\u200bd\u202ee\r\nf\tg") == "ab[31mcde\nf\tg"


def test_passages_are_cleaned_on_construction() -> None:
    passage = Passage(
        id="p", title="T\x07", text="x\x00y", pathway="local", provenance=Provenance(kind="corpus", corpus="c")
    )
    assert (passage.title, passage.text) == ("T", "xy")


def test_environment_secrets_and_key_shapes_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_API_KEY", "plain-secret-value-42")
    text = "key plain-secret-value-42, Bearer abcdefghijklmnop, sk-0123456789abcdef, tvly-0123456789abcdef"
    assert redact_secrets(text) == "key ***, Bearer ***, ***, ***"
    assert redact_secrets("no secrets in 120 s") == "no secrets in 120 s"


def test_recorded_errors_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-000000000000")
    error = StepError(stage="parametric", kind="lm_error", message="bad key sk-test-000000000000")
    assert "sk-test" not in error.message
    decision = Decision(
        question_id="q",
        status="failed",
        bundle=EvidenceBundle(question=QUESTION, candidates=[]),
        error="proxy said sk-test-000000000000",
    )
    assert decision.error == "proxy said ***"
