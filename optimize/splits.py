"""Which question ids an optimizer may see, and the guard that keeps them out of any test report.

Compiling sees train and validation ids; tuning sees train ids. Both are written into the artifact
(`ids.json`), and every later report refuses to call a score on those ids a test score. One question is one group:
a question the benchmark repeats under another id (MMLU asks some questions in two subjects; MIRAGE's MMLU-Med holds
63 such twins) is the same question (`question_key`), so a committed split (`seeded_split`), a tune split
(`split_ids` with `groups`), the learned verifier's folds and eval's train-overlap guard (`seen_keys`) keep twins on
one side.
"""

from __future__ import annotations

import hashlib
import random
import re
import unicodedata
from collections.abc import Collection, Iterable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from clearmed.core.errors import UsageError
from clearmed.signatures.records import Question


class UsedIds(BaseModel):
    """The ids an artifact was optimised on (`train`, `val`) and the held-out ids it may be tested on."""

    model_config = ConfigDict(extra="forbid")

    train: list[str] = Field(default_factory=list)
    val: list[str] = Field(default_factory=list)
    test: list[str] = Field(default_factory=list)
    # The digests (`question_key_digest`) of the train and val questions, so that eval refuses a twin of a seen
    # question under another id too; empty in an artifact written before they were recorded (ids alone are checked).
    seen_keys: list[str] = Field(default_factory=list)

    def seen(self) -> set[str]:
        """Every id the optimizer looked at: never a test id."""
        return set(self.train) | set(self.val)


def _examples(ids: Iterable[str], limit: int = 3) -> str:
    chosen = sorted(ids)
    more = f" and {len(chosen) - limit} more" if len(chosen) > limit else ""
    return ", ".join(chosen[:limit]) + more


def refuse_seen_as_test(
    test_ids: Collection[str],
    seen: Collection[str],
    *,
    what: str = "tuning",
    groups: Mapping[str, str] | None = None,
) -> None:
    """Raise a one-line error when any test id was seen by the optimizer, or (with `groups`, id -> question key) is a
    twin of a seen question under another id."""
    overlap = set(test_ids) & set(seen)
    if groups is not None:
        seen_groups = {groups.get(qid, qid) for qid in seen}
        twins = {qid for qid in test_ids if qid not in overlap and groups.get(qid, qid) in seen_groups}
        if twins:
            raise UsageError(
                f"refusing to report a test score on {len(twins)} ids that repeat a question used for {what} under "
                f"another id ({_examples(twins)}; same stem and options); choose held-out questions"
            )
    if overlap:
        raise UsageError(
            f"refusing to report a test score on {len(overlap)} ids used for {what} ({_examples(overlap)}); "
            "choose held-out ids"
        )


def split_ids(
    all_ids: Sequence[str],
    *,
    train_ids: Sequence[str] | None = None,
    test_ids: Sequence[str] | None = None,
    train_fraction: float | None = None,
    seed: int = 0,
    groups: Mapping[str, str] | None = None,
) -> UsedIds:
    """Train ids (what tuning sees) and test ids (held out), from explicit lists or a seeded fraction.

    With neither, every id is a train id and there is no test set. Explicit test ids must be disjoint from
    the train ids; ids that are not in the runs are an error, not silently dropped.

    `groups` maps an id to its question (`question_key`): a seeded fraction draws whole questions, so twins land on
    one side; a test id that repeats a train question is refused when named, and left out of the test set when it
    is only the rest (it was seen, under its twin's id); a train id that repeats a named test question is left out of
    the train set. Without `groups` every id is its own question.
    """
    known = list(dict.fromkeys(all_ids))
    known_set = set(known)
    group = dict(groups or {})

    def key(qid: str) -> str:
        return group.get(qid, qid)

    for name, given in (("--train-ids", train_ids), ("--test-ids", test_ids)):
        if given is not None:
            unknown = set(given) - known_set
            if unknown:
                raise UsageError(f"{name}: {len(unknown)} ids are not in the runs ({_examples(unknown)})")
    if train_ids is not None and train_fraction is not None:
        raise UsageError("give --train-ids or --train-fraction, not both")
    if train_fraction is not None and not 0.0 < train_fraction <= 1.0:
        raise UsageError(f"--train-fraction must be in (0, 1], got {train_fraction}")
    if train_ids is not None:
        train = [qid for qid in known if qid in set(train_ids)]
    elif train_fraction is not None:
        # Whole questions are drawn: with no twins this is the shuffle of the ids it always was.
        order = list(dict.fromkeys(key(qid) for qid in known))
        random.Random(seed).shuffle(order)
        chosen = set(order[: max(1, round(train_fraction * len(order)))])
        train = [qid for qid in known if key(qid) in chosen]
    elif test_ids is not None:
        held = {key(qid) for qid in test_ids}
        train = [qid for qid in known if key(qid) not in held]
    else:
        train = list(known)
    if test_ids is not None:
        refuse_seen_as_test(test_ids, train, groups=group)
        test = [qid for qid in known if qid in set(test_ids)]
    else:
        seen = {key(qid) for qid in train}
        test = [qid for qid in known if key(qid) not in seen]
    if not train:
        raise UsageError("no train ids left to tune on")
    return UsedIds(train=train, test=test)


