"""Answers: prompts, the answer cache, building answers from engine results (or extractively, without a
model), verifying quotes against the sections given, and streaming. May import everything below it: types,
errors, settings, ingest, embed, retrieve, engine.
"""
