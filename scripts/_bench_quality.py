"""Benchmark section ``quality``: the built-in solver on every perturbed fixture.

Builds every perturbed fixture group (``fixtures.build.build_all``, variants
``fixtures.specs.PERTURBED``) under ``<--work>/quality`` and drives each one with
``island_tools.adapter.run_group(policy="solver")`` - the same call as ``scripts/agent.py
run --policy solver`` - in this process on the embedded bpy (or ``--blender-bin``), with
128 px Workbench renders (64 px with ``--quick``, which also keeps one variant per fixture).

Per group, from the final iteration's geometry.json: iterations used (the loop's earliest
stop is MIN_ITER = 5), the iterations that moved members, max facing error, max
|clearance - clearance_m|, mesh penetration pairs (> 5 mm), spacing deviation (max slot
deviation in metres; rings: the gap CV), edge counts against the pattern, and pass/fail
against issue 4's targets: facing <= 5 deg, clearance within 0.03 m, no penetration,
spacing <= 0.05 m (ring CV <= 0.05), counts match.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

TITLE = "quality: solver policy on every perturbed fixture"
RESOLUTION = 128
QUICK_RESOLUTION = 64
QUICK_VARIANTS = ("turned_90",)


def _counts(edge_counts: dict[str, int] | None) -> str:
    return " ".join(f"{e}:{c}" for e, c in (edge_counts or {}).items() if c) or "-"


def run(args: argparse.Namespace) -> dict[str, Any]:
    from fixtures.build import build_all
    from fixtures.specs import PERTURBED
    from island_tools.adapter import quality, run_group
    from island_tools.config import Settings
    from island_tools.errors import GroupInputError
    from island_tools.jsonio import read_object
    from worker.launch import resolve_blender, run_job

    backend = resolve_blender(args.blender_bin, None)
    resolution = QUICK_RESOLUTION if args.quick else RESOLUTION
    settings = Settings(blender_bin=args.blender_bin, engine="workbench",
                        resolution=resolution, samples=1)
    groups = build_all(Path(args.work) / "quality", None,
                       QUICK_VARIANTS if args.quick else PERTURBED, backend=backend)
    columns = ["group", "pattern", "iters", "moved in", "facing max deg", "|clr err| max m",
               "pen pairs", "spacing", "edge counts", "counts ok", "pass", "s"]
    rows: list[list[Any]] = []
    data: dict[str, Any] = {}
    for group in groups:
        t0 = time.perf_counter()
        report = run_group(group, "solver", settings, lambda job: run_job(job, backend))
        seconds = time.perf_counter() - t0
        spec = read_object(group / "target_spec.json", GroupInputError, "target_spec.json",
                           "rebuild the fixture")
        q: dict[str, Any] = {"passed": False, "checks": {}}
        if report.final_iter:
            final_dir = group / "simple_refiner" / f"iter_{report.final_iter}"
            q = quality(read_object(final_dir / "geometry.json", GroupInputError,
                                    "geometry.json", "rerun the group"))
        passed = report.ok and q["passed"]
        spacing = q.get("spacing")
        rows.append([group.name, spec["pattern"], report.final_iter,
                     ",".join(map(str, report.nonempty_iters)) or "-",
                     q.get("facing_error_max_deg"), q.get("clearance_error_max_m"),
                     q.get("penetration_pairs"),
                     None if spacing is None else (f"CV {spacing:.4f}"
                                                   if q["spacing_kind"] == "ring_gap_cv"
                                                   else f"{spacing:.4f} m"),
                     _counts(q.get("edge_counts")), q["checks"].get("counts"),
                     "PASS" if passed else "FAIL", round(seconds, 2)])
        data[group.name] = {"report": report.report_text, "stop_reason": report.stop_reason,
                            "exit_code": report.exit_code, "errors": report.errors,
                            "seconds": round(seconds, 3), "quality": q}
    failed = [r[0] for r in rows if r[10] != "PASS"]
    notes = [f"{len(rows) - len(failed)}/{len(rows)} groups pass"
             + (f"; FAILED: {', '.join(failed)}" if failed else ""),
             (f"{backend.describe()}, Workbench {resolution} px, 1 sample; iters = final "
              "iteration (MIN_ITER = 5 is the earliest stop), moved in = iterations with "
              "members"),
             ("targets: facing <= 5 deg, |clearance - clearance_m| <= 0.03 m, no penetration "
              "(> 5 mm mesh), spacing <= 0.05 m (ring gap CV <= 0.05), edge counts match the "
              "pattern")]
    return {"columns": columns, "rows": rows, "notes": notes, "data": data}
