"""The option-wise judge as the answer step of the local and dynamic pathways, and query-planned search (QPIS)."""

from __future__ import annotations

import pytest

from clearmed.programs.pathways.qpis import in_turns, round_quota
from clearmed.retrieval.base import EvidenceError
from clearmed.retrieval.memory import InMemoryWebSearch, web_passage
from clearmed.signatures.records import Answer, Decision, Question
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import (
    GUARD_ALL_TRUE,
    QUESTION,
    WEB,
    ScriptValue,
    build_toy_program,
    label_all,
    pathway_replies,
    verifier_reply,
)

MULTI = QUESTION.model_copy(update={"id": "toy-multi", "answer_mode": "multi", "gold_letters": ["A", "B"]})
FREE = Question(id="toy-free", text="Which condition causes weight gain and cold intolerance?", answer_mode="free_text")


def settings(**overrides: object) -> ProgramSettings:
    base = {"json_fallback": False, "parallel_pathways": "off", "local_answerer": "judge", "dynamic_answerer": "judge"}
    return ProgramSettings(**{**base, **overrides})  # type: ignore[arg-type]


def judge_reply(verdicts: list[tuple[str, str, list[str]]], decision: str, answer: str) -> dict[str, object]:
    return {
        "verdicts": [{"option": o, "evidence": e, "verdict": v} for o, v, e in verdicts],
        "decision": decision,
        "answer": answer,
    }


GROUNDED_LOCAL = judge_reply(
    [("A", "supported", ["L1"]), ("B", "contradicted", ["L2"]), ("C", "insufficient", []), ("D", "insufficient", [])],
    "grounded",
    "A",
)
GROUNDED_WEB = judge_reply([("A", "supported", ["W1"])], "grounded", "A")


def script(**replies: ScriptValue) -> dict[str, ScriptValue]:
    base: dict[str, ScriptValue] = {
        **pathway_replies("A", "A", "A"),
        "local_judge": GROUNDED_LOCAL,
        "dynamic_judge": GROUNDED_WEB,
        "source_quality": label_all("high"),
        "verifier": verifier_reply("consensus"),
    }
    return {**base, **replies}


def run(program, question: Question = QUESTION) -> Decision:
    decision = program(question=question).decision
    assert Decision.model_validate_json(decision.model_dump_json()) == decision
    return decision


def test_judge_answers_both_evidence_pathways_and_keeps_its_verdicts() -> None:
    program, engine, _ = build_toy_program(script(), settings=settings())
    decision = run(program)
    stages = engine.stages()
    assert "local_judge" in stages
    assert "dynamic_judge" in stages
    assert "local_answer" not in stages
    assert "dynamic_answer" not in stages
    local = decision.bundle.candidate("local")
    assert local.answer == Answer.of_letters("A")
    assert local.judgment is not None
    assert local.judgment.decision == "grounded"
    assert [v.verdict for v in local.judgment.verdicts] == ["supported", "contradicted", "insufficient", "insufficient"]
    assert local.cited_passage_ids == ["L1"]
    assert decision.answer == Answer.of_letters("A")


def test_judge_switch_is_per_pathway() -> None:
    program, engine, _ = build_toy_program(script(), settings=settings(dynamic_answerer="direct"))
    decision = run(program)
    assert "local_judge" in engine.stages()
    assert "dynamic_answer" in engine.stages()
    assert decision.bundle.candidate("dynamic").judgment is None


def test_invalid_citation_turns_support_into_insufficient_and_the_rule_decides() -> None:
    reply = judge_reply([("A", "supported", ["L7"]), ("B", "contradicted", ["L2"])], "grounded", "A")
    program, _, _ = build_toy_program(script(local_judge=reply), settings=settings())
    local = run(program).bundle.candidate("local")
    assert local.judgment is not None
    assert local.judgment.decision == "elimination"  # the only valid verdict left is B contradicted
    assert local.judgment.invalid_citations == 1
    assert local.answer == Answer.of_letters("A")  # A is not contradicted, and the model chose it


def test_judge_answer_inconsistent_with_its_verdicts_is_recorded_not_guessed() -> None:
    reply = judge_reply([("A", "contradicted", ["L1"])], "elimination", "A")
    program, _, _ = build_toy_program(script(local_judge=reply), settings=settings())
    local = run(program).bundle.candidate("local")
    assert local.answer is None
    assert local.error is not None
    assert local.error.kind == "invalid_answer"
    assert "contradicted" in local.error.message


