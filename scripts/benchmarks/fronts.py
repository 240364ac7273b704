"""Section ``fronts``: forward-axis detection over the front corpus, per split and category.

The corpus is ``fixtures.fronts_corpus.front_pieces()``: the repository's ``assets/``
(kenney-cco, caysonverse, infinigen), the hand-checked models of ``../shared/corpus``
(``$ISLAND_REFINER_CORPUS``) and the parametric generator (``fixtures.parametric``), each
piece with its TRUE front (or none, with its symmetry order when known), split by the frozen
``fixtures/fronts_split.json``: the detector may be tuned only on the **tuned** part; the
**untouched** part (other creators' furniture, held-out seeds) is reported only at the end.
``--split tuned|untouched|both`` (default both: two separate tables).

Each piece is posed - the four axis-aligned yaws plus seeded random ones, a random uniform
scale and translation (seeded per piece, so a piece's poses do not depend on which split or
sources run) - and ``island_tools.measure.forward_axis.detect_forward_axis`` runs on the posed
vertices. Real pieces (assets, shared) get ``POSES`` poses (``QUICK_POSES`` with
``--quick``); the big parametric set gets ``PARAMETRIC_POSES`` (one axis-aligned yaw picked
at random, the rest random yaws) over all its seeds, with ``--quick`` ``QUICK_PARAMETRIC_POSES``
over the first ``QUICK_PARAMETRIC_SEEDS`` seeds of each part. Per pose the verdict is:

* ``ok``: a fronted piece whose front was found within ``TOLERANCE_DEG``, or a piece
  without a front reported ``symmetric``;
* ``undetermined``: status ``undetermined`` (an honest "don't know");
* ``confidently wrong``: status ``front`` more than ``TOLERANCE_DEG`` off, a fronted piece
  reported ``symmetric`` (its facing would silently not be measured), or a piece without a
  front reported ``front``.

The TUNED table also carries ``synthetic:`` rows (tuned by definition: built for tuning,
``fixtures.parametric.swivel_chair``, true front -Y): ``swivel_chair``, seats and backrests
over five-spoke bases turned 0-36 deg from them (the base must not vote for the front), and
``tub_chair``, a round seat under a wrapping backrest with a lever breaking its mirror plane
(its body's rectangle lies at any angle: before issue 32's fix 19-28 deg off at confidence
0.7). They are posed like parametric pieces (random yaws), ``SYNTHETIC_POSES`` each.

Rows are ``<source>:<category>`` (the sources name categories differently), then a total
per source and ALL. Columns: pieces, poses, ok / undetermined / confidently wrong counts,
median and max error in degrees over the poses with a found front, the lowest confidence of
an ok pose and the highest of a wrong one, "order ok / known" (no-front poses whose known
symmetry order the detector reported right, from ``detail["symmetry"]["order"]`` or a
``symmetry_order`` attribute; ``n/a`` when it reports none) and milliseconds per detection.
Per-piece results go to the JSON for the tuned split only; the untouched split is kept to
its per-category totals.
"""
from __future__ import annotations

import argparse
import functools
import math
import statistics
import sys
import time
import zlib
from collections import defaultdict
from typing import Any

import numpy as np

TITLE = "fronts: forward-axis detection over the front corpus, per split and category"
POSES = 12
QUICK_POSES = 4
PARAMETRIC_POSES = 4
QUICK_PARAMETRIC_POSES = 2
QUICK_PARAMETRIC_SEEDS = 10
SYNTHETIC_POSES = 6
QUICK_SYNTHETIC_POSES = 3
TOLERANCE_DEG = 10.0
SEED = 20261201
LABELS = {"tuned": "TUNED split",
          "untouched": "UNTOUCHED split (never used for tuning)"}
COLUMNS = ["category", "pieces", "poses", "ok", "undetermined", "confidently wrong",
           "median err deg", "max err deg", "min conf ok", "max conf wrong",
           "order ok / known", "ms"]


def _rot(deg: float) -> np.ndarray:
    a = math.radians(deg)
    return np.array([[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0],
                     [0.0, 0.0, 1.0]])


def _yaws(piece: Any, poses: int, rng: np.random.Generator) -> list[float]:
    if piece.source in ("parametric", "synthetic"):
        first = [90.0 * int(rng.integers(0, 4))]
        return first + [float(y) for y in rng.uniform(0, 360, poses - 1)]
    yaws = [0.0, 90.0, 180.0, 270.0] + [float(y) for y in rng.uniform(0, 360, max(0, poses - 4))]
    return yaws[:poses]


