"""Which question ids an optimizer may see, and the guard that keeps them out of any test report.

Compiling sees train and validation ids; tuning sees train ids. Both are written into the artifact
(`ids.json`), and every later report refuses to call a score on those ids a test score.
"""

from __future__ import annotations

import json
import random
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from clearmed.errors import UsageError


class UsedIds(BaseModel):
    """The ids an artifact was optimised on (`train`, `val`) and the held-out ids it may be tested on."""

    model_config = ConfigDict(extra="forbid")

    train: list[str] = Field(default_factory=list)
    val: list[str] = Field(default_factory=list)
    test: list[str] = Field(default_factory=list)

    def seen(self) -> set[str]:
        """Every id the optimizer looked at: never a test id."""
        return set(self.train) | set(self.val)


def read_id_file(path: str | Path) -> list[str]:
    """Ids from a file: a JSON list, an artifact's ids.json (its train and val ids), or one id per line."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as err:
        raise UsageError(f"{file}: cannot read the id file: {err.strerror or err}") from None
    stripped = text.strip()
    if stripped.startswith(("[", "{")):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as err:
            raise UsageError(f"{file}: not valid JSON: {err.msg} (line {err.lineno})") from None
        if isinstance(data, dict):
            return sorted(UsedIds.model_validate(data).seen())
        if isinstance(data, list) and all(isinstance(item, str) for item in data):
            return list(data)
        raise UsageError(f"{file}: expected a JSON list of ids or an ids.json object")
    ids = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not ids:
        raise UsageError(f"{file}: no ids in the file")
    return ids


def _examples(ids: Iterable[str], limit: int = 3) -> str:
    chosen = sorted(ids)
    more = f" and {len(chosen) - limit} more" if len(chosen) > limit else ""
    return ", ".join(chosen[:limit]) + more


def refuse_seen_as_test(test_ids: Collection[str], seen: Collection[str], *, what: str = "tuning") -> None:
    """Raise a one-line error when any test id was seen by the optimizer."""
    overlap = set(test_ids) & set(seen)
    if overlap:
        raise UsageError(
            f"refusing to report a test score on {len(overlap)} ids used for {what} ({_examples(overlap)}); "
            "choose held-out ids"
        )


def split_ids(
    all_ids: Sequence[str],
    *,
    train_ids: Sequence[str] | None = None,
    test_ids: Sequence[str] | None = None,
    train_fraction: float | None = None,
    seed: int = 0,
) -> UsedIds:
    """Train ids (what tuning sees) and test ids (held out), from explicit lists or a seeded fraction.

    With neither, every id is a train id and there is no test set. Explicit test ids must be disjoint from
    the train ids; ids that are not in the runs are an error, not silently dropped.
    """
    known = list(dict.fromkeys(all_ids))
    known_set = set(known)
    for name, given in (("--train-ids", train_ids), ("--test-ids", test_ids)):
        if given is not None:
            unknown = set(given) - known_set
            if unknown:
                raise UsageError(f"{name}: {len(unknown)} ids are not in the runs ({_examples(unknown)})")
    if train_ids is not None and train_fraction is not None:
        raise UsageError("give --train-ids or --train-fraction, not both")
    if train_fraction is not None and not 0.0 < train_fraction <= 1.0:
        raise UsageError(f"--train-fraction must be in (0, 1], got {train_fraction}")
    if train_ids is not None:
        train = [qid for qid in known if qid in set(train_ids)]
    elif train_fraction is not None:
        order = list(known)
        random.Random(seed).shuffle(order)
        chosen = set(order[: max(1, round(train_fraction * len(order)))])
        train = [qid for qid in known if qid in chosen]
    elif test_ids is not None:
        train = [qid for qid in known if qid not in set(test_ids)]
    else:
        train = list(known)
    if test_ids is not None:
        refuse_seen_as_test(test_ids, train)
        test = [qid for qid in known if qid in set(test_ids)]
    else:
        test = [qid for qid in known if qid not in set(train)]
    if not train:
        raise UsageError("no train ids left to tune on")
    return UsedIds(train=train, test=test)