def test_unparseable_judge_output_is_salvaged_from_lines() -> None:
    raw = "[[ ## verdicts ## ]]\nA: supported [L1]\nB: contradicted [L2]\n[[ ## decision ## ]]\ngrounded\n[[ ## answer ## ]]\nA"
    program, _, _ = build_toy_program(script(local_judge=raw), settings=settings())
    local = run(program).bundle.candidate("local")
    assert local.judgment is not None
    assert local.judgment.salvaged
    assert local.answer == Answer.of_letters("A")


def test_judge_failure_leaves_the_pathway_without_an_answer() -> None:
    program, _, _ = build_toy_program(script(local_judge="I refuse to follow the format."), settings=settings())
    decision = run(program)
    local = decision.bundle.candidate("local")
    assert local.answer is None
    assert local.error is not None
    assert local.error.kind == "parse_error"
    assert decision.status == "answered"  # the other pathways still answer


def test_multi_answer_judge_supports_several_options() -> None:
    reply = judge_reply(
        [("A", "supported", ["L1"]), ("B", "supported", ["L2"]), ("C", "contradicted", ["L3"])], "grounded", "A"
    )
    program, _, _ = build_toy_program(
        script(local_judge=reply, **pathway_replies("A, B", "A, B", "A, B")),
        settings=settings(dynamic_answerer="direct"),
        question=MULTI,
    )
    local = run(program, MULTI).bundle.candidate("local")
    assert local.answer == Answer.of_letters("A", "B")


def test_explicit_mode_with_an_empty_graph() -> None:
    reply = {"entities": [], "relations": [], **judge_reply([("A", "insufficient", [])], "parametric", "A")}
    program, _, _ = build_toy_program(script(local_judge=reply), settings=settings(judge_mode="explicit"))
    local = run(program).bundle.candidate("local")
    assert local.judgment is not None
    assert local.judgment.mode == "explicit"
    assert local.judgment.graph is not None
    assert local.judgment.graph.is_empty
    assert local.judgment.decision == "parametric"
    assert local.answer == Answer.of_letters("A")


def test_explicit_mode_verdicts_may_cite_graph_elements() -> None:
    reply = {
        "entities": [{"id": "E1", "name": "hypothyroidism", "type": "Disease", "evidence": ["L1"]}],
        "relations": [],
        **judge_reply([("A", "supported", ["E1"])], "grounded", "A"),
    }
    program, _, _ = build_toy_program(script(local_judge=reply), settings=settings(judge_mode="explicit"))
    local = run(program).bundle.candidate("local")
    assert local.judgment is not None
    assert local.judgment.graph is not None
    assert local.judgment.graph.entities[0].type == "DISO"
    assert local.judgment.verdicts[0].verdict == "supported"
    assert local.judgment.verdicts[0].cited_ids == ["L1"]


def test_free_text_questions_skip_the_judge() -> None:
    replies = {
        "parametric": {"rationale": "r", "answer": "hypothyroidism"},
        "local_answer": {"rationale": "r", "cited_ids": ["L1"], "answer": "hypothyroidism"},
        "dynamic_answer": {"rationale": "r", "cited_ids": ["W1"], "answer": "hypothyroidism"},
        "source_quality": label_all("high"),
        "verifier": verifier_reply("consensus", "hypothyroidism"),
        "response": {"response": "Hypothyroidism."},
    }
    program, engine, _ = build_toy_program(replies, settings=settings(), question=FREE)
    run(program, FREE)
    assert "local_judge" not in engine.stages()


# ------------------------------------------------------------------------------------------- QPIS

MORE_WEB = [
    *WEB,
    web_passage("p3", "https://www.cdc.gov/thyroid", "Thyroid hormone", "levothyroxine replaces thyroid hormone", None),
    web_passage("p4", "https://medlineplus.gov/tsh", "TSH test", "TSH is raised in primary hypothyroidism", None),
]


def qpis_settings(**overrides: object) -> ProgramSettings:
    return settings(dynamic_answerer="direct", local_answerer="direct", dynamic_search_mode="qpis", **overrides)


