"""bm25s states its limit: a build that will not fit in memory is refused in one line that names Lucene."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from clearmed.cli.index import register
from clearmed.retrieval import build_memory
from clearmed.retrieval.base import EvidenceError
from clearmed.retrieval.bm25_sparse import BM25sRetriever
from clearmed.retrieval.build_memory import (
    BUILD_BASE_BYTES,
    BUILD_BYTES_PER_PASSAGE,
    build_memory_estimate,
    check_build_fits,
)
from clearmed.retrieval.config import CorpusConfig
from clearmed.retrieval.factory import build_index, source_rows
from clearmed.signatures.records import Passage


def room_for(monkeypatch: pytest.MonkeyPatch, passages: int) -> None:
    """Pretend the machine has memory for exactly `passages` passages."""
    available = BUILD_BASE_BYTES + passages * BUILD_BYTES_PER_PASSAGE + BUILD_BYTES_PER_PASSAGE // 2
    monkeypatch.setattr(build_memory, "available_memory", lambda: available)


def assert_one_line_naming_lucene(error: BaseException) -> None:
    message = str(error)
    assert "\n" not in message
    assert 'corpus.backend = "lucene"' in message
    assert f"{BUILD_BYTES_PER_PASSAGE:,} bytes a passage" in message


def test_the_estimate_is_the_measured_cost_per_passage() -> None:
    assert build_memory_estimate(0) == BUILD_BASE_BYTES
    assert build_memory_estimate(1_000_000) - build_memory_estimate(0) == 1_000_000 * BUILD_BYTES_PER_PASSAGE


def test_pubmed_is_refused_on_this_machines_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build_memory, "available_memory", lambda: 24 * 2**30)
    with pytest.raises(EvidenceError) as caught:
        check_build_fits(23_900_000, name="pubmed")
    assert_one_line_naming_lucene(caught.value)
    assert "a bm25s build of 23,900,000 passages needs about" in str(caught.value)
    assert "but 24.0 GiB is available" in str(caught.value)
    check_build_fits(1_000_000, name="openstax")  # a million fits in 24 GiB


def test_unknown_memory_never_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build_memory, "available_memory", lambda: None)
    check_build_fits(10**9, name="huge")


def test_a_corpus_file_too_large_is_refused_before_a_passage_is_read(
    toy_jsonl: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    room_for(monkeypatch, 7)
    cfg = CorpusConfig(path=toy_jsonl, index_dir=tmp_path / "idx")
    assert source_rows(cfg) == 8
    monkeypatch.setattr("clearmed.retrieval.factory.iter_corpus", pytest.fail)
    with pytest.raises(EvidenceError) as caught:
        build_index(cfg)
    assert_one_line_naming_lucene(caught.value)
    assert "a bm25s build of 8 passages" in str(caught.value)
    assert not (tmp_path / "idx").exists()


def test_the_limit_counts_the_rows_the_config_reads(toy_jsonl: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    room_for(monkeypatch, 7)
    cfg = CorpusConfig(path=toy_jsonl, limit=5)
    assert source_rows(cfg) == 5
    assert len(build_index(cfg)) == 5


def test_a_stream_is_stopped_once_it_passes_what_fits(
    toy_passages: list[Passage], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A hub stream has no row count: the build itself stops at the first passage that no longer fits.
    room_for(monkeypatch, 3)
    directory = tmp_path / "idx"
    with pytest.raises(EvidenceError) as caught:
        BM25sRetriever.build(iter(toy_passages), name="toy", directory=directory)
    assert_one_line_naming_lucene(caught.value)
    assert "a bm25s build of more than 3 passages" in str(caught.value)
    assert not directory.exists()
    assert not directory.with_name("idx.partial").exists()


def test_force_builds_anyway(toy_jsonl: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    room_for(monkeypatch, 1)
    cfg = CorpusConfig(path=toy_jsonl, index_dir=tmp_path / "idx", force=True)
    assert len(build_index(cfg)) == 8


def test_the_command_line_prints_the_one_line(
    toy_jsonl: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    room_for(monkeypatch, 2)
    parser = argparse.ArgumentParser(prog="clearmed")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["index", "build", "--path", str(toy_jsonl), "--out", str(tmp_path / "idx")])
    assert args.func(args) == 1
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0
    assert err.strip().startswith("error: corpus 'toy': a bm25s build of 8 passages")
    assert 'use the Lucene backend (corpus.backend = "lucene"' in err
