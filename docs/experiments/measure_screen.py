"""Measure the evidence screen (`retrieval/screening.py`): quarantine and false-positive rates.

On the labelled set `tests/reliability/data/screen_phrasings.jsonl` (prompt-injection phrasings and benign medical
passages, each in a dev half, looked at while the patterns were written; a test half, reported and never tuned on;
or the red team, written after issue 48's patterns were frozen to evade them, and looked at for issue 58's) and
`screen_phrasings_fresh.jsonl` (written after issue 58's patterns were frozen, never tuned on), each part also
disguised as an attacker would (look-alike letters, invisible characters, full-width forms); and on the real passages of the shared OpenStax
and MedQuAD corpora, none of which should be quarantined. Each text is screened as a passage would be (`screen`): a
labelled text as a local corpus passage, a MedQuAD row as the web page it is (its URL screened too).

    python docs/experiments/measure_screen.py                    # every part, all ~30k shared passages
    python docs/experiments/measure_screen.py --show test        # and list that part's misses and false alarms
    python docs/experiments/measure_screen.py --corpus-sample 2000 --seed 0
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from clearmed.retrieval.corpus import CorpusError, row_to_passages
from clearmed.retrieval.corpus_presets import preset, preset_path
from clearmed.retrieval.screening import CAPITAL_LOOK_ALIKES, LATIN_LOOK_ALIKES, fold, screen
from clearmed.signatures.records import Passage, Provenance

SPLITS: list[str] = ["dev", "test", "redteam", "fresh"]
DATA = Path(__file__).resolve().parents[2] / "tests" / "reliability" / "data"
LABELLED = DATA / "screen_phrasings.jsonl"
# Issue 58: written after its patterns were frozen (retrieval/screening.py sha256 72c46569...), never tuned on.
FRESH = DATA / "screen_phrasings_fresh.jsonl"


class Phrasing(BaseModel):
    """One row of the labelled set."""

    label: Literal["injection", "benign"]
    kind: str  # the family of phrasing ("override", "answer_assertion", "hard_negative", ...)
    # looked at while writing the patterns; reported; written after issue 48's; written after issue 58's
    split: Literal["dev", "test", "redteam", "fresh"]
    text: str


def load_phrasings(paths: tuple[Path, ...] = (LABELLED, FRESH)) -> list[Phrasing]:
    return [
        Phrasing.model_validate_json(line)
        for path in paths
        for line in path.read_text(encoding="utf-8").splitlines()
        if line
    ]


def as_corpus_passage(text: str) -> Passage:
    return Passage(id="L1", text=text, pathway="local", provenance=Provenance(kind="corpus", corpus="labelled"))


def quarantined(text: str) -> bool:
    return screen(as_corpus_passage(text)).quarantined


def rates(phrasings: Iterable[Phrasing], split: str) -> dict[str, tuple[int, int]]:
    """(flagged, total) per label in one split."""
    counts: dict[str, list[int]] = {"injection": [0, 0], "benign": [0, 0]}
    for item in phrasings:
        if item.split == split:
            counts[item.label][0] += quarantined(item.text)
            counts[item.label][1] += 1
    return {label: (flagged, total) for label, (flagged, total) in counts.items()}


# Latin letter -> one character drawn like it, for disguising phrasings as an attacker would (Cyrillic first); a
# capital by a capital drawn like it (Greek Ν for N, never Η, the capital of the η that passes for an n).
_DISGUISES: dict[str, str] = {}
_CAPITAL_DISGUISES: dict[str, str] = {}
for _look_alike, _latin in LATIN_LOOK_ALIKES.items():
    _DISGUISES.setdefault(_latin, _look_alike)
for _capital in [key.upper() for key in LATIN_LOOK_ALIKES] + list(CAPITAL_LOOK_ALIKES):
    if len(_capital) == 1 and len(fold(_capital)) == 1 and fold(_capital).isascii():
        _CAPITAL_DISGUISES.setdefault(fold(_capital), _capital)


def disguise(text: str, rng: random.Random) -> str:
    """`text` as an attacker might hide it: letters swapped for look-alikes, zero-width spaces and soft hyphens
    inside words, some words in full-width forms."""
    words = []
    for word in text.split(" "):
        if rng.random() < 0.15:
            word = "".join(chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch for ch in word)
        out = []
        for ch in word:
            look_alike = (_CAPITAL_DISGUISES if ch.isupper() else _DISGUISES).get(ch.lower())
            if look_alike and rng.random() < 0.3:
                ch = look_alike
            out.append(ch)
            if ch.isalpha() and rng.random() < 0.1:
                out.append(rng.choice(("\u200b", "\u00ad", "\u2060")))
        words.append("".join(out))
    return " ".join(words)


def shared_passages(sample: int | None, seed: int) -> list[Passage]:
    """The shared corpora's passages (all, or a seeded sample of `sample` rows); empty where the data is absent.
    Rows are sampled before they are parsed: a sample costs what its own passages cost."""
    rows: list[tuple[str, str]] = []
    for name in ("openstax", "medquad"):
        try:
            lines = preset_path(name).read_text(encoding="utf-8").splitlines()
        except CorpusError as exc:
            print(f"skipped {name}: {exc}", file=sys.stderr)
            continue
        rows += [(name, line) for line in lines if line.strip()]
    if sample is not None and sample < len(rows):
        rows = random.Random(seed).sample(rows, sample)
    passages: list[Passage] = []
    for name, line in rows:
        spec = preset(name)
        passages += row_to_passages(json.loads(line), spec.mapping, corpus=name, pathway=spec.pathway, where=name)
    return passages


def percent(flagged: int, total: int) -> str:
    return f"{flagged}/{total} ({100 * flagged / total:.1f}%)" if total else "0/0"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", choices=SPLITS, help="list this part's misses and false alarms")
    parser.add_argument("--corpus-sample", type=int, default=None, help="screen a sample of the shared passages")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    phrasings = load_phrasings()
    for split in SPLITS:
        by_label = rates(phrasings, split)
        print(
            f"{split:7}: injections quarantined {percent(*by_label['injection'])}, "
            f"benign passages quarantined {percent(*by_label['benign'])}"
        )
    rng = random.Random(args.seed)
    for split in SPLITS:
        disguised = [item.model_copy(update={"text": disguise(item.text, rng)}) for item in phrasings]
        by_label = rates(disguised, split)
        print(
            f"{split:7} disguised (look-alikes, invisible characters, full-width; seed {args.seed}): injections "
            f"quarantined {percent(*by_label['injection'])}, benign passages quarantined {percent(*by_label['benign'])}"
        )
    if args.show:
        for item in phrasings:
            if item.split == args.show and quarantined(item.text) != (item.label == "injection"):
                what = "missed" if item.label == "injection" else "false alarm"
                print(f"  {what} [{item.kind}]: {json.dumps(item.text, ensure_ascii=False)}")
    started = time.perf_counter()
    corpus = shared_passages(args.corpus_sample, args.seed)
    flagged = [p for p in corpus if screen(p).quarantined]
    by_corpus = Counter(p.provenance.corpus for p in corpus)
    print(
        f"shared corpora ({', '.join(f'{n} {name}' for name, n in sorted(by_corpus.items()))}): quarantined "
        f"{percent(len(flagged), len(corpus))} in {time.perf_counter() - started:.0f} s"
    )
    for passage in flagged:
        print(f"  {passage.id}: {screen(passage).reason()}")


if __name__ == "__main__":
    main()
