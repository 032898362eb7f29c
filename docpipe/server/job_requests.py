"""What a review, key-terms or playbook-check job is asked, checked before it is queued, and the grid columns it
runs with.

A job's request is plain JSON in its record (``job.json``): the review body's questions, checklist categories,
typed ``columns`` (each as a columns file's ``[[column]]`` table says it), ``key_terms`` (true, or their ids),
mode and layout, and its ``type``: ``review`` (``POST /v1/collections/{name}/review``), ``terms`` (``POST
/v1/collections/{name}/terms``: the key terms alone) or ``check`` (``POST /v1/collections/{name}/check``: a
playbook's TOML text, its name, SHA-256 and number of rules). `review_request`, `terms_request` and
`check_request` check a body and return that request; `job_columns` turns a stored request's ``columns`` back
into grid columns, through the same check (`docpipe.terms.columns.column_from_table`), when the job runs or
resumes.

Every refusal is a `ConfigError` (answered 422) that names the field and the fix (a playbook's: the line, the
rule and the fix, as `docpipe.playbook.parse_playbook` says them). The limits are the server's:
at most `MAX_COLUMNS` columns in all, each question and header under the server's ``max_question_chars``, a
choice column at most `MAX_OPTIONS` options of at most `MAX_OPTION_CHARS` characters each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from docpipe.errors import ConfigError
from docpipe.playbook import Playbook, parse_playbook
from docpipe.review.run import MAX_COLUMNS, columns_for
from docpipe.terms.columns import column_from_table, parse_question

if TYPE_CHECKING:
    from docpipe.cells import Column
    from docpipe.server.options import ServeOptions
    from docpipe.server.review_models import CheckRequest, ColumnSpec, ReviewRequest, TermsRequest

__all__ = [
    "MAX_OPTIONS",
    "MAX_OPTION_CHARS",
    "check_request",
    "job_columns",
    "question_texts",
    "review_request",
    "terms_request",
]

MAX_OPTIONS = 50  # a choice column's options: a reviewer picks among a few, not a list of everything
MAX_OPTION_CHARS = 200


def review_request(options: ServeOptions, body: ReviewRequest) -> dict[str, Any]:
    """Returns the job request of a review body once every column is checked (see the module docstring)."""
    questions = list(body.questions or [])
    specs = [_spec(column) for column in body.columns or []]
    key_terms = body.key_terms if isinstance(body.key_terms, bool) else list(body.key_terms)
    if not questions and not specs and not key_terms and not body.checklist and not body.categories:
        raise ConfigError(
            'a review needs columns: send "questions" (a list of questions), "checklist": true (every '
            'clause category), "categories" (names of checklist categories), "columns" (typed columns) or '
            '"key_terms" (true, or the ids of key terms)'
        )
    if len(questions) > MAX_COLUMNS:
        raise ConfigError(
            f"{len(questions)} questions in one review; a grid takes at most {MAX_COLUMNS} columns: split them "
            "over several reviews"
        )
    if len(specs) > MAX_COLUMNS:
        raise ConfigError(
            f'{len(specs)} "columns" in one review; a grid takes at most {MAX_COLUMNS} columns: split them over '
            "several reviews"
        )
    for number, question in enumerate(questions, 1):
        if len(question) > options.max_question_chars:
            raise ConfigError(
                f"question {number} is {len(question)} characters long; keep it under {options.max_question_chars}"
            )
        _check_options(parse_question(question)[2], where=f"question {number}")
    columns = [_column(spec, f"columns[{n}]", options.max_question_chars) for n, spec in enumerate(specs)]
    try:
        columns_for(
            questions, checklist=body.checklist, categories=body.categories, columns=columns, key_terms=key_terms
        )
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("a question is empty", 'a question in "questions" is empty')) from None
    return {
        "type": "review",
        "questions": questions,
        "checklist": body.checklist,
        "categories": list(body.categories or []),
        "columns": specs,
        "key_terms": key_terms,
        "mode": body.mode,
        "layout": body.layout,
    }


def terms_request(body: TermsRequest) -> dict[str, Any]:
    """Returns the job request of a key-terms body: every key term, or the ids given, checked."""
    terms: bool | list[str] = list(body.terms) if body.terms else True
    columns_for(key_terms=terms)  # an unknown id names the key terms; one given twice is refused
    return {"type": "terms", "key_terms": terms, "mode": body.mode, "layout": None}


def check_request(options: ServeOptions, body: CheckRequest) -> tuple[dict[str, Any], Playbook]:
    """Returns the job request of a playbook check and its playbook, parsed and checked (the size is the
    route's to check first); a question rule's question over the server's ``max_question_chars`` is refused as a
    review's is."""
    playbook = parse_playbook(body.playbook, source="playbook")
    for rule in playbook.rules:
        if len(rule.question) > options.max_question_chars:
            raise ConfigError(
                f"playbook: rule {rule.id!r}: the question is {len(rule.question)} characters long; keep it under "
                f"{options.max_question_chars}"
            )
    request = {
        "type": "check",
        "playbook": body.playbook,
        "playbook_name": playbook.name,
        "playbook_sha256": playbook.sha256,
        "rules": len(playbook.rules),
        "mode": body.mode,
        "layout": None,
    }
    return request, playbook


def job_columns(request: dict[str, Any]) -> list[Column]:
    """Returns the typed columns of a stored job request (its ``columns``), checked again."""
    return [column_from_table(spec, where=f"columns[{n}]") for n, spec in enumerate(request.get("columns") or [])]


def question_texts(request: dict[str, Any]) -> list[str]:
    """Returns what a job asks in words, for the access log (which keeps their hashes): its questions and the
    questions of its typed columns (a check's are its playbook's question rules: `check_request` gives them)."""
    asked = list(request.get("questions") or [])
    return asked + [str(spec["question"]) for spec in request.get("columns") or [] if spec.get("question")]


def _spec(column: ColumnSpec) -> dict[str, Any]:
    """Returns a column as given, without the fields left out (null is absent, as in a columns file); keys that
    are not column fields stay, for the check to refuse by name."""
    declared = type(column).model_fields
    return {name: value for name, value in column.model_dump().items() if value is not None or name not in declared}


def _column(spec: dict[str, Any], where: str, max_chars: int) -> Column:
    for name in ("key", "question"):
        text = spec.get(name)
        if isinstance(text, str) and len(text) > max_chars:
            raise ConfigError(f"{where}: the {name} is {len(text)} characters long; keep it under {max_chars}")
    if isinstance(spec.get("options"), list):
        _check_options(spec["options"], where=where)
    return column_from_table(spec, where=where)


def _check_options(options: Any, *, where: str) -> None:
    if len(options) > MAX_OPTIONS:
        raise ConfigError(f"{where}: {len(options)} options; a choice column takes at most {MAX_OPTIONS}")
    for number, option in enumerate(options, 1):
        if isinstance(option, str) and len(option) > MAX_OPTION_CHARS:
            raise ConfigError(
                f"{where}: option {number} is {len(option)} characters long; keep each under {MAX_OPTION_CHARS}"
            )
