"""Evidence binding in the run summary (issue 56 item 5): the disputed questions it ran on, and by reason the evidence
pathways that got no binding term (a backbone without log-probabilities: `no_logprobs`), in summary.json and in the
summary's markdown."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from clearmed.evaluation import EvalSpec, RunStore, run_evaluation, summarize
from clearmed.evaluation.store import EvalRecord
from clearmed.report.markdown import details_markdown
from clearmed.testing import build_toy_program, label_all, pathway_replies
from tests.evaluation.test_runs import CONFIG, questions
from tests.programs.test_evidence_binding import BINDING

SCRIPT = {**pathway_replies("A", "A", "C"), "source_quality": label_all("high")}
DISPUTED = {  # parametric and local on A, the web on C: every question disputed
    "parametric": {"A": 0.6, "B": 0.2, "C": 0.1, "D": 0.1},
    "local_answer": {"A": 0.7, "B": 0.1, "C": 0.1, "D": 0.1},
    "dynamic_answer": {"A": 0.1, "B": 0.1, "C": 0.7, "D": 0.1},
    "local_binding": {"A": 0.4, "B": 0.2, "C": 0.2, "D": 0.2},
}  # none for dynamic_binding: that pass fails


def run_four(program: Any, run_dir: Path) -> list[EvalRecord]:
    """Four disputed questions of the toy world through ``program`` into ``run_dir``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_evaluation(
            EvalSpec(program="clear", benchmark="toy", source="memory", questions=questions(4), run_dir=run_dir),
            CONFIG,
            program,
            show_progress=False,
        )


def test_the_summary_counts_binding_passes_and_their_fallbacks(tmp_path: Path) -> None:
    program, _, _ = build_toy_program(SCRIPT, settings=BINDING, scores=DISPUTED)
    run_dir = tmp_path / "run"
    records = run_four(program, run_dir)
    manifest = RunStore(run_dir).read_manifest()
    assert manifest is not None
    summary = summarize(records, manifest)
    assert (summary.binding_questions, summary.binding_fallbacks) == (4, {"scoring_failed": 4})
    assert json.loads(summary.model_dump_json())["binding_fallbacks"] == {"scoring_failed": 4}
    text = details_markdown([summary])
    assert (
        "evidence binding (question-removed scoring) ran on 4 disputed questions; evidence pathways with no binding "
        "term: 4 (scoring_failed 4)"
    ) in text
    # Every binding pass failed: the questions still count as bound, each pathway by its reason.
    failing, _, _ = build_toy_program(
        SCRIPT, settings=BINDING, scores={k: v for k, v in DISPUTED.items() if k != "local_binding"}
    )
    records = run_four(failing, tmp_path / "failed")
    summary = summarize(records, manifest)
    assert (summary.binding_questions, summary.binding_fallbacks) == (4, {"scoring_failed": 8})
    # Binding off: nothing counted, nothing said.
    off, _, _ = build_toy_program(
        SCRIPT, settings=BINDING.model_copy(update={"evidence_binding": False}), scores=DISPUTED
    )
    records = run_four(off, tmp_path / "off")
    summary = summarize(records, manifest)
    assert (summary.binding_questions, summary.binding_fallbacks) == (0, {})
    assert "evidence binding" not in details_markdown([summary])
