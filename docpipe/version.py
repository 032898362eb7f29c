"""docpipe's version, in a module that imports nothing, so any layer (an answer's or a report's audit manifest)
can record it without importing the `docpipe` facade; `docpipe.__version__` is this one."""

__all__ = ["__version__"]

__version__ = "0.1.0"
