"""Access control for a shared server: per-user API keys, matters and their document records, and the
append-only access log. May import docpipe.types, errors, settings and ingest (the store).
"""
