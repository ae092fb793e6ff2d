"""`clearmed index build` (and `warm`) are configured one way, by `-c` and `--set`: each corpus flag is a shorthand
the parser writes as `--set corpus.KEY=VALUE`, so a flag gives exactly the corpus its `--set` gives; a flag and a
`--set` of the same setting together are refused in one line; a bad value is refused in one line naming the
setting."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from clearmed.api.index import IndexBuildRequest, IndexWarmRequest, corpus_config_of
from clearmed.cli.index import CorpusFlag, register
from clearmed.cli.main import main, parsed_request
from clearmed.retrieval.config import CorpusConfig
from clearmed.testing import demo_config_toml


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="clearmed")
    register(parser.add_subparsers(dest="command", required=True))
    return parser


def build_request(argv: list[str]) -> IndexBuildRequest:
    return parsed_request(IndexBuildRequest, parser().parse_args(["index", "build", *argv]))


def corpus_of(argv: list[str]) -> CorpusConfig | None:
    """The corpus `index build ARGV` would build (None: refused)."""
    try:
        return corpus_config_of(build_request(argv))
    except ValueError:
        return None


# flag -> (the flag's arguments, the same written as --set by hand, the other arguments of a buildable corpus).
# "{db}", "{toy}" and "{idx}" are a folder, a corpus file and an index folder.
BM25S = ["--path", "{toy}", "--out", "{idx}"]
LUCENE = ["--backend", "lucene", "--db-dir", "{db}", "--corpus", "textbooks"]
SHORTHANDS: dict[str, tuple[list[str], str, list[str]]] = {
    "--backend": (["--backend", "lucene"], "corpus.backend=lucene", LUCENE[2:]),
    "--db-dir": (["--db-dir", "{db}"], "corpus.db_dir={db}", ["--backend", "lucene", "--corpus", "textbooks"]),
    "--corpus": (
        ["--corpus", "textbooks", "--corpus", "statpearls"],
        'corpus.corpora=["textbooks", "statpearls"]',
        LUCENE[:4],
    ),
    "--threads": (["--threads", "3"], "corpus.threads=3", LUCENE),
    "--rebuild": (["--rebuild"], "corpus.rebuild=true", LUCENE),
    "--shards": (["--shards", "4"], "corpus.shards=4", LUCENE),
    "--preset": (["--preset", "openstax"], "corpus.preset=openstax", ["--out", "{idx}"]),
    "--path": (["--path", "{toy}"], "corpus.path={toy}", ["--out", "{idx}"]),
    "--hub": (["--hub", "MedRAG/textbooks"], "corpus.hub=MedRAG/textbooks", ["--out", "{idx}"]),
    "--out": (["--out", "{idx}"], "corpus.index_dir={idx}", ["--path", "{toy}"]),
    "--name": (["--name", "notes"], "corpus.name=notes", BM25S),
    "--id-field": (["--id-field", "doc"], "corpus.fields.id=doc", BM25S),
    "--title-field": (["--title-field", "h1", "--title-field", "h2"], 'corpus.fields.title=["h1", "h2"]', BM25S),
    "--text-field": (["--text-field", "body"], "corpus.fields.text=body", BM25S),
    "--url-field": (["--url-field", "link"], "corpus.fields.url=link", BM25S),
    "--date-field": (["--date-field", "day"], "corpus.fields.date=day", BM25S),
    "--chunk-words": (["--chunk-words", "50"], "corpus.chunking.words=50", BM25S),
    "--chunk-overlap": (["--chunk-overlap", "5"], "corpus.chunking.overlap=5", BM25S),
    "--stem": (["--stem", "simple"], "corpus.tokenizer.stem=simple", BM25S),
    "--keep-stopwords": (["--keep-stopwords"], "corpus.tokenizer.stopwords=false", BM25S),
    "--limit": (["--limit", "3"], "corpus.limit=3", BM25S),
    "--skip-bad-rows": (["--skip-bad-rows"], "corpus.on_error=skip", BM25S),
    "--data-root": (["--data-root", "{db}"], "corpus.data_root={db}", BM25S),
}


def _filled(argv: list[str], tmp_path: Path, toy: Path) -> list[str]:
    names = {"{db}": str(tmp_path / "db"), "{toy}": str(toy), "{idx}": str(tmp_path / "idx")}
    out = []
    for arg in argv:
        for name, value in names.items():
            arg = arg.replace(name, value)
        out.append(arg)
    return out


def test_every_corpus_flag_of_the_parser_has_a_case_here() -> None:
    index: argparse.ArgumentParser = parser()._subparsers._group_actions[0].choices["index"]  # type: ignore[union-attr,index]
    build: argparse.ArgumentParser = index._subparsers._group_actions[0].choices["build"]  # type: ignore[union-attr,index]
    flags = {action.option_strings[-1] for action in build._actions if isinstance(action, CorpusFlag)}
    assert flags == set(SHORTHANDS)
    # the request holds the config and its overrides alone: no second way to say a corpus setting
    assert set(IndexBuildRequest.model_fields) == {"config", "overrides"}
    assert "out" not in IndexWarmRequest.model_fields


@pytest.mark.parametrize("flag", SHORTHANDS)
def test_a_flag_gives_exactly_the_corpus_its_set_gives(flag: str, tmp_path: Path, toy_jsonl: Path) -> None:
    flag_args, setting, rest = (
        _filled(SHORTHANDS[flag][0], tmp_path, toy_jsonl),
        _filled([SHORTHANDS[flag][1]], tmp_path, toy_jsonl)[0],
        _filled(SHORTHANDS[flag][2], tmp_path, toy_jsonl),
    )
    by_flag = corpus_of([*rest, *flag_args])
    assert by_flag is not None
    assert by_flag == corpus_of([*rest, "--set", setting])
    assert by_flag != corpus_of(rest)  # the flag set something


def test_the_flags_are_the_overrides_they_stand_for(tmp_path: Path) -> None:
    request = build_request(["-c", "c.toml", "--path", "a b.jsonl", "--limit", "2", "--limit", "3", "--keep-stopwords"])
    assert request == IndexBuildRequest(
        config="c.toml", overrides=['corpus.path="a b.jsonl"', "corpus.limit=3", "corpus.tokenizer.stopwords=false"]
    )  # a flag given again replaces its value
    joined = build_request(["--text-field", "a", "--set", "corpus.name=x", "--text-field", 'b"c'])
    assert joined.overrides == ["corpus.name=x", 'corpus.fields.text=["a", "b\\"c"]']  # a repeatable one adds to it
    assert build_request(["--corpus", "medcorp"]).overrides == ['corpus.corpora=["medcorp"]']
    assert build_request(["--title-field", "h"]).overrides == ['corpus.fields.title="h"']


def test_a_flag_over_a_config_file_overrides_its_table(tmp_path: Path, toy_jsonl: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f'[corpus]\npath = "{toy_jsonl}"\nindex_dir = "idx"\nlimit = 5\n', encoding="utf-8")
    cfg = corpus_of(["-c", str(config), "--limit", "2", "--stem", "simple"])
    assert cfg is not None
    assert (cfg.limit, cfg.tokenizer.stem, cfg.index_dir) == (2, "simple", tmp_path / "idx")  # idx: beside the file


def test_a_packaged_config_is_read_as_every_command_reads_it(tmp_path: Path) -> None:
    from clearmed.demo import demo_dir

    cfg = corpus_of(["-c", "embedded", "--out", str(tmp_path / "idx")])
    assert cfg is not None
    assert (cfg.path, cfg.name, cfg.index_dir) == (demo_dir() / "textbook.jsonl", "demo-textbook", tmp_path / "idx")
    assert corpus_of(["--out", str(tmp_path / "idx")]) is None  # no -c: no config read, not the default one


def test_a_shorthand_in_a_warm_is_the_hit_cache_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from clearmed.api.config_choice import request_config

    corpus = f'backend = "bm25s"\npreset = "openstax"\nindex_dir = "{tmp_path / "idx"}"'
    (tmp_path / "c.toml").write_text(demo_config_toml(corpus=corpus), encoding="utf-8")
    monkeypatch.chdir(tmp_path)

    def hit_cache(*argv: str) -> Path | None:
        args = parser().parse_args(["index", "warm", "--benchmark", "demo", "-c", "c.toml", *argv])
        config = request_config(parsed_request(IndexWarmRequest, args))
        assert config.corpus is not None
        return config.corpus.hit_cache

    assert hit_cache("--out", "h.sqlite") == hit_cache("--set", "corpus.hit_cache=h.sqlite") == tmp_path / "h.sqlite"
    assert hit_cache() is None


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        ([*BM25S, "--limit", "2", "--set", "corpus.limit=3"], "--limit and --set corpus.limit"),
        ([*BM25S, "--set", "corpus.limit=2", "--limit", "2"], "--limit and --set corpus.limit"),  # either order, alike
        ([*BM25S, "--set", "corpus.index_dir={db}"], "--out and --set corpus.index_dir"),
        ([*BM25S, "--text-field", "b", "--set", 'corpus.fields={text="a"}'], "--text-field and --set corpus.fields"),
        (
            [*BM25S, "--set", "corpus.chunking.words=80", "--chunk-words", "50"],
            "--chunk-words and --set corpus.chunking",
        ),
    ],
)
def test_a_flag_and_a_set_of_the_same_setting_are_refused_in_one_line(
    argv: list[str], said: str, tmp_path: Path, toy_jsonl: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["index", "build", *_filled(argv, tmp_path, toy_jsonl)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert said in err
    assert "give one" in err
    assert not (tmp_path / "idx").exists()  # refused before anything was built
    assert not (tmp_path / "db").exists()


def test_a_warm_refuses_its_out_with_a_set_of_the_hit_cache(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["index", "warm", "--benchmark", "demo", "--set", "corpus.hit_cache=a.sqlite", "--out", "b.sqlite"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "clearmed: error: --out and --set corpus.hit_cache set the same setting (--out is --set corpus.hit_cache=...): "
        "give one"
    )


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        ([*BM25S, "--limit", "0"], "corpus.limit: Input should be greater than or equal to 1"),
        ([*BM25S, "--limit", "many"], "corpus.limit: Input should be a valid integer"),
        ([*BM25S, "--chunk-words", "5"], "corpus.chunking.words: Input should be greater than or equal to 10"),
        ([*BM25S, "--stem", "porter"], "corpus.tokenizer.stem: Input should be 'none' or 'simple'"),
        ([*LUCENE, "--threads", "0"], "corpus.threads: Input should be greater than or equal to 1"),
        ([*BM25S, "--shards", "2"], "corpus.shards is read by backend 'lucene', not bm25s"),
        (["--backend", "lucene", "--corpus", "textbooks"], "backend 'lucene' needs db_dir"),
        ([*BM25S, "--backend", "lucen"], "corpus.backend: Input should be 'bm25s', 'rank_bm25', 'memory' or 'lucene'"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_setting(
    argv: list[str], field: str, tmp_path: Path, toy_jsonl: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["index", "build", *_filled(argv, tmp_path, toy_jsonl)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert err.startswith("error: ")
    assert field in err
    assert "Traceback" not in err
