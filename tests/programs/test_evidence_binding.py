"""Evidence binding (issue 56 item 5): on a disputed MCQ each evidence pathway's prompt is scored once more with the
question removed, p(o | P), recorded on its candidate and in the trail, and the calibrated verifier's pool gains
beta_k * [log p_k(o | q, P) - log p_k(o | P)] (TrustMargin's evidence-binding margin, arXiv 2606.08397), replayed from
the record with no LM call."""

from __future__ import annotations

import math
from typing import Any

import dspy
import pytest

from clearmed.optimize.replay import replay_decision
from clearmed.programs.adjudication import Mechanisms
from clearmed.programs.adjudication.calibrated import calibrated_verify
from clearmed.signatures.records import Agreement, Candidate, EvidenceBundle, Thresholds
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import QUESTION, ScriptedEngine, build_toy_program, pathway_replies
from tests.programs.test_option_scoring import SCORES, SCRIPT

BINDING = ProgramSettings(
    json_fallback=False,
    parallel_pathways="off",
    mcq_decoding="score",
    verifier_mode="calibrated",
    evidence_binding=True,
)
# p(o | P): with the question removed, the local passages still point at A (they mention it whatever is asked), the web
# pages less firmly at C than they do with the question.
PASSAGE_ONLY = {
    "local_binding": {"A": 0.9, "B": 0.03, "C": 0.04, "D": 0.03},
    "dynamic_binding": {"A": 0.1, "B": 0.1, "C": 0.7, "D": 0.1},
}
# The packaged embedded weights: the parametric pathway alone (configs/embedded.toml).
PARAMETRIC_ONLY = Thresholds(
    calibrated_parametric_weight=1.0, calibrated_local_weight=0.0, calibrated_dynamic_weight=0.0
)
BOUND = PARAMETRIC_ONLY.model_copy(update={"calibrated_local_binding": 1.0, "calibrated_dynamic_binding": 1.0})


def run(settings: ProgramSettings = BINDING, scores: dict[str, dict[str, float]] | None = None, **kwargs: object):
    program, engine, _ = build_toy_program(
        SCRIPT, settings=settings, scores={**SCORES, **PASSAGE_ONLY} if scores is None else scores, **kwargs
    )  # type: ignore[arg-type]
    return program(question=QUESTION).decision, engine


def _field(messages: list[dict[str, str]], name: str) -> str:
    user = messages[-1]["content"]
    start = user.index(f"[[ ## {name} ## ]]") + len(f"[[ ## {name} ## ]]")
    end = user.find("[[ ## ", start)
    return user[start:end].strip()


def test_a_disputed_question_scores_each_evidence_prompt_again_without_its_question() -> None:
    decision, engine = run()
    assert engine.scored == ["parametric", "local_answer", "dynamic_answer", "local_binding", "dynamic_binding"]
    prompts = dict(zip(engine.scored, engine.scored_prompts, strict=True))
    for pathway in ("local", "dynamic"):
        (answered, prefix), (ablated, ablated_prefix) = prompts[f"{pathway}_answer"], prompts[f"{pathway}_binding"]
        assert _field(answered, "question") == QUESTION.text
        assert _field(ablated, "question") == ""
        # the same prompt but the question: system turn, options, format, evidence as the answer step read it
        # (the web results carry no quality label there; the bundle's are labelled after the answer)
        assert ablated[0] == answered[0]
        assert ablated_prefix == prefix
        for name in ("options", "answer_format", "evidence"):
            assert _field(ablated, name) == _field(answered, name)
    by_pathway = {c.pathway: c for c in decision.bundle.candidates}
    assert by_pathway["local"].passage_only_scores.probs == pytest.approx(PASSAGE_ONLY["local_binding"])
    assert by_pathway["dynamic"].passage_only_scores.probs == pytest.approx(PASSAGE_ONLY["dynamic_binding"])
    assert by_pathway["parametric"].passage_only_scores is None  # no passages: no binding pass
    step = next(s for s in decision.steps if s.trigger == "evidence binding")
    assert "local: p(o | P) A 0.90" in step.outcome
    assert "dynamic: p(o | P) C 0.70" in step.outcome
    rows = {row.stage: row for row in decision.usage}
    assert rows["local_binding"].calls == rows["dynamic_binding"].calls == 1


def test_an_agreed_question_pays_no_binding_pass() -> None:
    agreed = {**SCORES, "dynamic_answer": {"A": 0.6, "B": 0.2, "C": 0.1, "D": 0.1}, **PASSAGE_ONLY}
    decision, engine = run(scores=agreed)
    assert engine.scored == ["parametric", "local_answer", "dynamic_answer"]
    assert all(c.passage_only_scores is None and c.binding_fallback is None for c in decision.bundle.candidates)
    assert not any(s.trigger == "evidence binding" for s in decision.steps)


