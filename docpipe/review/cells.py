"""The parts of a review grid, defined in `docpipe.cells` (below the key terms, which read typed cells)."""

from docpipe.cells import CELL_LABELS, CELL_STATUSES, Cell, Column, ReviewManifest, Row, verified_label

__all__ = ["CELL_LABELS", "CELL_STATUSES", "Cell", "Column", "ReviewManifest", "Row", "verified_label"]
