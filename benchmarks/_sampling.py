"""Deterministic subsets: the same (seed, limit) always gives the same questions, in source order."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def sample(items: Sequence[T], *, limit: int | None, seed: int | None) -> list[T]:
    """Without a seed: the first `limit` items. With a seed: `limit` items drawn without replacement.

    A seeded draw is a prefix of one fixed permutation, so a larger limit extends a smaller one with the same
    seed (n=50 contains n=20); the chosen items are returned in source order so runs stay easy to read.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if seed is None:
        return list(items if limit is None else items[:limit])
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    chosen = sorted(order if limit is None else order[:limit])
    return [items[i] for i in chosen]