def test_binding_off_makes_no_binding_pass() -> None:
    decision, engine = run(BINDING.model_copy(update={"evidence_binding": False}))
    assert "local_binding" not in engine.scored
    assert "dynamic_binding" not in engine.scored
    assert all(c.passage_only_scores is None for c in decision.bundle.candidates)


class _NoLogprobs:
    """An engine that answers but exposes no log-probabilities (a hosted chat model): no `score_next_token`."""

    def __init__(self, inner: ScriptedEngine) -> None:
        self.inner = inner

    def complete(self, request: Any) -> Any:
        return self.inner.complete(request)

    def close(self) -> None:
        return None


def test_a_backbone_without_log_probabilities_falls_back_with_the_reason_in_the_trail() -> None:
    program, engine, _ = build_toy_program({**SCRIPT, **pathway_replies("A", "A", "C")}, settings=BINDING)
    program.role_lms["main"] = dspy.LM("local/hosted", engine=_NoLogprobs(engine), cache=False, num_retries=0)
    decision = program(question=QUESTION).decision
    assert decision.status == "answered"
    assert engine.scored == []
    by_pathway = {c.pathway: c for c in decision.bundle.candidates}
    assert by_pathway["local"].binding_fallback == by_pathway["dynamic"].binding_fallback == "no_logprobs"
    step = next(s for s in decision.steps if s.trigger == "evidence binding")
    assert step.outcome == "local: no binding term (no_logprobs); dynamic: no binding term (no_logprobs)"


def test_a_failed_binding_pass_is_recorded_and_the_question_goes_on() -> None:
    decision, _engine = run(scores={**SCORES, "local_binding": PASSAGE_ONLY["local_binding"]})  # none for dynamic
    by_pathway = {c.pathway: c for c in decision.bundle.candidates}
    assert by_pathway["local"].passage_only_scores is not None
    assert by_pathway["dynamic"].passage_only_scores is None
    assert by_pathway["dynamic"].binding_fallback == "scoring_failed"
    failed = [row for row in decision.usage if row.failed]
    assert [row.stage for row in failed] == ["dynamic_binding"]
    assert "no scores scripted" in (failed[0].error or "")
    assert decision.status == "answered"


def _expected_pool(betas: dict[str, float]) -> dict[str, float]:
    """TrustMargin's binding margin added to the parametric-only log pool, computed here from the scripted numbers."""
    p, local, web = SCORES["parametric"], SCORES["local_answer"], SCORES["dynamic_answer"]
    local_p, web_p = PASSAGE_ONLY["local_binding"], PASSAGE_ONLY["dynamic_binding"]
    s = {
        o: math.log(p[o])
        + betas["local"] * (math.log(local[o]) - math.log(local_p[o]))
        + betas["dynamic"] * (math.log(web[o]) - math.log(web_p[o]))
        for o in "ABCD"
    }
    z = sum(math.exp(v) for v in s.values())
    return {o: math.exp(v) / z for o, v in s.items()}


def test_the_binding_term_joins_the_pool_and_replays_with_no_lm_call() -> None:
    decision, engine = run(thresholds=PARAMETRIC_ONLY)
    verifier = next(step for step in decision.steps if step.mechanism == "verifier")
    assert (verifier.route, decision.answer.letters) == ("consensus", ("A",))  # beta 0: the parametric pool alone
    calls, scored = len(engine.calls), len(engine.scored)
    result, actions = replay_decision(decision, BOUND, Mechanisms(guard=False, audit=False))
    assert (len(engine.calls), len(engine.scored)) == (calls, scored)  # no LM call
    assert actions.served["verify"] == 1
    # A has local's support only because the local passages name A whatever the question; C is bound to it.
    assert result.route == "accept_dynamic"
    assert result.answer.letters == ("C",)
    output = result.verifier_outputs[0]
    assert output.pooled == pytest.approx(_expected_pool({"local": 1.0, "dynamic": 1.0}), abs=1e-6)
    assert "binding local, dynamic" in output.rationale


def _bundle(local_only: dict[str, float] | None, fallback: str | None = None) -> tuple[EvidenceBundle, Agreement]:
    def scored(pathway: str, probs: dict[str, float], passage_only: dict[str, float] | None = None) -> Candidate:
        best = max(probs, key=probs.__getitem__)
        return Candidate.model_validate(
            {
                "pathway": pathway,
                "answer": {"letters": [best]},
                "option_scores": {"probs": probs, "letters": [best]},
                "passage_only_scores": {"probs": passage_only, "letters": ["A"]} if passage_only else None,
                "binding_fallback": fallback,
            }
        )

    candidates = [
        scored("parametric", SCORES["parametric"]),
        scored("local", SCORES["local_answer"], local_only),
        scored("dynamic", SCORES["dynamic_answer"], PASSAGE_ONLY["dynamic_binding"]),
    ]
    agreement = Agreement(parametric_local=True, parametric_dynamic=False, local_dynamic=False)
    return EvidenceBundle(question=QUESTION, candidates=candidates), agreement


