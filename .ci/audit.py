"""Fails when an installed (or locked) package has a known advisory: `make audit`, run by CI.

Two sources, so the check works offline and gets better online:

1. `.ci/advisories.toml`, checked in: package, affected range, fixed version, advisory id. Always runs, needs no
   network. Entries marked `accepted` are printed and do not fail.
2. pip-audit, when `--pip-audit PATH` names an executable: it audits the same name==version list against its
   vulnerability service. When the service cannot be reached (or, as on a PyPI mirror, answers nothing for the
   packages) the run says so and relies on the list; a vulnerability it does report fails the audit.

Versions come from the environment this script runs in (importlib.metadata), from `--versions FILE`
(name==version lines, as `pip freeze` writes; used by the tests and to check a lock) and from `--lock FILE`.
Exit status: 0 clean, 1 a known vulnerable version, 2 a usage or data error.

    .venv/bin/python .ci/audit.py --lock constraints.txt --pip-audit .venv/audit-tools/bin/pip-audit
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

try:
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version
except ImportError:  # pip vendors packaging: enough in a bare venv
    from pip._vendor.packaging.specifiers import SpecifierSet  # type: ignore[no-redef]
    from pip._vendor.packaging.utils import canonicalize_name  # type: ignore[no-redef]
    from pip._vendor.packaging.version import InvalidVersion, Version  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
ADVISORIES = HERE / "advisories.toml"
PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;#]+)")


@dataclass(frozen=True)
class Advisory:
    package: str
    id: str
    aliases: tuple[str, ...]
    affected: SpecifierSet
    fixed: str
    summary: str
    accepted: str | None


@dataclass(frozen=True)
class Finding:
    source: str  # "installed", the lock file's name, or "pip-audit"
    package: str
    version: str
    id: str
    fixed: str
    summary: str
    accepted: str | None = None


def load_advisories(path: Path = ADVISORIES) -> list[Advisory]:
    """Reads the advisory list; raises ValueError on an entry that cannot be checked."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    out = []
    for entry in data.get("advisory", []):
        missing = {"package", "id", "affected", "fixed", "summary"} - set(entry)
        if missing:
            raise ValueError(f"{path}: advisory {entry.get('id', '?')} lacks {sorted(missing)}")
        spec = SpecifierSet(entry["affected"])
        if Version(entry["fixed"]) in spec:
            raise ValueError(f"{path}: {entry['id']}: fixed version {entry['fixed']} is inside {entry['affected']}")
        out.append(
            Advisory(
                package=canonicalize_name(entry["package"]),
                id=entry["id"],
                aliases=tuple(entry.get("aliases", ())),
                affected=spec,
                fixed=entry["fixed"],
                summary=entry["summary"],
                accepted=entry.get("accepted"),
            )
        )
    return out


def read_pins(path: Path) -> dict[str, str]:
    """Returns {canonical name: version} from name==version lines (pip freeze, constraints files)."""
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = PIN.match(line)
        if match:
            pins[canonicalize_name(match.group(1))] = match.group(2)
    return pins


def installed_versions() -> dict[str, str]:
    """Returns {canonical name: version} of the distributions importable by this interpreter."""
    out = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            out.setdefault(canonicalize_name(name), dist.version)
    return out


def check(versions: dict[str, str], advisories: list[Advisory], *, source: str) -> list[Finding]:
    """Returns one finding per (package, advisory) whose affected range holds the given version."""
    findings = []
    for adv in advisories:
        version = versions.get(adv.package)
        if version is None:
            continue
        try:
            hit = Version(version) in adv.affected
        except InvalidVersion:
            hit = False
        if hit:
            findings.append(Finding(source, adv.package, version, adv.id, adv.fixed, adv.summary, adv.accepted))
    return findings


