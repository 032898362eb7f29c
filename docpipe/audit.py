"""Audit manifests: what produced an answer or a report, so a reviewer can check or reproduce it later.

A manifest names the document by its SHA-256, the engine, model and model revision, the prompt version,
a fingerprint of every setting that can change the output, the index fingerprint, the section ids that went
to the model, and when it was made.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from docpipe.settings import EngineSettings

__all__ = ["AuditManifest", "model_revision"]


@dataclass(frozen=True, slots=True)
class AuditManifest:
    """The provenance of one answer or report (see the module docstring).

    >>> m = AuditManifest(kind="answer", document_sha256="ab" * 32, document_name="msa.pdf", engine="extractive")
    >>> m.to_dict()["document_sha256"][:4], m.kind
    ('abab', 'answer')
    """

    kind: str
    document_sha256: str
    document_name: str
    engine: str
    model: str | None = None
    model_revision: str | None = None
    thinking: bool = False
    prompt_version: str = ""
    settings_fingerprint: str = ""
    index_fingerprint: str = ""
    section_ids: tuple[str, ...] = ()
    created: str = field(default_factory=lambda: _iso(None))
    docpipe_version: str = ""
    # Asked of a collection: its name and the SHA-256 of every document whose sections went to the model.
    collection: str = ""
    documents_sha256: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["section_ids"] = list(self.section_ids)
        data["documents_sha256"] = list(self.documents_sha256)
        return data

    def to_json(self) -> str:
        """Returns the manifest as indented JSON."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AuditManifest:
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["section_ids"] = tuple(fields.get("section_ids", ()))
        fields["documents_sha256"] = tuple(fields.get("documents_sha256", ()))
        return cls(**fields)


def _iso(timestamp: float | None) -> str:
    moment = datetime.now(UTC) if timestamp is None else datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat(timespec="seconds")


def iso_time(timestamp: float) -> str:
    """Returns a Unix time as ISO 8601 in UTC, e.g. ``2026-11-30T12:00:00+00:00``."""
    return _iso(timestamp)


def model_revision(settings: EngineSettings, engine_name: str | None, model: str | None = None) -> str | None:
    """Returns what pins the model's weights: the configured revision, or for a local model folder a hash of
    its config and its files' names and sizes (hashing the weights of a 14B model would take minutes)."""
    if engine_name in (None, "extractive"):
        return None
    if engine_name == "echo":
        return "echo"
    if settings.revision:
        return settings.revision
    folder = Path(model or settings.model).expanduser()
    if folder.is_dir():
        digest = hashlib.sha256()
        config = folder / "config.json"
        if config.is_file():
            digest.update(config.read_bytes())
        for path in sorted(folder.iterdir()):
            if path.is_file():
                digest.update(f"{path.name}:{path.stat().st_size}\n".encode())
        return "local-sha256:" + digest.hexdigest()[:16]
    return "unpinned (set DOCPIPE_ENGINE__REVISION to record the exact weights)"