def synthetic_pieces() -> list[Any]:
    """The tuned synthetic swivel chairs (see the module docstring), deterministic."""
    from fixtures import fronts_corpus as fc
    from fixtures import parametric as par

    specs: list[tuple[str, dict[str, Any]]] = [
        ("swivel_chair", {"star_deg": 6.0 * k, "seed": k, "arms": bool(k % 2),
                          "lever": k % 3 == 0, "roundness": 0.4 + 0.1 * k,
                          "curve_r": 0.5 + 0.15 * k}) for k in range(7)]
    specs += [("tub_chair", {"star_deg": 7.0 * k, "seed": 11 + 3 * k, "arms": k == 3,
                             "lever": k != 4, "roundness": 0.9 + 0.02 * k,
                             "curve_r": 0.24 + 0.02 * k, "segments": 96 if k % 2 else 48})
              for k in range(6)]
    return [fc.FrontPiece(name=f"synthetic:{cat}_{i}", category=cat, source="synthetic",
                          creator="synthetic", split="tuned", front=(0.0, -1.0, 0.0),
                          symmetry_order=1, loader=functools.partial(par.swivel_chair, **kw))
            for i, (cat, kw) in enumerate(specs)]


def reported_order(found: Any) -> Any:
    """The detector's symmetry order, if it reports one (detail or attribute), else None."""
    order = getattr(found, "symmetry_order", None)
    if order is None:
        detail = getattr(found, "detail", None) or {}
        sym = detail.get("symmetry") if isinstance(detail, dict) else None
        if isinstance(sym, dict):
            order = sym.get("order")
    return order


def _same_order(truth: Any, got: Any) -> bool:
    def norm(x: Any) -> Any:
        if isinstance(x, str):
            low = x.lower()
            return "continuous" if low in ("continuous", "inf", "infinite", "o2", "so2") else low
        if isinstance(x, float) and (math.isinf(x) or x == 0.0):
            return "continuous"
        if isinstance(x, (int, float)):
            return int(x) if x > 0 else "continuous"
        return x
    return norm(truth) == norm(got)


def evaluate(piece: Any, poses: int, detect=None) -> list[dict[str, Any]]:
    """One row per pose: yaw, status, verdict, error, confidence, reported order, seconds."""
    if detect is None:
        from island_tools.measure.forward_axis import detect_forward_axis as detect
    rng = np.random.default_rng([SEED, zlib.crc32(piece.name.encode("utf-8"))])
    vertices, faces = piece.load()
    vertices = np.asarray(vertices, dtype=np.float64)
    out = []
    for yaw in _yaws(piece, poses, rng):
        r = _rot(yaw)
        verts = (vertices @ r.T) * rng.uniform(0.3, 3.0) + rng.uniform(-5, 5, 3)
        t0 = time.perf_counter()
        found = detect(verts, faces)
        seconds = time.perf_counter() - t0
        status = found.status
        error = None
        if piece.front is None:
            verdict = {"symmetric": "ok", "undetermined": "undetermined"}.get(status, "wrong")
        elif status == "front":
            truth = r[:2, :2] @ np.asarray(piece.front[:2], dtype=float)
            axis = np.asarray(found.axis_local, dtype=float)[:2]
            cos = float(truth @ axis) / max(float(np.linalg.norm(axis)), 1e-12)
            error = math.degrees(math.acos(float(np.clip(cos, -1, 1))))
            verdict = "ok" if error <= TOLERANCE_DEG else "wrong"
        else:
            verdict = "undetermined" if status == "undetermined" else "wrong"
        order = reported_order(found)
        out.append({"yaw": round(yaw, 3), "status": status, "verdict": verdict,
                    "error_deg": error, "confidence": float(found.confidence),
                    "order": order if isinstance(order, (int, float, str)) or order is None
                    else str(order), "seconds": seconds})
    return out


def _row(label: str, pieces: int, rows: list[dict[str, Any]],
         truths: list[Any]) -> list[Any]:
    """``truths``: per pose, the piece's known symmetry order (no-front pieces) or None."""
    errs = [r["error_deg"] for r in rows if r["error_deg"] is not None]
    counts = {v: sum(1 for r in rows if r["verdict"] == v)
              for v in ("ok", "undetermined", "wrong")}
    ok_conf = [r["confidence"] for r in rows if r["verdict"] == "ok"]
    bad_conf = [r["confidence"] for r in rows if r["verdict"] == "wrong"]
    known = [(t, r["order"]) for t, r in zip(truths, rows) if t is not None]
    if not known:
        order_cell = None
    elif all(got is None for _, got in known):
        order_cell = f"n/a ({len(known)} known)"
    else:
        order_cell = f"{sum(1 for t, got in known if _same_order(t, got))}/{len(known)}"
    return [label, pieces, len(rows), counts["ok"], counts["undetermined"], counts["wrong"],
            round(statistics.median(errs), 3) if errs else None,
            round(max(errs), 3) if errs else None,
            round(min(ok_conf), 3) if ok_conf else None,
            round(max(bad_conf), 3) if bad_conf else None, order_cell,
            round(1000 * statistics.median(r["seconds"] for r in rows), 1) if rows else None]


