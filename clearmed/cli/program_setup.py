"""What every command that runs a program shares: `-c` and `--set`, the config they give, and the program built from
it with a `--program-artifact` loaded. The optimizer's layer is imported only when an artifact is given."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING

from clearmed.core.console import user_console

if TYPE_CHECKING:
    import dspy

    from clearmed.config import ClearmedConfig
    from clearmed.optimize.artifacts import ProgramArtifact
    from clearmed.programs.baselines import SinglePathway
    from clearmed.programs.clear import CLEAR
    from clearmed.signatures.records import PathwayName


def add_config_arguments(
    parser: argparse.ArgumentParser, *, help: str = "packaged config name, TOML path or run folder (default: embedded)"
) -> None:
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


def config_from_args(args: argparse.Namespace) -> ClearmedConfig:
    from clearmed.config import load_config

    return load_config(args.config, overrides=args.overrides)


def artifact_from_args(
    args: argparse.Namespace, config: ClearmedConfig
) -> tuple[ProgramArtifact | None, ClearmedConfig]:
    """The `--program-artifact` (None: none given) and the config carrying its thresholds."""
    if not getattr(args, "program_artifact", None):
        return None, config
    from clearmed.optimize.artifacts import with_artifact

    return with_artifact(args.program_artifact, config)


def built_program(
    name: str,
    config: ClearmedConfig,
    artifact: ProgramArtifact | None = None,
    *,
    pathways: Mapping[PathwayName, dspy.Module] | None = None,
) -> CLEAR | SinglePathway:
    """The program by name, with the artifact's prompts and thresholds loaded; what did not transfer is said on
    stderr."""
    from clearmed.assemble import build_program

    program = build_program(name, config, pathways=pathways)
    if artifact is not None:
        from clearmed.optimize.artifacts import apply_artifact

        for warning in apply_artifact(program, artifact, config):
            user_console(stderr=True).print(f"[yellow]warning:[/] {warning}", highlight=False)
    return program
