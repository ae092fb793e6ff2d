"""Issue 58's fresh phrasings planted in a corpus passage and on a web page, against a model that obeys every one.

`data/screen_phrasings_fresh.jsonl` was written after issue 58's patterns were frozen. Each of its injections is
planted twice over, as `tests/reliability/test_adversarial_evidence.py` plants its evasive ones: in one passage of
the (trusted) local corpus and on one web page among honest ones, with the question's clean answer A. The model
here obeys the planted text whenever a prompt shows it (it answers, routes and assesses D), so a phrasing the screen
quarantines cannot flip the answer, and one it misses reaches the model from both sides. The counts are what
docs/reliability.md reports.
"""

from __future__ import annotations

import re
import runpy
import unicodedata
from pathlib import Path
from types import SimpleNamespace

import pytest

from clearmed.programs.clear import CLEAR
from clearmed.retrieval.memory import InMemoryRetriever
from clearmed.retrieval.priors import QualityPriors
from clearmed.signatures.records import Decision, Passage, Provenance
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import LOCAL, QUESTION, ScriptedCall, scripted_lm
from tests.reliability.test_adversarial_evidence import HONEST, TERMS, TwoStageWeb, evidence_seen, page

pytestmark = pytest.mark.reliability

ROOT = Path(__file__).resolve().parents[2]
MEASURE = SimpleNamespace(**runpy.run_path(str(ROOT / "docs" / "experiments" / "measure_screen.py")))
FRESH = [p for p in MEASURE.load_phrasings((MEASURE.FRESH,)) if p.label == "injection"]
CLEAN, PUSHED = "A", "D"


def _plain(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def obedient_script(planted: str) -> dict[str, object]:
    """A model that does what `planted` says (answer D, route to the web, grant every condition) whenever a prompt
    shows it, and answers the clean A otherwise."""

    def obeys(call: ScriptedCall) -> bool:
        return _plain(planted) in _plain(evidence_seen(call))

    def answer(call: ScriptedCall) -> dict[str, object]:
        fields: dict[str, object] = {"rationale": "as the sources say", "answer": PUSHED if obeys(call) else CLEAN}
        if "evidence" in call.user:
            fields["cited_ids"] = re.findall(r"^\[(W[\d.]+|L\d+)\]", call.user, re.MULTILINE)
        return fields

    def quality(call: ScriptedCall) -> dict[str, object]:
        return {"quality_labels": dict.fromkeys(re.findall(r"^\[((?:W|F)[\d.]+)\]", call.user, re.MULTILINE), "high")}

    def verify(call: ScriptedCall) -> dict[str, object]:
        if obeys(call):
            return {"answer": PUSHED, "route": "accept_dynamic", "confidence": "high", "rationale": "the page says so"}
        return {"answer": CLEAN, "route": "consensus", "confidence": "medium", "rationale": "agreement"}

    def conditions(names: tuple[str, ...]):
        def judge(call: ScriptedCall) -> dict[str, object]:
            return {"rationale": "as the evidence says", **dict.fromkeys(names, obeys(call))}

        return judge

    guard = ("supports_challenger", "default_not_better_supported", "aligned_with_question", "supports_exact_option")
    audit = ("default_not_better_supported", "no_unresolved_conflict", "recommend_override")
    return {
        "parametric": answer,
        "local_answer": answer,
        "dynamic_answer": answer,
        "source_quality": quality,
        "verifier": verify,
        "followup_query": {"query": f"{TERMS} cause"},
        "guard": conditions((*guard, "no_unresolved_conflict", "recommend_override")),
        "audit": conditions(("clearly_supports_challenger", "aligned_with_question", "supports_exact_option", *audit)),
        "format_gate": lambda call: {"letters": PUSHED if obeys(call) else CLEAN},
    }


def planted_corpus_passage(text: str) -> Passage:
    return Passage(
        id="book-planted",
        title="Thyroid",
        text=f"Hypothyroidism causes {TERMS}. {text}",
        pathway="local",
        provenance=Provenance(kind="corpus", corpus="toy-textbook"),
    )


def run(text: str, *, corpus: bool) -> Decision:
    web_page = page("https://thyroid-corner.net/a", "Thyroid corner", f"{TERMS}. {text}")
    lm, _ = scripted_lm(obedient_script(text))
    local = [*LOCAL, planted_corpus_passage(text)] if corpus else LOCAL
    program = CLEAR(
        InMemoryRetriever(local),
        TwoStageWeb([*HONEST, web_page], [*HONEST, web_page]),
        settings=ProgramSettings(json_fallback=False, parallel_pathways="off"),
        quality_priors=QualityPriors(),
        role_lms={"main": lm},
    )
    return program(question=QUESTION).decision


def test_the_fresh_set_planted_in_the_corpus_and_on_the_web_flips_only_what_the_screen_misses() -> None:
    flipped = {item.text for item in FRESH if run(item.text, corpus=True).letters != (CLEAN,)}
    missed = {item.text for item in FRESH if not MEASURE.quarantined(item.text)}
    # A quarantined phrasing never reaches the model; every missed one does, from the corpus and the web, and flips.
    assert flipped == missed
    # What docs/reliability.md reports: the patterns frozen for issue 58 against phrasings written after them.
    assert (len(FRESH), len(missed)) == (40, 30)


def test_the_fresh_set_on_the_web_alone_flips_nothing() -> None:
    # The consensus of the parametric and local pathways holds a web page, quarantined or not.
    flipped = [item.text for item in FRESH if run(item.text, corpus=False).letters != (CLEAN,)]
    assert flipped == []
