"""How many project files one question passes through: `clearmed ask --demo demo-01` on the default embedded
config, with a scripted LM (and scripted option scores) in place of the model, traced from the command line to
the printed Decision.

    python scripts/count_question_files.py [--demo demo-01] [--list]

A file counts when one of its functions or methods runs; a module's top level and class bodies (its import) do
not count. The model's stand-in is defined here, so that nothing a real run would not load is loaded before tracing starts.
Nor does what runs while a module is imported (a comprehension or helper building a module constant, the import
system probing a package's `__getattr__`): the first version of this script counted those, and gave 54 files before
issue 33 (the review that filed it counted 57) and 47 after it; this one gives 44. Issue 33 asks for at most 45.
"""

from __future__ import annotations

import argparse
import inspect
import math
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _project_file(filename: str) -> str | None:
    path = Path(filename)
    if not path.is_absolute() or path.suffix != ".py":
        return None
    try:
        relative = path.resolve().relative_to(ROOT)
    except ValueError:
        return None
    if relative.parts[0] in {"tests", "scripts", ".venv"}:
        return None
    return relative.as_posix()


class _ScriptedEngine:
    """The model's stand-in: every pathway scores option A most likely, and a generated step answers A. Defined
    here, not taken from `clearmed.testing`, so that nothing the question would not load is loaded first."""

    def score_next_token(self, messages: Any, assistant_prefix: str, candidates: Any) -> Any:
        from clearmed.backbones.logprobs import NextTokenScores

        probs = {candidate: (0.7 if candidate.strip() in {"A", "yes"} else 0.1) for candidate in candidates}
        return NextTokenScores(logprobs={c: math.log(p) for c, p in probs.items()}, prompt_tokens=100)

    def complete(self, request: Any) -> Any:
        from dspy.lm15 import Message, Response, TextPart, Usage

        text = "[[ ## rationale ## ]]\nbecause\n\n[[ ## cited_ids ## ]]\n[]\n\n[[ ## answer ## ]]\nA\n\n[[ ## completed ## ]]"
        return Response(
            id=None,
            model="scripted",
            message=Message.assistant([TextPart(text)]),
            finish_reason="stop",
            usage=Usage(input_tokens=100, output_tokens=10),
        )

    def close(self) -> None:
        return None

    def __deepcopy__(self, memo: dict[int, object]) -> _ScriptedEngine:
        return self


def _scripted_lm() -> Any:
    import dspy

    from clearmed import assemble

    lm = dspy.LM("local/scripted", engine=_ScriptedEngine(), cache=False, num_retries=0)
    assemble_module: Any = assemble
    assemble_module.build_role_lms = lambda config, roles=("main", "assessor"): {"main": lm}
    return lm


def trace_question(demo: str) -> tuple[set[str], int]:
    """The project files the question ran through, and the command's exit code."""
    seen: set[str] = set()

    def tracer(frame: FrameType, event: str, arg: Any) -> None:
        # A function or method that runs: a module's top level and a class body (its import) are not steps, nor
        # what they call while the module is imported (a comprehension or a helper building a module constant), nor
        # the import system's probe of a package's `__getattr__`.
        caller = frame.f_back
        importing = caller is not None and (
            not caller.f_code.co_flags & inspect.CO_NEWLOCALS or caller.f_code.co_filename.startswith("<frozen")
        )
        if event == "call" and frame.f_code.co_flags & inspect.CO_NEWLOCALS and not importing:
            name = _project_file(frame.f_code.co_filename)
            if name is not None:
                seen.add(name)
        return None

    threading.settrace(tracer)  # type: ignore[arg-type]
    sys.settrace(tracer)  # type: ignore[arg-type]
    try:
        # Inside the trace: the setup imports only what `ask` imports (dspy, clearmed.assemble) besides this file.
        from clearmed.cli.main import main as clearmed_main

        _scripted_lm()
        code = clearmed_main(["ask", "--demo", demo, "--json"])
    finally:
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]
    return seen, code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", default="demo-01")
    parser.add_argument("--list", action="store_true", help="print the files, grouped by folder")
    args = parser.parse_args()
    files, code = trace_question(args.demo)
    if args.list:
        for name in sorted(files):
            print(name, file=sys.stderr)
    print(f"{len(files)} project files (exit code {code})", file=sys.stderr)
    return 0 if code in (0, 1) else code


if __name__ == "__main__":
    raise SystemExit(main())
