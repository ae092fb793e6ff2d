"""The `clearmed` command line: a thin layer over library functions that tests call directly."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import pydantic

from clearmed.core.console import user_console
from clearmed.core.errors import FatalServiceError, UsageError
from clearmed.core.exit_codes import EXIT_CODES_HELP, ExitCode
from clearmed.core.version import __version__

if TYPE_CHECKING:
    from clearmed.evaluation import RunSummary

    _SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    _SubParsers = argparse._SubParsersAction

Handler = Callable[[argparse.Namespace], int]
_Request = TypeVar("_Request", bound=pydantic.BaseModel)


def add_config_arguments(
    parser: argparse.ArgumentParser, *, help: str = "packaged config name, TOML path or run folder (default: embedded)"
) -> None:
    """`-c` and `--set`, which every command that loads a config shares."""
    parser.add_argument("-c", "--config", help=help)
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one setting of the config (repeatable), e.g. --set program.local_k=32; validated like the file",
    )


def add_artifact_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--program-artifact", help="a `clearmed compile` / `clearmed tune` artifact folder to load")


def parsed_request(request_type: type[_Request], args: argparse.Namespace) -> _Request:
    """A command's parsed arguments as its api request: each option is the field of the same name (the command's
    display options, which no field holds, aside; tests/test_one_door.py holds the two equal)."""
    return request_type(**{name: value for name, value in vars(args).items() if name in request_type.model_fields})


def print_summary(summary: RunSummary) -> None:
    """A finished run's tables, as `clearmed eval`, `merge` and `suite` print them."""
    from clearmed.report.markdown import comparison_table, details_markdown

    user_console(soft_wrap=True).print(
        comparison_table([summary]) + details_markdown([summary]), markup=False, highlight=False
    )


def cmd_ask(args: argparse.Namespace) -> int:
    from clearmed.api.ask import AskRequest, asked_question

    request = parsed_request(AskRequest, args)
    asked_question(request)  # a bad question is refused before anything heavy is imported
    with user_console(stderr=True).status("loading the program and answering ...", spinner="dots"):
        from clearmed.api.ask import ask

        decision = ask(request)
    if args.json:
        sys.stdout.write(decision.model_dump_json(indent=2) + "\n")
    else:
        from clearmed.report.terminal import render_decision

        render_decision(decision, user_console(), passages=args.passages)
    return ExitCode.DONE if decision.status == "answered" else ExitCode.FAILED


def cmd_demo(args: argparse.Namespace) -> int:
    from rich.table import Table

    from clearmed.api.ask import demo_bundle

    table = Table(title="Demo questions (clearmed ask --demo ID)", title_justify="left")
    for column in ("id", "mode", "question"):
        table.add_column(column, overflow="fold")
    for question in demo_bundle():
        table.add_row(question.id, question.answer_mode, question.text)
    user_console().print(table)
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    from clearmed.api.config_choice import packaged_config_paths, request_config

    if args.list:
        for name, path in sorted(packaged_config_paths().items()):
            print(f"{name}\t{path}")
        return 0
    config = request_config(args)  # `-c` and `--set`, as every verb's request names its config
    # The config holds only names of key variables, never keys: safe to print whole.
    sys.stdout.write(config.model_dump_json(indent=2, exclude_none=True) + "\n")
    return 0


# The commands beyond ask, demo and config, each registered by its module's `register(commands)`: name -> (module,
# the one line `clearmed --help` shows). A module is imported only when its command is chosen, so building the
# parser, and `clearmed ask`, load none of what the others need (Optuna, matplotlib, Jinja2, the index builders).
COMMANDS: dict[str, tuple[str, str]] = {
    "eval": ("clearmed.cli.evaluate", "evaluate a program on a benchmark (resumable run folder)"),
    "compare": ("clearmed.cli.evaluate", "put finished runs side by side"),
    "benchmarks": ("clearmed.cli.evaluate", "list the benchmarks with hub ids and scoring"),
    "merge": ("clearmed.cli.merge", "join the shards of a run (eval --shard K/N) into one run folder"),
    "suite": (
        "clearmed.cli.suite",
        "run a matrix of evaluations (programs x benchmarks x configs), resumable, with one comparison per benchmark",
    ),
    "report": (
        "clearmed.cli.report",
        "write a static HTML report of run folders (overview, question trails, comparisons)",
    ),
    "export": ("clearmed.cli.export", "write a run's table, one row per question, as CSV or Parquet"),
    "index": ("clearmed.cli.index", "build or inspect a local BM25 index (bm25s or Lucene)"),
    "export-sft": (
        "clearmed.cli.export_sft",
        "export validated option-wise judge traces (from a teacher's eval runs) as SFT chat JSONL",
    ),
    "compile": ("clearmed.cli.compile", "optimize the program's prompts with a DSPy optimizer"),
    "tune": (
        "clearmed.cli.tune",
        "tune the adjudication thresholds with Optuna by replaying stored eval runs (no new LM calls)",
    ),
    "doctor": ("clearmed.cli.doctor", "check the engine, the model and the backends of a config"),
}


