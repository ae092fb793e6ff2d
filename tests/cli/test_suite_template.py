"""A suite reaches every option of `clearmed eval`: its file's keys other than the axes make an `EvalRequest` template,
and every cell (and shard) is that template with the cell's axes put in. The field list is read off `EvalRequest`, so
an option added to it without reaching a suite fails here."""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path

import pytest
from pydantic.fields import FieldInfo

from clearmed.api.request import EvalRequest
from clearmed.api.suite import plan_suite
from clearmed.api.suite_file import AXES, load_suite
from clearmed.core.errors import UsageError
from tests.cli.scripted_cli import config_toml

SWEEP = ["program.local_k=4"]  # the second set of the suite's sweep


def _sample(name: str, field: FieldInfo) -> object:
    """A value of the field other than its default, as a TOML file would give it."""
    if name == "overrides":
        return ["program.local_k=3"]  # validated against the config before any cell runs
    kinds = set(typing.get_args(field.annotation)) if isinstance(field.annotation, types.UnionType) else set()
    kinds = kinds or {typing.get_origin(field.annotation) or field.annotation}
    if bool in kinds:
        return not field.default
    if list in kinds or any(typing.get_origin(kind) is list for kind in kinds):
        return [f"{name}=value"]
    if float in kinds:
        return 2.5
    if int in kinds:
        return 7
    if str in kinds:
        return f"{name}-value"
    raise AssertionError(f"EvalRequest.{name}: no sample value for {field.annotation}; add one to this test")


OPTIONS = {name: _sample(name, field) for name, field in EvalRequest.model_fields.items() if name not in AXES}


@pytest.fixture
def suite_path(tmp_path: Path) -> Path:
    config = tmp_path / "alpha.toml"
    config.write_text(config_toml(""), encoding="utf-8")
    lines = [
        f"out = {json.dumps(str(tmp_path / 'suite'))}",
        f"configs = [{json.dumps(str(config))}]",
        'programs = ["direct", "clear"]',
        "seeds = [0, 3]",
        "shards = 2",
        f"sets = [[], {json.dumps(SWEEP)}]",
        *(f"{name} = {json.dumps(value)}" for name, value in OPTIONS.items()),
        "[[benchmarks]]",
        'name = "demo"',
        'split = "test"',
    ]
    path = tmp_path / "suite.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_the_fields_of_a_request_are_the_axes_and_the_options() -> None:
    assert set(AXES) <= set(EvalRequest.model_fields)  # an axis renamed in the request is renamed here
    assert set(OPTIONS) | set(AXES) == set(EvalRequest.model_fields)


def test_every_option_of_a_suite_file_reaches_every_cell_and_shard(suite_path: Path) -> None:
    plan = plan_suite(load_suite(suite_path))
    assert len(plan) == 2 * 2 * 2  # programs x sets x seeds
    for planned in plan:
        cell = planned.cell
        for request in [*planned.evals, planned.resume]:
            for name, value in OPTIONS.items():
                expected = [*value, *cell.overrides] if name == "overrides" else value  # type: ignore[misc]
                assert getattr(request, name) == expected, name
            axes = (request.program, request.benchmark, request.config, request.seed, request.split)
            assert axes == (cell.program, "demo", cell.config, cell.seed, "test")
            assert (request.source, request.ids, request.questions) == (None, None, None)
        assert [request.shard for request in planned.evals] == ["1/2", "2/2"]
        assert (planned.resume.shard, planned.resume.run_dir) == (None, str(planned.run_dir))
    assert {planned.cell.overrides for planned in plan} == {(), tuple(SWEEP)}


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("seed = 3", "seed is an axis of the suite: give it as seeds"),
        ('run_dir = "x"', "run_dir is an axis of the suite: give it as out"),
        ('max_cost = "lots"', "max_cost: Input should be a valid number"),
        ("threads = 0", "suite: threads must be at least 1, not 0"),
        ("limit = 0", "suite: limit must be at least 1, not 0"),
        ("max_kost = 2", "max_kost: Extra inputs are not permitted"),
    ],
)
def test_an_axis_or_a_bad_option_in_a_suite_file_is_one_line(line: str, said: str, tmp_path: Path) -> None:
    path = tmp_path / "suite.toml"
    path.write_text(f'configs = ["demo"]\nprograms = ["direct"]\nbenchmarks = ["demo"]\n{line}\n', encoding="utf-8")
    with pytest.raises(UsageError) as caught:
        load_suite(path)
    assert str(caught.value).startswith(said if said.startswith("suite: ") else f"{path}: {said}")
    assert "\n" not in str(caught.value)
