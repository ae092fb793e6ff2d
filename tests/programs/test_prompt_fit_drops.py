"""Prompt fitting leaves out uncited first-search passages first and follow-up pages last, records which ids it left
out, and the question page shows them; scoring prompts are fitted too (issue 31, items 6 and 8)."""

from __future__ import annotations

from pathlib import Path

import dspy

from clearmed.config import parse_config
from clearmed.evaluation import EvalSpec, run_evaluation
from clearmed.programs.lm.context import RunContext, activate
from clearmed.programs.lm.prompting import fit_prompt, prompt_limit, render_dynamic_evidence, render_local_evidence
from clearmed.report.html_report import write_html_report
from clearmed.signatures.records import (
    Answer,
    Candidate,
    EvidenceBundle,
    FollowUpRound,
    Passage,
    Provenance,
)
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import QUESTION, build_toy_program, label_all, pathway_replies, verifier_reply

TEXT = "thyroid hormone replacement dosing in older adults with cardiac disease " * 12


def web(pid: str) -> Passage:
    return Passage(id=pid, text=TEXT, pathway="dynamic", provenance=Provenance(kind="web", url=f"https://x.org/{pid}"))


def local(pid: str) -> Passage:
    return Passage(id=pid, text=TEXT, pathway="local", provenance=Provenance(kind="corpus", doc_id=pid))


def bundle() -> EvidenceBundle:
    """Four first-search web results (the dynamic pathway cited the lowest-ranked, W4) and a follow-up round."""
    candidates = [
        Candidate(pathway="parametric", answer=Answer.of_letters("A")),
        Candidate(pathway="local", answer=Answer.of_letters("A"), cited_passage_ids=["L3"]),
        Candidate(pathway="dynamic", answer=Answer.of_letters("B"), cited_passage_ids=["W4"]),
    ]
    return EvidenceBundle(
        question=QUESTION,
        candidates=candidates,
        local_passages=[local("L1"), local("L2"), local("L3")],
        dynamic_passages=[web("W1"), web("W2"), web("W3"), web("W4")],
        followups=[FollowUpRound(trigger="needs_more_search", query="q", passages=[web("F1.1"), web("F1.2")])],
    )


def fitted(window: int, field: str) -> tuple[str, ...]:
    predictor = dspy.Predict(f"{field} -> answer")
    with activate(RunContext(settings=ProgramSettings())):
        evidence = render_dynamic_evidence(bundle()) if field == "dynamic_evidence" else render_local_evidence(bundle())
    fit = fit_prompt(predictor, dspy.ChatAdapter(), {field: evidence}, window=window, output_budget=0)
    return fit.dropped_ids


def test_uncited_first_search_pages_go_first_and_the_follow_up_last() -> None:
    # Before: the last blocks went first: the follow-up round, then the cited W4.
    assert fitted(1300, "dynamic_evidence") == ("W3", "W2", "W1")
    assert fitted(900, "dynamic_evidence") == ("W3", "W2", "W1", "W4")  # the cited page outlasts the uncited
    assert fitted(700, "dynamic_evidence") == ("W3", "W2", "W1", "W4", "F1.2")  # follow-up pages go last


def test_the_cited_local_passage_is_kept_longest() -> None:
    assert fitted(700, "local_evidence") == ("L2", "L1")  # L3, last in retrieval order, was cited


def test_the_trail_names_the_passages_left_out_and_the_question_page_shows_them(tmp_path: Path) -> None:
    script = {
        **pathway_replies("A", "A", "A"),
        "source_quality": label_all("high"),
        "verifier": verifier_reply("consensus"),
    }
    program, _, _ = build_toy_program(script)
    lm = program.role_lms["main"]
    lm.kwargs["max_tokens"] = 100
    lm.context_window = 1300
    config = parse_config(
        {"backbones": {"main": {"kind": "openai_compatible", "model": "m", "api_base": "http://127.0.0.1:9/v1"}}},
        source="test.toml",
    )
    spec = EvalSpec(program="clear", benchmark="toy", source="memory", questions=[QUESTION], run_dir=tmp_path / "run")
    (record,) = run_evaluation(spec, config, program, show_progress=False)
    (row,) = [r for r in record.decision.usage if r.stage == "verifier"]
    assert len(row.passages_dropped_ids) == row.passages_dropped >= 2
    assert "L1" not in row.passages_dropped_ids[:2]  # the local pathway cited L1: it goes after the uncited ones
    names = f"({', '.join(row.passages_dropped_ids)})"
    assert names in row.note
    write_html_report([tmp_path / "run"], tmp_path / "report")
    pages = [page.read_text() for page in (tmp_path / "report").rglob("*.html") if QUESTION.id in page.name]
    assert any(names in page for page in pages)


def test_scoring_prompts_are_fitted_to_the_window() -> None:
    from clearmed.testing import SCORED_CALIBRATED

    script = {**pathway_replies("A", "A", "A"), "source_quality": label_all("high")}
    scores = {
        stage: {"A": 0.7, "B": 0.1, "C": 0.1, "D": 0.1} for stage in ("parametric", "local_answer", "dynamic_answer")
    }
    program, _, _ = build_toy_program(script, settings=SCORED_CALIBRATED, scores=scores)
    program.role_lms["main"].context_window = 700
    decision = program(question=QUESTION).decision
    rows = [r for r in decision.usage if r.stage in ("local_answer", "dynamic_answer")]
    assert rows
    assert any(r.passages_dropped for r in rows)  # before: sent whole, over the window
    assert all(r.fit_tokens == prompt_limit(700, 1) for r in rows if r.passages_dropped)
    assert all(len(r.passages_dropped_ids) == r.passages_dropped for r in rows)