class _LazyCommands(_SubParsers):
    """Subcommands listed by name and help alone; the chosen one's module builds its real parser when parsed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._unloaded: dict[str, tuple[str, str]] = {}  # command -> the module that registers it, its help line

    def add_lazy(self, name: str, module: str, help: str) -> None:
        self.add_parser(name, help=help)  # a placeholder: lists the command and accepts its name
        self._unloaded[name] = (module, help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        assert isinstance(values, list)  # nargs=PARSER: the command, then its arguments
        if values[0] in self._unloaded:
            self._load(self._unloaded[values[0]][0])
        super().__call__(parser, namespace, values, option_string)

    def _load(self, module: str) -> None:
        """Swap the placeholders of every command ``module`` registers for the parsers it builds."""
        helps = {name: help for name, (owner, help) in self._unloaded.items() if owner == module}
        for name in helps:
            del self._unloaded[name], self._name_parser_map[name]
        importlib.import_module(module).register(self)
        for name, help in helps.items():
            if name not in self._name_parser_map:
                raise RuntimeError(f"{module} did not register the command {name!r}")
            self._name_parser_map[name].description = self._name_parser_map[name].description or help


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="clearmed",
        description="Answer medical questions by adjudicating parametric, local and web evidence (CLEAR).",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,  # the epilog's table, one code a line
    )
    parser.add_argument("--version", action="version", version=f"clearmed {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for unexpected errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", action=_LazyCommands)
    assert isinstance(commands, _LazyCommands)

    ask = commands.add_parser("ask", help="answer one question and show its adjudication trail")
    ask.add_argument("question", nargs="?", help="the question text")
    ask.add_argument("-o", "--option", action="append", default=[], metavar="'A: text'", help="an answer option")
    ask.add_argument("--multi", action="store_true", help="several options may be correct")
    ask.add_argument("--context", help="context given with the question (e.g. an abstract)")
    ask.add_argument("--demo", metavar="ID", help="answer a question of the built-in demo bundle (see `clearmed demo`)")
    add_config_arguments(ask)
    add_artifact_argument(ask)
    ask.add_argument("--json", action="store_true", help="print the Decision as JSON")
    ask.add_argument("--passages", type=int, default=12, help="evidence rows to show (default 12)")
    ask.set_defaults(func=cmd_ask)

    demo = commands.add_parser("demo", help="list the built-in demo questions")
    demo.set_defaults(func=cmd_demo)

    config = commands.add_parser("config", help="validate and print a config")
    add_config_arguments(config, help="packaged config name, TOML path or run folder")
    config.add_argument("--list", action="store_true", help="list packaged configs")
    config.set_defaults(func=cmd_config)

    for name, (module, help_line) in COMMANDS.items():
        commands.add_lazy(name, module, help_line)
    return parser


def _known_errors() -> tuple[type[BaseException], ...]:
    from clearmed.api.errors import ONE_LINE_ERRORS

    return ONE_LINE_ERRORS


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return ExitCode.USAGE
    handler: Handler = args.func
    from clearmed.core.retries import second_interrupt_cuts_retries

    try:
        # Ctrl-C lets the questions in flight finish; a second one cuts their retries and attempts short.
        with second_interrupt_cuts_retries(), _warnings_as_lines():
            return handler(args)
    # Apart, so that refusing bad input never imports the layers that define the others. A fatal service error (a
    # rejected key, an exhausted balance, a missing model) is one line too: no retry or later question would mend it.
    except (UsageError, FatalServiceError) as err:
        return _error_line(err)
    except _known_errors() as err:
        return _error_line(err)
    except KeyboardInterrupt as err:
        print(f"clearmed: {_interrupted_line(err)}", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except Exception as err:  # the last line of defence: one clear line, traceback only on request
        if args.debug:
            sys.stderr.write(_printable("".join(traceback.format_exception(err)), one_line=False))
        print(
            f"clearmed: unexpected error: {type(err).__name__}: {_printable(str(err))} (rerun with --debug for details)",
            file=sys.stderr,
        )
        return ExitCode.FAILED


@contextlib.contextmanager
def _warnings_as_lines() -> Iterator[None]:
    """A Python warning shown while a command runs is one line, `warning: MESSAGE (Category)`, not Python's form with
    the file, line and source line of the code that warned (which tells a user nothing they can act on)."""
    shown = warnings.showwarning

    def one_line(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        print(f"warning: {_printable(str(message))} ({category.__name__})", file=file or sys.stderr)

    warnings.showwarning = one_line
    try:
        yield
    finally:
        warnings.showwarning = shown


def _interrupted_line(err: KeyboardInterrupt) -> str:
    """What Ctrl-C left: a run says what it recorded (`evaluation.runner.RunInterrupted.line`); a second Ctrl-C cut
    the questions in flight short; either way the same command resumes."""
    from clearmed.core.retries import retries_cut

    line = getattr(err, "line", None)
    if isinstance(line, str) and not retries_cut():
        return line
    cut = " (the questions in flight were cut short, not recorded)" if retries_cut() else ""
    return f"interrupted{cut}; rerun the same command to resume"


def _error_line(err: BaseException) -> int:
    print(f"clearmed: error: {_printable(str(err))}", file=sys.stderr)
    return ExitCode.USAGE


def _printable(message: str, *, one_line: bool = True) -> str:
    """An error message safe for a terminal or a CI log: no control characters, no credentials."""
    from clearmed.core.sanitize import clean_text, redact_secrets

    text = redact_secrets(clean_text(message))
    return " ".join(text.split()) if one_line else text


if __name__ == "__main__":
    sys.exit(main())
