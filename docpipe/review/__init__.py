"""Review grids: every document of a data room against a set of questions or the clause checklist
(`docpipe.cells` and `docpipe.review.grid` the data and its exports, `docpipe.review.run` how a grid is
filled, `docpipe.review.xlsx` the Excel workbook, `docpipe.review.review` the grid `DocPipe.review` asks for,
`docpipe.review.ray_grid` the same on a Ray cluster)."""

from docpipe.review.grid import CELL_STATUSES, Cell, Column, ReviewGrid, ReviewManifest, Row
from docpipe.review.run import ReviewCancelled, ReviewProgress, columns_for

__all__ = [
    "CELL_STATUSES",
    "Cell",
    "Column",
    "ReviewCancelled",
    "ReviewGrid",
    "ReviewManifest",
    "ReviewProgress",
    "Row",
    "columns_for",
]
