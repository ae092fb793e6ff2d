"""The learned verifier (`verifier_mode = "learned"`, issue 47): its features, its choice with no LM call, and every
way it leaves a question to the deterministic verifier, recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from clearmed.programs.adjudication.learned import (
    BASE_FEATURES,
    BINDING_FEATURES,
    LearnedDomain,
    LearnedModel,
    OutOfDomainError,
    answer_features,
    domain_of,
    feature_names,
    learned_decision,
)
from clearmed.programs.clear import CLEAR
from clearmed.signatures.records import (
    Answer,
    Candidate,
    EvidenceBundle,
    Passage,
    PathwayName,
    Provenance,
    Question,
    StepError,
)
from clearmed.testing import ScriptedEngine

QUESTION = Question(
    id="mirage:medqa:0007",
    text="A 45-year-old man has weight gain and cold intolerance. What is the most likely diagnosis?",
    options={"A": "Hypothyroidism", "B": "Hyperthyroidism", "C": "Addison disease", "D": "Cushing syndrome"},
    gold_letters=["A"],
)


def _candidate(pathway: PathwayName, letter: str | None, rationale: str, model: str = "OpenAI/gpt-4-32k") -> Candidate:
    if letter is None:
        return Candidate(pathway=pathway, error=StepError(stage=pathway, kind="not_run", message="absent"))
    return Candidate(pathway=pathway, answer=Answer.of_letters(letter), rationale=rationale, model=model)


def _bundle(parametric: str, local: str, *, passages: list[Passage] | None = None) -> EvidenceBundle:
    # Replies in MIRAGE's own words: CoT reasons from memory; MedRAG says its documents lack the answer, then guesses.
    cot = "Weight gain and cold intolerance point to hypothyroidism, which slows metabolism."
    rag = (
        "The provided documents do not contain information about this patient. It may possibly be "
        "Hyperthyroidism, although hypothyroidism could also fit."
    )
    return EvidenceBundle(
        question=QUESTION,
        candidates=[
            _candidate("parametric", parametric, cot),
            _candidate("local", local, rag),
            _candidate("dynamic", None, ""),
        ],
        local_passages=passages or [],
    )


def _model(coef: dict[str, float], *, margin: float = 0.05, domain: LearnedDomain | None = None) -> LearnedModel:
    names = feature_names([])
    return LearnedModel(
        features=names,
        mean=[0.0] * len(names),
        scale=[1.0] * len(names),
        coef=[coef.get(name, 0.0) for name in names],
        intercept=0.0,
        margin=margin,
        domain=domain
        or LearnedDomain(benchmarks=["mirage:medqa"], formats=["single:4"], backbones=["OpenAI/gpt-4-32k"]),
    )


def test_features_read_who_hedges_who_lacks_documents_and_who_names_the_other_option() -> None:
    features = answer_features(_bundle("A", "B"))
    assert set(features) == {"A", "B"}
    a, b = features["A"], features["B"]
    assert (a["holds_parametric"], a["holds_local"], b["holds_parametric"], b["holds_local"]) == (1, 0, 0, 1)
    # "The provided documents do not contain information": the local reply holding B says its documents lack it.
    assert (b["holder_docs_lack"], a["holder_docs_lack"], a["other_docs_lack"]) == (1.0, 0.0, 1.0)
    # The local reply hedges ("may", "possibly", "although", "could": 4 of its 20 words); the CoT reply does not.
    assert b["holder_hedges"] == pytest.approx(100 * 4 / 20)
    assert a["holder_hedges"] == 0.0
    # The local reply names hypothyroidism, the parametric pathway's option: the other's option is named by its holder.
    assert (b["holder_names_other_option"], a["other_names_option"]) == (1.0, 1.0)
    assert set(a) == set(BASE_FEATURES) | set(BINDING_FEATURES)


def test_option_support_comes_from_the_passages_the_bundle_holds() -> None:
    passage = Passage(
        id="L1", title="Thyroid", text="Hypothyroidism causes weight gain and cold intolerance.", pathway="local",
        provenance=Provenance(kind="corpus", corpus="toy"),
    )  # fmt: skip
    supported = answer_features(_bundle("A", "B", passages=[passage]))
    assert (supported["A"]["option_support"], supported["B"]["option_support"]) == (1.0, 0.0)
    bare = answer_features(_bundle("A", "B"))
    assert bare["A"]["option_support"] == bare["B"]["option_support"] == 0.0


def test_the_model_chooses_and_its_margin_sends_a_near_coin_flip_to_the_fallback() -> None:
    # holds_parametric +2: sigmoid(2) = 0.881 against sigmoid(0) = 0.5, normalised 0.638 / 0.362.
    decided = learned_decision(_bundle("A", "B"), _model({"holds_parametric": 2.0}, margin=0.1))
    assert decided.choice == "A"
    assert decided.fallback is None
    assert decided.probabilities["A"] == pytest.approx(0.638, abs=1e-3)
    assert decided.features["B"]["holder_docs_lack"] == 1.0  # the features are on the record
    close = learned_decision(_bundle("A", "B"), _model({"holds_parametric": 2.0}, margin=0.15))
    assert (close.choice, close.fallback) == (None, "within_margin")
    assert close.probabilities  # a fallback still shows what the model thought


def test_outside_its_fit_it_falls_back_or_refuses_by_its_setting() -> None:
    elsewhere = LearnedDomain(benchmarks=["mirage:mmlu"], formats=["single:4"], backbones=["OpenAI/gpt-4-32k"])
    verdict = learned_decision(_bundle("A", "B"), _model({"holds_parametric": 2.0}, domain=elsewhere))
    assert (verdict.choice, verdict.fallback) == (None, "out_of_domain")
    assert "benchmark mirage:medqa" in verdict.note
    assert domain_of(_bundle("A", "B")) == ("mirage:medqa", "single:4", "OpenAI/gpt-4-32k")
    refusing = _model({"holds_parametric": 2.0}, domain=elsewhere).model_copy(update={"out_of_domain": "refuse"})
    with pytest.raises(OutOfDomainError, match="mirage:medqa:0007"):
        learned_decision(_bundle("A", "B"), refusing)


def test_no_model_and_no_dispute_are_fallbacks_with_their_reason() -> None:
    assert learned_decision(_bundle("A", "B"), None).fallback == "no_model"
    agreed = learned_decision(_bundle("A", "A"), _model({"holds_parametric": 2.0}))
    assert agreed.fallback == "fewer_than_two_answers"


# ------------------------------------------------------------------------------------------ in the program


def _script(parametric: str, local: str, dynamic: str) -> dict:
    from clearmed.testing import label_all, pathway_replies

    return {**pathway_replies(parametric, local, dynamic), "source_quality": label_all("high")}


def _program(model: LearnedModel | None) -> tuple[CLEAR, ScriptedEngine]:
    from clearmed.signatures.records.settings import ProgramSettings
    from clearmed.testing import build_toy_program

    settings = ProgramSettings(json_fallback=False, parallel_pathways="off", verifier_mode="learned")
    program, engine, _ = build_toy_program(_script("A", "B", "C"), settings=settings)
    program.learned_model = model
    return program, engine


def _toy_domain() -> LearnedDomain:
    """Where the toy question lies (its id, format and the scripted backbone), read off one run of it."""
    from clearmed.testing import QUESTION as TOY

    program, _ = _program(None)
    benchmark, answer_format, backbone = domain_of(program(question=TOY).decision.bundle)
    return LearnedDomain(benchmarks=[benchmark], formats=[answer_format], backbones=[backbone])


def test_learned_mode_with_no_fitted_model_is_the_deterministic_verifier_and_says_why() -> None:
    from clearmed.testing import QUESTION as TOY

    program, _ = _program(None)
    decision = program(question=TOY).decision
    output = decision.verifier_outputs[0]
    assert output.learned is not None
    assert (output.mode, output.learned.fallback, decision.deciding_rule) == (
        "heuristic",
        "no_model",
        "heuristic_keep_local",
    )


def test_learned_mode_decides_a_disputed_question_with_no_verifier_call() -> None:
    from clearmed.testing import QUESTION as TOY

    program, engine = _program(_model({"holds_parametric": 2.0}, domain=_toy_domain()))
    decision = program(question=TOY).decision
    output = decision.verifier_outputs[0]
    assert output.learned is not None
    assert (output.mode, output.route, decision.deciding_rule) == ("learned", "keep_parametric", "learned")
    assert decision.answer == Answer.of_letters("A")
    assert set(output.learned.probabilities) == {"A", "B", "C"}
    assert "verifier" not in {call.stage for call in engine.calls}  # no LM verifier call


def test_a_learned_choice_too_close_to_call_is_the_deterministic_verifiers_and_says_so() -> None:
    from clearmed.testing import QUESTION as TOY

    program, _ = _program(_model({"holds_parametric": 2.0}, margin=0.5, domain=_toy_domain()))
    decision = program(question=TOY).decision
    output = decision.verifier_outputs[0]
    assert output.learned is not None
    assert (output.learned.fallback, decision.deciding_rule) == ("within_margin", "heuristic_keep_local")


def test_a_refusing_fit_refuses_a_question_outside_its_domain_in_the_program() -> None:
    from clearmed.testing import QUESTION as TOY

    elsewhere = LearnedDomain(benchmarks=["mirage:mmlu"], formats=["single:4"], backbones=["OpenAI/gpt-4-32k"])
    refusing = _model({"holds_parametric": 2.0}, domain=elsewhere).model_copy(update={"out_of_domain": "refuse"})
    program, _ = _program(refusing)
    # The run harness records the question as failed with this line (`crashed_decision`), and goes on.
    with pytest.raises(OutOfDomainError, match="toy-1: outside the learned verifier's fit"):
        program(question=TOY)
    program, _ = _program(_model({"holds_parametric": 2.0}, domain=elsewhere))
    output = program(question=TOY).decision.verifier_outputs[0]
    assert output.learned is not None
    assert output.learned.fallback == "out_of_domain"


def test_the_run_summary_says_how_often_the_learned_verifier_fell_back_and_why() -> None:
    from clearmed.evaluation.summary import RunSummary, _fallback_counts
    from clearmed.report.markdown import learned_fallback_line
    from clearmed.testing import QUESTION as TOY

    elsewhere = LearnedDomain(benchmarks=["mirage:mmlu"], formats=["single:4"], backbones=["OpenAI/gpt-4-32k"])
    decided = _program(_model({"holds_parametric": 2.0}, domain=_toy_domain()))[0](question=TOY).decision
    outside = _program(_model({"holds_parametric": 2.0}, domain=elsewhere))[0](question=TOY).decision
    unfitted = _program(None)[0](question=TOY).decision
    asked, fallbacks = _fallback_counts([decided, outside, outside, unfitted], "learned")
    assert (asked, fallbacks) == (4, {"out_of_domain": 2, "no_model": 1})
    # The calibrated count does not see learned fallbacks.
    assert _fallback_counts([outside], "calibrated") == (0, {})
    line = learned_fallback_line(
        RunSummary.model_construct(learned_questions=asked, learned_fallbacks=fallbacks)  # only the two fields read
    )
    assert line == (
        "learned verifier fell back to the deterministic (heuristic) verifier: 3 of 4 questions "
        "(no_model 1, out_of_domain 2)"
    )


# ------------------------------------------------------------------------------------------ issue 56
def test_features_do_not_read_the_gold() -> None:
    """Mutant killed: a feature that reads `gold_letters` (the fit would learn the answer key)."""
    bundle = _bundle("A", "B")
    features = answer_features(bundle)
    for gold in (["B"], ["C"], [], ["A", "B"]):
        question = bundle.question.model_copy(update={"gold_letters": gold})
        assert answer_features(bundle.model_copy(update={"question": question})) == features, gold


def test_a_fit_that_reads_scores_falls_back_where_the_holders_recorded_none_and_says_so() -> None:
    """A replayed record without `option_scores` (MIRAGE's, or an older clearmed run's): the scored features are
    absent, not 0, and the fit that learned them leaves the question to the deterministic verifier. Mutant killed:
    deciding on zeros where the fit read probabilities."""
    model = _model({"holds_parametric": 2.0, "scored_local": 1.0}).model_copy(update={"scored": ["local"]})
    verdict = learned_decision(_bundle("A", "B"), model)
    assert (verdict.choice, verdict.fallback) == (None, "scores_absent")
    assert verdict.note == "scored features absent: local answered with no option_scores, and the fit reads them"
    assert verdict.features
    assert all(not any(k.startswith("scored_") for k in row) for row in verdict.features.values())
    # A fit that never saw scores (MIRAGE's) decides the same bundle.
    assert learned_decision(_bundle("A", "B"), _model({"holds_parametric": 2.0})).choice == "A"


def test_a_scored_live_run_and_its_replay_give_the_same_learned_features_and_decisions(tmp_path: Path) -> None:
    """Item 4: the run folder read back as recorded pathways (`eval --pathway NAME=RUN`) keeps each candidate's
    option scores, so the learned verifier reads the same features and decides the same. Mutant killed: the replay
    dropping `Candidate.option_scores` (the scored features read 0 there)."""
    from clearmed.evaluation import EvalSpec, run_evaluation
    from clearmed.recorded import read_recorded_pathway
    from clearmed.signatures.records import PATHWAYS
    from clearmed.signatures.records.settings import ProgramSettings
    from clearmed.testing import GUARD_ALL_TRUE, build_toy_program
    from clearmed.testing import QUESTION as TOY
    from clearmed.testing.synthetic_run import SYNTHETIC_CONFIG

    settings = ProgramSettings(
        json_fallback=False, parallel_pathways="off", mcq_decoding="score", verifier_mode="learned"
    )
    scores = {
        "parametric": {"A": 0.6, "B": 0.3, "C": 0.1},
        "local_answer": {"A": 0.2, "B": 0.7, "C": 0.1},
        "dynamic_answer": {"A": 0.1, "B": 0.2, "C": 0.7},
    }

    def program() -> CLEAR:
        script = {**_script("A", "B", "C"), "guard": GUARD_ALL_TRUE}
        built, _, _ = build_toy_program(script, settings=settings, scores=scores)
        return built

    questions = [TOY.model_copy(update={"id": f"toy-{i}"}) for i in range(1, 4)]
    live_program = program()
    first = live_program(question=questions[0]).decision
    benchmark, answer_format, backbone = domain_of(first.bundle)
    domain = LearnedDomain(benchmarks=[benchmark], formats=[answer_format], backbones=[backbone])
    model = _model({"scored_dynamic": 3.0, "holds_local": 0.5}, margin=0.0, domain=domain)
    model = model.model_copy(update={"scored": list(PATHWAYS)})
    live_program.learned_model = model
    run_dir = tmp_path / "live"
    spec = EvalSpec(program="clear", benchmark="toy", source="toy", questions=questions, run_dir=run_dir)
    records = run_evaluation(spec, SYNTHETIC_CONFIG, live_program, show_progress=False)
    live = {record.question_id: record.decision for record in records}
    replay_program = program()
    replay_program.learned_model = model
    for pathway in PATHWAYS:
        setattr(replay_program, pathway, read_recorded_pathway(run_dir, pathway, questions).module())
    for question in questions:
        before, after = live[question.id], replay_program(question=question).decision
        assert after.bundle.candidate("dynamic").recorded_from  # it was read back, not run
        features = answer_features(before.bundle.initial())
        assert features["C"]["scored_dynamic"] == pytest.approx(0.7)  # the live run's scores are in the features
        assert answer_features(after.bundle.initial()) == features
        learned = before.verifier_outputs[0].learned
        assert learned is not None
        assert learned.choice == "C"  # the dynamic pathway's scored 0.7 decided it
        assert after.verifier_outputs[0].learned == learned
        # The guard that follows an accepted dynamic answer runs live in both (an LM call learned mode still makes).
        assert (after.answer, after.deciding_rule) == (before.answer, before.deciding_rule)
        assert after.answer == Answer.of_letters("C")


def test_learned_mode_saves_only_the_verifier_call_a_live_dynamic_answer_still_gets_follow_up_and_guard_calls() -> None:
    """Item 8, as the README says: under CLEAR with a live dynamic pathway, a learned choice of the web's answer is
    still checked by a follow-up search (its query written by the LM) and the guard's LM call."""
    from clearmed.testing import QUESTION as TOY

    program, engine = _program(_model({"holds_dynamic": 2.0}, domain=_toy_domain()))
    decision = program(question=TOY).decision
    output = decision.verifier_outputs[0]
    assert (output.mode, output.route) == ("learned", "accept_dynamic")
    stages = [call.stage for call in engine.calls]
    assert "verifier" not in stages
    assert {"followup_query", "guard"} <= set(stages)
