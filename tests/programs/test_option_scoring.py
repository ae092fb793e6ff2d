"""Scored MCQ pathways and the calibrated verifier, end to end on the scripted toy world (no model)."""

from __future__ import annotations

import dspy
import pytest

from clearmed.optimize.replay import replay_decision
from clearmed.programs.adjudication import Mechanisms
from clearmed.programs.pathways.scored_answer import ANSWER_MARKER, answer_first
from clearmed.signatures.clear import AnswerFromEvidence
from clearmed.signatures.records import Question, Thresholds
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import GUARD_ALL_TRUE, QUESTION, build_toy_program, label_all, pathway_replies, verifier_reply

SCORED = ProgramSettings(json_fallback=False, parallel_pathways="off", mcq_decoding="score")
CALIBRATED = SCORED.model_copy(update={"verifier_mode": "calibrated"})
# Parametric leans A, local is sure of A, the web is sure of C.
SCORES = {
    "parametric": {"A": 0.5, "B": 0.2, "C": 0.2, "D": 0.1},
    "local_answer": {"A": 0.7, "B": 0.1, "C": 0.1, "D": 0.1},
    "dynamic_answer": {"A": 0.02, "B": 0.02, "C": 0.94, "D": 0.02},
}
SCRIPT = {
    "source_quality": label_all("high"),
    "verifier": verifier_reply("keep_parametric"),
    "followup_query": {"query": "thyroid"},
    "guard": GUARD_ALL_TRUE,
    "audit": {"rationale": "r", "clearly_supports_challenger": False, "aligned_with_question": True,
              "supports_exact_option": True},
}  # fmt: skip


def run(settings: ProgramSettings, scores: dict[str, dict[str, float]] | None = SCORES, **kwargs: object):
    program, engine, _ = build_toy_program(SCRIPT, settings=settings, scores=scores, **kwargs)  # type: ignore[arg-type]
    return program(question=QUESTION).decision, engine


def test_scored_pathways_record_their_distributions_and_generate_nothing() -> None:
    decision, engine = run(SCORED)
    by_pathway = {c.pathway: c for c in decision.bundle.candidates}
    assert by_pathway["parametric"].answer.letters == ("A",)
    assert by_pathway["dynamic"].answer.letters == ("C",)
    assert by_pathway["local"].option_scores.probs["A"] == pytest.approx(0.7)
    assert by_pathway["local"].option_scores.letter_mass == pytest.approx(1.0)
    assert sorted(engine.scored) == ["dynamic_answer", "local_answer", "parametric"]
    assert not {"parametric", "local_answer", "dynamic_answer"} & set(engine.stages())
    rows = {row.stage: row for row in decision.usage}
    assert rows["parametric"].calls == 1
    assert rows["parametric"].completion_tokens == 0


def test_a_backbone_that_cannot_score_generates_as_before() -> None:
    program, engine, _ = build_toy_program({**SCRIPT, **pathway_replies("A", "A", "C")}, settings=SCORED)
    decision = program(question=QUESTION).decision
    assert all(c.option_scores is None for c in decision.bundle.candidates)
    assert {"parametric", "local_answer", "dynamic_answer"} <= set(engine.stages())
    assert decision.status == "answered"


def test_calibrated_verifier_routes_from_the_pooled_distributions_without_an_lm_call() -> None:
    decision, engine = run(CALIBRATED)
    assert "verifier" not in engine.stages()
    verifier = next(step for step in decision.steps if step.mechanism == "verifier")
    assert verifier.rule == "calibrated"
    assert verifier.verifier.mode == "calibrated"
    # log-linear pooling: the web's 0.94 on C outweighs A's 0.5 x 0.7 -> accept_dynamic, which faces the guard
    assert verifier.route == "accept_dynamic"
    assert set(verifier.verifier.pooled) == {"A", "B", "C", "D"}
    assert any(step.mechanism == "guard" for step in decision.steps)


