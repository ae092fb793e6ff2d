"""How many project files one question passes through: `clearmed ask --demo demo-01` on the default embedded
config, with a scripted LM (and scripted option scores) in place of the model, traced from the command line to
the printed Decision.

    python scripts/count_question_files.py [--demo demo-01] [--dissent] [--list]

`--dissent`: the dynamic pathway (the one whose evidence is web pages, `[W1]`) scores B most likely, against the
others' A, so the dynamic answer challenges the consensus: the challenge audit's follow-up search and its gate run too.

A file counts when one of its functions or methods runs; a module's top level and class bodies (its import) do
not count, nor does anything they call (a helper's comprehension building a module constant), nor the import
system probing a package's `__getattr__`. The model's stand-in is defined here, so that nothing a real run would not
load is loaded before tracing starts. The first version of this script counted what runs while a module is
imported, and gave 54 files before issue 33 (the review that filed it counted 57) and 47 after it; the next one
still counted a comprehension inside a helper called at import (two files), and gave 44 after issue 33 and 47
before issue 49; this one gives 45 (agreed) and 49 (`--dissent`) on the commit before issue 49's last step, and 44 and 47 once the
look-alike fold and the follow-up bookkeeping went back into the modules that use them and `ask` built its
program where a run does (`clearmed/api/assemble.py`), not through the run harness's door.
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
    """The model's stand-in: every pathway scores option A most likely (with `dissent`, the dynamic one B), and a
    generated step answers A. Defined here, not taken from `clearmed.testing`, so that nothing the question would
    not load is loaded first."""

    dissent = False

    def score_next_token(self, messages: Any, assistant_prefix: str, candidates: Any) -> Any:
        from clearmed.backbones.logprobs import NextTokenScores

        liked = {"B"} if self.dissent and "[W1]" in str(messages) else {"A", "yes"}
        probs = {candidate: (0.7 if candidate.strip() in liked else 0.1) for candidate in candidates}
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

    from clearmed.api import assemble

    lm = dspy.LM("local/scripted", engine=_ScriptedEngine(), cache=False, num_retries=0)
    assemble_module: Any = assemble
    assemble_module.build_role_lms = lambda config, roles=("main", "assessor"): {"main": lm}
    return lm


def _importing(frame: FrameType) -> bool:
    """Whether `frame` runs for an import: called by a module's top level or a class body, or by anything the import
    system runs (a helper's comprehension building a module constant counts as the import, not as a step)."""
    caller = frame.f_back
    if caller is not None and not caller.f_code.co_flags & inspect.CO_NEWLOCALS:
        return True
    while caller is not None:  # the import system's own frames (`python -m` runs under frozen runpy: not those)
        if caller.f_code.co_filename.startswith(("<frozen importlib", "<frozen zipimport")):
            return True
        caller = caller.f_back
    return False


def trace_question(demo: str, *, dissent: bool = False) -> tuple[set[str], int]:
    """The project files the question ran through, and the command's exit code."""
    seen: set[str] = set()
    _ScriptedEngine.dissent = dissent

    def tracer(frame: FrameType, event: str, arg: Any) -> None:
        # A function or method that runs: a module's top level and a class body (its import) are not steps, nor
        # what they call while the module is imported (a comprehension or a helper building a module constant), nor
        # the import system's probe of a package's `__getattr__`.
        if event == "call" and frame.f_code.co_flags & inspect.CO_NEWLOCALS and not _importing(frame):
            name = _project_file(frame.f_code.co_filename)
            if name is not None:
                seen.add(name)
        return None

    threading.settrace(tracer)
    sys.settrace(tracer)
    try:
        # Inside the trace: the setup imports only what `ask` imports (dspy, clearmed.api.assemble) besides this file.
        from clearmed.cli.main import main as clearmed_main

        _scripted_lm()
        code = clearmed_main(["ask", "--demo", demo, "--json"])
    finally:
        sys.settrace(None)
        threading.settrace(None)
    return seen, code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", default="demo-01")
    parser.add_argument("--dissent", action="store_true", help="the dynamic pathway disagrees with the others")
    parser.add_argument("--list", action="store_true", help="print the files, grouped by folder")
    args = parser.parse_args()
    files, code = trace_question(args.demo, dissent=args.dissent)
    if args.list:
        for name in sorted(files):
            print(name, file=sys.stderr)
    print(f"{len(files)} project files (exit code {code})", file=sys.stderr)
    return 0 if code in (0, 1) else code


if __name__ == "__main__":
    raise SystemExit(main())
