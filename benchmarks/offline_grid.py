"""The checklist grid offline (no language model) over the data room: ingestion and cold cells, with the
sentence embeddings made at ingestion vs on each document's first offline use, side by side in one run.

Run: .venv/bin/python benchmarks/offline_grid.py [--contracts 231] [--compare 20]
     (writes benchmarks/results/offline_grid.json; about 20 minutes on 2 cores for the whole room)

Every step is a `docpipe` process of its own (what a user runs), timed by wall clock with its peak RSS:
1. `docpipe ingest --collection room` of the first `--contracts` contracts of ../shared/eval/cuad-collection-dev
   (read in place) into two empty stores: `embedding.sentence_vectors` ``first_use`` and ``ingest``.
2. `docpipe review --checklist` of the first `--compare` contracts (x 41 categories) in each store, cells cold
   (no cell cached): first use embeds each document's sentences in its row; at ingestion they are read.
3. `docpipe review --collection room --checklist` over the whole room in the ``ingest`` store: its remaining
   cells cold, then the same grid again (every cell from the cell cache).
The grid's own time is its manifest's ``seconds`` (no process start); cells/s counts the cells computed.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOM = ROOT.parent / "shared" / "eval" / "cuad-collection-dev"


def _files(limit: int) -> list[Path]:
    with (ROOM / "manifest.csv").open(encoding="utf-8", newline="") as handle:
        return [ROOM / row["file"] for row in csv.DictReader(handle)][:limit]


def _measured(cmd: list[str], env: dict[str, str]) -> dict[str, float]:
    """Returns the wall time (s) and peak RSS (MB) of `cmd`, run under this script's `--rss` wrapper so the
    peak is that one process's."""
    proc = subprocess.run([sys.executable, __file__, "--rss", "--", *cmd], env=env, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    wall, rss = proc.stdout.split("\n", 1)[0].split()
    return {"wall_s": round(float(wall), 2), "peak_rss_mb": round(float(rss))}


def _grid(args: list[str], env: dict[str, str], work: Path, name: str) -> dict[str, float]:
    """Runs `docpipe review ... --checklist`, returns its process figures and its manifest's."""
    grid, manifest_file = work / f"{name}.grid.json", work / f"{name}.manifest.json"
    cmd = [sys.executable, "-m", "docpipe", "review", *args, "--checklist", "-o", str(grid)]
    figures = _measured([*cmd, "--manifest", str(manifest_file)], env)
    manifest = json.loads(manifest_file.read_text())
    computed = manifest["cells"] - len(manifest["cached_cells"])
    figures.update(
        cells=manifest["cells"],
        cached_cells=len(manifest["cached_cells"]),
        grid_s=manifest["seconds"],
        cells_per_s=round(computed / manifest["seconds"], 1) if computed else None,
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--contracts", type=int, default=231, help="contracts of the room ingested and reviewed")
    parser.add_argument("--compare", type=int, default=20, help="contracts whose grid runs in both stores")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "offline_grid.json")
    args = parser.parse_args()
    if not (ROOM / "manifest.csv").exists():
        sys.exit(f"missing {ROOM}: the benchmark reads ../shared/eval in place")
    files = _files(args.contracts)
    compare = files[: args.compare]
    work = Path(tempfile.mkdtemp(prefix="docpipe-bench-grid-"))
    results: dict = {"contracts": len(files), "compare_contracts": len(compare), "categories": 41, "stores": {}}
    envs = {}
    for placement in ("first_use", "ingest"):
        env = {
            **os.environ,
            "DOCPIPE_HOME": str(work / placement),
            "DOCPIPE_EMBEDDING__SENTENCE_VECTORS": placement,
        }
        envs[placement] = env
        ingest = _measured([sys.executable, "-m", "docpipe", "ingest", "--collection", "room", *map(str, files)], env)
        results["stores"][placement] = {"ingest": ingest}
        print(f"ingest, sentences at {placement}: {ingest}", flush=True)
    for placement, env in envs.items():
        grid = _grid([*map(str, compare)], env, work, f"compare-{placement}")
        results["stores"][placement]["grid_compare_cold"] = grid
        print(f"grid of {len(compare)} contracts cold, sentences at {placement}: {grid}", flush=True)
    env = envs["ingest"]
    room = _grid(["--collection", "room"], env, work, "room-cold")
    results["stores"]["ingest"]["grid_room"] = room
    print(f"grid of the room ({len(files)} contracts; the first {len(compare)} cached): {room}", flush=True)
    again = _grid(["--collection", "room"], env, work, "room-warm")
    results["stores"]["ingest"]["grid_room_warm"] = again
    print(f"the same grid again (every cell cached): {again}", flush=True)
    stores = results["stores"]
    results["ingest_ratio_ingest_over_first_use"] = round(
        stores["ingest"]["ingest"]["wall_s"] / stores["first_use"]["ingest"]["wall_s"], 2
    )
    results["cold_cells_ratio_ingest_over_first_use"] = round(
        stores["ingest"]["grid_compare_cold"]["cells_per_s"] / stores["first_use"]["grid_compare_cold"]["cells_per_s"],
        1,
    )
    if room["cells_per_s"]:
        results["room_full_checklist_minutes_at_this_rate"] = round(room["cells"] / room["cells_per_s"] / 60, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(json.dumps({k: v for k, v in results.items() if k != "stores"}, indent=1))


def _rss_wrapper(cmd: list[str]) -> None:
    """Runs `cmd`, then prints its wall time (s) and peak RSS (MB) on the first line."""
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode:
        sys.stderr.write(proc.stdout[-2000:] + proc.stderr[-3000:])
        sys.exit(proc.returncode)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    sys.stdout.write(f"{wall:.3f} {peak:.0f}\n")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--rss" and sys.argv[2] == "--":
        _rss_wrapper(sys.argv[3:])
    else:
        main()
