"""`clearmed suite`: a matrix of runs (2 configs x 2 benchmarks x 2 programs here) in normal run folders, that resumes
after a kill (finished cells skipped, the half-done one resumed) and ends with one comparison per benchmark; its
`--print-commands` lines are the commands it runs, shards and merges included; a bad suite is one line."""

from __future__ import annotations

import itertools
import json
import shlex
from pathlib import Path

import pytest

from clearmed.cli.main import main
from clearmed.evaluation import read_records
from clearmed.testing import ScriptedCall, ScriptedEngine
from tests.cli.scripted_cli import answer, config_toml, scripted

OPTIONS = {"A": "Cortisol", "B": "Insulin", "C": "Thyroxine", "D": "Aldosterone"}


def killed_at(call_number: int):
    """The parametric stage answers until its `call_number`th call, which is a Ctrl-C (a kill, as far as the
    suite can tell: nothing after it runs)."""
    count = itertools.count(1)

    def parametric(call: ScriptedCall) -> object:
        if next(count) == call_number:
            raise KeyboardInterrupt
        return answer(call)

    return parametric


def parametric_calls(engine: ScriptedEngine) -> int:
    return sum(1 for call in engine.calls if call.stage == "parametric")


@pytest.fixture
def suite_file(tmp_path: Path) -> Path:
    """Two configs (the second retrieves 3 passages, not 5), the demo bundle and a MIRAGE MedQA file of 4
    questions, Direct and CLEAR, 3 questions of each benchmark."""
    for name, program in (("alpha", ""), ("beta", "local_k = 3")):
        (tmp_path / f"{name}.toml").write_text(config_toml(program), encoding="utf-8")
    questions = {
        f"{i:04d}": {"question": f"Question {i}?", "options": OPTIONS, "answer": "AB"[i % 2]} for i in range(4)
    }
    (tmp_path / "mirage.json").write_text(json.dumps({"medqa": questions}), encoding="utf-8")
    path = tmp_path / "suite.toml"
    path.write_text(
        f'out = "{tmp_path / "suite"}"\n'
        f'configs = ["{tmp_path / "alpha.toml"}", "{tmp_path / "beta.toml"}"]\n'
        'programs = ["direct", "clear"]\n'
        "limit = 3\n"
        'benchmarks = ["demo", {{ name = "mirage-medqa", source = "{0}" }}]\n'.format(tmp_path / "mirage.json"),
        encoding="utf-8",
    )
    return path


def cell(tmp_path: Path, config: str, benchmark: str, program: str) -> Path:
    return tmp_path / "suite" / config / benchmark / f"{program}-n3-s0"


CELLS = [
    (config, benchmark, program)
    for config in ("alpha", "beta")
    for benchmark in ("demo", "mirage-medqa")
    for program in ("direct", "clear")
]


