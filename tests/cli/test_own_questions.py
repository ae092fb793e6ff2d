"""Your own questions on the command line: `clearmed eval --benchmark questions --source FILE` reads the format
`clearmed.evaluate` takes a list in, with the ids the Python API gives; `--limit`, `--ids`, `--shard` with
`clearmed merge`, and a suite cell take it as they take a benchmark; a bad row is one line naming its line."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from clearmed.api.questions import question_of
from clearmed.api.suite_file import suite_from_table
from clearmed.benchmarks import sample
from clearmed.cli.main import main
from clearmed.evaluation import read_records
from clearmed.evaluation.store import load_manifest
from tests.cli.scripted_cli import config_toml, scripted

# Every other question has an id of its own; the rest get the digest of their text and options.
ROWS = [
    {
        "question": f"Case {n}. Which hormone is deficient in Addison disease?",
        "options": ["Cortisol", "Insulin", "Thyroxine"],
        "answer": "AB"[n % 2],
        **({"id": f"case-{n}"} if n % 2 else {}),
    }
    for n in range(6)
]
IDS = [question_of(row).id for row in ROWS]


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A scripted config whose default run folders go under tmp_path/runs, and the questions file."""
    scripted(monkeypatch)
    config = tmp_path / "remote.toml"
    config.write_text(config_toml(run=f'runs_dir = "{tmp_path / "runs"}"'), encoding="utf-8")
    questions = tmp_path / "mine.jsonl"
    questions.write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8")
    return config, questions


def own(config: Path, questions: Path, *extra: str) -> list[str]:
    return [
        "eval",
        "--program",
        "direct",
        "--benchmark",
        "questions",
        "--source",
        str(questions),
        "-c",
        str(config),
        *extra,
    ]


def recorded_ids(folder: Path) -> list[str]:
    return [record.question_id for record in sorted(read_records(folder), key=lambda record: record.index)]


def test_eval_runs_your_own_file_with_the_ids_the_python_api_gives(setup: tuple[Path, Path], tmp_path: Path) -> None:
    config, questions = setup
    assert main(own(config, questions, "--run-dir", str(tmp_path / "all"))) == 0
    assert load_manifest(tmp_path / "all" / "manifest.json").question_ids == IDS
    assert recorded_ids(tmp_path / "all") == IDS
    assert ("case-1", IDS[0][:2]) == (IDS[1], "q-")  # the given ids kept, the others the API's digests
    summary = json.loads((tmp_path / "all" / "summary.json").read_text())
    assert (summary["benchmark"], summary["evaluated"]) == ("questions", 6)
    # --limit and --seed draw the sample a benchmark's would; --ids runs exactly those, in their order
    assert main(own(config, questions, "--limit", "2", "--seed", "3", "--run-dir", str(tmp_path / "two"))) == 0
    assert recorded_ids(tmp_path / "two") == sample(IDS, limit=2, seed=3)
    (tmp_path / "ids.txt").write_text(f"case-3\n{IDS[0]}\n", encoding="utf-8")
    assert main(own(config, questions, "--ids", str(tmp_path / "ids.txt"), "--run-dir", str(tmp_path / "ids"))) == 0
    assert load_manifest(tmp_path / "ids" / "manifest.json").question_ids == ["case-3", IDS[0]]


def test_shards_one_and_two_of_two_cover_the_file_once_and_merge(setup: tuple[Path, Path], tmp_path: Path) -> None:
    config, questions = setup
    for shard in ("1/2", "2/2"):
        assert main(own(config, questions, "--shard", shard)) == 0
    folder = tmp_path / "runs" / "remote" / "questions-mine"  # named by the file, so two files' runs never meet
    shards = [folder / f"direct-all-s0-shard{k}of2" for k in (1, 2)]
    first, second = (recorded_ids(shard) for shard in shards)
    assert [] not in (first, second)
    assert sorted(first + second) == sorted(IDS)  # every question once, none in both shards
    assert main(["merge", *map(str, shards), "--out", str(folder / "direct-all-s0")]) == 0
    assert sorted(recorded_ids(folder / "direct-all-s0")) == sorted(IDS)


def test_a_suite_cell_runs_your_own_file(
    setup: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, questions = setup
    suite = tmp_path / "suite.toml"
    suite.write_text(
        f'out = "{tmp_path / "suite"}"\nconfigs = ["{config}"]\nprograms = ["direct"]\nshards = 2\n'
        f'[[benchmarks]]\nname = "questions"\nsource = "{questions}"\n',
        encoding="utf-8",
    )
    assert main(["suite", str(suite), "--print-commands", "eval"]) == 0
    first = shlex.split(capsys.readouterr().out.splitlines()[0])
    assert first[first.index("--benchmark") + 1] == "questions"
    assert first[first.index("--source") + 1] == str(questions)
    assert main(["suite", str(suite)]) == 0
    cell = tmp_path / "suite" / "remote" / "questions-mine" / "direct-all-s0"  # as clearmed eval names it
    assert sorted(recorded_ids(cell)) == sorted(IDS)
    summary = json.loads((cell / "summary.json").read_text())
    assert (summary["benchmark"], summary["evaluated"]) == ("questions", 6)


def test_two_files_in_one_suite_are_two_folders_without_labels(tmp_path: Path) -> None:
    files = [{"name": "questions", "source": str(tmp_path / name)} for name in ("a.jsonl", "b.jsonl")]
    table: dict[str, object] = {"out": str(tmp_path), "configs": ["embedded"], "programs": ["direct"]}
    suite = suite_from_table({**table, "benchmarks": files}, "suite.toml")
    assert [benchmark.folder for benchmark in suite.benchmarks] == ["questions-a", "questions-b"]


def test_a_suite_of_your_own_questions_needs_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text('configs = ["embedded"]\nprograms = ["direct"]\nbenchmarks = ["questions"]\n', encoding="utf-8")
    assert main(["suite", str(suite)]) == 2
    assert capsys.readouterr().err.strip() == (
        "clearmed: error: suite: benchmark questions needs source = <your questions file>"
    )


def test_a_bad_row_is_one_line_naming_its_line_or_skipped(
    setup: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, questions = setup
    bad = tmp_path / "bad.jsonl"
    lines = questions.read_text().splitlines()
    bad.write_text("\n".join([lines[0], '{"question": "Which?", "options": "x, y"}', *lines[1:3]]) + "\n")
    assert main(own(config, bad, "--run-dir", str(tmp_path / "bad"))) == 2
    err = capsys.readouterr().err
    assert (
        err.strip()
        == f"clearmed: error: {bad}:2: options: give a list of option texts (or letters to texts), not one string"
    )
    assert not (tmp_path / "bad").exists()
    assert main(own(config, bad, "--skip-bad-rows", "--run-dir", str(tmp_path / "skipped"))) == 0
    assert "1 malformed rows skipped" in capsys.readouterr().err
    assert recorded_ids(tmp_path / "skipped") == IDS[:3]


def test_the_spelling_is_named_where_a_user_looks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["benchmarks"]) == 0
    assert "--benchmark questions --source my.jsonl" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    assert "'questions' for your own file" in " ".join(capsys.readouterr().out.split())
    assert main(["eval", "--benchmark", "questions", "--source", "shared", "--program", "direct"]) == 2
    assert "questions reads your own file (--source FILE)" in capsys.readouterr().err