def test_qpis_stops_when_evidence_suffices() -> None:
    web = InMemoryWebSearch(MORE_WEB)
    replies = script(
        qpis_plan={"subqueries": ["hypothyroidism weight gain", "cold intolerance cause"]},
        qpis_check={"sufficient": True, "missing": "", "next_query": ""},
    )
    program, engine, _ = build_toy_program(replies, settings=qpis_settings(qpis_max_rounds=3), web=web)
    dynamic = run(program).bundle.candidate("dynamic")
    plan = dynamic.search_plan
    assert plan is not None
    assert plan.subqueries == ["hypothyroidism weight gain", "cold intolerance cause"]
    assert plan.stop_reason == "sufficient"
    assert len(plan.rounds) == 1
    assert engine.stages().count("qpis_check") == 1
    assert web.queries[:2] == plan.subqueries


def test_qpis_stops_at_its_round_budget() -> None:
    web = InMemoryWebSearch(MORE_WEB)
    queries = iter(["TSH test", "levothyroxine thyroid hormone", "never used"])
    replies = script(
        qpis_plan={"subqueries": ["weight gain"]},
        qpis_check=lambda call: {"sufficient": False, "missing": "more", "next_query": next(queries)},
    )
    program, engine, _ = build_toy_program(
        replies, settings=qpis_settings(qpis_max_rounds=3, dynamic_k=1, qpis_max_passages=10), web=web
    )
    plan = run(program).bundle.candidate("dynamic").search_plan
    assert plan is not None
    assert plan.stop_reason == "budget"
    assert len(plan.rounds) == 3
    assert engine.stages().count("qpis_check") == 2  # no check after the last affordable round
    assert web.queries == ["weight gain", "TSH test", "levothyroxine thyroid hormone"]


def test_qpis_stops_when_a_round_finds_nothing_new() -> None:
    web = InMemoryWebSearch(WEB)
    replies = script(
        qpis_plan={"subqueries": ["weight gain cold intolerance"]},
        qpis_check={"sufficient": False, "missing": "x", "next_query": "weight gain cold intolerance again"},
    )
    program, _, _ = build_toy_program(replies, settings=qpis_settings(qpis_max_rounds=4), web=web)
    plan = run(program).bundle.candidate("dynamic").search_plan
    assert plan is not None
    assert plan.stop_reason == "no_new_results"
    assert len(plan.rounds) == 2


def test_qpis_without_a_plan_searches_the_question() -> None:
    web = InMemoryWebSearch(WEB)
    replies = script(qpis_plan="no idea", qpis_check={"sufficient": True, "missing": "", "next_query": ""})
    program, _, _ = build_toy_program(replies, settings=qpis_settings(), web=web)
    dynamic = run(program).bundle.candidate("dynamic")
    assert dynamic.search_plan is not None
    assert dynamic.search_plan.plan_error is not None
    assert web.queries[0] == QUESTION.text
    assert dynamic.answer == Answer.of_letters("A")


def test_qpis_search_failure_is_recorded() -> None:
    web = InMemoryWebSearch(WEB, fail_with=EvidenceError("429 from the search API", kind="rate_limit"))
    replies = script(qpis_plan={"subqueries": ["a", "b"]})
    program, _, _ = build_toy_program(replies, settings=qpis_settings(), web=web)
    dynamic = run(program).bundle.candidate("dynamic")
    assert dynamic.answer is None
    assert dynamic.search_plan is not None
    assert dynamic.search_plan.stop_reason == "search_failed"
    assert dynamic.error is not None
    assert dynamic.error.kind == "search_error"


def test_qpis_keeps_passage_ids_stable_and_pages_unique() -> None:
    web = InMemoryWebSearch(MORE_WEB)
    replies = script(
        qpis_plan={"subqueries": ["thyroid", "thyroid hormone"]},
        qpis_check={"sufficient": True, "missing": "", "next_query": ""},
    )
    program, _, _ = build_toy_program(replies, settings=qpis_settings(), web=web)
    decision = run(program)
    ids = [p.id for p in decision.bundle.dynamic_passages]
    urls = [p.provenance.url for p in decision.bundle.dynamic_passages]
    assert ids == [f"W{i}" for i in range(1, len(ids) + 1)]
    assert len(set(urls)) == len(urls)


