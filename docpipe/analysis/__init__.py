"""Contract analysis: the 41-category clause checklist and its report. May import answer and what is
below it.
"""