def _table(results: list[tuple[Any, list[dict[str, Any]]]]) -> list[list[Any]]:
    groups: dict[tuple[str, str], list] = defaultdict(list)
    for piece, rows in results:
        groups[(piece.source, piece.category)].append((piece, rows))
    order = {"assets": 0, "shared": 1, "parametric": 2, "synthetic": 3}
    table = []

    def flat(items):
        rows = [r for _, rs in items for r in rs]
        truths = [None if p.front is not None else p.symmetry_order
                  for p, rs in items for _ in rs]
        return rows, truths

    by_source: dict[str, list] = defaultdict(list)
    for (source, category) in sorted(groups, key=lambda k: (order.get(k[0], 9), k[1])):
        items = groups[(source, category)]
        by_source[source] += items
        table.append(_row(f"{source}:{category}", len(items), *flat(items)))
    for source in sorted(by_source, key=lambda s: order.get(s, 9)):
        table.append(_row(f"ALL {source}", len(by_source[source]), *flat(by_source[source])))
    everything = [item for items in by_source.values() for item in items]
    table.append(_row("ALL", len(everything), *flat(everything)))
    return table


def run(args: argparse.Namespace, detect=None) -> dict[str, Any]:
    """``detect``: the detector to measure (default ``island_tools.measure.forward_axis``'s)."""
    from fixtures import fronts_corpus as fc

    split = getattr(args, "split", None) or "both"
    parts = fc.SPLITS if split == "both" else (split,)
    quick = bool(getattr(args, "quick", False))
    real_poses = QUICK_POSES if quick else POSES
    par_poses = QUICK_PARAMETRIC_POSES if quick else PARAMETRIC_POSES
    syn_poses = QUICK_SYNTHETIC_POSES if quick else SYNTHETIC_POSES
    smoke = bool(getattr(args, "smoke", False))
    if smoke:   # one pose of one piece per source and category (scripts/bench.py --smoke)
        real_poses = par_poses = syn_poses = 1
    notes = []
    missing = fc.shared_corpus_status()
    if missing:
        if fc.corpus_required():
            raise fc.SharedCorpusMissingError(missing + f" (required: ${fc.REQUIRE_ENV} or "
                                              "CI=true)")
        notes.append(f"{missing}: the shared pieces are LEFT OUT of these tables")
        print(f"bench fronts: {missing}: shared pieces left out", file=sys.stderr)
    tables, all_rows, data = [], [], {}
    for part in parts:
        pieces = fc.front_pieces(part, missing_shared="skip")
        if quick:
            keep = set(fc.parametric_seeds(part)[:QUICK_PARAMETRIC_SEEDS])
            pieces = [p for p in pieces if p.source != "parametric" or p.seed in keep]
        if part == "tuned":
            pieces = pieces + synthetic_pieces()
        if smoke:
            pieces = list({(p.source, p.category): p for p in reversed(pieces)}.values())
        results = []
        t0 = time.perf_counter()
        for piece in pieces:
            poses = {"parametric": par_poses, "synthetic": syn_poses}.get(piece.source,
                                                                         real_poses)
            results.append((piece, evaluate(piece, poses, detect)))
        seconds = time.perf_counter() - t0
        rows = _table(results)
        tables.append({"title": LABELS[part], "split": part, "columns": COLUMNS, "rows": rows,
                       "seconds": round(seconds, 2)})
        all_rows += [[part, *row] for row in rows]
        if part == "tuned":
            data[part] = {p.name: {"category": p.category, "source": p.source,
                                   "front": p.front, "symmetry_order": p.symmetry_order,
                                   "poses": rs} for p, rs in results}
        else:
            data[part] = {"per_piece": "withheld: the untouched split is reported as "
                                       "per-category totals only"}
    notes.append(
        f"poses per piece: assets/shared {real_poses} (4 axis-aligned yaws + seeded random "
        f"ones), parametric {par_poses} (one axis-aligned + random yaws)"
        + (f" over its first {QUICK_PARAMETRIC_SEEDS} seeds per category and split"
           if quick else " over all its seeds")
        + f", synthetic swivel chairs (tuned) {syn_poses} (like parametric)"
        + "; random uniform scale 0.3-3 and translation")
    notes.append(f"ok = front within {TOLERANCE_DEG} deg, or a no-front piece reported "
                 "symmetric; confidently wrong = status front off by more, a fronted piece "
                 "reported symmetric, or a no-front piece reported front")
    notes.append("split frozen in fixtures/fronts_split.json: tune only on TUNED; UNTOUCHED "
                 "is reported only at the end")
    return {"columns": ["split", *COLUMNS], "rows": all_rows, "tables": tables,
            "data": data, "notes": notes}