def run_pip_audit(executable: str, versions: dict[str, str]) -> tuple[list[Finding], str]:
    """Runs pip-audit over the pins; returns its findings and a one-line account of what it could audit."""
    with tempfile.TemporaryDirectory() as tmp:
        req = Path(tmp) / "requirements.txt"
        req.write_text("".join(f"{n}=={v}\n" for n, v in sorted(versions.items())), encoding="utf-8")
        cmd = [executable, "-r", str(req), "--no-deps", "--disable-pip", "--format", "json",
               "--progress-spinner", "off", "--timeout", "20"]  # fmt: skip
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return [], f"pip-audit did not run ({exc}): offline list only"
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return [], f"pip-audit could not reach its vulnerability service ({tail}): offline list only"
    findings, audited, skipped = [], 0, 0
    for dep in report.get("dependencies", []):
        if "skip_reason" in dep:
            skipped += 1
            continue
        audited += 1
        for vuln in dep.get("vulns", []):
            fixed = ", ".join(vuln.get("fix_versions", [])) or "none yet"
            summary = (vuln.get("description") or "").strip().splitlines()[0][:100] if vuln.get("description") else ""
            ids = [vuln["id"], *vuln.get("aliases", [])]
            findings.append(Finding("pip-audit", dep["name"], dep["version"], " / ".join(ids), fixed, summary))
    total = audited + skipped
    if audited == 0:
        note = (f"pip-audit audited 0 of {total} packages (its service answered nothing for them: no network or a "
                "mirror without vulnerability data): offline list only")  # fmt: skip
    else:
        note = f"pip-audit audited {audited} of {total} packages ({skipped} skipped)"
    return findings, note


def _accepted_ids(advisories: list[Advisory]) -> set[str]:
    return {name for adv in advisories if adv.accepted for name in (adv.id, *adv.aliases)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=Path, help="name==version lines to check instead of this environment")
    parser.add_argument("--lock", type=Path, action="append", default=[], help="also check this constraints file")
    parser.add_argument("--advisories", type=Path, default=ADVISORIES)
    parser.add_argument("--pip-audit", dest="pip_audit", help="pip-audit executable; skipped when missing")
    args = parser.parse_args(argv)

    try:
        advisories = load_advisories(args.advisories)
        sets = {"installed": read_pins(args.versions) if args.versions else installed_versions()}
        if args.versions:
            sets = {args.versions.name: sets["installed"]}
        for lock in args.lock:
            sets[lock.name] = read_pins(lock)
    except (OSError, ValueError, tomllib.TOMLDecodeError) as exc:
        print(f"audit: {exc}", file=sys.stderr)
        return 2

    findings = [f for source, versions in sets.items() for f in check(versions, advisories, source=source)]
    packages = {p for versions in sets.values() for p in versions}
    print(f"advisory list: {len(advisories)} advisories over {len({a.package for a in advisories})} packages, "
          f"checked against {', '.join(f'{s} ({len(v)} packages)' for s, v in sets.items())}")  # fmt: skip

    if args.pip_audit and Path(args.pip_audit).exists():
        first = next(iter(sets.values()))
        extra, note = run_pip_audit(args.pip_audit, first)
        accepted = _accepted_ids(advisories)
        for f in extra:
            if accepted & set(f.id.split(" / ")):
                f = Finding(f.source, f.package, f.version, f.id, f.fixed, f.summary, "accepted in advisories.toml")
            findings.append(f)
        print(note)
    elif args.pip_audit:
        print(f"pip-audit not installed at {args.pip_audit}: offline list only")

    failing = [f for f in findings if not f.accepted]
    for f in sorted(findings, key=lambda f: (f.accepted is not None, f.package, f.id, f.source)):
        tag = "ACCEPTED" if f.accepted else "VULNERABLE"
        print(f"{tag}  {f.package}=={f.version} ({f.source}): {f.id}, fixed in {f.fixed}: {f.summary}")
        if f.accepted:
            print(f"          why accepted: {' '.join(f.accepted.split())}")
    if failing:
        names = sorted({f.package for f in failing})
        print(f"audit FAILED: {len(failing)} known vulnerable version(s) in {', '.join(names)}. Raise the floor in "
              "pyproject.toml past the fixed version, reinstall (make install-engine) and run make lock.")  # fmt: skip
        return 1
    print(f"audit passed: no known vulnerable version among {len(packages)} packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
