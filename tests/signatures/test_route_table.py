"""A route is defined once, in ROUTE_TABLE: adding one there makes it a route everywhere."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import get_args

import pytest
from rich.console import Console

from clearmed.optimize.replay import replay_decision
from clearmed.programs.rules import answer_for_route, audit_applies, guard_applies
from clearmed.render import render_decision
from clearmed.signatures.records import (
    ROUTE_TABLE,
    AdjudicationStep,
    Agreement,
    Answer,
    Candidate,
    Decision,
    EvidenceBundle,
    RouteSpec,
    Thresholds,
    VerifierOutput,
    route_meanings,
)
from clearmed.testing import QUESTION

NEW = "defer_to_local"
SPEC = RouteSpec("the curated corpus settles it on its own", answer_from="local", style="blue", guard=False, audit=True)


@pytest.fixture
def new_route(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(ROUTE_TABLE, NEW, SPEC)
    return NEW


def _bundle() -> tuple[EvidenceBundle, Agreement]:
    bundle = EvidenceBundle(
        question=QUESTION,
        candidates=[
            Candidate(pathway="parametric", answer=Answer.of_letters("B")),
            Candidate(pathway="local", answer=Answer.of_letters("A")),
            Candidate(pathway="dynamic", answer=Answer.of_letters("C")),
        ],
    )
    return bundle, Agreement(parametric_local=False, parametric_dynamic=False, local_dynamic=False)


def _decision(route: str) -> Decision:
    bundle, agreement = _bundle()
    output = VerifierOutput(answer=Answer.of_letters("A"), route=route, confidence="medium")
    step = AdjudicationStep(mechanism="verifier", rule="verifier", route=route, verifier=output)
    return Decision(
        question_id=QUESTION.id,
        status="answered",
        answer=Answer.of_letters("A"),
        route=route,
        deciding_rule="verifier",
        bundle=bundle,
        agreement=agreement,
        verifier_outputs=[output],
        steps=[step],
    )


def test_an_added_route_is_a_route_in_records_rules_renderer_and_replay(new_route: str) -> None:
    decision = Decision.model_validate_json(_decision(new_route).model_dump_json())  # records accept it
    assert decision.route == new_route
    assert f"{new_route} = {SPEC.meaning}" in route_meanings()

    bundle, agreement = _bundle()
    assert answer_for_route(new_route, bundle, agreement) == Answer.of_letters("A")  # from its pathway
    assert not guard_applies(new_route, bundle, agreement)
    assert audit_applies(new_route, agreement.model_copy(update={"parametric_local": True}))

    console = Console(record=True, width=120, color_system="truecolor")
    render_decision(decision, console)
    assert new_route in console.export_text(styles=False, clear=False)
    assert any(segment.text == new_route and str(segment.style) == "blue" for segment in console._record_buffer)

    replayed, _ = replay_decision(decision, Thresholds())
    assert (replayed.route, replayed.answer, replayed.rule) == (new_route, Answer.of_letters("A"), "verifier")


def test_an_unknown_route_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown route"):
        VerifierOutput(route="defer_to_local")


def test_the_verifier_prompt_lists_the_table() -> None:
    # The signature is built from the table at import, so the added route is checked in a fresh interpreter.
    script = f"""
import json
from typing import get_args
from clearmed.signatures.records import ROUTE_TABLE, RouteSpec
ROUTE_TABLE[{NEW!r}] = RouteSpec({SPEC.meaning!r}, answer_from="local", style="blue", guard=False, audit=True)
from clearmed.signatures.clear import VerifyAggregate
print(json.dumps([VerifyAggregate.instructions, list(get_args(VerifyAggregate.output_fields["route"].annotation))]))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    instructions, choices = json.loads(done.stdout)
    assert f"{NEW} = {SPEC.meaning}" in instructions
    assert choices == [*ROUTE_TABLE, NEW]


def test_the_table_is_the_verifier_field() -> None:
    from clearmed.signatures.clear import VerifyAggregate

    assert list(get_args(VerifyAggregate.output_fields["route"].annotation)) == list(ROUTE_TABLE)
    for name, spec in ROUTE_TABLE.items():
        assert f"{name} = {spec.meaning}" in VerifyAggregate.instructions
