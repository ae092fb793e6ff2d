"""Option-wise judge statistics in eval reports: verdicts per option position, decision mix, gold, citations."""

from __future__ import annotations

from clearmed.metrics import judge_stats, judge_table
from clearmed.signatures.records import Decision
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import QUESTION, ScriptValue, build_toy_program, label_all, pathway_replies, verifier_reply


def judged(verdicts: list[tuple[str, str, list[str]]], decision: str, answer: str) -> Decision:
    script: dict[str, ScriptValue] = {
        **pathway_replies("A", "A", "A"),
        "local_judge": {
            "verdicts": [{"option": o, "evidence": e, "verdict": v} for o, v, e in verdicts],
            "decision": decision,
            "answer": answer,
        },
        "source_quality": label_all("high"),
        "verifier": verifier_reply("consensus"),
    }
    settings = ProgramSettings(json_fallback=False, parallel_pathways="off", local_answerer="judge")
    program, _, _ = build_toy_program(script, settings=settings)
    return program(question=QUESTION).decision


def test_stats_count_positions_decisions_gold_and_citations() -> None:
    decisions = [
        judged([("A", "supported", ["L1"]), ("B", "contradicted", ["L2"])], "grounded", "A"),  # gold A supported
        judged([("A", "contradicted", ["L1"]), ("B", "supported", ["L9"])], "grounded", "C"),  # B's citation invalid
        judged([], "parametric", "D"),
    ]
    (stats,) = judge_stats(decisions)
    assert stats.pathway == "local"
    assert stats.judged == 3
    assert stats.verdicts_by_position["A"] == {"supported": 1, "contradicted": 1, "insufficient": 1}
    assert stats.verdicts_by_position["B"] == {"contradicted": 1, "insufficient": 2}
    assert stats.decisions == {"grounded": 1, "elimination": 1, "parametric": 1}
    assert stats.stated_decision_agrees == round(2 / 3, 4)  # the second said grounded, the rule says elimination
    assert stats.gold_supported == round(1 / 3, 4)
    assert stats.gold_contradicted == round(1 / 3, 4)
    assert stats.citation_validity == 0.75  # 3 of 4 supported/contradicted claims cite real evidence
    assert stats.invalid_citations == 1
    assert stats.unjudged_options == round(8 / 12, 4)  # 2 + 2 + 4 of 3 x 4 option slots had no verdict
    assert stats.several_supported == 0
    table = judge_table([stats])
    assert "| local | 3 |" in table
    assert "A:1/1/1" in table


def test_several_supported_options_on_a_single_answer_question_are_counted() -> None:
    # The embedded model's failure: every option a passage mentions is "supported", and the answer repeats them.
    everything = [("A", "supported", ["L1"]), ("B", "supported", ["L2"])]
    (stats,) = judge_stats([judged(everything, "grounded", "A, B"), judged(everything[:1], "grounded", "A")])
    assert stats.several_supported == 1
    assert stats.no_answer == 1
    assert "| 1 | 1 | A:2/0/0" in judge_table([stats])  # several supported, no answer, then the positions


def test_no_judge_no_stats() -> None:
    script: dict[str, ScriptValue] = {
        **pathway_replies("A", "A", "A"),
        "source_quality": label_all("high"),
        "verifier": verifier_reply("consensus"),
    }
    program, _, _ = build_toy_program(script)
    assert judge_stats([program(question=QUESTION).decision]) == []
    assert judge_table([]) == ""


def test_run_summary_reports_judge_and_qpis_sections() -> None:
    from clearmed.evaluation.store import EvalRecord, RunManifest
    from clearmed.evaluation.summary import summarize
    from clearmed.report.markdown import details_markdown
    from clearmed.signatures.records import SearchPlan, SearchRound

    decision = judged([("A", "supported", ["L1"])], "grounded", "A")
    dynamic = decision.bundle.candidate("dynamic").model_copy(
        update={"search_plan": SearchPlan(subqueries=["q"], rounds=[SearchRound(queries=["q"])], stop_reason="budget")}
    )
    bundle = decision.bundle.model_copy(update={"candidates": [*decision.bundle.candidates[:2], dynamic]})
    decision = decision.model_copy(update={"bundle": bundle})
    record = EvalRecord(question_id="toy-1", index=0, program="clear-judge", decision=decision, seconds=1, finished="t")
    manifest = RunManifest(
        program="clear-judge",
        benchmark="toy",
        source="file",
        config_source="x",
        config_digest="d",
        question_ids=["toy-1"],
        created="t",
        clearmed_version="0",
    )
    summary = summarize([record], manifest)
    assert summary.judge[0].decisions == {"grounded": 1}
    assert summary.search_plan_stops == {"budget": 1}
    assert summary.mean_search_rounds == 1.0
    text = details_markdown([summary])
    assert "Option-wise judge: clear-judge on toy" in text
    assert "stopped by budget 1" in text
