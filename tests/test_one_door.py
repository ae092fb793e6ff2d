"""`clearmed.api` is the one door of a run: every option of `clearmed eval` is a field of `EvalRequest`, and a run
through the command, through `clearmed.evaluate(EvalRequest(...))` and as the one cell of `clearmed suite` with the
same options writes the same manifest and the same records (scripted backbones over the demo bundle; wall-clock
seconds and timestamps aside). A suite runs in process: it builds no `clearmed eval` command line to run."""

from __future__ import annotations

import argparse
import json
import re
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
    from clearmed.api.suite_file import load_suite

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
        max_cost=1.5, batch=True, estimate=True, pilot=2, pathway=["parametric=absent", "dynamic=absent"], shard="1/2",
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


# ------------------------------------------------------------- every work verb: one request, one function (issue 57)
def _command(module: str, *path: str) -> argparse.ArgumentParser:
    """The real parser of `clearmed <path...>`, as its module registers it (`ask` is built by cli/main)."""
    import importlib

    from clearmed.cli.main import build_parser

    if module == "clearmed.cli.main":
        commands = build_parser()._subparsers._group_actions[0]  # type: ignore[union-attr]
    else:
        commands = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).register(commands)
    parser: argparse.ArgumentParser = commands.choices[path[0]]  # type: ignore[attr-defined]
    for name in path[1:]:
        parser = parser._subparsers._group_actions[0].choices[name]  # type: ignore[union-attr,attr-defined]
    return parser


# (command module, command path, its request, the command's display options that no request field holds)
VERBS: list[tuple[str, tuple[str, ...], str, frozenset[str]]] = [
    ("clearmed.cli.main", ("ask",), "clearmed.api.ask.AskRequest", frozenset({"json", "passages"})),
    ("clearmed.cli.evaluate", ("eval",), "clearmed.api.request.EvalRequest", frozenset()),
    ("clearmed.cli.evaluate", ("compare",), "clearmed.api.compare.CompareRequest", frozenset()),
    ("clearmed.cli.merge", ("merge",), "clearmed.api.merge.MergeRequest", frozenset()),
    ("clearmed.cli.compile", ("compile",), "clearmed.api.compile.CompileRequest", frozenset()),
    ("clearmed.cli.tune", ("tune",), "clearmed.api.tune.TuneRequest", frozenset()),
    ("clearmed.cli.index", ("index", "build"), "clearmed.api.index.IndexBuildRequest", frozenset()),
    ("clearmed.cli.index", ("index", "warm"), "clearmed.api.index.IndexWarmRequest", frozenset()),
    ("clearmed.cli.export", ("export",), "clearmed.api.export.ExportRequest", frozenset()),
    ("clearmed.cli.doctor", ("doctor",), "clearmed.api.doctor.DoctorRequest", frozenset()),
    ("clearmed.cli.report", ("report",), "clearmed.api.report.ReportRequest", frozenset()),
    ("clearmed.cli.export_sft", ("export-sft",), "clearmed.api.sft.SftExportRequest", frozenset()),
]
# Fields of the Python door alone, which no option sets.
PYTHON_ONLY = {"EvalRequest": {"questions", "show_progress"}}


def _request_type(dotted: str) -> type[Any]:
    import importlib

    module, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def parser_request_gaps(parser: argparse.ArgumentParser, request: type[Any], display: frozenset[str]) -> list[str]:
    """Where a command's parser and its request differ: an option with no field, a field with no option, a default
    that is not the same (an option the parser requires has no default to compare)."""
    actions = [a for a in parser._actions if not isinstance(a, argparse._HelpAction) and a.dest not in display]
    fields = dict(request.model_fields)
    gaps = [f"option {a.dest} has no field" for a in actions if a.dest not in fields]
    dests = {a.dest for a in actions}
    python_only = PYTHON_ONLY.get(request.__name__, set())
    gaps += [f"field {name} has no option" for name in fields if name not in dests | python_only]
    for action in actions:
        field = fields.get(action.dest)
        if field is None or action.required:
            continue
        default = "(required)" if field.is_required() else field.default
        if default != action.default:
            gaps.append(f"{action.dest}: the option's default {action.default!r}, the field's {default!r}")
    return gaps


@pytest.mark.parametrize(("module", "path", "request_name", "display"), VERBS, ids=[" ".join(v[1]) for v in VERBS])
def test_every_verbs_request_matches_its_parser(
    module: str, path: tuple[str, ...], request_name: str, display: frozenset[str]
) -> None:
    parser, request = _command(module, *path), _request_type(request_name)
    assert parser_request_gaps(parser, request, display) == []
    # the command parses into its request and nothing else: a parsed line is a valid request
    assert request.__name__ in {n.rsplit(".", 1)[1] for _, _, n, _ in VERBS}


