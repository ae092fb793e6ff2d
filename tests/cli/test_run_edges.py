"""The edges of a run's command line (issue 58, item 10): a merged run holding degraded questions exits 4 with the
degraded line, as `clearmed eval` does; `--threads 0` and a `--run-dir` that is a file are refused in one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from clearmed.cli.main import main
from tests.cli.test_exit_codes import Backbone, eval_argv, said_lines


@pytest.fixture
def broken() -> Iterator[Backbone]:
    """A fake OpenAI-compatible server answering 503 until mended (tests/cli/test_exit_codes.py's)."""
    with Backbone() as server:
        yield server


def test_a_merge_holding_degraded_questions_exits_4_with_the_degraded_line(
    broken: Backbone, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = broken.config(tmp_path / "broken.toml")
    shards = [tmp_path / f"shard{k}" for k in (1, 2)]
    for k, folder in enumerate(shards, 1):
        assert main([*eval_argv(config, folder), "--shard", f"{k}/2"]) == 4
    merged = tmp_path / "merged"
    capsys.readouterr()
    assert main(["merge", *map(str, shards), "--out", str(merged)]) == 4
    out, err = capsys.readouterr()
    assert said_lines(err) == [err.splitlines()[-1]]  # one line, and the last
    endpoint = broken.api_base.removesuffix("/v1")  # the failures name where they came from
    assert said_lines(err)[0] == (
        f"clearmed: 3 of 3 questions degraded (failed after their retries: parametric; at {endpoint}); summary "
        f"written; rerun the shards' clearmed eval command without --shard and with --run-dir {merged} to resume and "
        "redo them"
    )
    assert "| direct | demo | 3/3 |" in out
    assert json.loads((merged / "summary.json").read_text(encoding="utf-8"))["degraded"] == 3

    broken.mend()  # the line's command resumes the merged run and redoes them
    assert main(eval_argv(config, merged)) == 0
    assert json.loads((merged / "summary.json").read_text(encoding="utf-8"))["degraded"] == 0


def test_a_clean_merge_exits_0(broken: Backbone, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken.mend()
    config = broken.config(tmp_path / "mended.toml")
    shards = [tmp_path / f"shard{k}" for k in (1, 2)]
    for k, folder in enumerate(shards, 1):
        assert main([*eval_argv(config, folder), "--shard", f"{k}/2"]) == 0
    assert main(["merge", *map(str, shards), "--out", str(tmp_path / "merged")]) == 0
    assert said_lines(capsys.readouterr().err) == []


@pytest.mark.parametrize("threads", ["0", "-2"])
def test_threads_below_one_are_refused_in_one_line(
    threads: str, broken: Backbone, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = broken.config(tmp_path / "broken.toml")
    assert main([*eval_argv(config, tmp_path / "run"), "--threads", threads]) == 2
    assert said_lines(capsys.readouterr().err) == [
        f"clearmed: error: threads must be at least 1, not {threads} (--threads)"
    ]
    assert broken.requests == []
    assert not (tmp_path / "run").exists()


def test_a_run_dir_that_is_a_file_is_refused_in_one_line(
    broken: Backbone, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = broken.config(tmp_path / "broken.toml")
    taken = tmp_path / "notes.txt"
    taken.write_text("mine", encoding="utf-8")
    assert main(eval_argv(config, taken)) == 2
    assert said_lines(capsys.readouterr().err) == [
        f"clearmed: error: {taken} is a file, not a run folder: give --run-dir a folder (new or a run's)"
    ]
    assert taken.read_text(encoding="utf-8") == "mine"
    assert broken.requests == []
