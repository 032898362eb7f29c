"""Storage: the content-addressed store of documents, their extracted text, indexes and cached vectors
(`store`), the sealing of what it writes when a store key is set (`sealing`), and the member records of
collections (`collections`). Imports only docpipe.errors and the standard library (and `cryptography`).
"""
