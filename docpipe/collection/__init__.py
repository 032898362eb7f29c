"""Collections (data rooms): documents asked as one. `handle` is the user's `Collection`; `service` the
`CollectionService` that holds the collections of one `DocPipe` and does the work over them (routing, pooled
index, answers); `parallel_ingest` adds many files at once on this machine, `ray_ingest` on a Ray cluster;
`reports` is what an add reports. May import everything below the facade: analysis, answer, access, ingest,
retrieve, engine, storage, embed and the plain-data modules.
"""

from docpipe.collection.handle import Collection
from docpipe.collection.reports import AddProgress, AddReport
from docpipe.collection.service import CollectionService

__all__ = ["AddProgress", "AddReport", "Collection", "CollectionService"]
