"""Pathway answers other systems (and earlier clearmed runs) recorded, read back so CLEAR can adjudicate them without
running the pathway (`clearmed eval --pathway NAME=SOURCE`):

- `pathway`: the records: one question's reply (`RecordedReply`) and a pathway's replies (`RecordedPathway`);
- `read`: a source read by its layout (`read_recorded_pathway`), or a pathway left out (`absent_pathway`), and
  clearmed's own run folders;
- `mirage`: MIRAGE's predictions, the answer located as MIRAGE locates it (`locate_answer`);
- `clear_code`: the CLEAR code's run files (`clear_code_rows`).
"""

from clearmed.recorded.clear_code import clear_code_reply, clear_code_rows
from clearmed.recorded.mirage import locate_answer, mirage_reply
from clearmed.recorded.pathway import RecordedPathway, RecordedPathwayError, RecordedReply
from clearmed.recorded.read import absent_pathway, read_recorded_pathway

__all__ = [
    "RecordedPathway",
    "RecordedPathwayError",
    "RecordedReply",
    "absent_pathway",
    "clear_code_reply",
    "clear_code_rows",
    "locate_answer",
    "mirage_reply",
    "read_recorded_pathway",
]
