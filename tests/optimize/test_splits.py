"""Committed train/test splits: a question the benchmark repeats never sits on both sides (issue 25).

MMLU asks some questions in both clinical_knowledge and college_medicine; the first MMLU-Med split put 10 of
its 300 test questions beside their train copies. `seeded_split` drops every later copy in the shuffled order,
so the ids that are not repeats stay where they were.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest

from clearmed.core.errors import UsageError
from clearmed.optimize.splits import question_key, seeded_split, without_repeats_of
from clearmed.signatures.records import Question

ROOT = Path(__file__).resolve().parents[2]
SPLITS = ROOT / "docs" / "splits"


def q(qid: str, text: str, options: list[str], gold: str = "A") -> Question:
    return Question(id=qid, text=text, options=dict(zip("ABCD", options, strict=False)), gold_letters=[gold])


# Twenty distinct questions, and copies of four of them written the way MMLU repeats them (case, punctuation,
# spacing, Unicode form, option order, even another gold); one near miss shares a stem but not the options.
DISTINCT = [q(f"u{i}", f"Invented question number {i}?", [f"opt {i} {k}" for k in "wxyz"]) for i in range(20)]
COPIES = [
    q("c0", "INVENTED   question number 0 ?", ["Opt 0 w.", "opt 0 x", "opt 0 y", "opt 0 z"]),
    q("c3", "Invented question number 3?", ["opt 3 z", "opt 3 y", "opt 3 x", "opt 3 w"], gold="D"),
    q("c7", "Invented question number 7\uff1f", ["opt 7 w", "opt 7 x", "opt 7 y", "opt 7 z"]),
    q("c11", "invented question, number 11?", ["opt 11 w", "opt 11 x", "opt 11 y", "opt 11 z"]),
]
NEAR_MISS = q("n0", "Invented question number 0?", ["other w", "other x", "other y", "other z"])
POOL = [*DISTINCT, *COPIES, NEAR_MISS]


def test_question_key_ignores_form_and_option_order_but_not_the_options() -> None:
    assert question_key(COPIES[0]) == question_key(DISTINCT[0])
    assert question_key(COPIES[1]) == question_key(DISTINCT[3])  # reordered options, another gold
    assert question_key(COPIES[2]) == question_key(DISTINCT[7])  # a full-width question mark (NFKC)
    assert question_key(NEAR_MISS) != question_key(DISTINCT[0])


def test_seeded_split_keeps_one_copy_and_leaves_the_other_ids_where_they_were() -> None:
    n_train = 12
    split = seeded_split(POOL, n_train=n_train, seed=0)
    train_keys = {question_key(question) for question in POOL if question.id in split.train}
    test_keys = [question_key(question) for question in POOL if question.id in split.test]
    assert not train_keys & set(test_keys)
    assert len(set(test_keys)) == len(test_keys)
    assert len(train_keys) == len(split.train)
    # the split without the check: the same shuffle and cut, every copy kept
    order = [question.id for question in POOL]
    random.Random(0).shuffle(order)
    dropped = split.train_repeats | split.test_repeats
    # this shuffle puts one pair across the cut (c11 train, u11 test), two on train and one on test
    assert split.test_repeats == {"u11": "c11", "u3": "c3"}
    assert split.train_repeats == {"c0": "u0", "c7": "u7"}
    assert split.train == [qid for qid in order[:n_train] if qid not in dropped]
    assert split.test == [qid for qid in order[n_train:] if qid not in dropped]
    by_id = {question.id: question for question in POOL}
    for copy, kept in dropped.items():
        assert question_key(by_id[copy]) == question_key(by_id[kept])
        # the kept copy comes first in the shuffle, so a repeat across the cut keeps its train copy
        assert order.index(kept) < order.index(copy)
    assert set(split.train) | set(split.test) | set(dropped) == set(order)
    assert "n0" in split.train or "n0" in split.test


def test_seeded_split_refuses_a_bad_pool() -> None:
    with pytest.raises(UsageError, match="not unique"):
        seeded_split([DISTINCT[0], DISTINCT[0]], n_train=1)
    with pytest.raises(UsageError, match="n_train must be between 1 and 19"):
        seeded_split(DISTINCT, n_train=20)


def test_an_optimizer_never_draws_a_repeat_of_a_held_out_question() -> None:
    usable = without_repeats_of(POOL, {"u0", "u3"})
    assert {x.id for x in usable} == {x.id for x in POOL} - {"u0", "c0", "u3", "c3"}


# --- the committed MMLU-Med files (skipped where the shared pool is absent) ---


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("write_mmlu_splits", ROOT / "scripts" / "write_mmlu_splits.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _ids(name: str) -> list[str]:
    lines = (SPLITS / f"mmlu-medical-{name}-ids.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


@pytest.fixture
def mmlu_pool(shared_data: Path) -> list[Question]:
    from clearmed.benchmarks import load_benchmark

    path = shared_data / "benchmarks" / "mmlu_med" / "test_pool.jsonl"
    if not path.is_file():
        pytest.skip("the shared MMLU-Med pool is absent")
    return load_benchmark("mmlu-medical", source=path).questions


def test_no_committed_test_question_repeats_a_train_question(mmlu_pool: list[Question]) -> None:
    by_id = {question.id: question for question in mmlu_pool}
    train, test = _ids("train"), _ids("test")
    train_keys = {question_key(by_id[qid]) for qid in train}
    repeats = [qid for qid in test if question_key(by_id[qid]) in train_keys]
    assert repeats == []
    assert len({question_key(by_id[qid]) for qid in test}) == len(test)
    assert len(train_keys) == len(train)


def test_the_committed_files_are_what_the_script_writes(mmlu_pool: list[Question], shared_data: Path) -> None:
    script = _script()
    n_pool, split = script.split_of(shared_data / "benchmarks" / "mmlu_med" / "test_pool.jsonl")
    texts = script.file_texts(n_pool, split)
    for side in ("train", "test"):
        assert (SPLITS / f"mmlu-medical-{side}-ids.txt").read_text() == texts[side], side
    assert (len(split.train), len(split.test), len(split.train_repeats), len(split.test_repeats)) == (242, 287, 3, 13)


def test_compiling_with_the_test_file_held_out_draws_no_twin_of_a_test_question(mmlu_pool: list[Question]) -> None:
    test = set(_ids("test"))
    usable = without_repeats_of(mmlu_pool, test)
    test_keys = {question_key(question) for question in mmlu_pool if question.id in test}
    assert not any(question_key(question) in test_keys for question in usable)
    # the dropped copies of test questions (three MMLU pairs fell on the test side) are not usable either
    assert len(usable) == len(mmlu_pool) - len(test) - 3


def test_compile_with_the_test_file_excluded_draws_no_twin_of_a_test_question(mmlu_pool: list[Question]) -> None:
    from clearmed.api.compile import CompileRequest, select_questions
    from clearmed.cli.main import build_parser, parsed_request

    test_file = SPLITS / "mmlu-medical-test-ids.txt"
    argv = ["compile", "--optimizer", "bootstrap", "--benchmark", "mmlu-medical", "--source", "shared"]
    # every usable question: the pool less the test ids and the three copies of test questions
    argv += ["--train", "200", "--val", "55", "--exclude-ids", str(test_file), "--out", "x"]
    _, train, val = select_questions(parsed_request(CompileRequest, build_parser().parse_args(argv)))
    test = set(_ids("test"))
    test_keys = {question_key(question) for question in mmlu_pool if question.id in test}
    assert [question.id for question in [*train, *val] if question_key(question) in test_keys] == []
    assert len(train) + len(val) == 255


# ------------------------------------------------------------------ one question, one group (issue 56, item 1)
def test_twins_never_straddle_a_tune_split() -> None:
    """Mutant killed: `split_ids` drawing ids instead of questions (its `groups` ignored)."""
    from clearmed.optimize.splits import question_groups, split_ids

    ids = [question.id for question in POOL]
    groups = question_groups(POOL)
    twins = {"u0": "c0", "u3": "c3", "u7": "c7", "u11": "c11"}
    straddled = 0
    for seed in range(20):
        split = split_ids(ids, train_fraction=0.5, seed=seed, groups=groups)
        train, test = set(split.train), set(split.test)
        assert train | test == set(ids)
        assert not train & test
        for one, other in twins.items():
            assert (one in train) == (other in train), (seed, one, other)
        straddled += sum((one in train) != (other in train) for one, other in twins.items())
        ungrouped = split_ids(ids, train_fraction=0.5, seed=seed)
        straddled += sum((one in ungrouped.train) != (o in ungrouped.train) for one, o in twins.items())
    assert straddled > 0  # without groups they do straddle: the check above is not vacuous
    # Named train ids: a twin of one is no test id (it was seen under the other id); named test ids that repeat a
    # train question are refused in one line; a train id repeating a named test question is left out of train.
    split = split_ids(ids, train_ids=["u0", "u1"], groups=groups)
    assert "c0" not in split.test
    assert "u2" in split.test
    with pytest.raises(UsageError, match=r"1 ids that repeat a question used for tuning under another id \(c3;"):
        split_ids(ids, train_ids=["u3"], test_ids=["c3", "u4"], groups=groups)
    split = split_ids(ids, test_ids=["c7"], groups=groups)
    assert "u7" not in split.train
    assert split.test == ["c7"]


def test_eval_refuses_a_twin_of_a_question_the_artifact_was_tuned_on() -> None:
    """Mutant killed: the train-overlap guard matching ids only (`seen_keys` ignored)."""
    from clearmed.optimize.artifacts import ArtifactManifest, ProgramArtifact, refuse_seen_ids
    from clearmed.optimize.splits import UsedIds, question_key_digest
    from clearmed.signatures.records import Thresholds

    manifest = ArtifactManifest(
        kind="tune", program="clear", created="", clearmed_version="", dspy_version="", backbone=""
    )
    seen = UsedIds(train=["u0"], seen_keys=[question_key_digest(DISTINCT[0])])
    artifact = ProgramArtifact(path=Path("art"), manifest=manifest, thresholds=Thresholds(), ids=seen)
    with pytest.raises(UsageError, match=r"1 of the questions were used to optimize art \(c0; 1 of them a repeat"):
        refuse_seen_ids([COPIES[0], DISTINCT[1]], artifact, allow=False)
    refuse_seen_ids([COPIES[0]], artifact, allow=True)  # --allow-train-overlap: knowingly
    refuse_seen_ids([NEAR_MISS, DISTINCT[1]], artifact, allow=False)  # same stem, other options: another question
    # An artifact written before the digests were recorded is checked by id alone.
    old = ProgramArtifact(path=Path("art"), manifest=manifest, thresholds=Thresholds(), ids=UsedIds(train=["u0"]))
    refuse_seen_ids([COPIES[0]], old, allow=False)
    with pytest.raises(UsageError, match="1 of the questions were used"):
        refuse_seen_ids([DISTINCT[0]], old, allow=False)
