"""The README's main job on the real embedded model: one demo question end to end (minutes: `-m slow`)."""

from __future__ import annotations

import importlib.util

import pytest

from clearmed.cli.main import main
from clearmed.signatures.records import Decision

pytestmark = pytest.mark.slow


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="the embedded extra is not installed")
def test_demo_question_on_the_embedded_model(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["ask", "--demo", "demo-01", "--json"])
    decision = Decision.model_validate_json(capsys.readouterr().out)
    # The weak model may fail to produce a valid option; the program must still decide and explain.
    assert code == (0 if decision.status == "answered" else 1)
    assert decision.status in ("answered", "unparsed")
    assert {c.pathway for c in decision.bundle.candidates} == {"parametric", "local", "dynamic"}
    assert decision.bundle.local_passages
    assert decision.bundle.dynamic_passages
    assert decision.lm_calls() >= 4
    assert all(row.model.startswith("local/") for row in decision.usage if row.role == "main")
    assert any(step.mechanism in ("verifier", "fallback") for step in decision.steps)
