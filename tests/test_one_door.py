"""`clearmed.api` is the one door of a run: every option of `clearmed eval` is a field of `EvalRequest`, and a run
through the command, through `clearmed.evaluate(EvalRequest(...))` and as the one cell of `clearmed suite` with the
same options writes the same manifest and the same records (scripted backbones over the demo bundle; wall-clock
seconds and timestamps aside). A suite runs in process: it builds no `clearmed eval` command line to run."""

from __future__ import annotations

import argparse
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

import clearmed
from clearmed.api.request import EvalRequest
from clearmed.cli import evaluate as eval_command
from clearmed.cli.main import main
from clearmed.evaluation import read_records
from tests.cli.scripted_cli import config_toml, scripted

ROOT = Path(__file__).resolve().parent.parent
# What differs between two runs of the same questions by the clock alone.
CLOCK = {"seconds", "created", "finished", "started", "latency_s", "elapsed"}


def eval_parser() -> argparse.ArgumentParser:
    """The real `clearmed eval` parser, as the command registers it."""
    commands = argparse.ArgumentParser().add_subparsers()
    eval_command.register(commands)
    return commands.choices["eval"]


def eval_options(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Every option string of the parser -> the destination argparse stores it in (--help aside)."""
    return {
        option: action.dest
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction)
        for option in action.option_strings
    }


def test_every_eval_option_is_a_field_of_the_request() -> None:
    options = eval_options(eval_parser())
    assert {"--revision", "--ids", "--pathway", "--shard", "--program-artifact", "--set", "--estimate"} <= set(options)
    assert {option: dest for option, dest in options.items() if dest not in EvalRequest.model_fields} == {}


def test_an_option_without_a_field_is_caught() -> None:
    parser = eval_parser()
    parser.add_argument("--new-knob", type=int)
    missing = [option for option, dest in eval_options(parser).items() if dest not in EvalRequest.model_fields]
    assert missing == ["--new-knob"]


def test_the_import_contract_puts_the_command_line_above_the_api() -> None:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    layers = next(c["layers"] for c in contracts["contracts"] if c["type"] == "layers" and "containers" not in c)
    assert layers.index("clearmed.cli") < layers.index("clearmed.api")


def _scrubbed(value: Any) -> Any:
    """`value` without the keys the clock sets."""
    if isinstance(value, dict):
        return {k: _scrubbed(v) for k, v in value.items() if k not in CLOCK}
    if isinstance(value, list):
        return [_scrubbed(v) for v in value]
    return value


def _folder(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    records = sorted((r.model_dump(mode="json") for r in read_records(run_dir)), key=lambda r: r["question_id"])
    return _scrubbed(manifest), _scrubbed(records)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "scripted.toml"
    path.write_text(config_toml(run=f'runs_dir = "{tmp_path / "runs"}"'), encoding="utf-8")
    return path


def _options(tmp_path: Path, config: Path, case: str) -> list[str]:
    common = ["--benchmark", "demo", "-c", str(config), "--threads", "1", "--set", "program.local_k=3"]
    if case == "sample-shard":  # a seeded sample, shard 2 of 2, a budget and a kept degraded answer
        return [*common, "--program", "direct", "--limit", "5", "--seed", "7", "--shard", "2/2", "--max-cost", "50",
                "--keep-degraded"]  # fmt: skip
    ids = tmp_path / "ids.txt"
    ids.write_text("demo-03\ndemo-01\n", encoding="utf-8")
    if case == "ids":
        return [*common, "--program", "clear", "--ids", str(ids), "--skip-bad-rows"]
    recorded = tmp_path / "recorded"  # a clearmed run folder another run takes its parametric answers from
    assert main(["eval", *common, "--program", "clear", "--run-dir", str(recorded)]) == 0
    return [*common, "--program", "clear", "--seed", "1", "--limit", "4", "--pathway", f"parametric={recorded}",
            "--pathway", "dynamic=absent"]  # fmt: skip


@pytest.mark.parametrize("case", ["sample-shard", "ids", "pathway"])
def test_the_command_and_the_api_write_the_same_run(
    case: str, config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted(monkeypatch)
    options = _options(tmp_path, config, case)
    by_command, by_api = tmp_path / "command", tmp_path / "api"
    assert main(["eval", *options, "--run-dir", str(by_command)]) == 0
    parsed = vars(eval_parser().parse_args([*options, "--run-dir", str(by_api)]))
    del parsed["func"]  # the command's handler, not an option
    clearmed.evaluate(EvalRequest(**parsed))
    command_manifest, command_records = _folder(by_command)
    api_manifest, api_records = _folder(by_api)
    assert command_records  # the run answered something
    assert api_manifest == command_manifest
    assert api_records == command_records


def test_the_keyword_call_builds_the_same_request(config: Path, tmp_path: Path) -> None:
    from clearmed.api.evaluate import request_of

    built = request_of("direct", "demo", config=config, limit=4, seed=2, num_threads=1, overrides=["run.max_cost=5"])
    assert built == EvalRequest(
        program="direct", benchmark="demo", config=config, limit=4, seed=2, threads=1, overrides=["run.max_cost=5"]
    )


def test_what_the_python_door_cannot_take_is_one_line(config: Path, tmp_path: Path) -> None:
    import dspy

    from clearmed.config import load_config
    from clearmed.core.errors import UsageError

    with pytest.raises(UsageError, match="an estimate is no run: call clearmed"):
        clearmed.evaluate(EvalRequest(program="direct", benchmark="demo", config=config, estimate=True))
    with pytest.raises(UsageError, match=r"overrides \(--set\) apply to a config name or TOML path"):
        clearmed.evaluate("direct", "demo", config=load_config(str(config)), overrides=["run.max_cost=5"])
    with pytest.raises(UsageError, match="ids and revision choose a benchmark's questions"):
        clearmed.evaluate("direct", ["What?"], config=config, run_dir=tmp_path / "a", revision="main")
    with pytest.raises(UsageError, match="--pathway replaces a pathway of a program built by name"):
        clearmed.evaluate(dspy.Module(), "demo", config=config, run_dir=tmp_path / "b", pathway=["dynamic=absent"])
    with pytest.raises(UsageError, match="give the questions"):
        clearmed.evaluate("direct", config=config)
    assert not (tmp_path / "b").exists()  # refused before the folder was made


def _suite_file(tmp_path: Path, config: Path, case: str) -> tuple[Path, list[str]]:
    """A one-cell suite and the `clearmed eval` options of its cell (what a suite can say: a seeded sample, or a
    list of ids; threads and overrides; sharded or not)."""
    ids = tmp_path / "ids.txt"
    ids.write_text("demo-03\ndemo-01\n", encoding="utf-8")
    common = ["--benchmark", "demo", "-c", str(config), "--threads", "1", "--set", "program.local_k=3"]
    table = f'out = "{tmp_path / "suite"}"\nconfigs = ["{config}"]\nthreads = 1\noverrides = ["program.local_k=3"]\n'
    if case == "ids":
        table += f'programs = ["clear"]\n[[benchmarks]]\nname = "demo"\nids = "{ids}"\n'
        options = [*common, "--program", "clear", "--ids", str(ids)]
    else:  # a seeded sample, run as 2 shards and merged
        table += 'programs = ["direct"]\nbenchmarks = ["demo"]\nlimit = 5\nseeds = [7]\nshards = 2\n'
        options = [*common, "--program", "direct", "--limit", "5", "--seed", "7"]
    path = tmp_path / "one-cell.toml"
    path.write_text(table, encoding="utf-8")
    return path, options


@pytest.mark.parametrize("case", ["ids", "sample-sharded"])
def test_a_one_cell_suite_writes_the_run_the_command_and_the_api_write(
    case: str, config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clearmed.api.suite import plan_suite
    from clearmed.evaluation.suite import load_suite

    scripted(monkeypatch)
    suite_file, options = _suite_file(tmp_path, config, case)
    by_command, by_api = tmp_path / "command", tmp_path / "api"
    assert main(["eval", *options, "--run-dir", str(by_command)]) == 0
    parsed = vars(eval_parser().parse_args([*options, "--run-dir", str(by_api)]))
    del parsed["func"]
    clearmed.evaluate(EvalRequest(**parsed))
    assert main(["suite", str(suite_file)]) == 0
    (cell,) = plan_suite(load_suite(suite_file))
    command_manifest, command_records = _folder(by_command)
    suite_manifest, suite_records = _folder(cell.run_dir)
    assert command_records
    assert suite_manifest == _folder(by_api)[0] == command_manifest
    assert suite_records == command_records


def test_a_suite_builds_no_command_line_to_run(config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from clearmed.cli import evaluate as eval_module
    from clearmed.cli import main as main_module
    from clearmed.cli.suite import run_suite

    scripted(monkeypatch)
    suite_file, _ = _suite_file(tmp_path, config, "sample-sharded")
    commands = argparse.ArgumentParser().add_subparsers()
    from clearmed.cli import suite as suite_command

    suite_command.register(commands)
    args = commands.choices["suite"].parse_args([str(suite_file)])

    def refused(*_: object, **__: object) -> Any:
        raise AssertionError("the suite parsed or ran a command line")

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", refused)
    monkeypatch.setattr(main_module, "main", refused)
    monkeypatch.setattr(main_module, "build_parser", refused)
    monkeypatch.setattr(eval_module, "run_eval", refused)
    assert run_suite(args) == 0  # two shards, their merge and the comparison, all in this process
    (merged,) = (tmp_path / "suite").glob("*/demo/direct-n5-s7")
    assert len(list(read_records(merged))) == 5
    assert (tmp_path / "suite" / "compare" / "demo" / "comparison.md").is_file()


def test_a_request_renders_as_the_eval_command_line_it_parses_from(tmp_path: Path) -> None:
    from clearmed.api.request import request_argv
    from clearmed.core.errors import UsageError

    every = EvalRequest(
        program="direct", benchmark="medqa", source="shared", split="test", revision="abc123", config="o3-mini",
        overrides=["run.max_cost=5", "program.local_k=3"], limit=9, seed=2, ids="ids.txt", skip_bad_rows=True,
        threads=3, run_dir="runs/x", program_artifact="art", allow_train_overlap=True, keep_degraded=True,
        max_cost=1.5, estimate=True, pilot=2, pathway=["parametric=absent", "dynamic=absent"], shard="1/2",
        stop_after=4, quiet=True,
    )  # fmt: skip
    assert {name for name, field in EvalRequest.model_fields.items() if getattr(every, name) == field.default} == {
        "questions",
        "show_progress",
    }  # every option is set, so each one is rendered
    for request in (every, EvalRequest(benchmark="demo")):
        argv = request_argv(request)
        assert argv[0] == "eval"
        parsed = vars(eval_parser().parse_args(argv[1:]))
        del parsed["func"]
        assert EvalRequest(**parsed) == request
    with pytest.raises(UsageError, match="a list of questions has no command line"):
        request_argv(EvalRequest(questions=[]))
