"""Shards of a run: the split (every id in exactly one shard, the same on every call), and a run made as shards and
merged (`join_shard_folders`) that is the run one process makes, at the library level on the synthetic CLEAR world."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from clearmed.core.errors import UsageError
from clearmed.evaluation import EvalSpec, RunSummary, read_records, run_evaluation
from clearmed.evaluation.merge import ShardMergeError, join_shard_folders
from clearmed.evaluation.shard import RunShard, interleave_shards, parse_shard, take_shard
from clearmed.evaluation.spend import Prices
from clearmed.evaluation.store import load_manifest
from clearmed.numbers.compare import snapshot_prices
from clearmed.report.run_folder import finish_run_folder
from clearmed.signatures.records import Question
from clearmed.testing.synthetic_run import SYNTHETIC_CONFIG, synthetic_program, synthetic_questions


@pytest.mark.parametrize("total", [1, 2, 7, 12, 101])
def test_every_id_goes_to_exactly_one_shard_and_interleave_puts_them_back(total: int) -> None:
    ids = [f"q{i:03d}" for i in range(total)]
    for count in range(1, min(total, 9) + 1):
        parts = [take_shard(ids, ids, index, count)[0] for index in range(1, count + 1)]
        assert sorted(qid for part in parts for qid in part) == sorted(ids)  # each id once
        assert max(map(len, parts)) - min(map(len, parts)) <= 1  # round robin: balanced
        assert interleave_shards(parts) == ids
        assert parts == [take_shard(ids, ids, index, count)[0] for index in range(1, count + 1)]  # stable


def test_the_shard_record_names_the_run_it_is_a_shard_of() -> None:
    ids = [f"q{i}" for i in range(10)]
    part, shard = take_shard(ids, ids, 2, 3)
    assert part == ["q1", "q4", "q7"]
    assert (shard.index, shard.count, shard.of_questions) == (2, 3, 10)
    assert take_shard(ids, ids, 3, 3)[1].ids_digest == shard.ids_digest
    assert take_shard(list(reversed(ids)), list(reversed(ids)), 2, 3)[1].ids_digest != shard.ids_digest  # order too
    assert repr(shard) == f"2/3 of 10 ids {shard.ids_digest}"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("0/3", "K must be between 1 and N"),
        ("4/3", "K must be between 1 and N"),
        ("1/0", "K must be between 1 and N"),
        ("x", "give K/N"),
        ("3", "give K/N"),
        ("1/3/4", "give K/N"),
        ("-1/3", "give K/N"),
    ],
)
def test_bad_shard_values_are_one_line(given: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_shard(given)


def test_good_shard_values_parse() -> None:
    assert parse_shard("1/1") == (1, 1)
    assert parse_shard(" 3 / 4 ") == (3, 4)


def test_more_shards_than_questions_are_refused() -> None:
    with pytest.raises(UsageError, match="the run has 3 questions, so at most that many shards"):
        take_shard(["a", "b", "c"], ["a", "b", "c"], 1, 4)


def test_a_shard_record_beyond_its_count_does_not_validate() -> None:
    with pytest.raises(ValueError, match="shard 4 of 3 does not exist"):
        RunShard(index=4, count=3, of_questions=9, ids_digest="0" * 16)


def _run(run_dir: Path, questions: list[Question], shard: RunShard | None = None) -> None:
    spec = EvalSpec(
        program="clear",
        benchmark="synthetic",
        source="synthetic seed 0",
        questions=questions,
        run_dir=run_dir,
        shard=shard,
    )
    program, _ = synthetic_program(0)
    run_evaluation(spec, SYNTHETIC_CONFIG, program, show_progress=False)


def _untimed(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary without the fields that measure wall time (two processes never take the same time)."""
    cost = {**summary["cost"], "mean_seconds": 0, "median_seconds": 0}
    routes = [{**route, "mean_seconds": 0} for route in summary["cost_by_route"]]
    return {**summary, "cost": cost, "cost_by_route": routes}


def _answers(folder: Path) -> list[tuple[str, int, str | None, str | None, str | None]]:
    return [
        (r.question_id, r.index, r.decision.answer, r.decision.route, r.decision.deciding_rule)
        for r in sorted(read_records(folder), key=lambda record: record.index)
    ]


def _merged(shards: list[Path], out: Path) -> RunSummary:
    """The shards merged into `out`, finished as `clearmed merge` finishes it (at the prices of the shards' config)."""
    join_shard_folders(shards, out)
    return finish_run_folder(out, snapshot_prices(out), Console(file=io.StringIO()))


def test_four_shards_merged_are_the_run_one_process_makes(tmp_path: Path) -> None:
    questions = synthetic_questions(62)  # shards of 16, 16, 15 and 15: uneven on purpose
    ids = [q.id for q in questions]
    _run(tmp_path / "one", questions)
    one = finish_run_folder(tmp_path / "one", Prices.of(SYNTHETIC_CONFIG), Console(file=io.StringIO()))
    shards = []
    for index in (3, 1, 4, 2):  # made in any order, given in any order
        part, shard = take_shard(questions, ids, index, 4)
        _run(tmp_path / f"shard{index}", part, shard)
        shards.append(tmp_path / f"shard{index}")
    merged = _merged(shards, tmp_path / "merged")

    assert _answers(tmp_path / "merged") == _answers(tmp_path / "one")
    assert len({route for _, _, _, route, _ in _answers(tmp_path / "one")}) > 2  # the world varies its routes
    assert _untimed(merged.model_dump()) == _untimed(one.model_dump())
    on_disk = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert _untimed(on_disk) == _untimed(json.loads((tmp_path / "one" / "summary.json").read_text()))
    manifest, unsharded = (
        load_manifest(tmp_path / "merged" / "manifest.json"),
        load_manifest(tmp_path / "one" / "manifest.json"),
    )
    assert manifest.shard is None
    assert manifest.model_dump(exclude={"created"}) == unsharded.model_dump(exclude={"created"})
    # the merged folder is the run: resuming it as the unsharded run finds every question done
    program, engine = synthetic_program(0)
    spec = EvalSpec(
        program="clear",
        benchmark="synthetic",
        source="synthetic seed 0",
        questions=questions,
        run_dir=tmp_path / "merged",
    )
    assert len(run_evaluation(spec, SYNTHETIC_CONFIG, program, show_progress=False)) == 62
    assert engine.calls == []
    # merging the same shards again into it rewrites the same run
    assert _untimed(_merged(shards, tmp_path / "merged").model_dump()) == _untimed(one.model_dump())


def test_an_unfinished_shard_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    questions = synthetic_questions(6)
    ids = [q.id for q in questions]
    for index in (1, 2):
        part, shard = take_shard(questions, ids, index, 2)
        spec = EvalSpec(
            program="clear",
            benchmark="synthetic",
            source="s",
            questions=part,
            run_dir=tmp_path / f"s{index}",
            shard=shard,
        )
        program, _ = synthetic_program(0)
        run_evaluation(spec, SYNTHETIC_CONFIG, program, show_progress=False, stop_after=3 if index == 1 else 1)
    with pytest.raises(ShardMergeError, match=r"s2: shard 2/2 is not finished \(1 of its 3 questions answered\)"):
        join_shard_folders([tmp_path / "s1", tmp_path / "s2"], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()
