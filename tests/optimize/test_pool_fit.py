"""The pooling weights fitted by likelihood: a pathway without signal gets weight 0, and tune carries the fit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from clearmed.optimize.pool_fit import fit_pool_weights, pool_features, weights_by_likelihood
from clearmed.optimize.tuning import fitted_base, parse_params
from clearmed.signatures.records import Answer, Decision, OptionScores
from clearmed.testing import QUESTION, SCORED_CALIBRATED, build_toy_program, label_all

LETTERS = ["A", "B", "C", "D"]
A_HEAVY = np.array([1.5, 0.5, 0.0, -0.5])  # a letter prior: A whatever the question


def _toy_decision() -> Decision:
    uniform = dict.fromkeys(LETTERS, 0.25)
    scores = {"parametric": uniform, "local_answer": uniform, "dynamic_answer": uniform}
    program, _, _ = build_toy_program({"source_quality": label_all("high")}, settings=SCORED_CALIBRATED, scores=scores)
    return program(question=QUESTION).decision


BASE = _toy_decision()


def decision(question_id: str, gold: str, probs: dict[str, dict[str, float]]) -> Decision:
    """The toy decision with its pathways' distributions and its question's gold replaced."""
    candidates = []
    for candidate in BASE.bundle.candidates:
        dist = probs[candidate.pathway]
        top = max(dist, key=dist.__getitem__)
        scores = OptionScores(probs=dist, letters=(top,))
        candidates.append(
            candidate.model_copy(
                update={"option_scores": scores, "answer": Answer(letters=(top,)), "uncorrected": None}
            )
        )
    # A text of its own: the same text and options under two ids are one question to a split (`question_key`).
    text = f"{BASE.bundle.question.text} ({question_id})"
    question = BASE.bundle.question.model_copy(update={"id": question_id, "text": text, "gold_letters": [gold]})
    return BASE.model_copy(
        update={
            "question_id": question_id,
            "bundle": BASE.bundle.model_copy(update={"question": question, "candidates": candidates}),
        }
    )


def _softmax(logits: np.ndarray) -> dict[str, float]:
    e = np.exp(logits - logits.max())
    return dict(zip(LETTERS, (e / e.sum()).tolist(), strict=True))


def synthetic(n: int, *, local_signal: float, seed: int = 0) -> list[Decision]:
    """Parametric: signal on the gold. Local: `local_signal` on the gold, independent noise, an A-heavy prior.
    Dynamic: the A-heavy prior and noise only."""
    rng = np.random.RandomState(seed)
    out = []
    for i in range(n):
        gold = rng.randint(4)
        boost = np.eye(4)[gold]
        probs = {
            "parametric": _softmax(rng.normal(size=4) + boost),
            "local": _softmax(rng.normal(size=4) + A_HEAVY + local_signal * boost),
            "dynamic": _softmax(rng.normal(size=4) + A_HEAVY),
        }
        out.append(decision(f"q{i}", LETTERS[gold], probs))
    return out


def test_a_pathway_with_only_a_letter_prior_gets_no_weight_and_an_informative_one_does() -> None:
    flat = weights_by_likelihood(synthetic(400, local_signal=0.0)).weights
    assert flat["calibrated_parametric_weight"] > 0.5
    assert flat["calibrated_local_weight"] < 0.1
    assert flat["calibrated_dynamic_weight"] < 0.1
    informed = weights_by_likelihood(synthetic(400, local_signal=1.0))
    assert informed.weights["calibrated_local_weight"] > 0.25
    assert informed.weights["calibrated_dynamic_weight"] < 0.1
    assert informed.questions == 400
    assert informed.mean_log_likelihood < 0


def test_unconstrained_weights_may_go_negative_and_the_default_may_not() -> None:
    # The dynamic pathway here prefers A, and gold is rarely A: against the gold, so negative when allowed.
    decisions = [d for d in synthetic(600, local_signal=0.0) if d.bundle.question.gold_letters != ["A"]]
    features = pool_features(decisions)
    assert fit_pool_weights(features, non_negative=False)[2] < -0.05
    assert fit_pool_weights(features)[2] == 0.0


def test_features_are_the_pathways_as_scored_and_a_left_out_pathway_contributes_nothing() -> None:
    probs = {
        "parametric": _softmax(np.array([2.0, 0, 0, 0])),
        "local": _softmax(np.zeros(4)),
        "dynamic": _softmax(np.zeros(4)),
    }
    scored = decision("q1", "A", probs)
    # the dynamic pathway generated its letter: left out of the pool
    generated = scored.bundle.candidate("dynamic").model_copy(update={"option_scores": None})
    candidates = [generated if c.pathway == "dynamic" else c for c in scored.bundle.candidates]
    record = scored.model_copy(update={"bundle": scored.bundle.model_copy(update={"candidates": candidates})})
    no_gold = scored.model_copy(
        update={
            "bundle": scored.bundle.model_copy(
                update={"question": scored.bundle.question.model_copy(update={"gold_letters": None})}
            )
        }
    )
    features = pool_features([record, no_gold])
    assert features.question_ids == ["q1"]
    assert np.allclose(features.logs[0, :, 1], np.log(0.25))  # local as scored
    assert np.allclose(features.logs[0, :, 2:], 0.0)  # dynamic left out, and its quality term with it


def test_tune_fits_the_weights_on_train_records_only() -> None:
    train = synthetic(200, local_signal=1.0)
    held_out = synthetic(200, local_signal=0.0, seed=1)  # a local pathway without signal: it must not count
    items = [SimpleNamespace(question_id=f"t-{d.question_id}", static=False, decision=d) for d in train]
    items += [SimpleNamespace(question_id=f"h-{d.question_id}", static=False, decision=d) for d in held_out]
    base = fitted_base(SimpleNamespace(items=items), ["calibrated_fit"], {f"t-q{i}" for i in range(200)})  # type: ignore[arg-type]
    assert base.pool_fit is not None
    assert base.pool_fit.questions == 200
    assert base.thresholds.calibrated_local_weight == base.pool_fit.weights["calibrated_local_weight"] > 0.25
    assert parse_params(None) == ["calibrated_fit"]  # the default


def test_tune_prints_and_stores_the_fit(
    synthetic_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from clearmed.cli.main import main
    from clearmed.evaluation.store import EvalRecord

    run = tmp_path / "run"
    shutil.copytree(synthetic_run, run)  # its manifest and config; the records are these
    decisions = synthetic(60, local_signal=1.0)
    records = [
        EvalRecord(question_id=d.question_id, index=i, program="clear", decision=d, seconds=1.0, finished="now")
        for i, d in enumerate(decisions)
    ]
    (run / "results.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records))
    out = tmp_path / "fitted"
    assert main(["tune", "--run", str(run), "--out", str(out), "--params", "calibrated_fit", "--trials", "1",
                 "--train-fraction", "0.5"]) == 0  # fmt: skip
    assert "pooling weights fitted by likelihood on 30 train questions" in capsys.readouterr().out
    study = json.loads((out / "study.json").read_text())
    assert study["pool_fit"]["questions"] == 30
    assert study["thresholds"]["calibrated_local_weight"] == study["pool_fit"]["weights"]["calibrated_local_weight"]
