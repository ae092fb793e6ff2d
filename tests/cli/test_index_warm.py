"""`clearmed index warm`: every question of a benchmark searched once into the local hit cache, with the query the
local pathway searches; a MedRAG run replayed from it opens no index and answers from the very hits a live run
has; a run that asks for hits the cache lacks stops with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clearmed.api import assemble
from clearmed.cli.main import main
from clearmed.demo import demo_dir
from clearmed.retrieval import bm25_sparse
from clearmed.testing import demo_config_toml, label_all, pathway_replies, scripted_lm, verifier_reply


@pytest.fixture(autouse=True)
def scripted_model(monkeypatch: pytest.MonkeyPatch) -> None:
    replies = {
        **pathway_replies("A", "A", "A"),
        "source_quality": label_all("high"),
        "verifier": verifier_reply("consensus"),
    }
    lm, _ = scripted_lm(replies)
    monkeypatch.setattr(assemble, "build_role_lms", lambda config, roles=("main", "assessor"): {"main": lm})


def write_config(tmp_path: Path, name: str, cache: str | None = None, backend: str = "bm25s") -> Path:
    lines = [f'backend = "{backend}"', f'path = "{demo_dir() / "textbook.jsonl"}"']
    lines.append('fields = { id = "id", title = "title", text = "text" }')
    if backend == "bm25s":
        lines.append(f'index_dir = "{tmp_path / "index"}"')
    if cache is not None:
        lines.append(f'hit_cache = "hits.sqlite"\nhit_cache_mode = "{cache}"')
    path = tmp_path / f"{name}.toml"
    path.write_text(demo_config_toml(corpus="\n".join(lines), program="local_k = 4"), encoding="utf-8")
    return path


def local_passages(run_dir: Path) -> list[list[dict[str, object]]]:
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    return [row["decision"]["bundle"]["local_passages"] for row in sorted(rows, key=lambda r: r["question_id"])]


def evaluate(config: Path, run_dir: Path, *extra: str) -> int:
    argv = ["eval", "-c", str(config), "--benchmark", "demo", "--program", "medrag", "--run-dir", str(run_dir)]
    return main([*argv, "--threads", "2", *extra])


def refuse_opening_the_index(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the index was opened")

    monkeypatch.setattr(bm25_sparse.BM25sRetriever, "load", refuse)
    monkeypatch.setattr(bm25_sparse.BM25sRetriever, "build", refuse)


def test_a_medrag_run_replayed_from_a_warmed_cache_has_the_live_runs_hits_and_opens_no_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert evaluate(write_config(tmp_path, "live"), tmp_path / "live") == 0
    warm = ["index", "warm", "--benchmark", "demo", "--program", "medrag", "-c", str(write_config(tmp_path, "live"))]
    assert main([*warm, "--out", str(tmp_path / "hits.sqlite")]) == 0
    said = capsys.readouterr().out
    assert f"warmed {tmp_path / 'hits.sqlite'}: " in said
    assert "12 questions of demo (12 searched, 0 already cached), k=4, textbook at index version bm25s-" in said
    assert main([*warm, "--out", str(tmp_path / "hits.sqlite")]) == 0  # warming again searches nothing
    assert "(0 searched, 12 already cached)" in capsys.readouterr().out

    refuse_opening_the_index(monkeypatch)
    assert evaluate(write_config(tmp_path, "replay", cache="replay"), tmp_path / "replay") == 0
    live, replayed = local_passages(tmp_path / "live"), local_passages(tmp_path / "replay")
    assert len(replayed) == 12
    assert all(len(passages) == 4 for passages in replayed)
    assert replayed == live  # the same passages, ids, ranks, scores and queries


def test_the_config_names_the_file_and_a_record_run_fills_it_as_it_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    recording = write_config(tmp_path, "record", cache="record")
    assert (
        main(["index", "warm", "--benchmark", "demo", "--limit", "2", "--program", "medrag", "-c", str(recording)]) == 0
    )
    assert "2 questions of demo (2 searched, 0 already cached)" in capsys.readouterr().out
    assert evaluate(recording, tmp_path / "recorded") == 0  # searches the other 10 and stores them
    refuse_opening_the_index(monkeypatch)
    assert evaluate(write_config(tmp_path, "replay", cache="replay"), tmp_path / "replay") == 0
    assert local_passages(tmp_path / "replay") == local_passages(tmp_path / "recorded")


def test_a_replay_missing_a_question_stops_the_run_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warm = ["index", "warm", "--benchmark", "demo", "--limit", "2", "--program", "medrag"]
    assert (
        main(
            [*warm, "-c", str(write_config(tmp_path, "replay", cache="replay")), "--out", str(tmp_path / "hits.sqlite")]
        )
        == 0
    )
    capsys.readouterr()
    assert evaluate(write_config(tmp_path, "replay", cache="replay"), tmp_path / "run", "--limit", "4") == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("clearmed: error:")]
    assert len(lines) == 1
    assert "hit cache" in lines[0]
    assert "has no hits for k=4 and the query" in lines[0]
    assert "the run stopped" in lines[0]


@pytest.mark.parametrize(
    ("extra", "backend", "message"),
    [
        (["--program", "direct"], "bm25s", "direct searches no local corpus"),
        (["--program", "nope"], "bm25s", "unknown program 'nope'"),
        ([], "bm25s", "say which file to fill: --out FILE (or corpus.hit_cache in the config)"),
        (["--out", "h.sqlite"], "memory", "hit_cache keeps the hits of an index as built"),
    ],
)
def test_warm_refuses_bad_input_in_one_line(
    extra: list[str], backend: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, "c", backend=backend)
    assert main(["index", "warm", "--benchmark", "demo", "-c", str(config), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "index").exists()  # refused before anything was built


@pytest.mark.parametrize(
    ("kind", "code", "said"),
    [
        ("timeout", 1, "1 search failed for a reason that may pass, not stored: warm again to fill them"),
        ("index", 2, "clearmed: error: the index broke"),
    ],
)
def test_a_failing_search_while_warming(
    kind: str, code: int, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from clearmed.retrieval.base import EvidenceError

    config = write_config(tmp_path, "c")
    assert main(["index", "build", "--config", str(config)]) == 0
    live = bm25_sparse.BM25sRetriever.retrieve
    calls: list[str] = []

    def second_fails(self: bm25_sparse.BM25sRetriever, query: str, k: int) -> list[object]:
        calls.append(query)
        if len(calls) == 2:
            raise EvidenceError("the index broke", kind=kind)  # type: ignore[arg-type]
        return live(self, query, k)  # type: ignore[return-value]

    monkeypatch.setattr(bm25_sparse.BM25sRetriever, "retrieve", second_fails)
    warm = [
        "index",
        "warm",
        "--benchmark",
        "demo",
        "--limit",
        "3",
        "-c",
        str(config),
        "--out",
        str(tmp_path / "h.sqlite"),
    ]
    assert main(warm) == code
    assert said in " ".join(capsys.readouterr().err.split())
    if kind == "timeout":  # the other questions were stored; warming again searches only the one that failed
        monkeypatch.setattr(bm25_sparse.BM25sRetriever, "retrieve", live)
        assert main(warm) == 0
        assert "(1 searched, 2 already cached)" in capsys.readouterr().out
