"""The extraction worker: a ``python -I -c`` child process per document, both sides of it.

The caller's side (`worker_request`, `run_worker`) pickles the request to the child's stdin, kills the child
at the time bound, and turns a crash into an `ExtractionError` that says what most likely happened; the
child's reply comes back as plain data, its errors as (class name, message, context) that
`raise_worker_error` raises as the matching `DocpipeError`, and its log records are re-logged here. The child's side
(`worker_main`) lowers its priority by ``worker_nice``, caps its address space at ``memory_limit_mb``, arms
its own alarm in case the parent dies, and reads the document (`docpipe.ingest.extract.pages`).

Like the "spawn" start method the child is exec'd straight after fork, which is safe in a parent holding
torch/OpenMP threads; unlike "spawn" and "forkserver" it does not re-import the caller's ``__main__``. It
imports only this package, `docpipe.types`, `docpipe.errors` and the chosen backend.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from docpipe import errors
from docpipe.errors import DocpipeError, ExtractionError, ExtractionTimeoutError
from docpipe.ingest.extract.budget import TextBudget
from docpipe.ingest.extract.common import limit_memory, other_extractor, out_of_memory
from docpipe.ingest.extract.docx_reader import read_docx
from docpipe.ingest.extract.pages import read_encryption, read_pages

if TYPE_CHECKING:
    from docpipe.settings import ExtractionSettings

logger = logging.getLogger(__name__)

# The package holding docpipe/__init__.py: the child registers it bare (see _BOOTSTRAP).
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_MAX_FORWARDED_RECORDS = 100

# The worker also arms its own alarm, so it dies even if the parent was killed before it could kill it.
_WORKER_ALARM_GRACE_S = 10

# The child's first lines. It ignores Ctrl-C (the parent owns the worker's life and kills it), moves
# stdout to stderr so that a stray print, from Python or from C, cannot corrupt the reply, and takes the
# caller's sys.path from the request (-I drops the environment and the current directory). It registers
# a bare `docpipe` package so that importing this package skips docpipe/__init__.py, which loads the
# whole pipeline (pydantic and more) and would add its import time to every extraction.
_BOOTSTRAP = """\
import os, pickle, signal, sys, types
signal.signal(signal.SIGINT, signal.SIG_IGN)
reply_fd = os.dup(1)
os.dup2(2, 1)
request = pickle.load(sys.stdin.buffer)
sys.path[:] = request["sys_path"]
package = types.ModuleType("docpipe")
package.__path__ = [request["package_dir"]]
sys.modules["docpipe"] = package
from docpipe.ingest.extract.worker import worker_main
worker_main(request, reply_fd)
"""


def worker_request(
    data: bytes, password: str | None, name: str, settings: ExtractionSettings, *, op: str
) -> dict[str, Any]:
    return {
        "op": op,
        "sys_path": list(sys.path),
        "package_dir": _PACKAGE_DIR,
        "data": data,
        "password": password,
        "name": name,
        "extractor": settings.extractor,
        "max_pages": settings.max_pages,
        "max_chars": settings.max_chars,
        "max_page_chars": settings.max_page_chars,
        "memory_limit_mb": settings.memory_limit_mb,
        "timeout_s": settings.timeout_s,
        "nice": settings.worker_nice,
    }


def run_worker(request: dict[str, Any], *, name: str, extractor: str, timeout_s: float) -> dict[str, Any]:
    """Returns the worker's reply (a dict with "pages" or "error"), killing the worker at `timeout_s`."""
    if not sys.executable:
        raise ExtractionError(
            f"cannot extract {name}: sys.executable is not set, so no extraction worker can be started",
            path=name,
        )
    payload = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _BOOTSTRAP],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except OSError as exc:
        raise ExtractionError(f"cannot start the extraction worker for {name}: {exc}", path=name) from exc
    logger.debug("extraction worker %s started for %s (%s)", proc.pid, name, extractor)
    try:
        out, err = proc.communicate(payload, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise ExtractionTimeoutError(
            _timeout_message(name, extractor, timeout_s), path=name, extractor=extractor, timeout_s=timeout_s
        ) from None
    except BaseException:
        # KeyboardInterrupt and friends: never leave a worker behind.
        proc.kill()
        proc.wait()
        raise
    elapsed = time.monotonic() - started
    stderr = err.decode("utf-8", "replace").strip()
    if stderr:
        logger.debug("extraction worker %s for %s wrote to stderr:\n%s", proc.pid, name, stderr[-4000:])
    if out:
        try:
            reply: dict[str, Any] = pickle.loads(out)
            logger.debug("extraction worker %s for %s answered in %.2f s", proc.pid, name, elapsed)
            return reply
        except Exception as exc:  # a reply cut short by a crash mid-write
            logger.debug("unreadable reply from extraction worker %s: %s", proc.pid, exc)
    raise _worker_died(name, extractor, proc.returncode, stderr, request["memory_limit_mb"])


def _timeout_message(name: str, extractor: str, timeout_s: float) -> str:
    fix = "use --extractor pypdfium2 (much faster) or " if extractor == "pypdf" else ""
    return (
        f"extracting {name} with {extractor} took longer than {timeout_s:g} s: {fix}raise DOCPIPE_EXTRACTION__TIMEOUT_S"
    )


def _worker_died(
    name: str, extractor: str, returncode: int | None, stderr: str, memory_limit_mb: int
) -> ExtractionError:
    """Returns the error for a worker that ended without a reply (killed by a signal or crashed)."""
    if returncode is not None and returncode < 0:
        try:
            how = f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"was killed by signal {-returncode}"
    else:
        how = f"exited with code {returncode} without an answer"
    # faulthandler's first line ("Fatal Python error: Aborted") says more than the traceback under it.
    fatal = next((line.strip() for line in stderr.splitlines() if line.startswith("Fatal Python error")), "")
    return ExtractionError(
        f"the extraction worker for {name} {how}{f' ({fatal[:200]})' if fatal else ''}. It most likely ran out of "
        f"memory (limit {memory_limit_mb} MB: a decompression bomb?) or hit a bug in {extractor}: "
        f"try --extractor {other_extractor(extractor)}, raise DOCPIPE_EXTRACTION__MEMORY_LIMIT_MB for a genuinely "
        "large document, or repair it with `qpdf in.pdf out.pdf`",
        path=name,
        extractor=extractor,
        returncode=returncode,
        stderr=stderr[-4000:],
    )


def raise_worker_error(error: dict[str, Any]) -> None:
    """Raises the `DocpipeError` subclass the worker named, with its message and context."""
    cls = getattr(errors, error["type"], None) if error["type"] in errors.__all__ else None
    if not (isinstance(cls, type) and issubclass(cls, DocpipeError)):
        cls = ExtractionError
    raise cls(error["message"], **error["context"])


def replay_worker_log(records: list[tuple[str, int, str]], dropped: int, name: str) -> None:
    """Re-logs the worker's records: ours as they were, the libraries' at DEBUG."""
    for record_name, level, message in records:
        if record_name == "docpipe" or record_name.startswith("docpipe."):
            logging.getLogger(record_name).log(level, "%s", message)
        else:
            logger.debug("%s: %s said: %s", name, record_name, message)
    if dropped:
        logger.debug("%s: %s more log records from the extraction worker were dropped", name, dropped)


class _Collector(logging.Handler):
    """A logging handler in the worker that keeps (up to a cap) the log records so the parent can re-log them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[str, int, str]] = []
        self.dropped = 0

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.records) >= _MAX_FORWARDED_RECORDS:
            self.dropped += 1
            return
        try:
            self.records.append((record.name, record.levelno, record.getMessage()))
        except Exception:
            self.handleError(record)


def worker_main(request: dict[str, Any], reply_fd: int) -> None:
    """Runs one extraction (or encryption check) in the worker and writes the pickled reply to `reply_fd`."""
    import faulthandler

    faulthandler.enable()  # a crash in C code leaves a Python traceback in the stderr the parent logs
    nice = _lower_priority(request["nice"])
    if hasattr(signal, "alarm"):
        signal.alarm(int(request["timeout_s"]) + _WORKER_ALARM_GRACE_S)
    collector = _Collector()
    root = logging.getLogger()
    root.addHandler(collector)
    root.setLevel(logging.WARNING)
    logging.getLogger("docpipe").setLevel(logging.DEBUG)
    logging.captureWarnings(True)
    # Freed on MemoryError so that there is room left to build and send the error reply.
    reserve = bytearray(4 << 20)
    name = request["name"]
    logger.debug("extraction worker %s for %s runs at nice %s", os.getpid(), name, nice)
    reply: dict[str, Any]
    try:
        # Before the cap: mapping the backend's shared libraries needs address space of its own.
        backend = "docx" if request["op"] == "docx" else "pypdf" if request["extractor"] == "pypdf" else "pypdfium2"
        __import__(backend)
        limit_memory(request["memory_limit_mb"])
        if request["op"] == "docx":
            pages = read_docx(
                request["data"], name=name, max_chars=request["max_chars"], max_page_chars=request["max_page_chars"]
            )
            reply = {"pages": pages, "encryption": (False, False, None)}
        elif request["op"] == "encryption":
            status = read_encryption(request["data"], request["password"], name, request["extractor"])
            reply = {"encryption": status}
        else:
            pages, status = read_pages(
                request["data"],
                password=request["password"],
                name=name,
                extractor=request["extractor"],
                max_pages=request["max_pages"],
                memory_limit_mb=request["memory_limit_mb"],
                budget=TextBudget(name, request["extractor"], request["max_chars"], request["max_page_chars"]),
                ocr=request.get("ocr"),
            )
            reply = {"pages": pages, "encryption": status}
    except DocpipeError as exc:
        reply = {"error": _error_as_data(exc)}
    except MemoryError:
        del reserve
        reply = {"error": _error_as_data(out_of_memory(name, request["extractor"], request["memory_limit_mb"]))}
    except Exception as exc:
        logger.debug("unexpected error while extracting %s", name, exc_info=True)
        reply = {
            "error": _error_as_data(
                ExtractionError(
                    f"extracting {name} with {request['extractor']} failed unexpectedly ({type(exc).__name__}: {exc}): "
                    f"try --extractor {other_extractor(request['extractor'])}",
                    path=name,
                    extractor=request["extractor"],
                )
            )
        }
    reply["log"] = collector.records
    reply["dropped"] = collector.dropped
    with os.fdopen(reply_fd, "wb") as out:
        pickle.dump(reply, out, protocol=pickle.HIGHEST_PROTOCOL)


def _lower_priority(increment: int) -> int | None:
    """Returns this process's nice value after lowering its CPU priority by `increment` (None if unknown)."""
    try:
        return os.nice(increment)
    except (AttributeError, OSError):  # not on Windows; an unprivileged process can always go lower elsewhere
        return None


def _error_as_data(exc: DocpipeError) -> dict[str, Any]:
    """Returns the error as plain data that can cross the process boundary."""
    simple = (str, int, float, bool, type(None))
    context = {key: value for key, value in exc.context.items() if isinstance(value, simple) and key != "message"}
    return {"type": type(exc).__name__, "message": exc.message, "context": context}
