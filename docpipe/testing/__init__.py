"""Real stand-ins for tests and demos: a tiny Qwen3-architecture model built locally, server helpers.
May import anything in docpipe; nothing in docpipe imports it.
"""
