"""How docpipe installs: every package folder is listed in pyproject.toml, and the workbench (ui/ in the
repository) installs as ``docpipe.ui``, never as a top-level package named ``ui``."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def _package_folders() -> dict[str, Path]:
    """Returns {package name: folder} for every folder with an __init__.py under docpipe/ and ui/."""
    found = {
        ".".join(init.parent.relative_to(ROOT).parts): init.parent
        for init in (ROOT / "docpipe").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    for init in (ROOT / "ui").rglob("__init__.py"):
        found[".".join(("docpipe", *init.parent.relative_to(ROOT).parts))] = init.parent
    return found


def test_every_package_folder_is_listed() -> None:
    listed = set(_setuptools()["packages"])
    folders = _package_folders()
    missing = sorted(set(folders) - listed)
    assert not missing, f"add {missing} to [tool.setuptools] packages in pyproject.toml, or they are not installed"
    gone = sorted(listed - set(folders))
    assert not gone, f"remove {gone} from [tool.setuptools] packages in pyproject.toml: no such folder"
    assert "ui" not in listed and not any(name.startswith("ui.") for name in listed)
    assert _setuptools()["package-dir"] == {"docpipe.ui": "ui"}


def test_the_workbench_imports_as_docpipe_ui(tmp_path: Path) -> None:
    # Run outside the repository, so only what is installed can be imported.
    code = (
        "import importlib.util, docpipe.ui\n"
        "print(docpipe.ui.__name__, importlib.util.find_spec('docpipe.ui.app') is not None, "
        "importlib.util.find_spec('ui') is None)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["docpipe.ui", "True", "True"]


@pytest.mark.integration
def test_the_wheel_holds_docpipe_ui_and_no_top_level_ui(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(ROOT),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    [wheel] = tmp_path.glob("docpipe_contracts-*.whl")  # the distribution docpipe-contracts, package docpipe
    names = zipfile.ZipFile(wheel).namelist()
    assert {"docpipe/ui/__init__.py", "docpipe/ui/app.py", "docpipe/ui/access.py"} <= set(names)
    assert not [name for name in names if name.startswith("ui/")]
    assert "docpipe/py.typed" in names
    for package, folder in _package_folders().items():
        assert f"{package.replace('.', '/')}/__init__.py" in names, (package, folder)
