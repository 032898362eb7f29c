"""Retrieval: the dense FAISS index, BM25, their fusion into ranked sections fitted to a token budget, and
the definitions and cross-references a section uses. May import docpipe.types, errors, settings, ingest and embed.
"""
