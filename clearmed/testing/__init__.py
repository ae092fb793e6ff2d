"""Test doubles as library code, for this project's tests and for users testing their own configs offline.

- `scripted`: a scripted LM that answers each CLEAR stage from a table (and scores options), with every call
  recorded;
- `toy`: one toy question with its evidence, reply helpers for each stage, and demo config files;
- `fake_http`: the base of the fake HTTP services;
- `synthetic_run`: run folders of a scripted program over synthetic questions (imported by name: it loads the run
  harness).
"""

from clearmed.testing.fake_http import JsonHandler, QuietHTTPServer
from clearmed.testing.scripted import (
    ScriptedCall,
    ScriptedEngine,
    ScriptValue,
    _AsyncScriptedEngine,
    format_chat_reply,
    identify_stage,
    scripted_lm,
)
from clearmed.testing.toy import (
    AUDIT_ALL_TRUE,
    FOLLOWUP_WEB,
    GUARD_ALL_TRUE,
    LOCAL,
    QUESTION,
    SCORED_CALIBRATED,
    UNREACHABLE_BACKBONE,
    WEB,
    build_toy_program,
    demo_config_toml,
    label_all,
    pathway_replies,
    verifier_reply,
)

__all__ = [
    "AUDIT_ALL_TRUE",
    "FOLLOWUP_WEB",
    "GUARD_ALL_TRUE",
    "LOCAL",
    "QUESTION",
    "SCORED_CALIBRATED",
    "UNREACHABLE_BACKBONE",
    "WEB",
    "JsonHandler",
    "QuietHTTPServer",
    "ScriptValue",
    "ScriptedCall",
    "ScriptedEngine",
    "_AsyncScriptedEngine",
    "build_toy_program",
    "demo_config_toml",
    "format_chat_reply",
    "identify_stage",
    "label_all",
    "pathway_replies",
    "scripted_lm",
    "verifier_reply",
]
