"""A route is defined once: `Route` names it and ROUTE_TABLE says what it means, and every part reads the table."""

from __future__ import annotations

from typing import get_args

import pytest
from pydantic import ValidationError
from rich.console import Console

from clearmed.optimize.replay import replay_decision
from clearmed.programs.adjudication import Mechanisms
from clearmed.programs.adjudication.rules import answer_for_route, audit_applies, guard_applies
from clearmed.report.terminal import render_decision
from clearmed.signatures.records import (
    NEEDS_MORE_SEARCH,
    PATHWAYS,
    ROUTE_TABLE,
    AdjudicationStep,
    Agreement,
    Answer,
    Candidate,
    Decision,
    EvidenceBundle,
    Route,
    Thresholds,
    VerifierOutput,
    route_meanings,
)
from clearmed.testing import QUESTION

LETTER = {"parametric": "B", "local": "A", "dynamic": "C"}


def _bundle() -> tuple[EvidenceBundle, Agreement]:
    bundle = EvidenceBundle(
        question=QUESTION,
        candidates=[Candidate(pathway=p, answer=Answer.of_letters(LETTER[p])) for p in PATHWAYS],
    )
    return bundle, Agreement(parametric_local=False, parametric_dynamic=False, local_dynamic=False)


def _decision(route: Route, answer: Answer) -> Decision:
    bundle, agreement = _bundle()
    output = VerifierOutput(answer=answer, route=route, confidence="medium")
    step = AdjudicationStep(mechanism="verifier", rule="verifier", route=route, verifier=output)
    return Decision(
        question_id=QUESTION.id,
        status="answered",
        answer=answer,
        route=route,
        deciding_rule="verifier",
        bundle=bundle,
        agreement=agreement,
        verifier_outputs=[output],
        steps=[step],
    )


def test_the_literal_and_the_table_name_the_same_routes() -> None:
    assert list(get_args(Route)) == list(ROUTE_TABLE)
    assert NEEDS_MORE_SEARCH in ROUTE_TABLE


@pytest.mark.parametrize("route", [r for r, spec in ROUTE_TABLE.items() if spec.answer_from in PATHWAYS])
def test_every_pathway_route_is_a_route_in_records_rules_renderer_and_replay(route: Route) -> None:
    spec = ROUTE_TABLE[route]
    answer = Answer.of_letters(LETTER[spec.answer_from])
    decision = Decision.model_validate_json(_decision(route, answer).model_dump_json())  # records accept it
    assert decision.route == route
    assert f"{route} = {spec.meaning}" in route_meanings()

    bundle, agreement = _bundle()
    assert answer_for_route(route, bundle, agreement) == answer  # from its pathway
    assert guard_applies(route, bundle, agreement) is spec.guard
    assert audit_applies(route, agreement.model_copy(update={"parametric_local": True})) is spec.audit

    console = Console(record=True, width=120, color_system="truecolor")
    render_decision(decision, console)
    assert any(segment.text == route and str(segment.style) == spec.style for segment in console._record_buffer)

    replayed, _ = replay_decision(decision, Thresholds(), Mechanisms(guard=False, audit=False))
    assert (replayed.route, replayed.answer, replayed.rule) == (route, answer, "verifier")


def test_an_unknown_route_is_refused() -> None:
    with pytest.raises(ValidationError, match="defer_to_local"):
        VerifierOutput(route="defer_to_local")  # type: ignore[arg-type]


def test_the_table_is_the_verifier_field() -> None:
    from clearmed.signatures.clear import VerifyAggregate

    assert list(get_args(VerifyAggregate.output_fields["route"].annotation)) == list(ROUTE_TABLE)
    for name, spec in ROUTE_TABLE.items():
        assert f"{name} = {spec.meaning}" in VerifyAggregate.instructions
