"""Issue 46: adjudication as the CLEAR authors' code does it (methods/clear/verifier.py, targeted_search.py).

The verifier's decision policy and structured verdict, the code's letter (`answer_source = "verifier"`), its LM-free
heuristic mode, and a question with one usable answer decided without a verifier call.
"""

from __future__ import annotations

import pytest
from dspy.adapters.chat_adapter import ChatAdapter

from clearmed.programs.adjudication import Mechanisms, adjudicate
from clearmed.programs.adjudication.rules import heuristic_verify
from clearmed.programs.assessors.verifier import candidates_view, cut_chars, local_view
from clearmed.programs.lm.context import Ledger, RunContext, activate
from clearmed.programs.lm.prompting import format_candidates
from clearmed.signatures.clear import VerifyAggregate
from clearmed.signatures.records import (
    Agreement,
    Answer,
    Candidate,
    Decision,
    EvidenceBundle,
    Passage,
    Provenance,
    SourceQuality,
    StepError,
    Thresholds,
    VerifierOutput,
)
from clearmed.signatures.records.settings import CLEAR_VARIANTS, ProgramSettings, clear_variant_settings
from clearmed.testing import (
    AUDIT_ALL_TRUE,
    QUESTION,
    build_toy_program,
    label_all,
    pathway_replies,
    verifier_reply,
)

# ------------------------------------------------------------------------------------------ the prompt's policy

# One phrase per rule of the code's DECISION POLICY (build_verifier_messages, rules 1-8), as the prompt states it.
POLICY_PHRASES = (
    "A reliable source is not support",  # 1. source quality is not answer support
    "unless web sources explicitly refute that option and support the dynamic one for this exact case",  # 2.
    "Web evidence counts only if it tells the options apart",  # 3. option-level evidence
    "related but different task",  # 4. question alignment
    "trust the claims",  # 5. summary against source claims
    "If all three differ, keep parametric unless the dynamic answer's option-level support is much stronger",  # 6.
    "keep local if it answered, else parametric",  # 7. weak evidence
    "give the best option and route needs_more_search",  # 8. nothing supported
)
VERDICT_FIELDS = (
    "web_supported",
    "local_supported",
    "conflict_detected",
    "option_level_support",
    "consensus_refuted",
    "question_aligned",
    "support_scope",
)


def rendered_verifier_prompt() -> str:
    inputs = {"question": "q", "options": "A. x", "candidates": "c", "local_evidence": "l", "dynamic_evidence": "d"}
    return "\n".join(message["content"] for message in ChatAdapter().format(VerifyAggregate, [], inputs))


@pytest.mark.parametrize("phrase", POLICY_PHRASES)
def test_the_rendered_verifier_prompt_states_each_rule_of_the_codes_policy(phrase: str) -> None:
    assert phrase in rendered_verifier_prompt()


def test_the_verifier_prompt_asks_for_the_structured_verdict() -> None:
    prompt = rendered_verifier_prompt()
    for name in VERDICT_FIELDS:
        assert f"[[ ## {name} ## ]]" in prompt, name
    for scope in ("exact_option", "background_only", "related_task", "unclear"):  # the code's VALID_SUPPORT_SCOPE
        assert scope in prompt


# ------------------------------------------------------------------------------------------ the structured verdict

VERDICT = {
    "web_supported": "false",
    "local_supported": "yes",
    "conflict_detected": "true",
    "option_level_support": "true",
    "consensus_refuted": "false",
    "question_aligned": "true",
    "support_scope": "Exact option",
}


def decide(program: object) -> Decision:
    decision: Decision = program(question=QUESTION).decision  # type: ignore[operator]
    assert Decision.model_validate_json(decision.model_dump_json()) == decision
    return decision


def test_the_structured_verdict_reaches_the_decision_and_its_trail() -> None:
    program, _, _ = build_toy_program(
        {**pathway_replies("B", "C", "A"), "verifier": {**verifier_reply("keep_local", "C"), **VERDICT}}
    )
    decision = decide(program)
    verdict = decision.verifier_outputs[0].verdict
    assert verdict is not None
    assert verdict.model_dump() == {
        "web_supported": False,
        "local_supported": True,
        "conflict_detected": True,
        "option_level_support": True,
        "consensus_refuted": False,
        "question_aligned": True,
        "support_scope": "exact_option",
    }
    step = next(s for s in decision.steps if s.mechanism == "verifier")
    assert step.verifier is not None
    assert step.verifier.verdict == verdict


