"""Sweeps that don't collide (issue 50, item 4): a run with `--set` overrides gets its own default folder, named by a
short label of them (a run without any keeps its name, so its folder still resumes); a folder holding another config
is refused naming the settings that differ; a suite sweeps over sets of `--set` values, one folder per set."""

from __future__ import annotations

import itertools
import json
import shlex
from pathlib import Path

import pytest

from clearmed.api.suite_file import suite_from_table
from clearmed.cli.main import main
from clearmed.config import overrides_label
from clearmed.core.errors import UsageError
from clearmed.evaluation import read_records
from clearmed.evaluation.folder import default_run_dir
from tests.cli.scripted_cli import config_toml, scripted


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "fake-a.toml"
    path.write_text(config_toml(run=f'runs_dir = "{tmp_path / "runs"}"'), encoding="utf-8")
    return path


def test_the_label_of_overrides_is_short_safe_and_the_same_for_the_same_settings() -> None:
    assert overrides_label([]) == ""
    assert overrides_label(["program.local_k=3"]) == "program.local_k=3"
    # one name for one config: sorted by key, a key set twice counted once with its last value
    assert overrides_label(["program.local_k=3", "program.dynamic_k=4"]) == "program.dynamic_k=4,program.local_k=3"
    assert overrides_label(["program.dynamic_k=4", "program.local_k=6", "program.local_k=3"]) == (
        "program.dynamic_k=4,program.local_k=3"
    )
    # a URL shows its host, port and path: never a user or password
    server = overrides_label(["backbones.main.api_base=http://ann:s3cret-pw@10.0.0.7:8000/v1"])
    assert server == "backbones.main.api_base=10.0.0.7-8000-v1"
    assert overrides_label(['backbones.main.model="Qwen/Qwen3.5-9B"']) == "backbones.main.model=Qwen-Qwen3.5-9B"
    # a long one is cut to 64 characters and ends in a digest of the whole, so two long sweeps stay apart
    long_a = overrides_label([f"program.setting_{n}=value_{n}" for n in range(8)])
    long_b = overrides_label([f"program.setting_{n}=value_{n}" for n in range(9)])
    assert len(long_a) == len(long_b) == 64
    assert long_a != long_b
    assert long_a.startswith("program.setting_0=value_0,")


def test_default_folders_without_overrides_keep_their_names() -> None:
    runs = Path("runs")
    assert default_run_dir(runs, "fake-a", "medqa", "clear", 40, 0) == runs / "fake-a" / "medqa" / "clear-n40-s0"
    labelled = default_run_dir(runs, "fake-a", "medqa", "clear", 40, 0, (1, 2), label="program.local_k=3")
    assert labelled == runs / "fake-a" / "medqa" / "clear-n40-s0-program.local_k=3-shard1of2"


