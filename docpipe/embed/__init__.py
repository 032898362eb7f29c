"""Embedders: the protocol, sentence-transformers (with a NumPy BERT for question embeddings) and the
deterministic hashing embedder. May import docpipe.types, docpipe.errors and docpipe.settings only.
"""
