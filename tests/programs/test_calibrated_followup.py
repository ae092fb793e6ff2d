"""The calibrated verifier's needs_more_search: one follow-up search, the dynamic pathway re-scored on it, and the
re-scored answer used everywhere after (toy world, scripted engine; no model)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from clearmed.backbones.scoring import ScoringError
from clearmed.optimize.replay import ReplayMiss, replay_decision
from clearmed.optimize.rescore import DecisionCost
from clearmed.programs import Mechanisms, ProgramSettings
from clearmed.programs.adjudication import before_followups
from clearmed.retrieval.memory import InMemoryWebSearch, web_passage
from clearmed.signatures.records import Decision, Thresholds
from clearmed.testing import (
    FOLLOWUP_WEB,
    GUARD_ALL_TRUE,
    QUESTION,
    SCORED_CALIBRATED,
    WEB,
    ScriptedCall,
    ScriptedEngine,
    build_toy_program,
    label_all,
)

# Parametric leans A, local is sure of A, the web is sure of C: pooled, C wins with about 0.71.
SCORES = {
    "parametric": {"A": 0.5, "B": 0.2, "C": 0.2, "D": 0.1},
    "local_answer": {"A": 0.7, "B": 0.1, "C": 0.1, "D": 0.1},
    "dynamic_answer": {"A": 0.02, "B": 0.02, "C": 0.94, "D": 0.02},
}
# What the dynamic pathway says once it has also read the follow-up page.
TO_A = {"A": 0.9, "B": 0.04, "C": 0.03, "D": 0.03}
TO_B = {"A": 0.01, "B": 0.97, "C": 0.01, "D": 0.01}
ASK = Thresholds(calibrated_more_search_below=0.8)
SCRIPT = {
    "source_quality": label_all("high"),
    "followup_query": {"query": "hypothyroidism TSH"},  # finds the MedlinePlus page the bundle lacks
    "guard": GUARD_ALL_TRUE,
}


def run(
    followup: dict[str, float] | None = TO_A,
    *,
    thresholds: Thresholds = ASK,
    settings: ProgramSettings = SCORED_CALIBRATED,
    script: dict | None = None,
    web: InMemoryWebSearch | None = None,
) -> tuple[Decision, ScriptedEngine]:
    scores = {**SCORES, **({"dynamic_followup": followup} if followup else {})}
    program, engine, _ = build_toy_program(
        script or SCRIPT, settings=settings, thresholds=thresholds, scores=scores, web=web
    )
    decision = program(question=QUESTION).decision
    return Decision.model_validate_json(decision.model_dump_json()), engine  # as read back from a run folder


def verifier_routes(decision: Decision) -> list[str]:
    return [output.route for output in decision.verifier_outputs]


def rounds_of(decision: Decision, trigger: str) -> int:
    return sum(1 for r in decision.bundle.followups if r.trigger == trigger)


def test_a_low_pooled_probability_searches_once_and_rescores_the_dynamic_pathway() -> None:
    decision, engine = run()
    assert engine.scored == ["parametric", "local_answer", "dynamic_answer", "dynamic_followup"]
    messages, _ = engine.scored_prompts[-1]
    prompt = "\n".join(m["content"] for m in messages)
    assert "[F1.1]" in prompt  # the follow-up page
    assert "[W1]" in prompt  # and the pathway's own pages
    assert "quality high" not in prompt  # read as the pathway read its own: without the later quality labels
    assert verifier_routes(decision) == ["needs_more_search", "consensus"]
    assert decision.verifier_outputs[0].pooled["C"] == pytest.approx(0.712, abs=0.01)
    # the re-scored distribution decides: all three pathways now hold A
    assert (decision.route, decision.letters, decision.deciding_rule) == ("consensus", ("A",), "calibrated")
    round_ = decision.bundle.followups[0]
    assert round_.trigger == "needs_more_search"
    assert round_.rescored is not None
    assert round_.rescored.letters == ("A",)
    assert round_.replaced is not None
    assert round_.replaced.answer.letters == ("C",)
    dynamic = decision.bundle.candidate("dynamic")
    assert dynamic.answer.letters == ("A",)
    assert dynamic.option_scores == round_.rescored
    assert "F1.1" in dynamic.passage_ids
    # the stored agreement is that of the stored candidates
    assert decision.agreement.parametric_dynamic is True
    assert not any(step.mechanism == "audit" for step in decision.steps)
    assert [row.stage for row in decision.usage].count("dynamic_answer") == 2


@pytest.mark.parametrize(
    "thresholds",
    [
        Thresholds(),  # the default: never asks
        Thresholds(calibrated_more_search_below=0.5),  # pooled 0.71 is above it
        Thresholds(calibrated_more_search_below=0.8, max_followup_rounds=0),  # no follow-up allowed
    ],
)
def test_no_follow_up_unless_the_threshold_asks_and_one_may_run(thresholds: Thresholds) -> None:
    decision, engine = run(thresholds=thresholds)
    assert engine.scored == ["parametric", "local_answer", "dynamic_answer"]
    assert verifier_routes(decision) == ["accept_dynamic"]
    assert rounds_of(decision, "needs_more_search") == 0
    assert decision.bundle.candidate("dynamic").answer.letters == ("C",)
    assert any(step.mechanism == "guard" for step in decision.steps)  # as before: C faces the guard
    assert not any(step.rule == "followup_bound_reached" for step in decision.steps)


def test_with_follow_up_switched_off_the_verifier_decides_itself() -> None:
    decision, _ = run(settings=SCORED_CALIBRATED.model_copy(update={"enable_followup": False}))
    assert verifier_routes(decision) == ["accept_dynamic"]
    assert decision.bundle.followups == []
    assert not any(step.mechanism == "fallback" for step in decision.steps)


@pytest.mark.parametrize("max_rounds", [1, 2])
def test_a_follow_up_that_finds_nothing_new_rescores_nothing_and_is_not_repeated(max_rounds: int) -> None:
    only_known = InMemoryWebSearch(WEB)  # the follow-up finds the pathway's own pages again
    thresholds = ASK.model_copy(update={"max_followup_rounds": max_rounds})
    decision, engine = run(thresholds=thresholds, web=only_known)
    assert engine.scored == ["parametric", "local_answer", "dynamic_answer"]
    assert rounds_of(decision, "needs_more_search") == 1
    assert decision.bundle.followups[0].rescored is None
    # decided from the original distributions, without asking again and without the deterministic fallback
    assert verifier_routes(decision) == ["needs_more_search", "accept_dynamic"]
    assert all(output.mode == "calibrated" for output in decision.verifier_outputs)
    assert not any(step.rule == "followup_bound_reached" for step in decision.steps)
    assert decision.bundle.candidate("dynamic").answer.letters == ("C",)


@pytest.mark.parametrize(
    "failure",
    [ScoringError("the backbone dropped the request"), RuntimeError("prompt exceeds the context window")],
)
def test_a_rescoring_that_fails_leaves_the_original_distributions(failure: Exception) -> None:
    program, engine, _ = build_toy_program(SCRIPT, settings=SCORED_CALIBRATED, thresholds=ASK, scores=SCORES)
    score = engine.score_next_token

    def failing_on_follow_up(messages: Sequence[dict[str, str]], prefix: str, candidates: Sequence[str]):
        if any("[F1." in m["content"] for m in messages):
            raise failure
        return score(messages, prefix, candidates)

    engine.score_next_token = failing_on_follow_up  # type: ignore[method-assign]
    decision = program(question=QUESTION).decision
    assert decision.status == "answered"  # a failed re-scoring never takes the question down
    round_ = decision.bundle.followups[0]
    assert round_.rescored is None
    assert verifier_routes(decision) == ["needs_more_search", "accept_dynamic"]
    # Either way (scoring unavailable, or the engine raised, e.g. on a context overflow) its usage row says so.
    assert [row.failed for row in decision.usage if row.stage == "dynamic_answer"] == [False, True]


# A page only the guard's own follow-up query finds (no word of the question), so the guard has new evidence.
GUARD_PAGE = web_passage("p4", "https://www.thyroid.org/graves", "Graves disease", "Thyrotoxicosis with goitre.")


def guard_run() -> tuple[Decision, ScriptedEngine]:
    calls: list[int] = []

    def query(call: ScriptedCall) -> dict[str, object]:
        calls.append(1)
        return {"query": "hypothyroidism TSH" if len(calls) == 1 else "graves disease"}

    web = InMemoryWebSearch([*WEB, *FOLLOWUP_WEB, GUARD_PAGE])
    return run(TO_B, script={**SCRIPT, "followup_query": query}, web=web)


def test_the_guard_contests_the_rescored_dynamic_answer() -> None:
    decision, engine = guard_run()
    assert verifier_routes(decision) == ["needs_more_search", "accept_dynamic"]
    guard_calls = [call for call in engine.calls if call.stage == "guard"]
    assert len(guard_calls) == 1
    assert "## challenger_answer ## ]]\nB. Hyperthyroidism" in guard_calls[0].user  # the re-scored B, not C
    assert "## default_answer ## ]]\nA. Hypothyroidism" in guard_calls[0].user
    assert (decision.deciding_rule, decision.route, decision.letters) == ("guard_granted", "accept_dynamic", ("B",))
    assert [r.trigger for r in decision.bundle.followups] == ["needs_more_search", "guard"]


def test_replay_serves_the_rescored_round_with_no_lm_call() -> None:
    for decision, engine in (run(), guard_run()):
        calls, scored = len(engine.calls), len(engine.scored)
        result, actions = replay_decision(decision, decision.thresholds)
        assert (result.answer, result.route, result.rule) == (decision.answer, decision.route, decision.deciding_rule)
        assert result.bundle.candidate("dynamic") == decision.bundle.candidate("dynamic")
        assert result.agreement == decision.agreement
        assert (len(engine.calls), len(engine.scored)) == (calls, scored)
        assert actions.misses == []
        assert actions.served["rescore"] == 1


def test_replay_starts_from_the_original_dynamic_candidate() -> None:
    decision, _ = run()
    bundle, agreement = before_followups(decision.bundle, decision.agreement)
    assert bundle.followups == []
    assert bundle.candidate("dynamic").answer.letters == ("C",)
    assert bundle.candidate("dynamic").option_scores.probs == SCORES["dynamic_answer"]
    assert agreement.parametric_dynamic is False
    # Below the recorded threshold the follow-up is not asked for, and the original C is the dynamic answer.
    result, actions = replay_decision(decision, Thresholds(), Mechanisms(guard=False))
    assert (result.route, result.answer.letters) == ("accept_dynamic", ("C",))
    assert actions.served["follow_up"] == 0


def test_replay_charges_the_rescoring_only_when_its_round_is_replayed() -> None:
    decision, _ = run()
    cost = DecisionCost.of(decision)
    assert cost.rescore.calls == 1  # the second dynamic_answer row, not a fixed pathway cost
    _, same = replay_decision(decision, decision.thresholds)
    assert cost.replayed(same).calls == cost.original.calls
    assert cost.replayed(same).seconds == pytest.approx(cost.original.seconds)
    _, lower = replay_decision(decision, Thresholds(), Mechanisms(guard=False))
    assert cost.replayed(lower).calls == cost.original.calls - cost.per_round.calls - cost.rescore.calls


def test_replay_above_the_recorded_threshold_is_a_miss() -> None:
    decision, _ = run(thresholds=Thresholds())  # recorded without asking
    with pytest.raises(ReplayMiss, match="needs_more_search follow-up search"):
        replay_decision(decision, ASK)


def test_records_without_the_new_fields_load_and_replay() -> None:
    decision, _ = run(web=InMemoryWebSearch(WEB), thresholds=Thresholds(calibrated_more_search_below=0.8))
    raw = decision.model_dump(mode="json")
    for round_ in raw["bundle"]["followups"]:
        del round_["rescored"], round_["replaced"]
    del raw["thresholds"]["calibrated_more_search_below"]
    old = Decision.model_validate(raw)
    assert old.thresholds.calibrated_more_search_below == 0.0
    assert all(r.rescored is None and r.replaced is None for r in old.bundle.followups)
    result, _ = replay_decision(old, ASK, Mechanisms(guard=False))
    assert result.route == "accept_dynamic"


def test_the_scripted_engine_scores_follow_up_evidence_apart_only_when_told() -> None:
    # Without a "dynamic_followup" distribution, a dynamic prompt with follow-up pages scores as any dynamic one.
    decision, engine = run(None)
    assert engine.scored[-1] == "dynamic_answer"
    assert decision.bundle.followups[0].rescored.probs == pytest.approx(SCORES["dynamic_answer"])
    assert math.isclose(sum(decision.bundle.followups[0].rescored.probs.values()), 1.0, abs_tol=1e-5)


def test_packaged_calibrated_configs_say_that_needs_more_search_is_off() -> None:
    import tomllib
    from pathlib import Path

    configs = Path(__file__).resolve().parents[2] / "configs"
    calibrated = []
    for path in sorted(configs.glob("*.toml")):
        text = path.read_text(encoding="utf-8")
        config = tomllib.loads(text)
        if config.get("program", {}).get("verifier_mode") != "calibrated":
            continue
        calibrated.append(path.name)
        if config.get("thresholds", {}).get("calibrated_more_search_below", 0.0) > 0.0:
            continue  # on: nothing to explain
        comments = " ".join(line.strip("# ") for line in text.splitlines() if line.lstrip().startswith("#"))
        assert "needs_more_search is off" in comments, path.name
        assert "calibrated_more_search_below" in comments, path.name
    assert calibrated, "no packaged config uses the calibrated verifier"
