"""Commands load what they use: the parser lists every command, and only the chosen one's module is imported."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import pytest

from clearmed.cli import main as cli
from clearmed.cli.main import COMMANDS, build_parser, main

# What `clearmed ask` must not pay for before it loads its own program: the tuner, the plots, the HTML report.
HEAVY = ("optuna", "matplotlib", "jinja2", "dspy")

_PROBE = """
import json, sys
from clearmed.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = [name for name in {heavy!r} if name in sys.modules]
shared = ("clearmed.cli.main",)  # the entry point, with the options every command shares
commands = [name for name in sys.modules if name.startswith("clearmed.cli.") and name not in shared]
sys.stderr.write(json.dumps({{"heavy": heavy, "commands": commands}}) + "\\n")
"""


def _modules_loaded_by(*argv: str) -> dict[str, list[str]]:
    """Run `clearmed ARGV` in a fresh interpreter; the heavy and command modules it imported."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=HEAVY), *argv], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    loaded: dict[str, list[str]] = json.loads(done.stderr.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize("argv", [("--help",), ("ask", "--help"), ("demo",), ("ask", "--demo", "demo-99")])
def test_the_parser_ask_help_and_a_usage_error_import_no_heavy_module(argv: tuple[str, ...]) -> None:
    assert _modules_loaded_by(*argv) == {"heavy": [], "commands": []}


@pytest.mark.parametrize("command", ["eval", "index"])
def test_a_command_that_lists_the_programs_loads_no_dspy_for_its_help(command: str) -> None:
    # The program names come from programs/catalog.py, not from the module that builds the programs: `clearmed eval
    # --help` took 1.75 s when it imported DSPy for them, 0.85 s without.
    loaded = _modules_loaded_by(command, "--help")
    assert "dspy" not in loaded["heavy"]
    assert loaded["commands"] == [f"clearmed.cli.{'evaluate' if command == 'eval' else command}"]


def test_a_chosen_command_loads_its_own_module_only() -> None:
    loaded = _modules_loaded_by("report", "--help")
    assert loaded["commands"] == ["clearmed.cli.report"]
    assert "optuna" not in loaded["heavy"]


def test_the_top_level_help_lists_every_command_with_its_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    listing = " ".join(capsys.readouterr().out.split())
    for name, (_, help_line) in COMMANDS.items():
        assert f"{name} {help_line}" in listing, name


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_builds_its_parser_when_chosen(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args([name, "--help"])
    assert stopped.value.code == 0
    page = " ".join(capsys.readouterr().out.split())
    assert page.startswith(f"usage: clearmed {name} ")
    assert COMMANDS[name][1] in page  # the listing's line is the command's own description


def test_a_lazy_command_parses_its_arguments() -> None:
    args = build_parser().parse_args(["compare", "run-a", "run-b", "--common"])
    assert args.command == "compare"
    assert args.runs == ["run-a", "run-b"]
    assert args.common is True
    assert callable(args.func)


def test_a_module_that_does_not_register_its_command_is_a_clear_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    silent = types.SimpleNamespace(register=lambda commands: None)  # a command module that adds no parser
    monkeypatch.setitem(sys.modules, "clearmed_test_silent_command", silent)
    monkeypatch.setitem(cli.COMMANDS, "silent", ("clearmed_test_silent_command", "registers nothing"))
    with pytest.raises(RuntimeError, match="did not register the command 'silent'"):
        build_parser().parse_args(["silent"])
