"""The web query the dynamic pathway, QPIS and the follow-up search send: per `web_query`, within the backend's
limit, never with option letters, and recorded on the candidate, the round or the QPIS round."""

from __future__ import annotations

import pytest

from clearmed.retrieval.base import EvidenceError
from clearmed.retrieval.memory import InMemoryWebSearch
from clearmed.signatures.records import Candidate, Decision, Passage, Question
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import (
    FOLLOWUP_WEB,
    GUARD_ALL_TRUE,
    QUESTION,
    WEB,
    ScriptValue,
    build_toy_program,
    label_all,
    pathway_replies,
    verifier_reply,
)

LIMIT = 40  # shorter than the toy question (56 characters), so every mode must shorten or replace it
LETTERED = "Option A: hypothyroidism (B) weight gain, C. cold intolerance"


class StrictWeb(InMemoryWebSearch):
    """Refuses an over-limit query, as Tavily does: the test fails loudly instead of recording a search error."""

    def search(self, query: str, max_results: int) -> list[Passage]:
        if self.max_query_chars is not None and len(query) > self.max_query_chars:
            raise AssertionError(f"a query of {len(query)} characters was sent (limit {self.max_query_chars})")
        return super().search(query, max_results)


def strict_web(limit: int | None = LIMIT) -> StrictWeb:
    return StrictWeb([*WEB, *FOLLOWUP_WEB], max_query_chars=limit)


def settings(**overrides: object) -> ProgramSettings:
    return ProgramSettings(json_fallback=False, parallel_pathways="off", **overrides)  # type: ignore[arg-type]


def consensus(**replies: ScriptValue) -> dict[str, ScriptValue]:
    return {
        **pathway_replies("A", "A", "A"),
        "source_quality": label_all("high"),
        "verifier": verifier_reply("consensus"),
        **replies,
    }


def dynamic_of(decision: Decision) -> Candidate:
    return decision.bundle.candidate("dynamic")


def no_letters(query: str) -> bool:
    return not any(marker in query for marker in ("Option A", "(B)", "C.", "A:"))


def test_the_question_is_the_query_when_it_fits() -> None:
    program, engine, _ = build_toy_program(consensus(), web=strict_web(None))
    dynamic = dynamic_of(program(question=QUESTION).decision)
    assert (dynamic.query, dynamic.query_source, dynamic.query_replaced_chars) == (QUESTION.text, "question", None)
    assert "web_query" not in engine.stages()


def test_a_question_over_the_limit_is_replaced_by_its_key_terms() -> None:
    web = strict_web()
    program, engine, _ = build_toy_program(consensus(), web=web)
    dynamic = dynamic_of(program(question=QUESTION).decision)
    assert dynamic.query_source == "salient"
    assert dynamic.query_replaced_chars == len(QUESTION.text)
    assert dynamic.query is not None
    assert len(dynamic.query) <= LIMIT
    assert "weight" in dynamic.query
    assert dynamic.error is None  # the key terms still find the pages
    assert web.queries == [dynamic.query]
    assert "web_query" not in engine.stages()


def test_salient_mode_uses_key_terms_even_without_a_limit() -> None:
    program, engine, _ = build_toy_program(consensus(), web=strict_web(None), settings=settings(web_query="salient"))
    dynamic = dynamic_of(program(question=QUESTION).decision)
    assert dynamic.query_source == "salient"
    assert dynamic.query is not None
    assert "Which" not in dynamic.query
    assert "web_query" not in engine.stages()


def test_the_lm_writes_the_query_without_option_letters() -> None:
    program, engine, _ = build_toy_program(
        consensus(web_query={"query": f"Query: {LETTERED}"}), web=strict_web(None), settings=settings(web_query="lm")
    )
    decision = program(question=QUESTION).decision
    dynamic = dynamic_of(decision)
    assert dynamic.query == "hypothyroidism weight gain, cold intolerance"
    assert (dynamic.query_source, dynamic.query_replaced_chars, dynamic.query_cut_chars) == (
        "lm",
        len(QUESTION.text),
        None,
    )
    call = next(c for c in engine.calls if c.stage == "web_query")
    assert "Hypothyroidism" not in call.user  # the writer sees the question, never the options
    assert "400" in call.user  # no backend limit: told the default
    assert any(row.stage == "web_query" for row in decision.usage)


