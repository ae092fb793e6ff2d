"""`clearmed eval --ids FILE`: exactly the listed questions, in order; bad lists are one clear line."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from clearmed.api.questions import load_questions as _load_questions
from clearmed.core.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]


def args(**overrides: object) -> argparse.Namespace:
    base = {"benchmark": "mmlu-medical", "source": "shared", "split": None, "limit": None, "seed": 0,
            "skip_bad_rows": False, "ids": None}  # fmt: skip
    return argparse.Namespace(**{**base, **overrides})


@pytest.mark.usefixtures("shared_data")
def test_ids_select_exactly_those_questions_in_file_order() -> None:
    test_ids = ROOT / "docs" / "splits" / "mmlu-medical-test-ids.txt"
    wanted = [line for line in test_ids.read_text().splitlines() if line and not line.startswith("#")]
    bench = _load_questions(args(ids=str(test_ids)))
    assert [q.id for q in bench.questions] == wanted
    assert len(wanted) == 287


@pytest.mark.usefixtures("shared_data")
def test_the_shared_split_is_disjoint_and_covers_the_pool() -> None:
    read = lambda name: {  # noqa: E731
        line for line in (ROOT / "docs" / "splits" / name).read_text().splitlines() if line and line[0] != "#"
    }
    train, test = read("mmlu-medical-train-ids.txt"), read("mmlu-medical-test-ids.txt")
    assert not train & test
    # the pool less the 16 copies of questions MMLU repeats (tests/optimize/test_splits.py)
    assert len(train | test) + 16 == len(_load_questions(args()).questions) == 545


@pytest.mark.usefixtures("shared_data")
def test_unknown_ids_and_ids_with_limit_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "ids.txt"
    bad.write_text("mmlu:anatomy:test_pool:3\nnot-an-id\n")
    with pytest.raises(UsageError, match="1 ids are not in mmlu-medical"):
        _load_questions(args(ids=str(bad)))
    with pytest.raises(UsageError, match="--ids or --limit"):
        _load_questions(args(ids=str(bad), limit=5))
