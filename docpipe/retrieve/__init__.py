"""Retrieval: the dense FAISS index, BM25, their fusion into ranked sections fitted to a token budget, and
the definitions and cross-references a section uses, and retrieval over a collection (routing to the
contracts a question names, the pooled index). May import docpipe.types, errors, settings, tokens, storage and embed.
"""
