"""docs/experiments/pooling_headroom.py: CLEAR's reading of the pool, and the questions it counts."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import numpy as np

from clearmed.optimize.pool_fit import PoolFeatures


def features(probs: list[list[list[float]]], gold: list[int]) -> PoolFeatures:
    """(question, option, pathway) probabilities; the quality term left at 0."""
    logs = np.log(np.array(probs))
    logs = np.concatenate([logs, np.zeros((*logs.shape[:2], 1))], axis=2)
    return PoolFeatures(
        logs=logs, present=np.ones(logs.shape[:2], dtype=bool), gold=np.array(gold), question_ids=["q"] * len(gold)
    )


def test_the_clear_rule_only_chooses_among_the_pathways_answers(script_module: Callable[[str], ModuleType]) -> None:
    script = script_module("docs/experiments/pooling_headroom.py")
    # parametric prefers A, local and dynamic B; all three rate C second, so an even pool prefers C, which no
    # pathway chose: CLEAR's rule answers among A and B
    x = features([[[0.4, 0.05, 0.05], [0.1, 0.5, 0.5], [0.35, 0.45, 0.45], [0.15, 0.0001, 0.0001]]], [2])
    w = np.array([1.0, 1.0, 1.0, 0.0])
    assert script.choices(x, w, rule="free")[0] == 2  # C
    assert script.choices(x, w, rule="clear")[0] == 1  # B, the evidence pathways' shared answer
    assert script.accuracy(x, w, rule="free") == 1.0


def test_only_questions_every_pathway_scored_are_counted(script_module: Callable[[str], ModuleType]) -> None:
    script = script_module("docs/experiments/pooling_headroom.py")
    x = features([[[0.7, 0.25, 0.25]] + [[0.1, 0.25, 0.25]] * 3] * 2, [0, 1])
    x.logs[1, :, 2] = 0.0  # the second question's dynamic pathway was left out of the pool
    kept = script.all_three_scored(x)
    assert kept.gold.tolist() == [0]
