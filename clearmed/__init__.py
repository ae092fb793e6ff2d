"""clearmed: cross-source evidence adjudication for medical QA, as a DSPy program.

The Python API (README "Python API"):

    from clearmed import EvalRequest, build_program, estimate_run, evaluate, load_config
    from clearmed import evaluate_suite, merge_shards, results_frame, runs_frame
    from clearmed import compare_runs
    from clearmed import ask, compile, tune, build_corpus_index, warm_hit_cache, export_runs
    from clearmed import AskRequest, CompileRequest, TuneRequest, IndexBuildRequest, IndexWarmRequest
    from clearmed import ExportRequest, CompareRequest, MergeRequest
    from clearmed import check_config, DoctorRequest, report_runs, ReportRequest
    from clearmed import export_teacher_traces, SftExportRequest

Every work verb of the command line has one request (one field per option of its command, tests/test_one_door.py)
and one function here: `ask`, `evaluate`, `evaluate_suite`, `merge_shards`, `compare_runs`, `compile`, `tune`,
`build_corpus_index`, `warm_hit_cache`, `export_runs`, `report_runs`, `export_teacher_traces` (`clearmed export-sft`),
`check_config` (`clearmed doctor`). `compile` and `tune` are `clearmed.api.compile.compile_prompts` and
`clearmed.api.tune.tune_thresholds` (the longer names are one meaning each in the package).

`import clearmed` loads none of it: each name is imported on first use (`clearmed ask` starts with few modules), and
mypy sees each one's real type through the TYPE_CHECKING imports. Nothing inside the package imports this face (the
version is `clearmed.core.version`): it sits above every layer (tests/test_layers.py).

Its rooms (docs/architecture.md): `cli` (the command line) above `api` (the one door of a run, and `assemble`:
config -> program), `report` (every view), `numbers` (the numbers of finished runs), `recorded` (other systems'
recorded pathway answers), `batch` (runs through the providers' batch APIs), `evaluation` (the run harness),
`config` (the TOML file), `core` (errors, retries, redaction, version) and `testing` (test doubles as library code).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Run from the checkout (`python -m pytest` and `python -c` put it first on sys.path), Python finds this folder
# as `clearmed` before the installed package, and the subpackages installed from the top-level folders
# (`programs/`, `signatures/`, ... : pyproject's package-dir) would be missing. They are the folders beside this
# one, so the checkout joins the package path. Installed (a wheel, or the strict editable link tree), the parent
# folder holds no `signatures/` and nothing changes.
_CHECKOUT = Path(__file__).parent.parent
if (_CHECKOUT / "signatures" / "__init__.py").is_file() and str(_CHECKOUT) not in __path__:
    __path__.append(str(_CHECKOUT))

from clearmed.core.version import __version__  # noqa: E402  (after the package path is complete)

if TYPE_CHECKING:
    from clearmed.api.ask import AskRequest, ask
    from clearmed.api.assemble import build_program
    from clearmed.api.compare import CompareRequest, compare_runs
    from clearmed.api.compile import CompileRequest
    from clearmed.api.compile import compile_prompts as compile
    from clearmed.api.doctor import DoctorRequest, check_config
    from clearmed.api.evaluate import estimate_run, evaluate
    from clearmed.api.export import ExportRequest, export_runs
    from clearmed.api.index import IndexBuildRequest, IndexWarmRequest, build_corpus_index, warm_hit_cache
    from clearmed.api.merge import MergeRequest
    from clearmed.api.report import ReportRequest, report_runs
    from clearmed.api.request import EvalRequest
    from clearmed.api.sft import SftExportRequest, export_teacher_traces
    from clearmed.api.suite import evaluate_suite, merge_shards
    from clearmed.api.tune import TuneRequest
    from clearmed.api.tune import tune_thresholds as tune
    from clearmed.config import load_config
    from clearmed.numbers.results_table import results_frame, runs_frame

# Each public name -> the module that defines it (under the name `_NAMED` gives, where that differs).
_DEFINED_IN = {
    "AskRequest": "clearmed.api.ask",
    "CompareRequest": "clearmed.api.compare",
    "CompileRequest": "clearmed.api.compile",
    "DoctorRequest": "clearmed.api.doctor",
    "EvalRequest": "clearmed.api.request",
    "ExportRequest": "clearmed.api.export",
    "IndexBuildRequest": "clearmed.api.index",
    "IndexWarmRequest": "clearmed.api.index",
    "MergeRequest": "clearmed.api.merge",
    "ReportRequest": "clearmed.api.report",
    "SftExportRequest": "clearmed.api.sft",
    "TuneRequest": "clearmed.api.tune",
    "ask": "clearmed.api.ask",
    "build_corpus_index": "clearmed.api.index",
    "compile": "clearmed.api.compile",
    "export_runs": "clearmed.api.export",
    "export_teacher_traces": "clearmed.api.sft",
    "report_runs": "clearmed.api.report",
    "tune": "clearmed.api.tune",
    "warm_hit_cache": "clearmed.api.index",
    "build_program": "clearmed.api.assemble",
    "check_config": "clearmed.api.doctor",
    "compare_runs": "clearmed.api.compare",
    "estimate_run": "clearmed.api.evaluate",
    "evaluate": "clearmed.api.evaluate",
    "evaluate_suite": "clearmed.api.suite",
    "merge_shards": "clearmed.api.suite",
    "load_config": "clearmed.config",
    "results_frame": "clearmed.numbers.results_table",
    "runs_frame": "clearmed.numbers.results_table",
}

_NAMED = {"compile": "compile_prompts", "tune": "tune_thresholds"}

__all__ = [
    "AskRequest",
    "CompareRequest",
    "CompileRequest",
    "DoctorRequest",
    "EvalRequest",
    "ExportRequest",
    "IndexBuildRequest",
    "IndexWarmRequest",
    "MergeRequest",
    "ReportRequest",
    "SftExportRequest",
    "TuneRequest",
    "__version__",
    "ask",
    "build_corpus_index",
    "build_program",
    "check_config",
    "compare_runs",
    "compile",
    "estimate_run",
    "evaluate",
    "evaluate_suite",
    "export_runs",
    "export_teacher_traces",
    "load_config",
    "merge_shards",
    "report_runs",
    "results_frame",
    "runs_frame",
    "tune",
    "warm_hit_cache",
]


if not TYPE_CHECKING:  # for mypy the names are the imports above, so a misspelt one is an error, not an Any

    def __getattr__(name: str) -> Any:
        if name not in _DEFINED_IN:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(_DEFINED_IN[name]), _NAMED.get(name, name))
        globals()[name] = value  # once imported, a plain attribute
        return value
