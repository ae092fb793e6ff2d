"""A reference that DSPy's deep copies share instead of duplicating."""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Shared(Generic[T]):
    """Holds an evidence backend (a BM25 index, a search client) across `module.deepcopy()`.

    Optimizers deep-copy programs many times; an index of a million passages must not be copied with them.
    """

    def __init__(self, value: T) -> None:
        self.value = value

    def __deepcopy__(self, memo: dict[int, object]) -> Shared[T]:
        return self

    def __repr__(self) -> str:
        return f"Shared({type(self.value).__name__})"
