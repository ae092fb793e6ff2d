"""Evidence binding's betas fitted by replay (issue 56 item 5): the likelihood fit reads the passage-only scores the
records hold (no LM call), gives a beta to a pathway whose question-bound support carries the gold and none to one
whose does not, and `clearmed tune --params binding_fit` refuses a pilot with too few bound questions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from clearmed.core.errors import UsageError
from clearmed.optimize.pool_fit import BINDING_FIELDS, MIN_BINDING_QUESTIONS, pool_features, weights_by_likelihood
from clearmed.optimize.tuning import fitted_base, parse_params
from clearmed.signatures.records import Decision, OptionScores
from tests.optimize.test_pool_fit import A_HEAVY, LETTERS, _softmax, decision


def bound(d: Decision, passage_only: dict[str, dict[str, float]]) -> Decision:
    """`d` with passage-only scores recorded for the named evidence pathways."""
    candidates = [
        c.model_copy(update={"passage_only_scores": OptionScores(probs=passage_only[c.pathway], letters=("A",))})
        if c.pathway in passage_only
        else c
        for c in d.bundle.candidates
    ]
    return d.model_copy(update={"bundle": d.bundle.model_copy(update={"candidates": candidates})})


def synthetic(n: int, *, seed: int = 0) -> list[Decision]:
    """Parametric: weak signal. Local: what its passages say whatever the question (an A-heavy prior and noise,
    p(o | P)), plus a question-bound signal on the gold that only p(o | q, P) has. Dynamic: passages' prior and noise,
    and with the question more noise, none of it on the gold (a binding term without signal)."""
    rng = np.random.RandomState(seed)
    out = []
    for i in range(n):
        gold = rng.randint(4)
        boost = np.eye(4)[gold]
        local_passages = rng.normal(size=4) * 1.5 + A_HEAVY
        web_passages = rng.normal(size=4) + A_HEAVY
        probs = {
            "parametric": _softmax(rng.normal(size=4) + 0.3 * boost),
            "local": _softmax(local_passages + 1.5 * boost),
            "dynamic": _softmax(web_passages + rng.normal(size=4)),
        }
        only = {"local": _softmax(local_passages), "dynamic": _softmax(web_passages)}
        out.append(bound(decision(f"q{i}", LETTERS[gold], probs), only))
    return out


def test_the_fit_weighs_the_question_bound_support_and_not_the_passages_prior() -> None:
    decisions = synthetic(400)
    fit = weights_by_likelihood(decisions, binding=True)
    assert fit.bound_questions == 400
    assert set(BINDING_FIELDS) <= set(fit.weights)
    assert fit.weights["calibrated_local_binding"] > 0.5
    assert fit.weights["calibrated_dynamic_binding"] < 0.1
    plain = weights_by_likelihood(decisions)
    assert set(BINDING_FIELDS).isdisjoint(plain.weights)  # calibrated_fit alone leaves the betas alone
    assert fit.mean_log_likelihood > plain.mean_log_likelihood + 0.05


def test_binding_columns_are_the_log_ratio_where_recorded_and_zero_elsewhere() -> None:
    probs = {p: dict(zip(LETTERS, [0.4, 0.3, 0.2, 0.1], strict=True)) for p in ("parametric", "local", "dynamic")}
    only = {"local": dict(zip(LETTERS, [0.1, 0.2, 0.3, 0.4], strict=True))}
    with_binding = bound(decision("q1", "A", probs), only)
    agreed = decision("q2", "A", probs)  # no binding pass recorded
    features = pool_features([with_binding, agreed], binding=True)
    assert features.logs.shape == (2, 4, 6)
    assert features.bound == 1
    assert features.logs[0, 0, 4] == pytest.approx(np.log(0.4 / 0.1))  # local: log p(A | q, P) - log p(A | P)
    assert features.logs[0, 3, 4] == pytest.approx(np.log(0.1 / 0.4))
    assert np.all(features.logs[0, :, 5] == 0.0)  # dynamic: nothing recorded
    assert np.all(features.logs[1, :, 4:] == 0.0)
    assert pool_features([with_binding]).logs.shape == (1, 4, 4)  # without binding: the four columns as before


class _Items:
    def __init__(self, decisions: list[Decision]) -> None:
        self.items = [
            type("Item", (), {"question_id": d.question_id, "decision": d, "static": False})() for d in decisions
        ]


def test_tune_fits_the_betas_with_the_weights_and_refuses_too_few_bound_questions() -> None:
    assert "binding_fit" in parse_params("binding_fit")
    decisions = synthetic(60)
    fitted = fitted_base(_Items(decisions), ["binding_fit"], {d.question_id for d in decisions})  # type: ignore[arg-type]
    assert fitted.pool_fit is not None
    assert fitted.pool_fit.bound_questions == 60
    assert fitted.thresholds.calibrated_local_binding == fitted.pool_fit.weights["calibrated_local_binding"] > 0
    unbound = [decision(d.question_id, d.bundle.question.gold_letters[0], _probs(d)) for d in decisions]
    few = unbound[: 60 - MIN_BINDING_QUESTIONS + 1] + decisions[: MIN_BINDING_QUESTIONS - 1]
    with pytest.raises(UsageError, match=f"{MIN_BINDING_QUESTIONS - 1} train questions have passage-only scores"):
        fitted_base(_Items(few), ["binding_fit"], {d.question_id for d in few})  # type: ignore[arg-type]
    plain = fitted_base(_Items(few), ["calibrated_fit"], {d.question_id for d in few})  # type: ignore[arg-type]
    assert plain.thresholds.calibrated_local_binding == 0.0


def _probs(d: Decision) -> dict[str, dict[str, float]]:
    return {c.pathway: dict(c.option_scores.probs) for c in d.bundle.candidates if c.option_scores is not None}


def test_tune_binding_fit_prints_and_stores_the_betas(
    synthetic_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from clearmed.cli.main import main
    from clearmed.evaluation.store import EvalRecord

    run = tmp_path / "run"
    shutil.copytree(synthetic_run, run)  # its manifest and config; the records are these
    records = []
    for i, d in enumerate(synthetic(80)):
        # a question of its own per id: splits keep a repeated question on one side
        question = d.bundle.question.model_copy(update={"text": f"{d.bundle.question.text} ({i})"})
        d = d.model_copy(update={"bundle": d.bundle.model_copy(update={"question": question})})
        records.append(
            EvalRecord(question_id=d.question_id, index=i, program="clear", decision=d, seconds=1.0, finished="now")
        )
    (run / "results.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records))
    out = tmp_path / "fitted"
    assert main(["tune", "--run", str(run), "--out", str(out), "--params", "binding_fit", "--trials", "1",
                 "--train-fraction", "0.5"]) == 0  # fmt: skip
    assert "the binding betas from 40 disputed questions" in capsys.readouterr().out
    study = json.loads((out / "study.json").read_text())
    assert study["pool_fit"]["bound_questions"] == 40
    assert study["thresholds"]["calibrated_local_binding"] == study["pool_fit"]["weights"]["calibrated_local_binding"]
    assert study["thresholds"]["calibrated_local_binding"] > 0
