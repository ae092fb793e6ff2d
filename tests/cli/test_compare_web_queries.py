"""docs/experiments/compare_web_queries.py on a scripted model: every mode runs on the same questions, reported."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from clearmed.config import load_config
from clearmed.demo import demo_questions
from clearmed.testing import scripted_lm


def test_each_mode_runs_the_dynamic_pathway_on_the_same_questions(script_module: Callable[[str], ModuleType]) -> None:
    script = script_module("docs/experiments/compare_web_queries.py")
    questions = [q for q in demo_questions() if q.is_mcq][:3]
    lm, engine = scripted_lm(
        {"web_query": {"query": "Option A: thyroid hormone " + "deficiency " * 60}},
        scores={"dynamic_answer": {"A": 0.7, "B": 0.1, "C": 0.1, "D": 0.1}},
    )
    config = load_config("embedded")  # the demo pages, offline
    results = script.compare(questions, config, ["question", "salient", "lm"], {"main": lm}, max_query_chars=120)
    assert [r.mode for r in results] == ["question", "salient", "lm"]
    assert all(r.n == len(questions) and len(r.seconds) == len(questions) for r in results)
    assert results[1].sources == {"salient": len(questions)}
    assert results[2].sources == {"lm": len(questions)}
    assert results[2].cut == len(questions)  # the written query was over the limit each time, and cut
    assert engine.stages().count("web_query") == len(questions)  # only the lm mode asks the model for a query
    text = script.report(results)
    assert text.count("accuracy") == 3
    assert "lm vs question: gained" in text
