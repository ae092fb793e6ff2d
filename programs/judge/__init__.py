"""The option-wise judge (MedJudgeRAG): a verdict per option citing its evidence (`judge.py`), the rules that turn
verdicts into an answer (`verdicts.py`), the knowledge graph's cleanup (`graph.py`) and the parse salvage."""