def test_a_sweep_by_set_gets_its_own_folder_beside_its_baseline(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scripted(monkeypatch)
    argv = ["eval", "--program", "direct", "--benchmark", "demo", "--limit", "2", "-c", str(config)]
    assert main(argv) == 0
    # before: "runs/fake-a/demo/direct-n2-s0 holds a different run (config '...' != '...')"
    assert main([*argv, "--set", "program.local_k=3"]) == 0
    demo = tmp_path / "runs" / "fake-a" / "demo"
    assert sorted(path.name for path in demo.iterdir()) == ["direct-n2-s0", "direct-n2-s0-program.local_k=3"]
    capsys.readouterr()
    assert main(argv) == 0  # the baseline's folder resumes, as it did before labels
    assert len(list(read_records(demo / "direct-n2-s0"))) == 2


def test_a_folder_of_another_config_is_refused_naming_the_settings_that_differ(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scripted(monkeypatch)
    run_dir = tmp_path / "run"
    argv = ["eval", "--program", "direct", "--benchmark", "demo", "--limit", "2", "-c", str(config)]
    assert main([*argv, "--run-dir", str(run_dir), "--set", "program.local_k=3"]) == 0
    capsys.readouterr()
    changed = ["--set", "program.local_k=7", "--set", "program.dynamic_k=2", "--set", "thresholds.guard_min_high=9"]
    assert main([*argv, "--run-dir", str(run_dir), *changed, "--set", "program.web_query=lm"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"clearmed: error: {run_dir} holds a different run (config '")
    # the dotted keys with both values (the folder's first), the first three and how many more
    assert line.endswith(
        "thresholds.guard_min_high 1 != 9, program.local_k 3 != 7, program.dynamic_k 8 != 2 and 1 more); "
        "choose another --run-dir"
    )


def suite_table(tmp_path: Path, **more: object) -> dict[str, object]:
    return {
        "out": str(tmp_path / "suite"),
        "configs": [str(tmp_path / "fake-a.toml")],
        "programs": ["direct"],
        "benchmarks": ["demo"],
        "limit": 2,
        **more,
    }


def test_a_suite_sweeps_over_sets_of_overrides_one_folder_each(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sets = [[], ["program.local_k=3"], ["program.local_k=3", "program.dynamic_k=2"]]
    suite_file = tmp_path / "sweep.toml"
    suite_file.write_text(
        f'out = "{tmp_path / "suite"}"\nconfigs = ["{config}"]\nprograms = ["direct"]\nbenchmarks = ["demo"]\n'
        f'limit = 2\noverrides = ["program.json_fallback=false"]\nsets = {json.dumps(sets)}\n',
        encoding="utf-8",
    )
    assert main(["suite", str(suite_file), "--print-commands", "eval"]) == 0
    commands = [shlex.split(line) for line in capsys.readouterr().out.splitlines()]
    assert [command[command.index("--run-dir") + 1] for command in commands] == [
        str(tmp_path / "suite" / "fake-a" / "demo" / name)
        for name in ("direct-n2-s0", "direct-n2-s0-program.local_k=3", "direct-n2-s0-program.dynamic_k=2,program.local_k=3")
    ]  # fmt: skip
    assert [[item for flag, item in itertools.pairwise(c) if flag == "--set"] for c in commands] == [
        ["program.json_fallback=false", *overrides] for overrides in sets
    ]
    scripted(monkeypatch)
    assert main(["suite", str(suite_file)]) == 0
    err = capsys.readouterr().err
    assert "cell 2/3: direct on demo with fake-a (program.local_k=3), seed 0" in err
    settings = [
        json.loads((Path(c[c.index("--run-dir") + 1]) / "config.json").read_text(encoding="utf-8"))["program"]
        for c in commands
    ]
    assert [(s["local_k"] == 3, s["dynamic_k"] == 2, s["json_fallback"]) for s in settings] == [
        (False, False, False),
        (True, False, False),
        (True, True, False),
    ]
    compared = (tmp_path / "suite" / "compare" / "demo" / "comparison.md").read_text(encoding="utf-8")
    assert "direct-n2-s0-program.local_k=3" in compared  # the sweep's runs, side by side


def test_named_sets_label_their_folders_and_bad_sets_are_one_line(tmp_path: Path) -> None:
    named = suite_from_table(suite_table(tmp_path, sets={"base": [], "k3": ["program.local_k=3"]}), "s.toml")
    assert [(cell.label, cell.overrides) for cell in named.cells()] == [("base", ()), ("k3", ("program.local_k=3",))]
    with pytest.raises(UsageError, match=r"suite: two sets labelled 'program.local_k=3'"):
        suite_from_table(suite_table(tmp_path, sets=[["program.local_k=3"], ["program.local_k=3"]]), "s.toml")
    with pytest.raises(UsageError, match=r"s.toml: sets: the set name 'k 3' names a folder"):
        suite_from_table(suite_table(tmp_path, sets={"k 3": ["program.local_k=3"]}), "s.toml")
    plain = suite_from_table(suite_table(tmp_path), "s.toml")
    assert [(cell.label, cell.overrides) for cell in plain.cells()] == [("", ())]  # no sweep: the cells as before
