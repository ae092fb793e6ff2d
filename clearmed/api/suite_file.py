"""Suites: a matrix of runs, configs x benchmarks x programs x seeds, every cell a normal resumable run folder.

A suite file is TOML (`clearmed suite SUITE.toml`; the same matrix can be given on the command line):

    out = "runs/suites/mmlu-med"     # the cells' run folders (default: runs/suites/<the file's name>)
    configs = ["o3-mini", "my-server.toml"]       # packaged names or TOML paths
    programs = ["direct", "clear"]
    seeds = [0, 1]                   # default [0]
    shards = 4                       # split every cell over 4 processes (default 1; --shards overrides)
    sets = [[], ["program.local_k=8"], ["program.local_k=64"]]   # a sweep: one cell per set (over `overrides`)
    benchmarks = ["medqa", "pubmedqa"]
    # Any other key is an option of every cell's `clearmed eval`, named as its `EvalRequest` field:
    limit = 200                      # a seeded sample of each benchmark (default: every question)
    threads = 8                      # --threads (default: the config's run.num_threads)
    overrides = ["program.local_k=32"]   # --set (the command line's --set adds to them)
    max_cost = 20.0                  # --max-cost of each cell; also revision, program_artifact, pathway,
                                     # keep_degraded, skip_bad_rows, allow_train_overlap, quiet, ...

These options are the suite's `template`, an `EvalRequest`: a cell's request is the template with the cell's axes
(program, benchmark, config, seed, its set's overrides, its folder and shard) put in, so every option of `clearmed
eval` reaches a suite by construction. The axes themselves (`program`, `benchmark`, `config`, `seed`, `source`,
`split`, `ids`, `run_dir`, `shard`, `questions`) are refused as plain keys, each naming the suite key that sets it.

or, for a benchmark that needs more than its name, one table per benchmark:

    [[benchmarks]]
    name = "mmlu-medical"
    source = "shared"                # --source (default: the hub copy)
    ids = "docs/splits/mmlu-medical-test-ids.txt"   # --ids: exactly these questions (not with `limit`)
    label = "mmlu-medical-test"      # its folder and comparison (default: name); two tables of one benchmark need it
    programs = ["clear"]             # this benchmark's programs instead of the suite's

A sweep (`sets`) runs every cell once per set of `--set` overrides, each in its own folder: the program's folder name
ends in the set's label (`clear-n200-s0-program.local_k=8`, as `clearmed eval --set` names its folder; the empty set
keeps the plain name), and the comparison of the benchmark holds them all. Named sets label their folders by name:

    [sets]
    baseline = []
    k8 = ["program.local_k=8"]

Your own questions are a table too: `name = "questions"`, `source = "my.jsonl"` (the format `clearmed.evaluate`
takes a list in; see `clearmed benchmarks`), in the folder `questions-my` unless labelled. Relative paths are relative to the folder clearmed runs in, as on the
command line.
"""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from clearmed.api.request import EvalRequest
from clearmed.core.errors import UsageError

__all__ = ["AXES", "Suite", "SuiteBenchmark", "SuiteCell", "load_suite", "suite_from_table"]

# The `EvalRequest` fields a cell sets from the suite's axes, each with the suite key that gives it.
AXES = {
    "program": "programs",
    "benchmark": "benchmarks",
    "config": "configs",
    "seed": "seeds",
    "source": "a [[benchmarks]] table's source",
    "split": "a [[benchmarks]] table's split",
    "ids": "a [[benchmarks]] table's ids",
    "run_dir": "out",
    "shard": "shards",
    "questions": 'a [[benchmarks]] table with name = "questions" and source',
}


class SuiteBenchmark(BaseModel):
    """One benchmark of a suite, with what its `clearmed eval` needs beyond the name."""

    model_config = ConfigDict(extra="forbid")

    name: str
    label: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]+$")
    source: str | None = None
    split: str | None = None
    ids: str | None = None
    programs: list[str] | None = Field(default=None, min_length=1)

    @property
    def folder(self) -> str:
        """Its name in the suite: the cells' folder and its comparison (as `clearmed eval` names its folder)."""
        from clearmed.benchmarks import benchmark_folder

        return self.label or benchmark_folder(self.name, self.source)


@dataclass(frozen=True)
class SuiteCell:
    """One run of the matrix."""

    config: str
    benchmark: SuiteBenchmark
    program: str
    seed: int
    label: str = ""  # the sweep's set (`Suite.sets`): what ends the cell's folder name ("": no set)
    overrides: tuple[str, ...] = ()  # the set's --set overrides, over the suite's own

    @property
    def config_name(self) -> str:
        """What the cell's folder is named by, as `clearmed eval` names its default folder (`config_name`)."""
        from clearmed.config import config_name

        return config_name(self.config)


