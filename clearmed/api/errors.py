"""The errors a command ends with in one line (`clearmed: error: ...`, exit 2) rather than a traceback: bad input the
user can mend (a config, a benchmark, a corpus, a run folder) and an engine that cannot start here. Defined once, so
the command line and a script that wraps the api refuse the same things the same way.

A module of its own, imported only once a command has failed: the layers that define these errors (backbones,
retrieval, benchmarks, the harness) load nothing for a command that refuses its input (`clearmed.core.errors` holds
the ones that need no layer: `UsageError`, `FatalServiceError`)."""

from __future__ import annotations

from clearmed.backbones.errors import ConfigError
from clearmed.backbones.selfcheck import EngineCheckError
from clearmed.benchmarks import BenchmarkError
from clearmed.evaluation import RunStoreError
from clearmed.retrieval.base import EvidenceError
from clearmed.retrieval.corpus import CorpusError

ONE_LINE_ERRORS: tuple[type[Exception], ...] = (
    ConfigError,
    EngineCheckError,
    EvidenceError,
    CorpusError,
    BenchmarkError,
    RunStoreError,
)
