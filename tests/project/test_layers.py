"""What the import contracts in pyproject.toml cannot see: ui/ installs as docpipe.ui through setuptools'
package-dir, but import-linter reads folders, so an import written ``docpipe.ui`` is invisible to it. Only the
entry points that serve the workbench may import it (and testing, which may import anything)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = ("docpipe/cli/", "docpipe/server/", "docpipe/testing/", "docpipe/ui/")


def _imports_of_ui(path: Path) -> list[int]:
    """Returns the lines of `path` that import docpipe.ui, at module level or inside functions."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        if any(name == "docpipe.ui" or name.startswith("docpipe.ui.") for name in names):
            lines.append(node.lineno)
    return sorted(lines)


def test_only_the_entry_points_import_the_workbench() -> None:
    offenders = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / "docpipe").rglob("*.py"))
        if not str(path.relative_to(ROOT)).startswith(ALLOWED) and (lines := _imports_of_ui(path))
    }
    assert offenders == {}, f"docpipe.ui imported below the entry points (file: lines): {offenders}"


def test_the_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "def f():\n    from docpipe.ui.app import build_app\n\nfrom docpipe import ui\nimport docpipe.uix\n"
    )
    assert _imports_of_ui(module) == [2, 4]