def test_an_over_long_written_query_is_cut_at_a_word_and_recorded() -> None:
    written = "hypothyroidism weight gain cold intolerance fatigue constipation bradycardia"
    program, engine, _ = build_toy_program(
        consensus(web_query={"query": written}), web=strict_web(), settings=settings(web_query="lm")
    )
    dynamic = dynamic_of(program(question=QUESTION).decision)
    assert dynamic.query == "hypothyroidism weight gain cold"
    assert dynamic.query_source == "lm"
    assert dynamic.query_cut_chars == len(written)
    assert str(LIMIT) in next(c for c in engine.calls if c.stage == "web_query").user


@pytest.mark.parametrize(
    "reply",
    [RuntimeError("model server down"), {"query": "   "}, {"query": "(A) (B)"}],
    ids=["lm fails", "empty query", "only letters"],
)
def test_the_key_terms_stand_in_when_the_writer_gives_nothing(reply: ScriptValue) -> None:
    program, _, _ = build_toy_program(consensus(web_query=reply), web=strict_web(), settings=settings(web_query="lm"))
    decision = program(question=QUESTION).decision
    dynamic = dynamic_of(decision)
    assert dynamic.query_source == "salient"
    assert dynamic.query is not None
    assert len(dynamic.query) <= LIMIT
    assert dynamic.answer is not None  # the pathway still answered
    step = next(s for s in decision.steps if s.trigger == "web query")
    assert step.error is not None
    assert step.error.stage == "web_query"


def test_the_query_writer_is_one_predictor_optimizers_see() -> None:
    program, _, _ = build_toy_program(consensus())
    names = [name for name, _ in program.named_predictors()]
    assert names.count("web_query.write") == 1
    assert not any(name.endswith("writer.write") for name in names)  # shared, not copied per module
    for copy in (program.deepcopy(), program.reset_copy()):  # what optimizers tune must be what runs
        assert copy.web_query is copy.dynamic.writer
        assert copy.web_query is copy.followup.writer


GUARD_CONTEST = {
    **pathway_replies("B", "B", "A"),
    "source_quality": label_all("high"),
    "verifier": verifier_reply("accept_dynamic"),
    "guard": GUARD_ALL_TRUE,
}


def test_a_follow_up_query_is_cleaned_of_letters_and_cut_to_the_limit() -> None:
    written = "option A hypothyroidism TSH level high versus (B) hyperthyroidism"
    web = strict_web()
    program, _, _ = build_toy_program({**GUARD_CONTEST, "followup_query": {"query": written}}, web=web)
    decision = program(question=QUESTION).decision
    round_ = decision.bundle.followups[0]
    assert round_.query == "hypothyroidism TSH level high versus"
    assert round_.query_cut_chars == len("hypothyroidism TSH level high versus hyperthyroidism")
    assert decision.deciding_rule == "guard_granted"  # the cut query still found the new page
    step = next(s for s in decision.steps if s.mechanism == "followup")
    assert "cut from 52 characters" in step.outcome


def test_a_failed_follow_up_query_falls_back_within_the_limit() -> None:
    web = strict_web(60)
    script = {**GUARD_CONTEST, "followup_query": RuntimeError("timeout"), "web_query": {"query": "thyroid TSH"}}
    program, _, _ = build_toy_program(script, web=web, settings=settings(web_query="lm"))
    decision = program(question=QUESTION).decision
    round_ = decision.bundle.followups[0]
    # The writer's stem, then the competing options' texts, without letters.
    assert round_.query.startswith("thyroid TSH")
    assert "Hyperthyroidism" in round_.query or "Hypothyroidism" in round_.query
    assert len(round_.query) <= 60
    assert no_letters(round_.query)
    # The writer's call is the follow-up's cost (tuning prices follow-up rounds by their rows).
    rows = [row.stage for row in decision.usage if row.role != "tool"]
    assert rows.count("followup_query") == 2
    assert rows.count("web_query") == 1  # the dynamic pathway's own query


