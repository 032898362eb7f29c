"""The security probes (tests/support/probes.py) as tests: issue 10's attacks and issue 23's red-team findings
against one real `docpipe serve` (127.0.0.1, echo engine, workbench on, four users' keys) and its two companion
servers, run once for the module in the order the probes need; each probe group is then one test that fails
naming every record whose protection did not hold. benchmarks/security_probes.py runs the same probes and writes
the results table.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.probes import ProbeRun, run_all

pytestmark = [pytest.mark.security, pytest.mark.integration]

# Run order (run_all's); the names of the functions that run each group.
GROUPS = [
    "probe_workbench",
    "probe_isolation",
    "probe_encrypted",
    "probe_at_rest",
    "probe_delete_document",
    "probe_exhaustion",
    "probe_exposed_bind",
    "probe_defaults",
    "probe_23_names",
    "probe_23_workbench_name",
    "probe_23_exports",
    "probe_23_question_hash",
    "probe_23_denied",
    "probe_faults",
    "probe_23_log_tamper",
    "probe_23_at_rest",
    "probe_delete_matter",
]


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory, eval_dir: Path) -> tuple[ProbeRun, list[str]]:
    """Returns the probes' records and the processes left running under their folder once every server stopped."""
    pytest.importorskip("gradio", reason="the workbench probes need gradio: pip install 'docpipe-contracts[ui]'")
    tmp = tmp_path_factory.mktemp("docpipe-security-probes")
    run = run_all(tmp)
    leftover = subprocess.run(["pgrep", "-f", str(tmp)], capture_output=True, text=True, check=False).stdout.split()
    return run, leftover


@pytest.mark.parametrize("group", GROUPS)
def test_every_protection_of_the_group_holds(probed: tuple[ProbeRun, list[str]], group: str) -> None:
    run, _ = probed
    records = run.groups.get(group)
    assert records, f"{group} recorded nothing (groups run: {sorted(run.groups)})"
    failed = [
        f"[{r.probe}] {r.threat}: {r.request} -> {r.outcome} (expected {r.expected}) {r.observation}"
        for r in records
        if not r.as_expected
    ]
    assert not failed, "\n".join(failed)


def test_every_group_ran_and_the_server_outlived_the_attacks(probed: tuple[ProbeRun, list[str]]) -> None:
    run, leftover = probed
    assert list(run.groups) == GROUPS
    assert run.server_alive_at_end, "the main server died during the probes"
    assert not leftover, f"processes still running after every server stopped: {leftover}"
