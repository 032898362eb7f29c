"""The API's routes, one module-level `fastapi.APIRouter` per area; `create_app` includes them in `ROUTERS`'
order. A route gets the pipeline, the stores and the caller in a matter through the dependencies of
`docpipe.server.deps`.

- `service`: ``GET /metrics`` (guarded) and ``GET /v1/health``
- `collections`: ``/v1/collections``, their documents, search and ask
- `openai`: ``GET /v1/models`` and ``POST /v1/chat/completions``, for OpenAI clients
- `review_jobs`: review grids, key-terms tables and playbook checks run in the background,
  ``/v1/collections/{name}/review``, ``/terms``, ``/check`` and ``/v1/jobs`` (downloads of grids and reports, the
  deadlines' iCalendar file)
- `matters`: ``/v1/matters``
- `documents`: ``/v1/documents``, ask and analyze, the stored ``/v1/answers`` and ``/v1/reports``
- `marks`: ``/v1/marks``, reviewers' marks on grid cells
"""

from __future__ import annotations

from docpipe.server.routers import collections, documents, marks, matters, openai, review_jobs, service

__all__ = ["ROUTERS"]

#: In the order the app matches and documents them (the OpenAPI description lists the tags in this order).
ROUTERS = (
    service.router,
    collections.router,
    openai.router,
    review_jobs.router,
    matters.router,
    documents.router,
    marks.router,
)
