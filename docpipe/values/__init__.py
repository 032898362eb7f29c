"""Typed values read from contract text: the kinds of a typed column (`docpipe.values.kinds`) and one reader
per kind (dates, durations, money and percents, jurisdictions, parties). Plain text in, `Value`s out: no
retrieval, no model, nothing of docpipe but this package."""