class Suite(BaseModel):
    """A matrix of runs; `cells` lists them, config by config, then benchmark, program, set and seed."""

    model_config = ConfigDict(extra="forbid")

    out: Path
    configs: list[str] = Field(min_length=1)
    benchmarks: list[SuiteBenchmark] = Field(min_length=1)
    programs: list[str] = Field(min_length=1)
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    shards: int = Field(default=1, ge=1)
    sets: dict[str, list[str]] = Field(default_factory=lambda: {"": list[str]()}, min_length=1)  # no sweep
    template: EvalRequest = Field(default_factory=EvalRequest)  # every cell's other options (the file's other keys)

    @model_validator(mode="before")
    @classmethod
    def _options_as_template(cls, value: object) -> object:
        """The file's keys that are `EvalRequest` fields (not axes) make the template; an axis given as a plain key
        is refused naming the suite key that sets it."""
        if not isinstance(value, dict):
            return value
        table = dict(value)
        for name, key in AXES.items():
            if name in table:
                raise ValueError(f"{name} is an axis of the suite: give it as {key}")
        options = {name: table.pop(name) for name in list(table) if name in EvalRequest.model_fields}
        if options:
            template = table.get("template")
            given = template.model_dump(exclude_unset=True) if isinstance(template, EvalRequest) else template or {}
            table["template"] = {**dict(given), **options}
        return table

    @field_validator("sets", mode="before")
    @classmethod
    def _labelled_sets(cls, value: object) -> object:
        """`sets = [[...], ...]` labels each set as `clearmed eval --set` labels its folder (`overrides_label`); a
        table's sets are labelled by their names."""
        from clearmed.config import overrides_label

        if isinstance(value, list) and all(isinstance(item, list) for item in value):
            labels = [overrides_label([str(override) for override in item]) for item in value]
            _refuse_repeats("sets labelled", labels)
            return dict(zip(labels, value, strict=True))
        if isinstance(value, dict):
            bad = [name for name in value if not re.fullmatch(r"[A-Za-z0-9_.=,-]+", name)]
            if bad:
                raise ValueError(f"the set name {bad[0]!r} names a folder: use letters, digits and _ . = , - only")
        return value

    @field_validator("benchmarks", mode="before")
    @classmethod
    def _names_as_tables(cls, value: object) -> object:
        """`benchmarks = ["medqa"]` is short for `[[benchmarks]] name = "medqa"`."""
        return (
            [{"name": item} if isinstance(item, str) else item for item in value] if isinstance(value, list) else value
        )

    def cells(self) -> list[SuiteCell]:
        return [
            SuiteCell(config, benchmark, program, seed, label, tuple(overrides))
            for config in self.configs
            for benchmark in self.benchmarks
            for program in benchmark.programs or self.programs
            for label, overrides in self.sets.items()
            for seed in self.seeds
        ]

    def check(self) -> Suite:
        """Refuse, in one line, a suite whose cells would share a folder or could not run; return it."""
        from clearmed.benchmarks import QUESTIONS, benchmark_info
        from clearmed.config import config_name
        from clearmed.programs.catalog import PROGRAMS

        _refuse_repeats("configs named", [config_name(config) for config in self.configs])
        _refuse_repeats("benchmarks labelled", [benchmark.folder for benchmark in self.benchmarks])
        _refuse_repeats("seeds", [str(seed) for seed in self.seeds])
        for programs in [self.programs, *(b.programs for b in self.benchmarks if b.programs)]:
            _refuse_repeats("programs", programs)
            unknown = [program for program in programs if program not in PROGRAMS]
            if unknown:
                raise UsageError(f"suite: unknown program {unknown[0]!r}; choose from {', '.join(PROGRAMS)}")
        for benchmark in self.benchmarks:
            if benchmark.name == QUESTIONS and not benchmark.source:
                raise UsageError(f"suite: benchmark {benchmark.folder} needs source = <your questions file>")
            if benchmark.name not in ("demo", QUESTIONS):
                benchmark_info(benchmark.name)  # an unknown name is one line (UnknownBenchmarkError)
            if benchmark.ids and self.template.limit:
                raise UsageError(f"suite: benchmark {benchmark.folder} has ids, so the suite takes no limit")
        for name in ("limit", "threads"):  # as the suite's own keys always were: a count of at least 1
            if (count := getattr(self.template, name)) is not None and count < 1:
                raise UsageError(f"suite: {name} must be at least 1, not {count}")
        return self


def _refuse_repeats(what: str, names: Sequence[str]) -> None:
    repeated = [name for name, count in Counter(names).items() if count > 1]
    if repeated:
        raise UsageError(f"suite: two {what} {repeated[0]!r}: their runs would share a folder (give each its own)")


def _first_error(err: ValidationError) -> str:
    first = err.errors()[0]
    loc = first["loc"][1:] if first["loc"][:1] == ("template",) else first["loc"]  # an option is a key of the file
    message = first["msg"].removeprefix("Value error, ")
    return f"{'.'.join(map(str, loc))}: {message}" if loc else message


def load_suite(path: Path) -> Suite:
    """A suite file, checked (`Suite.check`); anything wrong with it is one line naming the file."""
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise UsageError(f"cannot read the suite file {path}: {err.strerror or err}") from None
    except tomllib.TOMLDecodeError as err:
        raise UsageError(f"{path}: not valid TOML: {err}") from None
    table.setdefault("out", str(Path("runs") / "suites" / path.stem))
    return suite_from_table(table, str(path))


def suite_from_table(table: dict[str, object], where: str) -> Suite:
    """A suite from its table (a file's, or the command line's matrix), checked; what is wrong is one line."""
    try:
        suite = Suite.model_validate(table)
    except ValidationError as err:
        raise UsageError(f"{where}: {_first_error(err)}") from None
    return suite.check()