def _normalised(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


def question_key(question: Question) -> str:
    """What makes two rows the same question: the stem and the option texts, compared after Unicode
    normalisation, case folding and with punctuation and spacing collapsed. The options are compared as a set,
    since the same question with its options reordered is still answered from memory; the gold is left out,
    since a repeat is a leak whatever its answer key says."""
    options = sorted(_normalised(text) for text in (question.options or {}).values())
    return "\n".join([_normalised(question.text), *options])


def question_key_digest(question: Question) -> str:
    """A short digest of `question_key`, what an artifact records of each question it saw (`UsedIds.seen_keys`):
    enough to recognise a twin, without copying the benchmark's text into the artifact."""
    return hashlib.sha256(question_key(question).encode("utf-8")).hexdigest()[:16]


def question_groups(questions: Iterable[Question]) -> dict[str, str]:
    """Each question's id mapped to its question (`question_key`): the `groups` of `split_ids`."""
    return {question.id: question_key(question) for question in questions}


class SeededSplit(BaseModel):
    """A committed train/test split: the ids on each side in shuffled order, and the repeats dropped from each
    side (by where the shuffle put them), each mapped to the id of the copy that was kept."""

    model_config = ConfigDict(extra="forbid")

    train: list[str]
    test: list[str]
    train_repeats: dict[str, str] = Field(default_factory=dict)
    test_repeats: dict[str, str] = Field(default_factory=dict)


def seeded_split(questions: Sequence[Question], *, n_train: int, seed: int = 0) -> SeededSplit:
    """Shuffle the questions with `seed`; the first `n_train` positions are train and the rest test; then every
    question that repeats one earlier in that order (`question_key`) is dropped.

    Dropping later copies keeps every unrepeated id where an earlier split without the check put it (same side,
    same order), so runs on those ids stay comparable. A repeat across the cut always keeps its train copy, since
    train comes first: train loses only second copies of its own questions, and test only loses questions. No
    test question repeats a train question, and no question is counted twice on either side.
    """
    ids = [question.id for question in questions]
    if len(set(ids)) != len(ids):
        raise UsageError("seeded_split: question ids are not unique")
    if not 0 < n_train < len(ids):
        raise UsageError(f"seeded_split: n_train must be between 1 and {len(ids) - 1}, got {n_train}")
    order = list(questions)
    random.Random(seed).shuffle(order)
    first_copy: dict[str, str] = {}
    split = SeededSplit(train=[], test=[])
    for position, question in enumerate(order):
        key = question_key(question)
        on_train = position < n_train
        if key in first_copy:
            (split.train_repeats if on_train else split.test_repeats)[question.id] = first_copy[key]
            continue
        first_copy[key] = question.id
        (split.train if on_train else split.test).append(question.id)
    return split


def without_repeats_of(questions: Sequence[Question], held_out: Collection[str]) -> list[Question]:
    """The questions that are neither held out (by id) nor a repeat of a held-out question (`question_key`): what
    an optimizer may draw from, so that a question the benchmark repeats cannot carry a held-out one into a demo.
    A committed split drops such copies from both files (`seeded_split`), so "not a test id" alone would let
    them back in."""
    held = {question_key(question) for question in questions if question.id in held_out}
    return [q for q in questions if q.id not in held_out and question_key(q) not in held]
