"""Ingestion: bytes to a searchable index. PDF and Word bytes to pages (a sandboxed extraction worker,
`extract`), clause-aware sections, embedder-sized passages, the index built or loaded from the store (`build`),
and the slots that bound concurrent extractions. Sits above retrieval (the index it builds) and storage.
"""
