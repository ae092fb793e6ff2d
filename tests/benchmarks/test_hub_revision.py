"""Hub revisions: `load_benchmark(..., revision=)` reads the hub copy at a branch, tag or commit, and says which commit
it read. Offline: `datasets.load_dataset` is the fake hub of conftest.py, or a fake that serves a dataset from a folder
laid out as the datasets cache lays out a prepared hub copy (``.../<config>/<version>/<commit>/*.arrow``)."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

from clearmed.benchmarks import BenchmarkSourceError, load_benchmark
from clearmed.benchmarks._io import HubSpec

COMMIT = "0123456789abcdef0123456789abcdef01234567"
MEDQA = "hf://datasets/GBaker/MedQA-USMLE-4-options/phrases_no_exclude_test.jsonl"


def cached_copy(tmp_path: Path, jsonl: Path, commit: str) -> datasets.Dataset:
    """The rows as the datasets cache holds a hub copy prepared at `commit`: arrow files in a folder named by it."""
    rows = [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]
    folder = tmp_path / "cache" / "openlifescienceai___medmcqa" / "default" / "0.0.0" / commit
    datasets.Dataset.from_list(rows).save_to_disk(str(folder))
    return datasets.load_from_disk(str(folder))


@pytest.fixture
def medmcqa_at(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fixtures: Path) -> list[dict[str, object]]:
    """A fake hub for medmcqa whose prepared copy is cached under COMMIT; records the keyword arguments of each call."""
    calls: list[dict[str, object]] = []
    copy = cached_copy(tmp_path, fixtures / "medmcqa" / "validation.jsonl", COMMIT)

    def load(*args: object, **kwargs: object) -> datasets.Dataset:
        assert args == ("openlifescienceai/medmcqa",)
        calls.append(kwargs)
        return copy

    monkeypatch.setattr(datasets, "load_dataset", load)
    return calls


def test_a_hub_repository_is_read_at_the_revision_asked_and_says_the_commit_it_read(medmcqa_at) -> None:
    bench = load_benchmark("medmcqa", revision="v1.0")
    assert medmcqa_at == [{"split": "validation", "revision": "v1.0"}]
    assert bench.revision == COMMIT  # the tag, resolved: the commit its cached copy was prepared at
    assert bench.source.endswith("split validation revision v1.0")


def test_an_unpinned_load_still_records_the_commit_it_read(medmcqa_at) -> None:
    bench = load_benchmark("medmcqa")
    assert medmcqa_at == [{"split": "validation"}]  # no revision argument: the hub's default branch
    assert bench.revision == COMMIT


def test_files_read_by_a_builder_are_pinned_in_their_address(fake_hub, fixtures: Path) -> None:
    pinned = "hf://datasets/GBaker/MedQA-USMLE-4-options@v2/phrases_no_exclude_test.jsonl"
    fake_hub.files[pinned] = fixtures / "medqa" / "test.jsonl"
    bench = load_benchmark("medqa", revision="v2")
    args, kwargs = fake_hub.calls[0]
    assert args == ("json",)
    # the json builder's own revision= would pick the builder's code, not the files
    assert kwargs == {"split": "train", "data_files": pinned}
    assert len(bench) == 3
    # the datasets cache does not name the commit of files a builder read: the revision asked is what is known
    assert bench.revision == "v2"


def test_an_unpinned_builder_load_knows_no_revision(fake_hub, fixtures: Path) -> None:
    fake_hub.files[MEDQA] = fixtures / "medqa" / "test.jsonl"
    assert load_benchmark("medqa").revision is None


def test_every_file_of_a_benchmark_is_read_at_the_revision(fake_hub, fixtures: Path) -> None:
    for name in ["general_surgery", "internal_medicine", "obgyn", "pediatrics", "psychiatry"]:
        fake_hub.files[f"hf://datasets/nejm-ai-qa/exams@{COMMIT}/{name}.csv"] = fixtures / "nejm" / f"{name}.csv"
    bench = load_benchmark("nejm-qa", on_error="skip", revision=COMMIT)
    assert len(fake_hub.calls) == 5
    assert all(f"exams@{COMMIT}/" in str(kwargs["data_files"]) for _, kwargs in fake_hub.calls)
    assert bench.revision == COMMIT


def test_a_revision_for_a_local_file_is_one_line(fixtures: Path) -> None:
    with pytest.raises(
        BenchmarkSourceError, match=r"^medqa: a revision picks a hub copy; the local source .* has none$"
    ):
        load_benchmark("medqa", source=fixtures / "medqa" / "test.jsonl", revision="v1")


def test_a_revision_cannot_be_put_in_an_address_that_names_no_repository() -> None:
    with pytest.raises(BenchmarkSourceError, match="no revision"):
        HubSpec(path="json", data_files="hf://datasets/lonely.jsonl", revision="v1").load_arguments()