def test_a_verdict_the_model_leaves_out_is_unjudged_not_a_failed_call() -> None:
    program, engine, _ = build_toy_program({**pathway_replies("B", "C", "A"), "verifier": verifier_reply("keep_local")})
    decision = decide(program)
    output = decision.verifier_outputs[0]
    assert (output.route, output.error, decision.deciding_rule) == ("keep_local", None, "verifier")
    assert output.verdict is not None
    assert output.verdict.judged() == {}
    assert engine.stages().count("verifier") == 1


def test_an_unknown_support_scope_is_unjudged() -> None:
    program, _, _ = build_toy_program(
        {**pathway_replies("B", "C", "A"), "verifier": {**verifier_reply("keep_local"), "support_scope": "sort of"}}
    )
    verdict = decide(program).verifier_outputs[0].verdict
    assert verdict is not None
    assert verdict.support_scope is None


# The code's heuristic_verdict: online_supported / local_supported / conflict_detected by letters.
@pytest.mark.parametrize(
    ("answers", "route", "web", "local", "conflict"),
    [
        (("A", "A", "B"), "consensus", False, True, True),  # direct = bm25 != online
        (("A", "A", "A"), "consensus", True, True, False),
        (("C", "B", "B"), "consensus", True, True, True),  # bm25 = online, direct differs
        (("A", "B", "C"), "keep_local", False, True, True),  # keep_bm25, online differs
        (("A", None, "C"), "keep_parametric", False, False, True),  # keep_direct, online differs
        ((None, None, "C"), "accept_dynamic", True, False, False),
    ],
)
def test_the_deterministic_verifier_judges_its_verdict_by_letters_as_the_code_does(
    answers: tuple[str | None, ...], route: str, web: bool, local: bool, conflict: bool
) -> None:
    bundle = bundle_of(*answers)
    output, _ = heuristic_verify(bundle, agreement_of(bundle), SourceQuality())
    assert output.route == route
    assert output.verdict is not None
    assert (output.verdict.web_supported, output.verdict.local_supported, output.verdict.conflict_detected) == (
        web,
        local,
        conflict,
    )
    assert output.verdict.support_scope is None  # needs a reading of the evidence


# ------------------------------------------------------------------------------------------ kernel helpers


def bundle_of(*answers: str | None, absent: str = "") -> EvidenceBundle:
    parametric, local, dynamic = answers

    def candidate(name: str, letter: str | None) -> Candidate:
        if name == absent:
            return Candidate(pathway=name, error=StepError(stage=name, kind="not_run", message="absent"))  # type: ignore[arg-type]
        if letter is None:
            return Candidate(pathway=name, error=StepError(stage=name, kind="parse_error", message="no option"))  # type: ignore[arg-type]
        return Candidate(pathway=name, answer=Answer.of_letters(letter))  # type: ignore[arg-type]

    candidates = [candidate(n, a) for n, a in (("parametric", parametric), ("local", local), ("dynamic", dynamic))]
    return EvidenceBundle(question=QUESTION, candidates=candidates)


def agreement_of(bundle: EvidenceBundle) -> Agreement:
    from clearmed.programs.assessors.agreement import letter_agreement

    return letter_agreement(bundle)


class ScriptedVerdict:
    """Actions whose verifier returns one output and counts its calls; no follow-up, guard or audit expected."""

    def __init__(self, output: VerifierOutput | None = None) -> None:
        self.output = output
        self.calls = 0

    def verify(self, bundle: EvidenceBundle, agreement: Agreement) -> tuple[VerifierOutput, str]:
        self.calls += 1
        assert self.output is not None, "the verifier was not to be asked"
        return self.output, "verifier"

    def follow_up(self, bundle: EvidenceBundle, trigger: str) -> object:
        raise AssertionError("no follow-up expected")

    def assess_guard(self, *args: object) -> object:
        raise AssertionError("no guard expected")

    def assess_audit(self, *args: object) -> object:
        raise AssertionError("no audit expected")


# ------------------------------------------------------------------------------------------ one usable answer


