"""The packaged configs' per-stage token budgets hold what each stage's signature asks the model to write (issue 58,
item 13).

On the embedded default the challenge audit was cut at its 140-token budget in 6 of 9 calls: its signature had grown
to a rationale and six conditions (the CLEAR code's fields), and the budget had not. Here every stage's reply is
estimated from its signature's output fields as DSPy's chat adapter writes them (a ``[[ ## name ## ]]`` header per
field and the ``[[ ## completed ## ]]`` marker, counted by the prompt estimate) plus room for each field's value,
and the budget must hold it.
"""

from __future__ import annotations

import typing
from pathlib import Path

import dspy
import pytest

from clearmed.config import load_config
from clearmed.programs.lm.prompting import estimate_tokens
from clearmed.signatures import clear, option_judge, qpis, web_query

ROOT = Path(__file__).resolve().parents[2]

# The signature each budgeted stage calls.
SIGNATURES: dict[str, type[dspy.Signature]] = {
    "parametric": clear.AnswerFromKnowledge,
    "local_answer": clear.AnswerFromEvidence,
    "dynamic_answer": clear.AnswerFromEvidence,
    "source_quality": clear.AssessSourceQuality,
    "verifier": clear.VerifyAggregate,
    "followup_query": clear.GenerateFollowUpQuery,
    "guard": clear.AssessOverride,
    "audit": clear.AssessChallenge,
    "format_gate": clear.MapToOptions,
    "agreement": clear.AssessAgreement,
    "response": clear.ComposeResponse,
    "local_judge": option_judge.JudgeOptions,
    "dynamic_judge": option_judge.JudgeOptions,
    "qpis_plan": qpis.PlanSubqueries,
    "qpis_check": qpis.CheckEvidence,
    "web_query": web_query.WriteWebQuery,
}

# A sentence of a medical rationale: about 30 words, 40 tokens. A small model asked for "at most two" writes more:
# the audits cut at 140 tokens had written more than the 45 tokens two short sentences take. A field asked for at
# most k sentences gets room for k + 1.
SENTENCE = 40
# Room for the values that are not sentences, in tokens (a value written in full, with a little slack).
VALUES = {
    "answer": 30,  # option letters, or a short free-text answer
    "cited_ids": 12,  # ["L1", "L3"]
    "quality_labels": 8 * 5,  # {"W1": "high", ...}: a label per result, five results
    "query": 32,  # "at most 20 words"
    "letters": 6,  # "A, C"
    "response": 4 * SENTENCE,  # "a concise answer"
    "verdicts": 40 * 5,  # a verdict per option (letter, cited ids, a few words, the label), five options
    "decision": 4,
    "subqueries": 3 * 12,
    "missing": SENTENCE,
    "next_query": 32,
    "support_scope": 6,
}
_SENTENCES = {"one sentence": 1, "two sentences": 2, "one or two sentences": 2}


def value_room(name: str, field: typing.Any) -> int:
    annotation = field.annotation
    if annotation is bool:
        return 2
    if typing.get_origin(annotation) is typing.Literal:
        return max(estimate_tokens(str(value)) for value in typing.get_args(annotation)) + 1
    desc = str((field.json_schema_extra or {}).get("desc", ""))
    for words, sentences in sorted(_SENTENCES.items(), key=lambda item: -len(item[0])):
        if desc.startswith(words):
            return (sentences + 1) * SENTENCE
    return VALUES[name]


def reply_tokens(signature: type[dspy.Signature]) -> int:
    headers = "".join(f"[[ ## {name} ## ]]\n\n\n" for name in signature.output_fields) + "[[ ## completed ## ]]"
    return estimate_tokens(headers) + sum(value_room(name, f) for name, f in signature.output_fields.items())


BUDGETED = [
    (path.stem, stage, budget)
    for path in sorted((ROOT / "configs").glob("*.toml"))
    for stage, budget in load_config(str(path)).program.max_tokens.items()
]


def test_the_embedded_configs_budget_every_stage_that_writes() -> None:
    assert {name for name, _, _ in BUDGETED} == {"embedded", "embedded-shared"}
    assert {stage for _, stage, _ in BUDGETED} == set(SIGNATURES)


@pytest.mark.parametrize(("config", "stage", "budget"), BUDGETED, ids=[f"{c}-{s}" for c, s, _ in BUDGETED])
def test_a_stage_budget_holds_its_signatures_reply(config: str, stage: str, budget: int) -> None:
    # Before: guard and audit 140 (a reply of ~230 by this estimate), verifier 160, format_gate 16.
    assert budget >= reply_tokens(SIGNATURES[stage]), f"{config}: {stage}"


def test_the_estimate_counts_each_condition_the_audit_writes() -> None:
    # The audit's seven fields: a rationale of at most two sentences (room for three) and six conditions, each a
    # header of about 10 tokens and a boolean; a budget that fitted five conditions must not pass for six.
    assert reply_tokens(clear.AssessChallenge) >= 3 * SENTENCE + 6 * 2 + 7 * 8