def test_a_killed_suite_resumes_skipping_finished_cells_and_ends_with_one_comparison_per_benchmark(
    suite_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Every question calls the parametric stage once (Direct's one stage, CLEAR's first pathway): the 14th call is
    # the second question of cell 5 (beta, demo, direct).
    scripted(monkeypatch, parametric=killed_at(14))
    assert main(["suite", str(suite_file)]) == 130
    assert "clearmed: interrupted" in capsys.readouterr().err
    finished = [cell(tmp_path, *c) for c in CELLS[:4]]
    assert all((folder / "summary.json").is_file() for folder in finished)
    half_done = cell(tmp_path, *CELLS[4])
    assert len(list(read_records(half_done))) == 1
    assert not (half_done / "summary.json").exists()
    assert not (tmp_path / "suite" / "compare").exists()
    before = {folder: (folder / "results.jsonl").read_bytes() for folder in finished}

    engine = scripted(monkeypatch)
    assert main(["suite", str(suite_file)]) == 0
    err = capsys.readouterr().err
    assert err.count("done before") == 4
    assert parametric_calls(engine) == 2 + 3 * 3  # the half-done cell's two questions left, then three cells of 3
    assert {folder: (folder / "results.jsonl").read_bytes() for folder in finished} == before  # untouched
    for config, benchmark, program in CELLS:
        summary = json.loads((cell(tmp_path, config, benchmark, program) / "summary.json").read_text())
        assert (summary["program"], summary["benchmark"], summary["evaluated"]) == (program, benchmark, 3)
    for benchmark in ("demo", "mirage-medqa"):
        table = (tmp_path / "suite" / "compare" / benchmark / "comparison.md").read_text()
        rows = [line for line in table.splitlines() if line.startswith("| ") and f"| {benchmark} |" in line]
        labels = {row.split(" | ")[0].removeprefix("| ") for row in rows}  # runs told apart by their config
        assert labels == {f"{c}/{benchmark}/{p}-n3-s0" for c in ("alpha", "beta") for p in ("direct", "clear")}
    assert "Paired against the first run of each benchmark" in table
    # a third run has nothing left to do and calls nothing
    engine = scripted(monkeypatch)
    assert main(["suite", str(suite_file)]) == 0
    assert engine.calls == []
    assert capsys.readouterr().err.count("done before") == 8


def test_print_commands_are_the_commands_the_suite_runs_shards_and_merges_included(
    suite_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["suite", str(suite_file), "--shards", "2", "--print-commands"]) == 0
    lines = capsys.readouterr().out.splitlines()
    evals = [line for line in lines if line.startswith("clearmed eval ")]
    merges = [line for line in lines if line.startswith("clearmed merge ")]
    compares = [line for line in lines if line.startswith("clearmed compare ")]
    assert lines == evals + merges + compares  # evals first (one array task each), merges after, comparisons last
    assert (len(evals), len(merges), len(compares)) == (16, 8, 2)
    first = shlex.split(evals[0])
    alpha_demo = tmp_path / "suite" / "alpha" / "demo"
    assert first == [
        "clearmed", "eval", "--program", "direct", "--benchmark", "demo", "-c", str(tmp_path / "alpha.toml"),
        "--limit", "3", "--seed", "0", "--run-dir", str(alpha_demo / "direct-n3-s0-shard1of2"), "--shard", "1/2",
    ]  # fmt: skip
    assert shlex.split(merges[0]) == [
        "clearmed", "merge", str(alpha_demo / "direct-n3-s0-shard1of2"), str(alpha_demo / "direct-n3-s0-shard2of2"),
        "--out", str(alpha_demo / "direct-n3-s0"),
    ]  # fmt: skip
    assert "--source" in shlex.split(evals[4])  # the MIRAGE cells
    assert shlex.split(compares[1])[-2:] == ["--out", str(tmp_path / "suite" / "compare" / "mirage-medqa")]
    assert main(["suite", str(suite_file), "--shards", "2", "--print-commands", "merge"]) == 0
    assert capsys.readouterr().out.splitlines() == merges
    # An array job: the printed evals in any order, then the merges; the suite then finds every cell done and
    # only compares.
    engine = scripted(monkeypatch)
    for line in [*reversed(evals[:4]), *merges[:2]]:
        assert main(shlex.split(line)[1:]) == 0
    merged = alpha_demo / "clear-n3-s0"
    assert [r.index for r in read_records(merged)] == [0, 1, 2]
    capsys.readouterr()
    assert main(["suite", str(suite_file), "--shards", "2", "--print-commands", "eval"]) == 0
    assert capsys.readouterr().out.splitlines() == evals  # printing runs nothing
    calls = len(engine.calls)
    assert main(["suite", "--program", "direct", "--program", "clear", "--benchmark", "demo", "-c",
                 str(tmp_path / "alpha.toml"), "--limit", "3", "--shards", "2", "--out", str(tmp_path / "suite")]) == 0  # fmt: skip
    assert len(engine.calls) == calls  # the matrix on the command line names the same cells: all done before
    assert capsys.readouterr().err.count("done before") == 2
    assert (tmp_path / "suite" / "compare" / "demo" / "comparison.md").is_file()


def test_overrides_of_the_file_and_the_command_line_reach_every_cell_and_are_validated_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.toml"
    path.write_text(
        'configs = ["embedded"]\nprograms = ["direct"]\nbenchmarks = ["demo"]\noverrides = ["program.local_k=3"]\n',
        encoding="utf-8",
    )
    assert main(["suite", str(path), "--set", "run.seed=4", "--print-commands", "eval"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    argv = shlex.split(line)
    assert [argv[i + 1] for i, item in enumerate(argv) if item == "--set"] == ["program.local_k=3", "run.seed=4"]
    # a bad override is refused in one line before any cell runs or is printed
    assert main(["suite", str(path), "--set", "program.local_kk=3", "--print-commands"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "program.local_kk: unknown key (with --set program.local_k=3 --set program.local_kk=3)" in captured.err
    assert len(captured.err.splitlines()) == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('programs = ["direct", "nope"]', "suite: unknown program 'nope'; choose from clear, "),
        ('programs = ["direct", "direct"]', "suite: two programs 'direct': their runs would share a folder"),
        ('benchmarks = ["nope"]', "unknown benchmark 'nope'; available: "),
        ('benchmarks = ["demo", "demo"]', "suite: two benchmarks labelled 'demo'"),
        ('configs = ["a/x.toml", "b/x.toml"]', "suite: two configs named 'x'"),
        ("seeds = [1, 1]", "suite: two seeds '1'"),
        (
            'benchmarks = [{ name = "demo", ids = "ids.txt" }]\nlimit = 3',
            "benchmark demo has ids, so the suite takes no",
        ),
        ("shards = 0", "shards: Input should be greater than or equal to 1"),
        ("colour = 1", "colour: Extra inputs are not permitted"),
        ('benchmarks = [{ name = "demo", label = "a b" }]', "benchmarks.0.label: String should match pattern"),
        ("programs = [", "not valid TOML"),
    ],
)
def test_a_bad_suite_file_is_one_line(
    text: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = {
        "configs": 'configs = ["embedded"]',
        "programs": 'programs = ["direct"]',
        "benchmarks": 'benchmarks = ["demo"]',
    }
    key = text.split(" ", 1)[0]
    lines = [line for name, line in table.items() if name != key] + [text]
    path = tmp_path / "bad.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["suite", str(path), "--print-commands"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert message in err, err


def test_a_suite_needs_a_file_or_a_whole_matrix_not_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["suite", "--program", "direct", "--benchmark", "demo"]) == 2
    assert "give a suite file, or a matrix: --program, --benchmark and -c" in capsys.readouterr().err
    path = tmp_path / "s.toml"
    path.write_text('configs = ["embedded"]\nprograms = ["direct"]\nbenchmarks = ["demo"]\n', encoding="utf-8")
    assert main(["suite", str(path), "--program", "clear"]) == 2
    assert "give a suite file or a matrix" in capsys.readouterr().err
    assert main(["suite", str(path), "--shards", "0"]) == 2
    assert "--shards must be at least 1" in capsys.readouterr().err
    assert main(["suite", str(tmp_path / "missing.toml")]) == 2
    assert "cannot read the suite file" in capsys.readouterr().err
    # the default folder of a suite file is runs/suites/<its name>
    assert main(["suite", str(path), "--print-commands"]) == 0
    assert "--run-dir runs/suites/s/embedded/demo/direct-all-s0" in capsys.readouterr().out


def test_the_readme_suite_example_prints_the_array_it_says(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    example = readme.split("```toml\n# suite.toml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "suite.toml"
    path.write_text(example, encoding="utf-8")
    assert main(["suite", str(path), "--shards", "8", "--print-commands", "eval"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 384  # as the README's comment says
    folders = {shlex.split(line)[shlex.split(line).index("--run-dir") + 1] for line in lines}
    assert len(folders) == 384
    assert sum("-n500-s0-program.local_k=8-shard" in folder for folder in folders) == 2 * 2 * 3 * 8  # the sweep's set
