"""Ingestion: PDF bytes to pages (a sandboxed extraction worker), clause-aware sections, embedder-sized
passages, Qwen3 token counts, the content-addressed store they are kept in, and the member records of
collections. May import docpipe.types, docpipe.errors and docpipe.settings only.
"""
