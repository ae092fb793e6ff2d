from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from clearmed.cli.index import register
from clearmed.retrieval.bm25_sparse import BM25sRetriever


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="clearmed")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_build_then_info(tmp_path: Path, toy_jsonl: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "idx"
    assert run(["index", "build", "--path", str(toy_jsonl), "--out", str(out), "--name", "toy"]) == 0
    assert "indexed 8 passages from 8 rows of toy" in capsys.readouterr().out
    assert BM25sRetriever.load(out).retrieve("levothyroxine", 1)[0].id == "d2"

    assert run(["index", "info", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["corpus"] == "toy"
    assert info["passages"] == 8
    assert info["vocabulary"] > 30
    assert info["disk_bytes"] > 0
    assert info["tokenizer"] == {"stopwords": True, "stem": "none"}
    assert info["built_at"]

    assert run(["index", "info", str(out)]) == 0
    table = capsys.readouterr().out
    assert "passages" in table
    assert "vocabulary" in table
    assert "disk size" in table


def test_build_with_field_flags_and_chunking(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "c.jsonl"
    words = " ".join(f"w{i}" for i in range(30))
    corpus.write_text(json.dumps({"doc": "x", "h": "Head", "body": words}) + "\n", encoding="utf-8")
    out = tmp_path / "idx"
    argv = [
        "index",
        "build",
        "--path",
        str(corpus),
        "--out",
        str(out),
        "--id-field",
        "doc",
        "--title-field",
        "h",
        "--text-field",
        "body",
        "--chunk-words",
        "12",
        "--chunk-overlap",
        "2",
        "--stem",
        "simple",
    ]
    assert run(argv) == 0
    index = BM25sRetriever.load(out)
    assert len(index) == 3
    assert index.manifest.tokenizer.stem == "simple"
    assert index.retrieve("w29", 1)[0].id == "x#2"


def test_build_from_config_table(tmp_path: Path, toy_jsonl: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f'[corpus]\npath = "{toy_jsonl}"\nindex_dir = "{tmp_path / "cfg-idx"}"\n', encoding="utf-8")
    assert run(["index", "build", "--config", str(config)]) == 0
    assert (tmp_path / "cfg-idx" / "manifest.json").is_file()
    # flags override the table
    assert run(["index", "build", "--config", str(config), "--out", str(tmp_path / "other"), "--limit", "2"]) == 0
    assert len(BM25sRetriever.load(tmp_path / "other")) == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--path", "{tmp}/toy.jsonl"], "--out DIR"),
        (["--out", "{tmp}/o"], "--preset, --path or --hub"),
        (["--path", "{tmp}/absent.jsonl", "--out", "{tmp}/o"], "no such corpus file"),
        (["--path", "{tmp}/bad.jsonl", "--out", "{tmp}/o"], "bad.jsonl:2: malformed JSON"),
        (["--preset", "nope", "--out", "{tmp}/o"], "unknown corpus preset"),
        (["--config", "{tmp}/absent.toml"], "absent.toml: config file not found"),
        (["--config", "{tmp}/broken.toml"], "broken.toml: not valid TOML"),
        (["--config", "{tmp}/empty.toml"], "no [corpus] table"),
        (["--config", "{tmp}/extra.toml", "--out", "{tmp}/o"], "corpus.top_k: Extra inputs"),
        (["--path", "{tmp}/toy.jsonl", "--out", "{tmp}/o", "--chunk-words", "5"], "chunking.words"),
    ],
)
def test_build_errors_are_one_clear_line(
    tmp_path: Path, toy_jsonl: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    (tmp_path / "bad.jsonl").write_text('{"id": "a", "text": "x"}\n{oops\n', encoding="utf-8")
    (tmp_path / "broken.toml").write_text("[corpus\n", encoding="utf-8")
    (tmp_path / "empty.toml").write_text("[search]\n", encoding="utf-8")
    (tmp_path / "extra.toml").write_text('[corpus]\npreset = "openstax"\ntop_k = 3\n', encoding="utf-8")
    code = run(["index", "build", *[a.replace("{tmp}", str(tmp_path)) for a in argv]])
    assert code == 2
    err = capsys.readouterr().err
    assert "error:" in err
    assert message in " ".join(err.split())
    assert "Traceback" not in err


def test_skip_bad_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "text": "alpha"}\nbroken\n{"id": "b", "text": "beta"}\n', encoding="utf-8")
    assert run(["index", "build", "--path", str(corpus), "--out", str(tmp_path / "o"), "--skip-bad-rows"]) == 0
    captured = capsys.readouterr()
    assert "indexed 2 passages from 3 rows" in captured.out
    assert "skipped 1 bad rows" in captured.err
    assert "c.jsonl:2" in captured.err


def test_info_on_a_non_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["index", "info", str(tmp_path)]) == 2
    assert "not a clearmed index" in capsys.readouterr().err


def test_config_paths_resolve_like_the_project_loader(
    tmp_path: Path, toy_jsonl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "c.toml").write_text('[corpus]\npath = "../toy.jsonl"\nindex_dir = "~/idx"\n', encoding="utf-8")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path / "configs")
    assert run(["index", "build", "--config", "c.toml"]) == 0
    assert (tmp_path / "home" / "idx" / "manifest.json").is_file()