def test_each_beta_weighs_its_own_pathway_only() -> None:
    bundle, agreement = _bundle(PASSAGE_ONLY["local_binding"])
    only_local = PARAMETRIC_ONLY.model_copy(update={"calibrated_local_binding": 0.5})
    output, rule = calibrated_verify(bundle, agreement, only_local)
    assert rule == "calibrated"
    assert output.pooled == pytest.approx(_expected_pool({"local": 0.5, "dynamic": 0.0}), abs=1e-6)
    assert output.rationale.endswith("; binding local")


def test_a_missing_passage_only_score_adds_no_term_and_says_why() -> None:
    bundle, agreement = _bundle(None, fallback="scoring_failed")
    output, _ = calibrated_verify(bundle, agreement, BOUND)
    assert output.pooled == pytest.approx(_expected_pool({"local": 0.0, "dynamic": 1.0}), abs=1e-6)
    assert "binding dynamic" in output.rationale
    assert "no binding term for local (scoring_failed)" in output.rationale


def test_beta_alone_is_enough_to_pool() -> None:
    """With every pooling weight 0, the binding terms are still something to pool (not `nothing_to_pool`)."""
    bundle, agreement = _bundle(PASSAGE_ONLY["local_binding"])
    zero = Thresholds(
        calibrated_parametric_weight=0.0,
        calibrated_local_weight=0.0,
        calibrated_dynamic_weight=0.0,
        calibrated_dynamic_binding=1.0,
    )
    decided = calibrated_verify(bundle, agreement, zero)
    assert decided is not None
    assert decided[0].raw_answer == "C"
    assert calibrated_verify(bundle, agreement, zero.model_copy(update={"calibrated_dynamic_binding": 0.0})) is None


def test_the_learned_verifier_reads_the_binding_terms_as_a_feature_group_of_their_own() -> None:
    from clearmed.programs.adjudication.learned import BINDING_FEATURES, answer_features, feature_names, feature_row

    bundle, _ = _bundle(PASSAGE_ONLY["local_binding"])
    features = answer_features(bundle)  # competing answers: A (parametric, local) and C (dynamic)
    local_q, local_p = SCORES["local_answer"], PASSAGE_ONLY["local_binding"]
    web_q, web_p = SCORES["dynamic_answer"], PASSAGE_ONLY["dynamic_binding"]
    assert features["A"]["binding_local"] == pytest.approx(math.log(local_q["A"] / local_p["A"]))
    assert features["C"]["binding_dynamic"] == pytest.approx(math.log(web_q["C"] / web_p["C"]))
    assert features["C"]["binding_local"] == pytest.approx(math.log(local_q["C"] / local_p["C"]))
    names = feature_names(["cell"])
    assert names[-len(BINDING_FEATURES) :] == list(BINDING_FEATURES)
    row = feature_row(features["A"], "cell", ["cell"])
    assert row[-2:] == [features["A"]["binding_local"], features["A"]["binding_dynamic"]]
    unbound, _ = _bundle(None)
    bare = answer_features(unbound)
    assert bare["A"]["binding_local"] == 0.0  # not recorded: 0, as the pool adds no term
    assert bare["C"]["binding_dynamic"] == features["C"]["binding_dynamic"]


def test_the_binding_pass_stays_out_of_dspy_s_trace() -> None:
    """An optimizer bootstraps demos from the trace: a question-less prompt is not a demo of the answer step."""
    program, engine, _ = build_toy_program(SCRIPT, settings=BINDING, scores={**SCORES, **PASSAGE_ONLY})
    with dspy.context(trace=[]):
        program(question=QUESTION)
        traced = [inputs for _, inputs, _ in dspy.settings.trace if "options" in inputs]
    assert "local_binding" in engine.scored
    assert len(traced) == 3  # the three pathways' answers
    assert all(inputs["question"] for inputs in traced)


def test_a_recorded_pathway_s_passage_only_scores_are_kept_not_scored_again() -> None:
    program, engine, _ = build_toy_program(SCRIPT, settings=BINDING, scores={**SCORES, **PASSAGE_ONLY})
    bundle, _ = _bundle({"A": 0.25, "B": 0.25, "C": 0.25, "D": 0.25})  # both evidence pathways hold theirs
    bound, step = program.bind_evidence(bundle)
    assert engine.scored == []
    assert bound.candidates == bundle.candidates
    assert step is not None
    assert step.outcome == "local: p(o | P) as recorded; dynamic: p(o | P) as recorded"
