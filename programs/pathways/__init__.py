"""The three pathways (CLEAR 2.2): parametric (the model's knowledge), local (a curated corpus) and dynamic (the
web), in `pathways.py`; their evidence search, the scored answer step, the web query and query-planned search
(QPIS) beside them."""
