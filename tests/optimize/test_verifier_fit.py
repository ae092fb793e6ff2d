"""The learned verifier's fit (issue 47): it finds a planted signal, never beats the deterministic verifier by luck
(its margin), refuses held-out ids, round-trips through a tune artifact, and reads a live and a recorded question
alike."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

pytest.importorskip("sklearn")

from clearmed.cli.main import main
from clearmed.core.errors import UsageError
from clearmed.optimize.artifacts import apply_artifact, load_artifact
from clearmed.optimize.verifier_fit import LearnedItem, cross_validate, fit_learned
from clearmed.programs.adjudication.learned import BASE_FEATURES, answer_features


def _row(holder: str, docs_lack: float, noise: float) -> dict[str, float]:
    row = dict.fromkeys(BASE_FEATURES, 0.0)
    row |= {f"holds_{holder}": 1.0, "holders": 1.0, "holder_docs_lack": docs_lack, "holder_log_words": noise}
    return row


def _items(n: int, *, signal: bool, seed: int = 0) -> list[LearnedItem]:
    """Disputes between a parametric A and a local B; the deterministic verifier keeps B. With `signal`, the local
    reply says its documents lack the answer on the questions it gets wrong (80% of those), else it is noise."""
    rng = random.Random(seed)
    items = []
    for i in range(n):
        gold = "A" if rng.random() < 0.5 else "B"
        lacks = float(gold == "A" and rng.random() < 0.8) if signal else float(rng.random() < 0.3)
        features = {"A": _row("parametric", 0.0, rng.random()), "B": _row("local", lacks, rng.random())}
        if not signal:
            gold = "B"  # the deterministic verifier is always right: nothing to gain
        items.append(
            LearnedItem(f"q{i}", "bench @ model", ("bench", "single:4", "model"), features, gold, deterministic="B")
        )
    return items


def test_the_fit_finds_a_planted_signal_and_cross_validates_above_the_deterministic_verifier() -> None:
    items = _items(200, signal=True)
    fit = fit_learned(items)
    assert fit.weights["holder_docs_lack"] < -0.5  # documents lacking: that answer is the wrong one
    assert fit.model.margin < 0.5
    [score] = fit.cross_validated
    assert score.questions == 200
    assert score.decided > 50
    assert score.learned_correct > score.deterministic_correct + 40


def test_with_nothing_to_learn_the_margin_leaves_every_question_to_the_deterministic_verifier() -> None:
    items = _items(200, signal=False)
    fit = fit_learned(items)
    assert fit.model.margin == 0.5  # never beaten on the training folds: always fall back
    [score] = cross_validate(items)
    assert score.learned_correct == score.deterministic_correct == 200


def test_a_fit_refuses_an_id_it_was_asked_to_skip() -> None:
    items = _items(60, signal=True)
    with pytest.raises(UsageError, match=r"1 question\(s\) it was asked to skip \(q7\)"):
        fit_learned(items, skip_ids={"q7", "elsewhere"})
    fit_learned(items, skip_ids={"elsewhere"}, report=False)  # ids it never sees are no reason to refuse


def test_too_few_disputed_questions_are_refused_in_one_line() -> None:
    with pytest.raises(UsageError, match="at least 20 disputed questions"):
        fit_learned(_items(10, signal=True))


@pytest.fixture(scope="module")
def disputed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from clearmed.testing.synthetic_run import write_synthetic_run

    run_dir = tmp_path_factory.mktemp("learned") / "run"
    write_synthetic_run(run_dir, 160, seed=3)
    return run_dir


def test_tune_writes_the_learned_fit_into_the_artifact_that_program_artifact_applies(
    disputed_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from clearmed.programs.adjudication.learned import LearnedModel
    from clearmed.testing.synthetic_run import SYNTHETIC_CONFIG, synthetic_program

    out = tmp_path / "pilot"
    argv = ["tune", "--run", str(disputed_run), "--out", str(out), "--params", "learned_fit", "--trials", "1"]
    assert main([*argv, "--train-fraction", "0.5", "--learned-out-of-domain", "refuse"]) == 0
    printed = capsys.readouterr().out
    assert "learned verifier fitted on" in printed
    assert "weights per standard deviation" in printed
    artifact = load_artifact(out)
    assert artifact.learned is not None
    assert artifact.learned.domain.benchmarks == ["-"]  # synthetic ids carry no benchmark prefix
    assert artifact.learned.out_of_domain == "refuse"
    # learned.json round-trips: loaded, the model is the one written, and it lands on the program
    written = LearnedModel.model_validate_json((out / "learned.json").read_text(encoding="utf-8"))
    assert written == artifact.learned
    program, _ = synthetic_program()
    assert program.learned_model is None
    apply_artifact(program, artifact, SYNTHETIC_CONFIG)
    assert program.learned_model == artifact.learned


def test_a_live_questions_features_equal_the_recorded_questions(disputed_run: Path) -> None:
    """The run folder's decisions are live ones; read back as recorded pathways (`eval --pathway NAME=RUN`), the
    program builds the bundle the same features come from."""
    from clearmed.evaluation import read_records
    from clearmed.evaluation.recorded import read_recorded_pathway
    from clearmed.signatures.records import PATHWAYS
    from clearmed.testing.synthetic_run import synthetic_program

    records = list(read_records(disputed_run))[:40]
    questions = [record.decision.bundle.question for record in records]
    program, _ = synthetic_program(seed=3)
    for pathway in PATHWAYS:
        recorded = read_recorded_pathway(disputed_run, pathway, questions)
        setattr(program, pathway, recorded.module())
    compared = 0
    for record, question in zip(records, questions, strict=True):
        live = answer_features(record.decision.bundle.initial())
        replayed = answer_features(program(question=question).decision.bundle.initial())
        assert replayed == live, question.id
        compared += len(live) >= 2
    assert compared >= 5  # disputed questions among them, with passages to support options