def test_a_flag_a_field_or_a_default_out_of_step_is_caught() -> None:
    from clearmed.api.compile import CompileRequest

    parser = _command("clearmed.cli.compile", "compile")
    parser.add_argument("--new-knob", type=int)
    parser.set_defaults(max_demos=3)
    assert parser_request_gaps(parser, CompileRequest, frozenset()) == [
        "option new_knob has no field",
        "max_demos: the option's default 3, the field's 2",
    ]
    bare = argparse.ArgumentParser()
    bare.add_argument("--out", required=True)
    gaps = parser_request_gaps(bare, CompileRequest, frozenset())
    assert "field optimizer has no option" in gaps
    assert "field out has no option" not in gaps


def test_every_verb_is_a_name_of_the_python_face() -> None:
    from clearmed.api.compile import compile_prompts
    from clearmed.api.tune import tune_thresholds

    assert clearmed.compile is compile_prompts
    assert clearmed.tune is tune_thresholds
    for name in ("ask", "evaluate", "evaluate_suite", "merge_shards", "compare_runs", "build_corpus_index",
                 "warm_hit_cache", "export_runs"):  # fmt: skip
        assert callable(getattr(clearmed, name)), name
    for _, _, dotted, _ in VERBS:
        assert getattr(clearmed, dotted.rsplit(".", 1)[1]) is _request_type(dotted)


