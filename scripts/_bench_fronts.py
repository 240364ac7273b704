"""Section ``fronts``: forward-axis detection over the furniture corpus, per category.

The corpus is every asset of ``assets/`` with its manifest's TRUE front (the shared CC0 kit,
and the procedural furniture generated with Infinigen; fronts checked on rendered views,
``assets/infinigen/checks/``). Each asset is posed ``POSES`` times - seeded random yaws
(fronts on no local axis) plus the four axis-aligned ones, a random uniform scale and
translation - and ``island_tools.forward_axis.detect_forward_axis`` runs on the posed
vertices. Per pose the verdict is:

* ``ok``: a front asset whose front was found within ``TOLERANCE_DEG``, or a symmetric
  asset reported ``symmetric``;
* ``undetermined``: nothing claimed (an honest "don't know": verify raises an unknown);
* ``wrong``: a front more than ``TOLERANCE_DEG`` off, a front asset reported symmetric (its
  facing would silently not be measured), or a symmetric asset given a front.

Columns per category: assets, poses, ok / undetermined / wrong counts, median and max
error in degrees over the poses with a found front, the lowest confidence of a correct
front and the highest confidence of a wrong one, milliseconds per detection.
"""
from __future__ import annotations

import argparse
import math
import statistics
import time
from collections import defaultdict
from typing import Any

import numpy as np

TITLE = "fronts: forward-axis detection over the furniture corpus, per category"
POSES = 12
QUICK_POSES = 4
TOLERANCE_DEG = 10.0


def _rot(deg: float) -> np.ndarray:
    a = math.radians(deg)
    return np.array([[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0],
                     [0.0, 0.0, 1.0]])


def evaluate(entry: Any, poses: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    """One row per pose: status, error, confidence, seconds."""
    from fixtures.assets import load_asset
    from island_tools.forward_axis import detect_forward_axis

    mesh = load_asset(entry.rel)
    yaws = [0.0, 90.0, 180.0, 270.0] + [float(y) for y in rng.uniform(0, 360, poses - 4)]
    out = []
    for yaw in yaws[:poses]:
        r = _rot(yaw)
        verts = (mesh.vertices @ r.T) * rng.uniform(0.3, 3.0) + rng.uniform(-5, 5, 3)
        t0 = time.perf_counter()
        found = detect_forward_axis(verts, mesh.faces)
        seconds = time.perf_counter() - t0
        status = found.status
        error = None
        if entry.front is None:
            verdict = {"symmetric": "ok", "undetermined": "undetermined"}.get(status, "wrong")
        elif status == "front":
            truth = r[:2, :2] @ np.asarray(entry.front)
            error = math.degrees(math.acos(float(np.clip(truth @ found.axis_local, -1, 1))))
            verdict = "ok" if error <= TOLERANCE_DEG else "wrong"
        else:
            verdict = "undetermined" if status == "undetermined" else "wrong"
        out.append({"yaw": yaw, "status": status, "verdict": verdict, "error_deg": error,
                    "confidence": found.confidence, "seconds": seconds})
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    from fixtures.assets import front_corpus

    rng = np.random.default_rng(20261201)
    poses = QUICK_POSES if args.quick else POSES
    per_cat: dict[str, list[dict[str, Any]]] = defaultdict(list)
    assets: dict[str, set[str]] = defaultdict(set)
    data: dict[str, Any] = {}
    for entry in front_corpus():
        rows = evaluate(entry, poses, rng)
        per_cat[entry.category] += rows
        assets[entry.category].add(entry.rel)
        data[entry.rel] = {"category": entry.category, "front": entry.front, "poses": rows}
    columns = ["category", "assets", "poses", "ok", "undetermined", "wrong", "median err deg",
               "max err deg", "min conf ok", "max conf wrong", "ms"]
    table = []
    totals = defaultdict(int)
    for cat in sorted(per_cat):
        rows = per_cat[cat]
        errs = [r["error_deg"] for r in rows if r["error_deg"] is not None]
        counts = {v: sum(1 for r in rows if r["verdict"] == v)
                  for v in ("ok", "undetermined", "wrong")}
        for k, v in counts.items():
            totals[k] += v
        totals["poses"] += len(rows)
        totals["assets"] += len(assets[cat])
        ok_conf = [r["confidence"] for r in rows if r["verdict"] == "ok"]
        bad_conf = [r["confidence"] for r in rows if r["verdict"] == "wrong"]
        table.append([cat, len(assets[cat]), len(rows), counts["ok"], counts["undetermined"],
                      counts["wrong"], round(statistics.median(errs), 3) if errs else None,
                      round(max(errs), 3) if errs else None,
                      round(min(ok_conf), 3) if ok_conf else None,
                      round(max(bad_conf), 3) if bad_conf else None,
                      round(1000 * statistics.median(r["seconds"] for r in rows), 1)])
    table.append(["ALL", totals["assets"], totals["poses"], totals["ok"],
                  totals["undetermined"], totals["wrong"], None, None, None, None, None])
    return {"columns": columns, "rows": table, "data": data,
            "notes": [f"{poses} poses per asset (4 axis-aligned yaws + seeded random ones, "
                      "random uniform scale and translation); ok = front within "
                      f"{TOLERANCE_DEG} deg or symmetric reported symmetric; wrong = a front "
                      "off by more, a front asset called symmetric, or a symmetric asset "
                      "given a front"]}