def qpis(**overrides: object) -> ProgramSettings:
    return settings(dynamic_search_mode="qpis", **overrides)


def test_qpis_sub_queries_lose_letters_and_are_cut_to_the_limit() -> None:
    long = "hypothyroidism weight gain and cold intolerance in adults"
    replies = consensus(
        qpis_plan={"subqueries": [long, "(A) cold intolerance"]},
        qpis_check={"sufficient": True, "missing": "", "next_query": ""},
    )
    program, _, _ = build_toy_program(replies, settings=qpis(qpis_max_rounds=2), web=strict_web())
    dynamic = dynamic_of(program(question=QUESTION).decision)
    assert dynamic.search_plan is not None
    first = dynamic.search_plan.rounds[0]
    assert first.queries == ["hypothyroidism weight gain and cold", "cold intolerance"]
    assert first.query_cut_chars == {"hypothyroidism weight gain and cold": len(long)}
    assert dynamic.query_source == "lm"  # the planner wrote what was searched


def test_qpis_without_a_plan_searches_the_pathways_own_query() -> None:
    replies = consensus(qpis_plan="no idea", qpis_check={"sufficient": True, "missing": "", "next_query": ""})
    program, _, _ = build_toy_program(replies, settings=qpis(), web=strict_web())
    dynamic = dynamic_of(program(question=QUESTION).decision)
    assert dynamic.query_source == "salient"
    assert dynamic.query is not None
    assert len(dynamic.query) <= LIMIT
    assert dynamic.search_plan is not None
    assert dynamic.search_plan.rounds[0].queries == [dynamic.query]


def test_a_refused_query_would_be_recorded_not_raised() -> None:
    # Belt and braces: a backend that refuses anyway (a stricter proxy) costs the evidence, never the question.
    web = InMemoryWebSearch(WEB, fail_with=EvidenceError("Query is too long.", kind="bad_request"))
    program, _, _ = build_toy_program(consensus(), web=web)
    dynamic = dynamic_of(program(question=QUESTION).decision)
    assert dynamic.error is not None
    assert "bad_request" in dynamic.error.message


def test_free_text_conversations_are_shortened_too() -> None:
    long = Question(id="free-long", text="weight gain and cold intolerance " * 20, answer_mode="free_text")
    replies = {
        "parametric": {"rationale": "r", "answer": "hypothyroidism"},
        "local_answer": {"rationale": "r", "cited_ids": ["L1"], "answer": "hypothyroidism"},
        "dynamic_answer": {"rationale": "r", "cited_ids": ["W1"], "answer": "hypothyroidism"},
        "source_quality": label_all("high"),
        "verifier": verifier_reply("consensus", answer="hypothyroidism"),
        "response": {"response": "Hypothyroidism."},
    }
    program, _, _ = build_toy_program(replies, question=long, web=strict_web())
    dynamic = dynamic_of(program(question=long).decision)
    assert dynamic.query_source == "salient"
    assert dynamic.query is not None
    assert len(dynamic.query) <= LIMIT


def test_the_online_program_records_a_failed_query_writer_in_its_trail() -> None:
    from clearmed.programs.baselines import SinglePathway
    from clearmed.testing import scripted_lm

    lm, _ = scripted_lm(consensus(web_query=RuntimeError("model server down")))
    program = SinglePathway("online", web_search=strict_web(), settings=settings(web_query="lm"), role_lms={"main": lm})
    decision = program(question=QUESTION).decision
    assert decision.status == "answered"
    assert dynamic_of(decision).query_source == "salient"
    step = next(s for s in decision.steps if s.trigger == "web query")
    assert step.error is not None
    assert step.error.stage == "web_query"
