"""Playbooks: a firm's standard positions (`docpipe.playbook.schema`), held against contracts as verdicts
(`docpipe.playbook.judge`) in a report (`docpipe.playbook.report`); `docpipe.playbook.run` runs one over a
collection or files, through one review grid."""

from docpipe.playbook.judge import VERDICT_LABELS, VERDICTS, Verdict
from docpipe.playbook.report import PlaybookReport
from docpipe.playbook.schema import Playbook, Rule, load_playbook, parse_playbook

__all__ = [
    "VERDICTS",
    "VERDICT_LABELS",
    "Playbook",
    "PlaybookReport",
    "Rule",
    "Verdict",
    "load_playbook",
    "parse_playbook",
]
