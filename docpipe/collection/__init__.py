"""Data rooms: collections of documents asked as one. `handle` is the user's `Collection` and what adding
reports; `mixin` is the `DocPipe` side that does the work. May import everything below the facade: analysis,
answer, retrieve, engine, access, ingest, embed and the plain-data modules.
"""

from docpipe.collection.handle import AddProgress, AddReport, Collection
from docpipe.collection.mixin import CollectionMixin

__all__ = ["AddProgress", "AddReport", "Collection", "CollectionMixin"]