def test_replay_recomputes_the_calibrated_route_under_new_weights() -> None:
    decision, engine = run(CALIBRATED)
    calls_before = len(engine.calls)
    quiet_web = Thresholds(calibrated_dynamic_weight=0.1)
    # (the audit that a consensus would face needs a follow-up the original run never made: left out here)
    result, actions = replay_decision(decision, quiet_web, Mechanisms(audit=False))
    assert result.route == "consensus"  # parametric and local agree on A once the web is down-weighted
    assert result.answer.letters == ("A",)
    assert len(engine.calls) == calls_before  # no LM call
    assert actions.served["verify"] == 1
    same, _ = replay_decision(decision, Thresholds())
    assert same.answer == decision.answer


def test_source_quality_from_priors_makes_no_lm_call() -> None:
    from clearmed.retrieval.priors import QualityPriors

    program, engine, _ = build_toy_program(
        SCRIPT, settings=CALIBRATED.model_copy(update={"source_quality": "priors"}), scores=SCORES
    )
    program.quality.priors = QualityPriors()
    decision = program(question=QUESTION).decision
    assert "source_quality" not in engine.stages()
    assert decision.bundle.source_quality.origin == "prior"
    domain = {p.id: p.provenance.domain for p in decision.bundle.dynamic_passages}
    labels = {domain[a.passage_id]: a.label for a in decision.bundle.source_quality.assessments}
    assert labels["www.niddk.nih.gov"] == "high"
    assert labels["thyroid-blog.example.com"] == "low"


def test_multi_answer_questions_get_a_probability_per_option() -> None:
    multi = Question(
        id="multi-1", text=QUESTION.text, options=QUESTION.options, answer_mode="multi", gold_letters=["A", "C"]
    )

    program, engine, _ = build_toy_program(SCRIPT, settings=SCORED, question=multi, scores=SCORES)
    engine.scores = {}
    yes = {"A": 0.9, "B": 0.2, "C": 0.6, "D": 0.1}

    def score(messages, prefix, candidates):  # per option: P(yes) from the asked option's letter
        import math

        from clearmed.backbones.logprobs import NextTokenScores

        asked = messages[-1]["content"].rsplit("Is option ", 1)[1][0]
        p = yes[asked]
        return NextTokenScores(logprobs={"yes": math.log(p), "no": math.log(1 - p)})

    engine.score_next_token = score  # type: ignore[method-assign]
    decision = program(question=multi).decision
    parametric = decision.bundle.candidates[0]
    assert parametric.option_scores.per_option
    assert parametric.option_scores.probs == pytest.approx(yes)
    assert parametric.answer.letters == ("A", "C")


def test_multi_answer_yes_no_is_asked_where_its_answer_is_the_next_token() -> None:
    # Issue 25: DSPy's chat format tells the model to start with `[[ ## answer ## ]]`, so with the assistant turn
    # unopened the next token is "[[", whatever the option: P(yes) said nothing. The turn is opened up to the
    # answer marker.
    import math

    from clearmed.backbones.logprobs import NextTokenScores

    multi = Question(
        id="multi-2", text=QUESTION.text, options=QUESTION.options, answer_mode="multi", gold_letters=["A", "C"]
    )
    program, engine, _ = build_toy_program(SCRIPT, settings=SCORED, question=multi, scores=SCORES)
    yes = {"A": 0.9, "B": 0.2, "C": 0.6, "D": 0.1}
    prefixes: list[str] = []

    def score(messages, prefix, candidates):  # a chat model under DSPy's format, as it reads the next token
        prefixes.append(prefix)
        user = messages[-1]["content"]
        assert user.endswith("Reply with yes or no only.")  # the question is the turn's last line
        dspy_format = "[[ ## answer ## ]]" in messages[0]["content"]
        if dspy_format and not prefix.endswith(ANSWER_MARKER):
            return NextTokenScores(logprobs={"yes": -9.0, "no": -9.0})  # it writes "[[" first
        p = yes[user.rsplit("Is option ", 1)[1][0]]
        return NextTokenScores(logprobs={"yes": math.log(p), "no": math.log(1 - p)})

    engine.score_next_token = score  # type: ignore[method-assign]
    parametric = program(question=multi).decision.bundle.candidates[0]
    assert parametric.option_scores.probs == pytest.approx(yes)
    assert parametric.answer.letters == ("A", "C")
    assert set(prefixes) == {ANSWER_MARKER}