def test_qpis_round_one_leaves_room_for_the_check_and_takes_every_query_in_turn() -> None:
    # 2 sub-queries x 2 results would fill the default 4-page budget in round one, and the check would never run.
    web = InMemoryWebSearch(MORE_WEB)
    replies = script(
        qpis_plan={"subqueries": ["TSH test", "levothyroxine thyroid hormone"]},
        qpis_check={"sufficient": True, "missing": "", "next_query": ""},
    )
    program, engine, _ = build_toy_program(replies, settings=qpis_settings(dynamic_k=2), web=web)
    decision = run(program)
    plan = decision.bundle.candidate("dynamic").search_plan
    assert plan is not None
    assert engine.stages().count("qpis_check") == 1
    assert plan.stop_reason == "sufficient"
    # Each query's best page, not the first query's two.
    assert [p.provenance.query for p in decision.bundle.dynamic_passages] == plan.subqueries


@pytest.mark.parametrize(
    ("limit", "round_number", "max_rounds", "quota"),
    [(8, 1, 2, 4), (8, 2, 2, 8), (8, 1, 1, 8), (10, 1, 3, 4), (10, 2, 3, 7), (10, 3, 3, 10), (1, 1, 3, 1)],
)
def test_round_quota_shares_the_page_budget(limit: int, round_number: int, max_rounds: int, quota: int) -> None:
    assert round_quota(limit, round_number, max_rounds) == quota


def test_in_turns_interleaves_result_lists() -> None:
    a, b, c = (web_passage(x, f"https://{x}.gov", x, x, None) for x in "abc")
    assert in_turns([[a, b], [c]]) == [a, c, b]
    assert in_turns([]) == []


# ------------------------------------------------------------------------------------------- guard and audit

DYNAMIC_SAYS_B = pathway_replies("A", "A", "B")


def contest_script(dynamic_verdict: str, route: str) -> dict[str, ScriptValue]:
    return script(
        **DYNAMIC_SAYS_B,
        dynamic_judge=judge_reply([("B", dynamic_verdict, ["W1"]), ("A", "insufficient", [])], "grounded", "B"),
        verifier=verifier_reply(route, "B", "high"),
        followup_query={"query": "hypothyroidism vs hyperthyroidism weight"},
        guard=GUARD_ALL_TRUE,
        audit={"rationale": "clear", "clearly_supports_challenger": True, "aligned_with_question": True},
    )


def test_guard_requires_the_judge_to_support_the_exact_option() -> None:
    program, engine, _ = build_toy_program(
        contest_script("insufficient", "accept_dynamic"), settings=settings(local_answerer="direct")
    )
    decision = run(program)
    assert decision.deciding_rule == "guard_rejected_option_not_supported"
    assert decision.answer == Answer.of_letters("A")
    # The veto needs no follow-up search and no guard call: the verdicts cannot change.
    assert "followup_query" not in engine.stages()
    assert "guard" not in engine.stages()


def test_guard_proceeds_when_the_judge_supports_the_challenger() -> None:
    program, engine, _ = build_toy_program(
        contest_script("supported", "accept_dynamic"), settings=settings(local_answerer="direct")
    )
    decision = run(program)
    assert decision.deciding_rule == "guard_granted"
    assert decision.answer == Answer.of_letters("B")
    assert "guard" in engine.stages()


def test_audit_requires_the_judge_to_support_the_exact_option() -> None:
    program, engine, _ = build_toy_program(
        contest_script("insufficient", "consensus"), settings=settings(local_answerer="direct")
    )
    decision = run(program)
    assert decision.deciding_rule == "audit_rejected_option_not_supported"
    assert decision.answer == Answer.of_letters("A")
    assert "audit" not in engine.stages()


def test_judge_veto_replays_without_lm_calls() -> None:
    from clearmed.optimize.replay import replay_decision
    from clearmed.signatures.records import Thresholds

    program, _, _ = build_toy_program(
        contest_script("insufficient", "accept_dynamic"), settings=settings(local_answerer="direct")
    )
    decision = run(program)
    replayed, actions = replay_decision(decision, Thresholds(guard_min_high=0))
    assert replayed.rule == "guard_rejected_option_not_supported"
    assert actions.misses == []
