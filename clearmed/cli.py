"""The `clearmed` command line: a thin layer over library functions that tests call directly."""

from __future__ import annotations

import argparse
import os
import re
import sys
import traceback
from collections.abc import Callable, Sequence

import pydantic
from rich.console import Console

from clearmed import __version__
from clearmed.errors import UsageError

Handler = Callable[[argparse.Namespace], int]
_OPTION = re.compile(r"^\s*([A-Za-z])\s*[:=.)]\s*(.+)$", re.DOTALL)


def parse_options(raw: Sequence[str]) -> dict[str, str]:
    """`--option "A: text"` (also A=, A., A)), or plain texts lettered A, B, C... in order."""
    options: dict[str, str] = {}
    for index, item in enumerate(raw):
        match = _OPTION.match(item)
        letter, text = (match.group(1).upper(), match.group(2).strip()) if match else (chr(ord("A") + index), item)
        if letter in options:
            raise UsageError(f"option {letter} is given twice")
        options[letter] = text
    return options


def _question_from_args(args: argparse.Namespace):  # -> Question
    from clearmed.demo_bundle import demo_question
    from clearmed.signatures.records import Question

    if args.demo:
        if args.question or args.option:
            raise UsageError("--demo picks a demo question; do not also give a question or options")
        return demo_question(args.demo)
    if not args.question:
        raise UsageError('give a question, e.g. clearmed ask "What causes ...?" -o "A: ..." -o "B: ...", or --demo')
    options = parse_options(args.option) if args.option else None
    if options is not None and len(options) < 2:
        raise UsageError("a multiple-choice question needs at least two --option values")
    mode = "free_text" if options is None else ("multi" if args.multi else "single")
    try:
        return Question(id="cli", text=args.question, options=options, answer_mode=mode, context=args.context)
    except pydantic.ValidationError as err:
        raise UsageError("; ".join(e["msg"].removeprefix("Value error, ") for e in err.errors())) from None


def cmd_ask(args: argparse.Namespace) -> int:
    from clearmed.assemble import build_clear
    from clearmed.config import load_config
    from clearmed.render import render_decision

    question = _question_from_args(args)
    config = load_config(args.config)
    from clearmed.programs import over_budget

    refusal = over_budget(question, config.program)  # before loading a model that could not read it
    if refusal is not None:
        raise UsageError(refusal)
    from clearmed.optimize.artifacts import apply_artifact, with_artifact

    artifact, config = with_artifact(args.program_artifact, config)
    console = Console(stderr=True)
    with console.status(f"answering with {config.backbones['main'].model} ...", spinner="dots"):
        program = build_clear(config)
        apply_artifact(program, artifact, config)
        decision = program(question=question).decision
    if args.json:
        sys.stdout.write(decision.model_dump_json(indent=2) + "\n")
    else:
        render_decision(decision, Console(), passages=args.passages)
    return 0 if decision.status == "answered" else 1


def cmd_demo(args: argparse.Namespace) -> int:
    from rich.table import Table

    from clearmed.demo_bundle import demo_questions

    table = Table(title="Demo questions (clearmed ask --demo ID)", title_justify="left")
    for column in ("id", "mode", "question"):
        table.add_column(column, overflow="fold")
    for question in demo_questions():
        table.add_row(question.id, question.answer_mode, question.text)
    Console().print(table)
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    from clearmed.config import load_config, packaged_configs

    if args.list:
        for name, path in sorted(packaged_configs().items()):
            print(f"{name}\t{path}")
        return 0
    config = load_config(args.config)
    # The config holds only names of key variables, never keys: safe to print whole.
    sys.stdout.write(config.model_dump_json(indent=2, exclude_none=True) + "\n")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="clearmed",
        description="Answer medical questions by adjudicating parametric, local and web evidence (CLEAR).",
    )
    parser.add_argument("--version", action="version", version=f"clearmed {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for unexpected errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    ask = commands.add_parser("ask", help="answer one question and show its adjudication trail")
    ask.add_argument("question", nargs="?", help="the question text")
    ask.add_argument("-o", "--option", action="append", default=[], metavar="'A: text'", help="an answer option")
    ask.add_argument("--multi", action="store_true", help="several options may be correct")
    ask.add_argument("--context", help="context given with the question (e.g. an abstract)")
    ask.add_argument("--demo", metavar="ID", help="answer a question of the built-in demo bundle (see `clearmed demo`)")
    ask.add_argument("-c", "--config", help="packaged config name or TOML path (default: embedded)")
    ask.add_argument("--program-artifact", help="a `clearmed compile` / `clearmed tune` artifact folder to load")
    ask.add_argument("--json", action="store_true", help="print the Decision as JSON")
    ask.add_argument("--passages", type=int, default=12, help="evidence rows to show (default 12)")
    ask.set_defaults(func=cmd_ask)

    demo = commands.add_parser("demo", help="list the built-in demo questions")
    demo.set_defaults(func=cmd_demo)

    config = commands.add_parser("config", help="validate and print a config")
    config.add_argument("-c", "--config", help="packaged config name or TOML path")
    config.add_argument("--list", action="store_true", help="list packaged configs")
    config.set_defaults(func=cmd_config)

    for module in _COMMAND_MODULES:
        module.register(commands)
    return parser


def _load_command_modules() -> list:
    from clearmed.commands import compile as compile_command
    from clearmed.commands import doctor, evaluate, export_sft, index, report, tune

    return [evaluate, report, index, export_sft, compile_command, tune, doctor]


_COMMAND_MODULES = _load_command_modules()


def _known_errors() -> tuple[type[BaseException], ...]:
    from clearmed.backbones.errors import ConfigError
    from clearmed.backbones.selfcheck import EngineCheckError
    from clearmed.benchmarks import BenchmarkError
    from clearmed.evaluation import RunStoreError
    from clearmed.retrieval.base import EvidenceError
    from clearmed.retrieval.corpus import CorpusError

    return (UsageError, ConfigError, EngineCheckError, EvidenceError, CorpusError, BenchmarkError, RunStoreError)


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    handler: Handler = args.func
    try:
        return handler(args)
    except _known_errors() as err:
        print(f"clearmed: error: {_printable(str(err))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("clearmed: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # the last line of defence: one clear line, traceback only on request
        if args.debug:
            sys.stderr.write(_printable("".join(traceback.format_exception(err)), one_line=False))
        print(
            f"clearmed: unexpected error: {type(err).__name__}: {_printable(str(err))} (rerun with --debug for details)",
            file=sys.stderr,
        )
        return 1


def _printable(message: str, *, one_line: bool = True) -> str:
    """An error message safe for a terminal or a CI log: no control characters, no credentials."""
    from clearmed.signatures.sanitize import clean_text, redact_secrets

    text = redact_secrets(clean_text(message))
    return " ".join(text.split()) if one_line else text


if __name__ == "__main__":
    sys.exit(main())
