"""A program's results and the program itself can be saved with DSPy's own tools (issue 31, item 9)."""

from __future__ import annotations

import json
from pathlib import Path

import dspy
import pytest

from clearmed.core.errors import FatalServiceError
from clearmed.programs.lm.stage import Shared
from clearmed.testing import QUESTION, build_toy_program, label_all, pathway_replies, verifier_reply

SCRIPT = {
    **pathway_replies("A", "A", "A"),
    "source_quality": label_all("high"),
    "verifier": verifier_reply("consensus"),
}


def test_evaluate_saves_its_results_as_json(tmp_path: Path) -> None:
    program, _, _ = build_toy_program(SCRIPT)
    examples = [dspy.Example(question=QUESTION, gold="A").with_inputs("question")]
    assert any(p.provenance.published for p in program(question=QUESTION).decision.bundle.dynamic_passages)
    out = tmp_path / "results.json"
    evaluate = dspy.Evaluate(
        devset=examples, metric=lambda *args: 1.0, save_as_json=str(out), num_threads=1, display_progress=False
    )
    evaluate(program)  # before: TypeError, a web page's `published` date is not JSON serializable
    (row,) = json.loads(out.read_text())
    pages = row["decision"]["bundle"]["dynamic_passages"]
    assert "2024-05-01" in {page["provenance"]["published"] for page in pages}


def test_a_whole_program_saves_and_loads_without_its_backends(tmp_path: Path) -> None:
    program, _, _ = build_toy_program(SCRIPT)
    program.save(str(tmp_path / "program"), save_program=True)  # before: cannot pickle '_thread.lock'
    loaded = dspy.load(str(tmp_path / "program"), allow_pickle=True)
    assert [name for name, _ in loaded.named_predictors()] == [name for name, _ in program.named_predictors()]
    backends = [value for value in vars(loaded.local).values() if isinstance(value, Shared)]
    assert backends
    assert all(shared.detached for shared in backends)  # an index or search client belongs to a run


def test_a_pickled_program_reloaded_without_its_backends_says_so_instead_of_answering(tmp_path: Path) -> None:
    """Issue 50, item 11: before, the loaded program answered `answered` with its local and dynamic pathways failing
    as if no corpus or search were configured."""
    program, _, _ = build_toy_program(SCRIPT)
    program.save(str(tmp_path / "program"), save_program=True)
    loaded = dspy.load(str(tmp_path / "program"), allow_pickle=True)
    with pytest.raises(FatalServiceError) as raised:
        loaded(question=QUESTION)
    assert str(raised.value).startswith(
        "local corpus: unusable: this program was loaded from a pickle, which keeps no index or search client"
    )
    assert "\n" not in str(raised.value)
    # wired to backends again, it answers as the program it was saved from
    loaded.local.retriever.value = program.local.retriever.value
    for module in (loaded.dynamic, loaded.followup):
        module.search.value = program.dynamic.search.value
    assert loaded(question=QUESTION).decision.status == program(question=QUESTION).decision.status == "answered"


def test_a_program_saved_without_backends_loads_as_it_was_saved(tmp_path: Path) -> None:
    """A program built with no corpus or search keeps that meaning when reloaded: no backend, nothing detached."""
    program, _, _ = build_toy_program(SCRIPT)
    program.local.retriever.value = None
    program.save(str(tmp_path / "program"), save_program=True)
    loaded = dspy.load(str(tmp_path / "program"), allow_pickle=True)
    assert not loaded.local.retriever.detached
    assert loaded.local.retriever.value is None
    assert loaded.dynamic.search.detached
