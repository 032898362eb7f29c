"""Runs every notebook in notebooks/ top to bottom in a fresh kernel: a cell that raises fails the test.

The notebooks assert on what they show (the sample's verified citations, the password errors), so a
behaviour change that would make the documentation wrong fails here. The kernel runs this interpreter
(the venv's python), with the notebooks folder as its working directory and DOCPIPE_HOME pointing at a
temporary folder, so a notebook can never write to the user's cache.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = [path.relative_to(ROOT) for path in sorted((ROOT / "notebooks").glob("*.ipynb"))]
KERNEL_NAME = "python3"
CELL_TIMEOUT_S = 600

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _kernel_python(kernel_name: str) -> str | None:
    """Returns the interpreter the named kernel would start (as nbclient will launch it), or None."""
    from jupyter_client.kernelspec import NoSuchKernel
    from jupyter_client.manager import KernelManager

    try:
        command = KernelManager(kernel_name=kernel_name).format_kernel_cmd()
    except NoSuchKernel:
        return None
    return shutil.which(command[0]) or command[0]


def _is_this_python(executable: str | None) -> bool:
    # Compare without resolving symlinks: a venv's python is a symlink to the base interpreter, and
    # the base interpreter would not see the venv's packages.
    return executable is not None and os.path.abspath(executable) == os.path.abspath(sys.executable)


@pytest.fixture(scope="session")
def kernel_name(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Returns the name of a kernel that runs this interpreter, installing a temporary kernelspec if needed.

    nbclient resolves "python3" through the Jupyter data path, where a user-level kernelspec (in the home
    folder) wins over the venv's. If the kernel would not start sys.executable, a spec for it is written
    to a temporary prefix and put first on JUPYTER_PATH for this session; the home folder is left alone.
    """
    if _is_this_python(_kernel_python(KERNEL_NAME)):
        yield KERNEL_NAME
        return
    from ipykernel.kernelspec import install

    prefix = tmp_path_factory.mktemp("jupyter-prefix")
    install(kernel_name=KERNEL_NAME, prefix=str(prefix))  # argv[0] is sys.executable
    with pytest.MonkeyPatch.context() as patch:
        data_dir = str(prefix / "share" / "jupyter")
        patch.setenv("JUPYTER_PATH", os.pathsep.join(filter(None, [data_dir, os.environ.get("JUPYTER_PATH")])))
        python = _kernel_python(KERNEL_NAME)
        assert _is_this_python(python), f"kernel {KERNEL_NAME!r} starts {python}, not {sys.executable}"
        yield KERNEL_NAME


@pytest.mark.integration
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_runs(notebook: Path, kernel_name: str, tmp_path: Path) -> None:
    nb = nbformat.read(ROOT / notebook, as_version=4)
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name=kernel_name,
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
    )
    env = {**os.environ, "DOCPIPE_HOME": str(tmp_path / "docpipe-home")}
    try:
        client.execute(env=env)
    except CellExecutionError as exc:
        pytest.fail(f"{notebook}: a cell raised\n\n{_ANSI.sub('', str(exc))}", pytrace=False)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_is_committed_clean(notebook: Path) -> None:
    """Notebooks are committed without outputs, so diffs show only what a person wrote."""
    nb = nbformat.read(ROOT / notebook, as_version=4)
    nbformat.validate(nb)
    dirty = [
        index
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count") is not None)
    ]
    assert not dirty, f"{notebook}: clear the outputs of cells {dirty} before committing"
    assert nb.metadata.get("kernelspec", {}).get("name") == KERNEL_NAME
