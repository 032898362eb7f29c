"""Answers: prompts, the answer cache, building answers from engine results (or extractively, without a
model), verifying quotes against the sections given, answers over several contracts of a collection, and
streaming. May import everything below it: types,
errors, settings, ingest, embed, retrieve, engine.
"""
