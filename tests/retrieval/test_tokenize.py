from __future__ import annotations

import pytest

from clearmed.retrieval.tokenize import Tokenizer, TokenizerConfig


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Vitamin B12 deficiency", ["vitamin", "b12", "deficiency"]),
        ("Free T4 and TSH", ["free", "t4", "tsh"]),
        ("HbA1c of 7.5%", ["hba1c", "7.5"]),
        ("HbA₁c", ["hba1c"]),  # subscript digit folded by NFKC
        ("IL-6 levels", ["il", "6", "il6", "levels"]),
        ("COVID-19", ["covid", "19", "covid19"]),
        ("beta-blocker", ["beta", "blocker"]),  # long parts: no joined token
        ("Crohn's disease", ["crohn", "disease"]),
        ("vitamin K and hepatitis B", ["vitamin", "k", "hepatitis", "b"]),
        ("0,5 mg of drug", ["0,5", "mg", "drug"]),
    ],
)
def test_medical_tokens_survive(text: str, expected: list[str]) -> None:
    assert Tokenizer()(text) == expected


def test_negations_are_not_stopwords() -> None:
    assert Tokenizer()("fever without rash, not contagious") == ["fever", "without", "rash", "not", "contagious"]


def test_stopwords_can_be_kept() -> None:
    assert Tokenizer(TokenizerConfig(stopwords=False))("the B12 of a") == ["the", "b12", "of", "a"]


def test_simple_stemmer_folds_plurals_only() -> None:
    tokens = Tokenizer(TokenizerConfig(stem="simple"))("antibodies doses virus B12s glucose")
    assert tokens == ["antibody", "dose", "virus", "b12s", "glucose"]


def test_empty_and_punctuation_only() -> None:
    assert Tokenizer()("") == []
    assert Tokenizer()("?!— ...") == []