@pytest.mark.parametrize(
    ("answers", "absent", "letter", "route"),
    [
        ((None, "B", None), "dynamic", "B", "keep_local"),  # CoT refused, MedRAG answered, no web pathway
        (("C", None, None), "dynamic", "C", "keep_parametric"),
        ((None, None, "D"), "", "D", "accept_dynamic"),
    ],
)
def test_one_usable_answer_is_decided_without_a_verifier_call(
    answers: tuple[str | None, ...], absent: str, letter: str, route: str
) -> None:
    bundle = bundle_of(*answers, absent=absent)
    actions = ScriptedVerdict()
    result = adjudicate(bundle, agreement_of(bundle), Thresholds(), actions)  # type: ignore[arg-type]
    assert actions.calls == 0
    assert (result.rule, result.route, result.answer) == ("single_usable_answer", route, Answer.of_letters(letter))
    assert [step.rule for step in result.steps] == ["single_usable_answer"]
    assert result.verifier_outputs == []


def test_two_usable_answers_still_ask_the_verifier() -> None:
    bundle = bundle_of(None, "B", "C")
    actions = ScriptedVerdict(VerifierOutput(answer=Answer.of_letters("B"), route="keep_local"))
    result = adjudicate(bundle, agreement_of(bundle), Thresholds(), actions, Mechanisms(guard=False))  # type: ignore[arg-type]
    assert actions.calls == 1
    assert result.rule == "verifier"


# ------------------------------------------------------------------------------------------ answer_source


@pytest.mark.parametrize(
    ("source", "answer", "rule"),
    [("route", "B", "verifier"), ("verifier", "C", "verifier_letter_kept")],
)
def test_answer_source_keeps_the_route_s_answer_or_the_verifier_s_letter(source: str, answer: str, rule: str) -> None:
    # P = L = B, D = A; the verifier routes consensus but writes C (the code keeps its final_pred, C).
    bundle = bundle_of("B", "B", "A")
    output = VerifierOutput(answer=Answer.of_letters("C"), route="consensus")
    mechanisms = Mechanisms(audit=False, answer_source=source)  # type: ignore[arg-type]
    result = adjudicate(bundle, agreement_of(bundle), Thresholds(), ScriptedVerdict(output), mechanisms)  # type: ignore[arg-type]
    assert (result.answer, result.rule) == (Answer.of_letters(answer), rule)


def test_a_route_no_candidate_backs_keeps_the_verifier_s_letter_under_the_code_s_setting() -> None:
    # keep_local with no local answer: the paper's setting falls to the deterministic verifier, the code keeps D.
    bundle = bundle_of("B", None, "A")
    output = VerifierOutput(answer=Answer.of_letters("D"), route="keep_local")
    route_result = adjudicate(bundle, agreement_of(bundle), Thresholds(), ScriptedVerdict(output))  # type: ignore[arg-type]
    assert "route_not_backed" in [step.rule for step in route_result.steps]
    assert (route_result.rule, route_result.answer) == ("heuristic_keep_parametric", Answer.of_letters("B"))
    letter = Mechanisms(answer_source="verifier")
    kept = adjudicate(bundle, agreement_of(bundle), Thresholds(), ScriptedVerdict(output), letter)  # type: ignore[arg-type]
    assert (kept.rule, kept.answer) == ("verifier_letter_kept", Answer.of_letters("D"))


def test_the_guard_does_not_follow_a_letter_that_is_not_the_dynamic_answer() -> None:
    # accept_dynamic with the letter C against P = L = B, D = A: the code guards only final_pred == online.
    bundle = bundle_of("B", "B", "A")
    output = VerifierOutput(answer=Answer.of_letters("C"), route="accept_dynamic")
    letter = Mechanisms(answer_source="verifier")
    result = adjudicate(bundle, agreement_of(bundle), Thresholds(), ScriptedVerdict(output), letter)  # type: ignore[arg-type]
    assert result.answer == Answer.of_letters("C")
    assert all(step.mechanism != "guard" for step in result.steps)