def test_non_finite_scores_are_refused_and_the_pathway_generates() -> None:
    # Issue 25: a NaN log-probability became a distribution of NaNs, the letter "A" and a record that does not reload.
    nan_scores = {**SCORES, "parametric": {"A": float("nan"), "B": 0.2, "C": 0.2, "D": 0.1}}
    program, engine, _ = build_toy_program(
        {**SCRIPT, **pathway_replies("B", "A", "C")}, settings=SCORED, scores=nan_scores
    )
    decision = program(question=QUESTION).decision
    parametric = decision.bundle.candidate("parametric")
    assert parametric.option_scores is None
    assert parametric.answer.letters == ("B",)  # generated instead
    assert "parametric" in engine.stages()
    assert [row.failed for row in decision.usage if row.stage == "parametric"] == [True, False]
    assert decision.bundle.candidate("local").option_scores is not None  # the other pathways still scored


def test_scoring_uses_the_predictors_instructions_and_demos() -> None:
    predictor = dspy.Predict(AnswerFromEvidence)
    scored = answer_first(predictor.signature)
    assert list(scored.output_fields) == ["answer"]
    assert scored.instructions == predictor.signature.instructions
    assert list(scored.input_fields) == list(predictor.signature.input_fields)


def test_an_engine_error_while_scoring_is_recorded_and_the_pathway_generates_instead() -> None:
    from dspy import lm15

    program, engine, _ = build_toy_program({**SCRIPT, **pathway_replies("A", "A", "C")}, settings=SCORED, scores=SCORES)

    def overflow(messages, prefix, candidates):
        raise lm15.ContextLengthError("prompt of 9000 tokens does not fit the 8192-token context")

    engine.score_next_token = overflow  # type: ignore[method-assign]
    decision = program(question=QUESTION).decision
    assert decision.status == "answered"
    assert all(c.option_scores is None for c in decision.bundle.candidates)
    failed = [row.stage for row in decision.usage if row.failed]
    assert sorted(failed) == ["dynamic_answer", "local_answer", "parametric"]
    assert {"parametric", "local_answer", "dynamic_answer"} <= set(engine.stages())  # generated instead


@pytest.fixture
def memory_cache():
    """DSPy's in-memory cache on for one test (the suite runs with every cache off), emptied before and after."""
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=True)
    dspy.cache.reset_memory_cache()
    yield
    dspy.cache.reset_memory_cache()
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)


def test_scoring_passes_are_cached_like_generated_calls(memory_cache: None) -> None:
    program, engine, _ = build_toy_program(SCRIPT, settings=SCORED, scores=SCORES)
    program.role_lms["main"].cache = True
    first = program(question=QUESTION).decision
    assert sorted(engine.scored) == ["dynamic_answer", "local_answer", "parametric"]
    again = program(question=QUESTION).decision
    assert len(engine.scored) == 3  # the second question's three scoring passes never reached the engine
    rows = {row.stage: row for row in again.usage}
    assert (rows["parametric"].cached, rows["parametric"].calls, rows["parametric"].prompt_tokens) == (True, 0, 0)
    assert not rows["parametric"].failed
    assert [c.option_scores for c in again.bundle.candidates] == [c.option_scores for c in first.bundle.candidates]
    assert again.answer == first.answer
    # other options are another request: scored afresh
    other = QUESTION.model_copy(update={"id": "q-other", "options": {**QUESTION.options, "D": "Watchful waiting"}})
    program(question=other)
    assert len(engine.scored) == 6


def test_an_lm_without_its_cache_scores_every_time(memory_cache: None) -> None:
    program, engine, _ = build_toy_program(SCRIPT, settings=SCORED, scores=SCORES)  # scripted LMs: cache=False
    program(question=QUESTION)
    decision = program(question=QUESTION).decision
    assert len(engine.scored) == 6
    assert not any(row.cached for row in decision.usage)
