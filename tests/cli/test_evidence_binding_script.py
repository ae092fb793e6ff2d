"""docs/experiments/evidence_binding.py on a synthetic run folder: every verifier read off the recorded bundles, the
cross-fitted rows fitted on the other folds only, and a planted binding signal found."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from clearmed.evaluation.store import EvalRecord
from tests.optimize.test_binding_fit import synthetic


def _run_folder(tmp_path: Path, n: int) -> Path:
    decisions = synthetic(n, seed=3)
    records = []
    for i, d in enumerate(decisions):
        # one question per id (the synthetic decisions share the toy stem, and folds group by the question)
        question = d.bundle.question.model_copy(update={"text": f"{d.bundle.question.text} (variant {i})"})
        d = d.model_copy(update={"bundle": d.bundle.model_copy(update={"question": question})})
        records.append(
            EvalRecord(question_id=d.question_id, index=i, program="clear", decision=d, seconds=2.0, finished="now")
        )
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records))
    return run


def test_the_script_reads_every_verifier_from_one_run_and_cross_fits(
    tmp_path: Path, script_module: Callable[[str], ModuleType], capsys: pytest.CaptureFixture[str]
) -> None:
    script = script_module("docs/experiments/evidence_binding.py")
    run = _run_folder(tmp_path, 120)
    seen: list[set[str]] = []
    fit = script.pool_features

    def spy(decisions: Any, **kwargs: Any) -> Any:
        decisions = list(decisions)
        seen.append({d.question_id for d in decisions})
        return fit(decisions, **kwargs)

    script.pool_features = spy
    assert script.main([str(run), "--partitions", "2", "--folds", "4"]) == 0
    out = capsys.readouterr().out
    assert "120 questions; disputed" in out
    for row in ("Direct", "deterministic", "calibrated (packaged", "calibrated + binding", "learned, scored + binding"):
        assert f"| {row}" in out
    # 2 partitions x 4 folds x (weights alone, weights and betas): each fit saw three folds, never the fourth
    assert len(seen) == 16
    assert all(80 <= len(ids) <= 100 for ids in seen)
    every = {f"q{i}" for i in range(120)}
    for start in range(0, 16, 4):
        held_out = [every - ids for ids in seen[start : start + 4]]
        assert set().union(*held_out) == every  # each question decided by the fit that left it out
        assert sum(len(h) for h in held_out) == 120
    binding = next(line for line in out.splitlines() if line.startswith("| calibrated + binding"))
    refitted = next(line for line in out.splitlines() if line.startswith("| calibrated, weights cross-fitted"))
    accuracy = lambda line: float(line.split("|")[2].split("±")[0])  # noqa: E731
    assert accuracy(binding) > accuracy(refitted) + 5  # the planted question-bound signal is found


def test_too_few_questions_are_refused_in_one_line(
    tmp_path: Path, script_module: Callable[[str], ModuleType], capsys: pytest.CaptureFixture[str]
) -> None:
    script = script_module("docs/experiments/evidence_binding.py")
    assert script.main([str(_run_folder(tmp_path, 6)), "--folds", "5"]) == 2
    assert "6 questions adjudicated; too few to cross-fit" in capsys.readouterr().err
