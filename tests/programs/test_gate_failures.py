"""A gate's failure is recorded and counted (issue 58, item 13).

On the embedded default the challenge audit was cut at its 140-token budget in 6 of 9 calls, each step with an empty
`error`: the question was neither degraded nor counted apart, and DSPy's "LM response was truncated" warning was the
only trace. Here a scripted server cuts a reply at the request's `max_tokens` as a real one does (the text stops at
the budget, `finish_reason` "length"): the step says "truncated at N tokens", and the summary counts the question.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import dspy
from dspy.lm15 import Request, Response
from rich.console import Console

from clearmed.api.compare import compare_runs
from clearmed.config import parse_config
from clearmed.evaluation import EvalSpec, run_evaluation
from clearmed.evaluation.summary import RunSummary
from clearmed.programs.clear import CLEAR
from clearmed.programs.lm.stage import run_stage
from clearmed.report.markdown import details_markdown
from clearmed.report.run_folder import finish_run_folder
from clearmed.retrieval.memory import InMemoryRetriever, InMemoryWebSearch, web_passage
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import (
    AUDIT_ALL_TRUE,
    FOLLOWUP_WEB,
    LOCAL,
    QUESTION,
    WEB,
    ScriptedEngine,
    ScriptValue,
    label_all,
    pathway_replies,
    verifier_reply,
)

# The audit's own follow-up finds a page of its own (as in tests/programs/test_contest_gates.py).
ONLY_FOLLOWUP = web_passage("p4", "https://www.thyroid.org/hypo", "Hypothyroidism | ATA", "a high TSH, low free T4")
AUDIT_SCRIPT: dict[str, ScriptValue] = {
    **pathway_replies("B", "B", "A"),
    "source_quality": label_all("high"),
    "verifier": verifier_reply("consensus", answer="B"),
    "followup_query": {"query": "hypothyroidism TSH"},
}
# A rationale of 60 words before the six conditions: the reply runs past a 40-token budget inside the rationale.
LONG_AUDIT = {**AUDIT_ALL_TRUE, "rationale": " ".join(["The evidence supports the challenger."] * 12)}
CONFIG = parse_config(
    {"backbones": {"main": {"kind": "openai_compatible", "model": "m", "api_base": "http://127.0.0.1:9/v1"}}},
    source="test.toml",
)


class BudgetedEngine(ScriptedEngine):
    """A scripted server that honours `max_tokens` as an OpenAI-compatible one does: a reply longer than the budget
    (a token is a word here, as the scripted engine counts them) stops at it, with finish_reason "length"."""

    def complete(self, request: Request) -> Response:
        response = super().complete(request)
        budget = request.config.max_tokens
        text = response.text or ""
        words = list(re.finditer(r"\S+", text))
        if budget is None or len(words) <= budget:
            return response
        cut = text[: words[budget - 1].end()]
        return Response(
            id=None,
            model=response.model,
            message=type(response.message).assistant(cut),
            finish_reason="length",
            usage=type(response.usage)(input_tokens=response.usage.input_tokens, output_tokens=budget),
        )


def budgeted_program(script: dict[str, ScriptValue], max_tokens: dict[str, int]) -> tuple[CLEAR, BudgetedEngine]:
    engine = BudgetedEngine(script=dict(script))
    lm = dspy.LM("local/scripted", engine=engine, cache=False, num_retries=0)
    settings = ProgramSettings(json_fallback=False, parallel_pathways="off", max_tokens=max_tokens)  # type: ignore[arg-type]
    web = InMemoryWebSearch([*WEB, *FOLLOWUP_WEB, ONLY_FOLLOWUP])
    return CLEAR(InMemoryRetriever(LOCAL), web, settings=settings, role_lms={"main": lm}), engine


def test_an_audit_cut_at_its_budget_fails_and_says_so() -> None:
    program, engine = budgeted_program({**AUDIT_SCRIPT, "audit": LONG_AUDIT}, {"audit": 40})
    decision = program(question=QUESTION).decision
    assert "audit" in engine.stages()
    step = next(s for s in decision.steps if s.mechanism == "audit")
    # Before: no error; the truncated reply was read field by field, the conditions it never reached taken as not
    # holding (audit_rejected_not_clearly_supported), and only DSPy's logged warning said it was cut.
    assert step.rule == "audit_assessment_failed"
    assert step.audit is None
    assert step.error is not None
    assert step.error.stage == "audit"
    assert step.error.message.startswith("truncated at 40 tokens")
    assert step.error.transient is False  # the same budget cuts it again: not degraded, not redone on resume
    assert decision.answer is not None
    assert decision.answer.letters == ("B",)


def test_an_audit_cut_between_its_conditions_is_not_half_read() -> None:
    # A short rationale, then the budget runs out after three of the six conditions (six words a field here).
    program, _ = budgeted_program({**AUDIT_SCRIPT, "audit": AUDIT_ALL_TRUE}, {"audit": 6 * 4})
    step = next(s for s in program(question=QUESTION).decision.steps if s.mechanism == "audit")
    # Before: read field by field, the three conditions never written taken as not holding, no error.
    assert (step.rule, step.audit) == ("audit_assessment_failed", None)
    assert step.error is not None
    assert step.error.message.startswith("truncated at 24 tokens")


def test_the_same_reply_within_its_budget_is_accepted() -> None:
    program, _ = budgeted_program({**AUDIT_SCRIPT, "audit": LONG_AUDIT}, {"audit": 400})
    decision = program(question=QUESTION).decision
    step = next(s for s in decision.steps if s.mechanism == "audit")
    assert (step.rule, step.error) == ("audit_accepted", None)


def test_a_garbled_condition_in_a_whole_reply_is_still_read_field_by_field() -> None:
    # Not cut: the model wrote every field but garbled one; salvage reads the rest (tests/programs/
    # test_contest_gates.py), and no truncation is claimed.
    garbled = {**AUDIT_ALL_TRUE, "no_unresolved_conflict": "perhaps"}
    program, _ = budgeted_program({**AUDIT_SCRIPT, "audit": garbled}, {"audit": 400})
    step = next(s for s in program(question=QUESTION).decision.steps if s.mechanism == "audit")
    assert (step.rule, step.error) == ("audit_rejected_not_clearly_supported", None)
    assert step.audit is not None
    assert step.audit.no_unresolved_conflict is False


def test_a_stage_that_fails_after_a_cut_names_the_budget_and_one_that_did_not_is_unchanged() -> None:
    from clearmed.programs.lm.context import RunContext, activate
    from clearmed.signatures.clear import MapToOptions

    engine = BudgetedEngine(script={"format_gate": "[[ ## letters ## ]]\nA, C and perhaps D as well"})
    lm = dspy.LM("local/scripted", engine=engine, cache=False, num_retries=0)
    predictor = dspy.Predict(MapToOptions)
    inputs = {"question": "q", "options": "A. a", "answer_format": "one", "proposed_answer": "a"}
    for budget, truncated in ((3, 3), (50, None)):
        settings = ProgramSettings(json_fallback=False, max_tokens={"format_gate": budget})
        with activate(RunContext(settings=settings, role_lms={"main": lm})):
            result = run_stage("format_gate", predictor, **inputs)
        assert result.truncated_at == truncated
        if truncated:
            assert result.error is not None
            assert result.error.message.startswith("truncated at 3 tokens (its output budget): ")
        else:
            assert result.error is None


def test_the_summary_and_its_report_count_a_failed_gate_apart(tmp_path: Path) -> None:
    program, _ = budgeted_program({**AUDIT_SCRIPT, "audit": LONG_AUDIT}, {"audit": 40})
    questions = [QUESTION.model_copy(update={"id": f"q{i}", "gold_letters": ["B"]}) for i in range(2)]
    spec = EvalSpec(program="clear", benchmark="toy", source="memory", questions=questions, run_dir=tmp_path)
    run_evaluation(spec, CONFIG, program, show_progress=False)
    summary = finish_run_folder(tmp_path, None, Console(file=io.StringIO()))
    # Before: nothing counted them; the question was neither degraded nor apart.
    assert summary.gate_failures == {"audit": 2}
    assert summary.degraded == 0
    assert summary.audit_invoked == 2
    assert RunSummary.model_validate_json((tmp_path / "summary.json").read_text()).gate_failures == {"audit": 2}
    markdown = (tmp_path / "summary.md").read_text()
    assert "2 of 2 questions had their guard or audit assessment fail (audit 2)" in markdown
    html = (tmp_path / "report" / "index.html").read_text()
    assert ">failed gates</th>" in html
    assert '(clean %)</th><th class="num"' in html
    compare_runs([tmp_path], out=tmp_path / "cmp")
    with (tmp_path / "cmp" / "runs.csv").open(encoding="utf-8") as handle:
        assert [row["gate_failures"] for row in csv.DictReader(handle)] == ["2"]


def test_a_run_with_no_failed_gate_reports_none() -> None:
    summary = RunSummary.model_validate_json(
        '{"program": "clear", "benchmark": "toy", "config_source": "t", "planned": 1, "evaluated": 1, "unscored": 0,'
        ' "accuracy": null, "status_counts": {}, "route_counts": {}, "rule_counts": {}, "followup_searches": 0,'
        ' "questions_with_followup": 0, "guard_invoked": 1, "audit_invoked": 0, "revisions_accepted": 0,'
        ' "cost": {"questions": 1, "mean_seconds": 0, "median_seconds": 0, "mean_lm_calls": 0, "mean_prompt_tokens": 0,'
        ' "mean_completion_tokens": 0, "cache_hit_calls": 0}, "cost_by_route": []}'
    )
    assert summary.gate_failures == {}  # a summary written before the count reads as none
    assert "Failed gates" not in details_markdown([summary])


def test_a_cut_is_read_off_a_litellm_reply_and_a_cached_one_alike() -> None:
    from types import SimpleNamespace

    from clearmed.programs.lm.stage import _Replies

    replies = _Replies()
    # A LiteLLM response (its choices as objects), then a dict as a cache keeps it: the budget from the call's kwargs.
    replies.history.append({"response": SimpleNamespace(choices=[SimpleNamespace(finish_reason="stop")])})
    assert replies.truncated_at(None) is None
    cut = {"choices": [{"finish_reason": "length"}]}
    replies.history.append({"response": cut, "kwargs": {"max_tokens": 77}, "usage": {"completion_tokens": 77}})
    assert replies.truncated_at(None) == 77
    # No budget in the call: the tokens the reply used.
    assert _Replies().truncated_at(None) is None
    only_usage = _Replies()
    only_usage.history.append(
        {"response": [SimpleNamespace(finish_reason="length")], "usage": {"completion_tokens": 12}}
    )
    assert only_usage.truncated_at(None) == 12
