"""Embedders: the protocol, sentence-transformers (with a NumPy BERT for question embeddings), the same weights
on OpenVINO (the bulk backend when installed) and the deterministic hashing embedder. May import docpipe.types,
docpipe.errors and docpipe.settings only.
"""
