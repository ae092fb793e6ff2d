"""Shards: one run's fixed question list split over several processes (`clearmed eval --shard K/N`).

The question at position i (from 0) of the run's question list (the manifest's order: the sample `--limit` and
`--seed` draw, the `--ids` file's order, or the benchmark's) goes to shard i mod N + 1, round robin. The list is
fixed by the command, so the split is the same on every resume; every question goes to exactly one shard; and
round robin spreads a list sorted by subject or length evenly over the shards. Each shard's manifest records which
shard it is and a digest of the whole list (`RunShard`), so `clearmed merge` can check that its shards are the
shards of one run, that they cover it, and put the questions back in the run's order (`interleave_shards`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from clearmed.core.errors import UsageError

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
T = TypeVar("T")


class RunShard(BaseModel):
    """This run is shard `index` of `count` of a question list of `of_questions` ids whose digest is `ids_digest`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int = Field(ge=1)
    count: int = Field(ge=1)
    of_questions: int = Field(ge=1)
    ids_digest: str

    @model_validator(mode="after")
    def _index_within_count(self) -> RunShard:
        if self.index > self.count:
            raise ValueError(f"shard {self.index} of {self.count} does not exist")
        return self

    def __repr__(self) -> str:  # how a resume that names another shard is refused: one readable line
        return f"{self.index}/{self.count} of {self.of_questions} ids {self.ids_digest}"


def ids_digest(question_ids: Sequence[str]) -> str:
    """A fingerprint of a question list, order included."""
    return hashlib.sha256(json.dumps(list(question_ids)).encode()).hexdigest()[:16]


def parse_shard(text: str) -> tuple[int, int]:
    """`--shard K/N` as (K, N), with 1 <= K <= N; anything else is one line."""
    match = _SHARD.match(text)
    if not match:
        raise UsageError(f"--shard {text!r}: give K/N, shard K of N shards (e.g. --shard 2/4)")
    index, count = int(match.group(1)), int(match.group(2))
    if not 1 <= index <= count:
        raise UsageError(f"--shard {text}: K must be between 1 and N (shard K of N shards)")
    return index, count


def take_shard(items: Sequence[T], question_ids: Sequence[str], index: int, count: int) -> tuple[list[T], RunShard]:
    """Shard `index` of `count` of `items` (one per id of `question_ids`, in the run's order), and its record."""
    if count > len(question_ids):
        raise UsageError(
            f"--shard {index}/{count}: the run has {len(question_ids)} questions, so at most that many shards"
        )
    shard = RunShard(index=index, count=count, of_questions=len(question_ids), ids_digest=ids_digest(question_ids))
    return list(items[index - 1 :: count]), shard


def interleave_shards(parts: Sequence[Sequence[T]]) -> list[T]:
    """The run's list back from its shards' lists, given in shard order (the inverse of `take_shard`)."""
    total = sum(len(part) for part in parts)
    return [parts[position % len(parts)][position // len(parts)] for position in range(total)]
