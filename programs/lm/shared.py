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

    # A pickled program (`program.save(path, save_program=True)`) leaves its backend out, as it does its keys: an index,
    # a search client and its cache hold connections, threads and locks that belong to a run, not to the program.
    # A loaded program is wired to the config's backends again (`clearmed.assemble`).
    def __getstate__(self) -> dict[str, object]:
        return {"value": None}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.value = state["value"]  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Shared({type(self.value).__name__})"
