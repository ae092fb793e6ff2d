"""Threshold tuning by replay: zero LM calls for gate changes, the Optuna study, the train/test guard, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clearmed.api.questions import read_id_file
from clearmed.cli.main import main
from clearmed.core.errors import UsageError
from clearmed.optimize.artifacts import load_artifact
from clearmed.optimize.rescore import DecisionCost, LiveSession, Rescorer, load_items
from clearmed.optimize.splits import UsedIds, refuse_seen_as_test, split_ids
from clearmed.optimize.tuning import TuneSettings, parse_params, thresholds_from, tune
from clearmed.signatures.records import Thresholds
from clearmed.testing.synthetic_run import synthetic_program

GATES_ONLY = [
    Thresholds(guard_min_high=3),
    Thresholds(audit_min_high=3, audit_min_medium=4),
    Thresholds(unanimity_fast_path=True),
]
# The searched groups (the default, the likelihood fit, needs scored pathways, which the synthetic run lacks).
SEARCHED = parse_params("guard_min_high,audit_min_high,audit_min_medium,max_followup_rounds,unanimity_fast_path")


def test_paper_defaults_reproduce_the_recorded_run(synthetic_run: Path) -> None:
    items, loaded = load_items([synthetic_run])
    assert loaded.records == 40
    assert loaded.programs == ["clear"]
    score = Rescorer(items).score(Thresholds())
    assert score.correct == sum(item.original_correct for item in items)
    assert score.misses == 0
    assert score.mean_calls == pytest.approx(sum(i.decision.lm_calls() for i in items) / 40)


def test_gate_changes_replay_with_zero_lm_calls_even_with_live_actions_at_hand(synthetic_run: Path) -> None:
    items, _ = load_items([synthetic_run])
    program, engine = synthetic_program(seed=0)
    rescorer = Rescorer(items, live=LiveSession(program))
    scores = [rescorer.score(thresholds) for thresholds in GATES_ONLY]
    assert engine.calls == []  # every judgement came from the records
    assert all(score.misses == 0 for score in scores)
    assert len({(s.correct, s.mean_calls) for s in scores}) > 1  # the gates do move the outcome


def test_a_branch_the_record_lacks_is_counted_then_kept_penalised_or_asked_live(synthetic_run: Path) -> None:
    items, _ = load_items([synthetic_run])
    # No needs_more_search round: the deterministic verifier decides, and some of its routes call for an
    # audit (with its follow-up search) that the original run never made.
    opening = Thresholds(max_followup_rounds=0)
    kept = Rescorer(items, on_miss="keep-original").score(opening)
    penalised = Rescorer(items, on_miss="penalize").score(opening)
    assert kept.misses > 0
    assert kept.misses == penalised.misses
    assert penalised.correct <= kept.correct
    program, engine = synthetic_program(seed=0)
    live = Rescorer(items, live=LiveSession(program)).score(opening)
    assert len(engine.calls) > 0
    assert live.misses == kept.misses


def test_cost_of_a_replay_drops_the_calls_it_skipped(synthetic_run: Path) -> None:
    items, _ = load_items([synthetic_run])
    rescorer = Rescorer(items, cost_weight=0.1)
    fast = rescorer.score(Thresholds(unanimity_fast_path=True))
    slow = rescorer.score(Thresholds())
    assert fast.mean_calls < slow.mean_calls
    assert fast.objective == pytest.approx(fast.accuracy - 0.1 * fast.mean_calls)
    cost = DecisionCost.of(items[0].decision)
    assert cost.original.calls == items[0].decision.lm_calls()


def test_study_is_seeded_shared_and_summarised(synthetic_run: Path, tmp_path: Path) -> None:
    items, _ = load_items([synthetic_run])
    ids = split_ids([i.question_id for i in items], train_fraction=0.75, seed=0)
    settings = TuneSettings(params=SEARCHED, seed=0)
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    first = tune(Rescorer(items), ids, settings, n_trials=15, study_name="s", storage=storage)
    assert first.trials_in_study == 15
    assert first.best_value >= first.paper_defaults_value  # trial 0 is the paper's defaults
    assert first.held_out is not None
    assert first.held_out.ids == len(ids.test) == 10
    assert first.unanimity is not None
    assert first.thresholds.unanimity_fast_path == first.unanimity.kept
    # A second worker on the same storage adds to the same study.
    second = tune(Rescorer(items), ids, settings, n_trials=5, study_name="s", storage=storage)
    assert second.trials_in_study == 20
    # ... but one with other train ids is refused, not mixed in.
    other = UsedIds(train=ids.train[:-1], test=ids.test)
    with pytest.raises(UsageError, match="other train ids"):
        tune(Rescorer(items), other, settings, n_trials=1, study_name="s", storage=storage)


def test_same_seed_same_best(synthetic_run: Path) -> None:
    items, _ = load_items([synthetic_run])
    ids = split_ids([i.question_id for i in items])
    settings = TuneSettings(params=["guard_min_high", "audit_min_high", "audit_min_medium"], seed=3)
    runs = [tune(Rescorer(items), ids, settings, n_trials=12, study_name="x", storage=None) for _ in range(2)]
    assert runs[0].best_params == runs[1].best_params
    assert runs[0].held_out is None  # every id was a train id: no test score


def test_trial_params_round_trip_to_thresholds() -> None:
    thresholds = thresholds_from({"guard_min_high": 2, "calibrated_local_weight": 0.5}, Thresholds())
    assert (thresholds.guard_min_high, thresholds.calibrated_local_weight) == (2, 0.5)
    assert thresholds_from({}, Thresholds()) == Thresholds()


# --------------------------------------------------------------------------------------------- train/test guard


def test_explicit_test_ids_may_not_overlap_the_train_ids() -> None:
    ids = [f"q{i}" for i in range(6)]
    with pytest.raises(UsageError, match="refusing to report a test score on 1 ids used for tuning"):
        split_ids(ids, train_ids=ids[:3], test_ids=ids[2:])
    split = split_ids(ids, train_ids=ids[:4])
    assert split.test == ["q4", "q5"]
    with pytest.raises(UsageError, match="not in the runs"):
        split_ids(ids, train_ids=["nope"])
    with pytest.raises(UsageError):
        refuse_seen_as_test(["q1"], {"q1"})


def test_seeded_fraction_split_is_disjoint_and_reproducible() -> None:
    ids = [f"q{i}" for i in range(20)]
    a, b = split_ids(ids, train_fraction=0.5, seed=1), split_ids(ids, train_fraction=0.5, seed=1)
    assert a == b
    assert not set(a.train) & set(a.test)
    assert len(a.train) == 10


def test_id_files(tmp_path: Path) -> None:
    (tmp_path / "ids.txt").write_text("# train\nq1\nq2\n")
    (tmp_path / "ids.json").write_text(json.dumps({"train": ["a"], "val": ["b"], "test": ["c"]}))
    (tmp_path / "list.json").write_text(json.dumps(["x", "y"]))
    assert read_id_file(tmp_path / "ids.txt") == ["q1", "q2"]
    assert read_id_file(tmp_path / "ids.json") == ["a", "b"]  # what an artifact's optimizer saw
    assert read_id_file(tmp_path / "list.json") == ["x", "y"]
    with pytest.raises(UsageError, match="cannot read"):
        read_id_file(tmp_path / "missing.txt")


# --------------------------------------------------------------------------------------------- CLI


def test_tune_cli_end_to_end(synthetic_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tuned"
    argv = ["tune", "--run", str(synthetic_run), "--out", str(out), "--trials", "10", "--train-fraction", "0.5"]
    argv += ["--params", "guard_min_high,audit_min_medium"]  # the default likelihood fit needs scored pathways
    assert main([*argv, "--cost-weight", "0.01"]) == 0
    printed = capsys.readouterr().out
    assert "test (held out): tuned" in printed
    for name in ("manifest.json", "thresholds.json", "ids.json", "study.json", "config.json", "optuna.db"):
        assert (out / name).is_file(), name
    artifact = load_artifact(out)
    assert artifact.manifest.kind == "tune"
    assert not artifact.manifest.has_program_state
    assert len(artifact.ids.train) == 20
    assert len(artifact.ids.test) == 20
    study = json.loads((out / "study.json").read_text())
    assert study["trials_in_study"] == 10
    assert study["storage"].startswith("sqlite:///")
    assert Thresholds.model_validate_json((out / "thresholds.json").read_text()) == artifact.thresholds


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--params", "guard_min_high,nope"], "unknown parameter 'nope'"),
        (["--train-fraction", "1.5"], "--train-fraction must be in (0, 1]"),
        (["--cost-weight", "-1"], "--cost-weight must be >= 0"),
        (["--storage", "nosuchdb://x"], "cannot open the Optuna storage"),
        (["--params", "calibrated_weights"], "unknown parameter 'calibrated_weights'"),  # removed: docs/results.md
        # the synthetic run's pathways generated their letters: nothing to fit the pooling weights on
        (
            ["--params", "calibrated_fit"],
            "--params calibrated_fit: 0 train questions have scored pathway distributions",
        ),
    ],
)
def test_tune_cli_bad_input_is_one_clear_line(
    synthetic_run: Path, tmp_path: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["tune", "--run", str(synthetic_run), "--out", str(tmp_path / "o"), "--trials", "1", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"clearmed: error: {message}" in err or (message in err and err.startswith("clearmed: error:"))
    assert "Traceback" not in err


def test_tune_cli_refuses_a_folder_that_is_not_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "--run", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "not a run folder" in capsys.readouterr().err


def test_tune_cli_overlapping_test_ids_are_refused(
    synthetic_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "train.txt").write_text("synth-0000\nsynth-0001\n")
    (tmp_path / "test.txt").write_text("synth-0001\nsynth-0002\n")
    argv = ["tune", "--run", str(synthetic_run), "--out", str(tmp_path / "o"), "--trials", "1"]
    assert main([*argv, "--train-ids", str(tmp_path / "train.txt"), "--test-ids", str(tmp_path / "test.txt")]) == 2
    assert "refusing to report a test score on 1 ids used for tuning" in capsys.readouterr().err


def test_storage_urls_in_reports_never_carry_a_password() -> None:
    from clearmed.optimize.tuning import redact_storage

    assert redact_storage("postgresql://user:hunter2@db:5432/optuna") == "postgresql://user:***@db:5432/optuna"
    assert redact_storage(None) == "in-memory"


def test_tune_on_a_compiled_program_carries_its_prompts(
    synthetic_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from clearmed.config import load_config
    from clearmed.optimize.artifacts import new_manifest, write_artifact
    from clearmed.testing import build_toy_program

    config = load_config("embedded")
    program, _, _ = build_toy_program({})
    program.parametric.answer.signature = program.parametric.answer.signature.with_instructions("COMPILED PROMPT")
    compiled = tmp_path / "compiled"
    write_artifact(
        compiled,
        new_manifest("compile", "clear", config, optimizer="bootstrap", has_program_state=True),
        thresholds=Thresholds(),
        ids=UsedIds(train=["synth-0000"], val=["synth-0001"]),
        config=config,
        program=program,
    )
    out = tmp_path / "tuned"
    (tmp_path / "held-out.txt").write_text("".join(f"synth-{i:04d}\n" for i in range(20, 40)))
    argv = [
        "tune",
        "--run",
        str(synthetic_run),
        "--out",
        str(out),
        "--trials",
        "3",
        "--program-artifact",
        str(compiled),
        "--params",
        "guard_min_high",
    ]
    assert main([*argv, "--test-ids", str(tmp_path / "held-out.txt")]) == 0
    artifact = load_artifact(out)
    assert artifact.manifest.has_program_state
    assert artifact.manifest.optimizer == "bootstrap+optuna-tpe"
    assert "COMPILED PROMPT" in (out / "program.json").read_text()
    assert {"synth-0000", "synth-0001"} <= set(artifact.ids.train)
    assert len(artifact.ids.test) == 20
    # A held-out id the prompts were compiled on is refused as a test id.
    (tmp_path / "test.txt").write_text("synth-0001\nsynth-0002\n")
    refused = ["tune", "--run", str(synthetic_run), "--out", str(tmp_path / "t2"), "--trials", "1",
               "--program-artifact", str(compiled), "--test-ids", str(tmp_path / "test.txt")]  # fmt: skip
    assert main(refused) == 2
    assert "used for compiling the program" in capsys.readouterr().err


def test_with_no_params_tune_runs_the_likelihood_fit_and_nothing_else() -> None:
    # Issue 26: the accuracy search won train questions by luck; the likelihood fit measured no harm.
    assert parse_params(None) == ["calibrated_fit"]
    assert parse_params("unanimity_fast_path,guard_min_high") == ["guard_min_high", "unanimity_fast_path"]