def test_ask_is_one_call_and_the_command_prints_its_decision(
    config: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from clearmed.signatures.records import Decision

    scripted(monkeypatch)
    options = ["Which drug treats hypothyroidism?", "-o", "A: levothyroxine", "-o", "B: methimazole"]
    assert main(["ask", *options, "-c", str(config), "--set", "program.local_k=3", "--json"]) == 0
    by_command = Decision.model_validate_json(capsys.readouterr().out)
    by_api = clearmed.ask(
        question=options[0],
        option=["A: levothyroxine", "B: methimazole"],
        config=config,
        overrides=["program.local_k=3"],
    )
    assert by_command.bundle.question.options == {"A": "levothyroxine", "B": "methimazole"}
    assert len(by_api.bundle.local_passages) == len(by_command.bundle.local_passages) == 3
    assert by_api.model_dump(exclude={"latency_s", "usage"}) == by_command.model_dump(exclude={"latency_s", "usage"})


def test_build_program_loads_an_artifact(config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from clearmed.optimize.artifacts import new_manifest, write_artifact
    from clearmed.optimize.splits import UsedIds

    scripted(monkeypatch)
    loaded = clearmed.load_config(str(config))
    tuned = loaded.thresholds.model_copy(update={"audit_min_medium": 5})
    manifest = new_manifest("tune", "clear", loaded, optimizer="optuna-tpe", has_program_state=False)
    write_artifact(tmp_path / "art", manifest, thresholds=tuned, ids=UsedIds(), config=loaded)
    assert clearmed.build_program("clear", loaded).thresholds.audit_min_medium == 2  # the paper's (CLEAR A.2)
    program = clearmed.build_program("clear", loaded, artifact=tmp_path / "art")
    assert program.thresholds.audit_min_medium == 5


class _Called(Exception):
    """Raised by a stand-in api function once it has recorded what the command gave it."""


# (argv, where the command finds its api function, that function's name, the request it must receive)
CALLS: list[tuple[list[str], str, str, str]] = [
    (["ask", "Why?", "-o", "A: x", "-o", "B: y", "--multi", "--set", "program.local_k=2", "--json"],
     "clearmed.api.ask", "ask", "clearmed.api.ask.AskRequest"),
    (["compile", "--optimizer", "bootstrap", "--benchmark", "demo", "--train", "2", "--val", "1", "--out", "a",
      "--auto", "none", "--trials", "3"], "clearmed.cli.compile", "compile_prompts",
     "clearmed.api.compile.CompileRequest"),
    (["tune", "--run", "r1", "--run", "r2", "--out", "t", "--on-miss", "penalize", "--cost-weight", "0.5"],
     "clearmed.cli.tune", "tune_thresholds", "clearmed.api.tune.TuneRequest"),
    (["index", "build", "--preset", "openstax", "--out", "idx", "--text-field", "a", "--text-field", "b"],
     "clearmed.cli.index", "build_corpus_index", "clearmed.api.index.IndexBuildRequest"),
    (["index", "warm", "--benchmark", "demo", "--limit", "3", "--out", "h.sqlite"], "clearmed.cli.index",
     "warm_hit_cache", "clearmed.api.index.IndexWarmRequest"),
    (["export", "r1", "r2", "--format", "jsonl", "--out", "x.jsonl"], "clearmed.cli.export", "export_runs",
     "clearmed.api.export.ExportRequest"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "module", "function", "request_name"), CALLS, ids=[c[0][0] for c in CALLS])
def test_each_command_calls_its_api_function_with_its_parsed_request(
    argv: list[str], module: str, function: str, request_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    from clearmed.cli.main import build_parser

    given: list[Any] = []

    def stand_in(request: Any, /, **_: Any) -> Any:
        given.append(request)
        raise _Called

    monkeypatch.setattr(importlib.import_module(module), function, stand_in)
    assert main(argv) != 0  # the stand-in stops the command once called
    request = _request_type(request_name)
    parsed = vars(build_parser().parse_args(argv))
    assert given == [request(**{name: value for name, value in parsed.items() if name in request.model_fields})]
    required = {name for name, field in request.model_fields.items() if field.is_required()}
    assert set(given[0].model_dump(exclude_defaults=True)) - required  # the options beyond the required ones arrived


# ------------------------------------------------- the command line's imports (issue 57, item 4; a ratchet)
# Import lines in clearmed/cli/ that reach past the api (neither clearmed.api, clearmed.core, clearmed.report nor
# cli/ itself): 74 before issue 57, 39 after its item 1 (doctor's probes, main's error types and `clearmed config`
# / `demo`, the types the reports render). The cap only comes down.
AROUND_THE_API_CAP = 10
_CLEARMED_IMPORT = re.compile(r"^\s*(?:from|import)\s+(clearmed(?:\.\w+)*)", re.MULTILINE)


def imports_around_the_api(folder: Path) -> list[str]:
    """`file: module` of every import line of the folder's modules that goes around clearmed.api."""
    inside = ("clearmed.api", "clearmed.core", "clearmed.report", "clearmed.cli")
    return [
        f"{path.name}: {module}"
        for path in sorted(folder.glob("*.py"))
        for module in _CLEARMED_IMPORT.findall(path.read_text(encoding="utf-8"))
        if module != "clearmed" and not module.startswith(inside)
    ]


def cli_helper_imports(paths: list[Path], *, in_cli: bool) -> list[str]:
    """Imports of clearmed.cli other than what is allowed: inside cli/, a command module imports only the shared
    cli/main.py; outside, only the entry point `clearmed.cli.main.main` (no command module's helper or private name)."""
    problems = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        for line in re.findall(r"^\s*(?:from clearmed\.cli\S*|from clearmed import cli)\b.*$", text, re.MULTILINE):
            allowed = line.strip().startswith("from clearmed.cli.main import") and (
                in_cli or line.strip().split(" import ")[1].split(" as ")[0].strip() == "main"
            )
            if not allowed:
                name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
                problems.append(f"{name}: {line.strip()}")
    return problems


def test_the_command_line_goes_around_the_api_no_more_than_it_did() -> None:
    assert len(imports_around_the_api(ROOT / "clearmed" / "cli")) <= AROUND_THE_API_CAP


def test_no_cli_helper_is_imported_across_commands_or_from_outside_the_cli() -> None:
    outside = [*(ROOT / "scripts").glob("*.py"), *(ROOT / "docs" / "experiments").glob("*.py")]
    outside += [p for p in (ROOT / "clearmed").rglob("*.py") if "cli" not in p.relative_to(ROOT / "clearmed").parts]
    assert cli_helper_imports(outside, in_cli=False) == []
    assert cli_helper_imports(sorted((ROOT / "clearmed" / "cli").glob("*.py")), in_cli=True) == []


def test_an_import_around_the_api_or_of_a_cli_helper_is_caught(tmp_path: Path) -> None:
    (tmp_path / "cmd.py").write_text(
        "from clearmed.api.ask import ask\nfrom clearmed.core.errors import UsageError\n"
        "from clearmed.cli.main import add_config_arguments\n    from clearmed.optimize.tuning import tune\n"
        "from clearmed.cli.evaluate import _print_summary\n",
        encoding="utf-8",
    )
    assert imports_around_the_api(tmp_path) == ["cmd.py: clearmed.optimize.tuning"]
    script = ROOT / "scripts" / "bench_cli_startup.py"  # imports the entry point: allowed
    assert cli_helper_imports([script], in_cli=False) == []
    command = tmp_path / "cmd.py"
    assert cli_helper_imports([command], in_cli=True) == ["cmd.py: from clearmed.cli.evaluate import _print_summary"]
    assert cli_helper_imports([command], in_cli=False) == [
        "cmd.py: from clearmed.cli.main import add_config_arguments",
        "cmd.py: from clearmed.cli.evaluate import _print_summary",
    ]
