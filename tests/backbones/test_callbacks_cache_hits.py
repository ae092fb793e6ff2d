"""Callbacks see every scored call, served from the cache or not, marked as a cache hit (issue 58 item 5).

Before: a warm cache hid scored calls from DSPy's callbacks (`run_scored_stage` answered from `dspy.cache` without a
traced call) while cached generated calls still reached them, so a tracer's count depended on the decoding mode."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dspy
import pytest

from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import QUESTION, build_toy_program
from tests.backbones.test_callbacks import SCRIPT, Counting
from tests.programs.test_option_scoring import SCORES

SCORED = ProgramSettings(json_fallback=False, parallel_pathways="off", mcq_decoding="score")


@pytest.fixture
def memory_cache() -> Iterator[None]:
    """DSPy's in-memory cache on for one test (the suite runs with every cache off), emptied before and after."""
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=True)
    dspy.cache.reset_memory_cache()
    yield
    dspy.cache.reset_memory_cache()
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)


def _scored_ends(counting: Counting) -> list[dict[str, Any]]:
    """The completion each scored call ended with, in call order."""
    ids = [key for key, (_, inputs) in counting.started.items() if inputs.get("kwargs", {}).get("logprobs")]
    return [counting.ended[key][0][0] for key in ids]


def _question(settings: ProgramSettings, question: Any = QUESTION) -> tuple[Counting, Counting, Any]:
    program, engine, _ = build_toy_program(SCRIPT, settings=settings, scores=SCORES)
    program.role_lms["main"].cache = True  # generated and scored calls alike are cached
    cold, warm = Counting(), Counting()
    with dspy.context(callbacks=[cold]):
        program(question=question)
    with dspy.context(callbacks=[warm]):
        program(question=question)
    return cold, warm, engine


def test_a_warm_cache_shows_every_scored_call_to_the_callbacks_marked_as_a_cache_hit(memory_cache: None) -> None:
    cold, warm, engine = _question(SCORED)
    assert len(engine.scored) == 3  # the second question's scoring passes never reached the engine
    assert len(warm.started) == len(cold.started)  # the same count, whatever the cache served
    assert len(warm.scored()) == len(cold.scored()) == 3
    assert [end["cache_hit"] for end in _scored_ends(cold)] == [False] * 3
    assert [end["cache_hit"] for end in _scored_ends(warm)] == [True] * 3
    # the cached call is reported in the live call's shapes: same messages and candidates, same most probable letter
    assert [inputs for inputs in warm.scored()] == [inputs for inputs in cold.scored()]
    assert [end["text"] for end in _scored_ends(warm)] == [end["text"] for end in _scored_ends(cold)]
    parametric = _scored_ends(warm)[0]["logprobs"]
    assert max(parametric, key=parametric.__getitem__) == "A"
    assert sorted(parametric) == ["A", "B", "C", "D"]


def test_a_cached_several_answer_question_shows_one_call_per_option(memory_cache: None) -> None:
    yes_no = {"yes": 0.8, "no": 0.2}
    multi = QUESTION.model_copy(update={"id": "q-multi", "answer_mode": "multi"})
    program, engine, _ = build_toy_program(
        SCRIPT, settings=SCORED, scores={stage: yes_no for stage in ("parametric", "local_answer", "dynamic_answer")}
    )
    program.role_lms["main"].cache = True
    cold, warm = Counting(), Counting()
    with dspy.context(callbacks=[cold]):
        program(question=multi)
    with dspy.context(callbacks=[warm]):
        program(question=multi)
    passes = 3 * len(QUESTION.options or {})
    assert len(engine.scored) == passes
    assert len(cold.scored()) == len(warm.scored()) == passes
    assert warm.scored() == cold.scored()
    ends = _scored_ends(warm)
    assert all(end["cache_hit"] for end in ends)
    assert ends[0]["logprobs"]["yes"] == pytest.approx(-0.2231, abs=1e-3)  # log 0.8