def test_the_lm_verifier_keeps_an_unbacked_route_with_a_valid_letter_under_the_code_s_setting() -> None:
    settings = ProgramSettings(json_fallback=False, parallel_pathways="off", answer_source="verifier")
    script = {**pathway_replies("B", "C", "A"), "verifier": verifier_reply("consensus", "D")}  # no two agree
    program, _, _ = build_toy_program(script, settings=settings)
    decision = decide(program)
    assert (decision.letters, decision.deciding_rule) == (("D",), "verifier_letter_kept")
    assert decision.verifier_outputs[0].error is None
    paper, _, _ = build_toy_program(script)
    assert decide(paper).deciding_rule.startswith("heuristic_")  # the route is not backed: deterministic verifier


# ------------------------------------------------------------------------------------------ clear-heuristic

PATHWAY_STAGES = {"parametric", "local_answer", "dynamic_answer", "source_quality", "format_gate", "web_query"}


def test_clear_heuristic_makes_no_lm_call_after_the_pathways() -> None:
    # P = L = B against D = A with high-quality web pages: the contested variant audits, the code's heuristic does not.
    script = {
        **pathway_replies("B", "B", "A"),
        "source_quality": label_all("high"),
        "followup_query": {"query": "hypothyroidism TSH"},
        "audit": AUDIT_ALL_TRUE,
    }
    base = ProgramSettings(json_fallback=False, parallel_pathways="off")
    heuristic = clear_variant_settings("clear-heuristic", base)
    assert heuristic is not None
    program, engine, _ = build_toy_program(script, settings=heuristic)
    decision = decide(program)
    assert set(engine.stages()) - PATHWAY_STAGES == set()
    assert engine.stages().count("parametric") == 1  # the pathways did run
    after = [c for c in engine.stages() if c not in PATHWAY_STAGES]
    assert len(after) == 0
    assert (decision.letters, decision.deciding_rule) == (("B",), "heuristic_parametric_local")
    contested = clear_variant_settings("clear-heuristic-contested", base)
    assert contested is not None
    program, engine, _ = build_toy_program(script, settings=contested)
    assert decide(program).deciding_rule == "audit_accepted"
    assert "audit" in engine.stages()


def test_the_variants_table_names_the_code_s_heuristic_mode_and_the_contested_one() -> None:
    assert CLEAR_VARIANTS["clear-heuristic"]["verifier_mode"] == "heuristic"
    for switch in ("enable_guard", "enable_audit", "enable_followup"):
        assert CLEAR_VARIANTS["clear-heuristic"][switch] is False
    assert CLEAR_VARIANTS["clear-heuristic-contested"] == {"verifier_mode": "heuristic"}


# ------------------------------------------------------------------------------------------ what the verifier sees


def test_a_recorded_candidate_shows_800_characters_of_its_raw_reply() -> None:
    reply = "x" * 790 + " " + "y" * 300
    recorded = Candidate(
        pathway="parametric", answer=Answer.of_letters("A"), rationale="short", raw_answer=reply, recorded_from="f"
    )
    live = Candidate(pathway="local", answer=Answer.of_letters("B"), rationale=" ".join(["w"] * 100))
    shown = candidates_view([recorded, live]).splitlines()
    assert shown[0].startswith("parametric: A - xxx")
    assert len(shown[0].split(" - ", 1)[1]) == 800  # the code's _truncate(raw_response, 800), "..." included
    assert shown[0].endswith("...")
    assert shown[1] == format_candidates([live])  # a live rationale as before (60 words)
    assert cut_chars("abc", 800) == "abc"


def test_recorded_local_documents_are_shown_six_at_1000_characters() -> None:
    docs = [
        Passage(id=f"L{i}", text="z" * 1500, pathway="local", provenance=Provenance(kind="corpus", corpus="pubmed"))
        for i in range(1, 9)
    ]
    bundle = bundle_of("A", "B", "C").model_copy(update={"local_passages": docs})
    local = bundle.candidate("local").model_copy(update={"recorded_from": "bm25.jsonl"})
    bundle = bundle.model_copy(update={"candidates": [bundle.candidates[0], local, bundle.candidates[2]]})
    settings = ProgramSettings(verifier_passages=2, passage_words=65)  # the embedded configs' budget
    with activate(RunContext(settings=settings, role_lms={}, ledger=Ledger())):
        text = local_view(bundle)
    assert [f"[L{i}]" in text for i in range(1, 9)] == [True] * 6 + [False] * 2
    assert "z" * 997 + "..." in text
    assert "z" * 998 not in text
