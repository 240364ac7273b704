"""Role accuracy of ``island_tools.scene.furniture.classify`` on the whole front corpus and
the designed rooms (issue 32, deliverable 6): every piece at life size, measured alone, its
role judged against the role its corpus category names (:data:`CATEGORY_ROLES`, the
judge's own table: it never uses the classifier's numbers).

Outcomes per piece: ``right`` (a settled role the category accepts), ``undetermined`` (no
role, or a role not settled against its runner-up: the proposer names the doubt) and
``wrong`` (a settled role the category does not accept: the defect, target 0).

Split discipline: the ``tuned`` part (``fixtures/fronts_split.json``, the tuned designed
scenes) may be printed piece by piece (``--list``); the ``untouched`` part is reported as
totals per source only, never piece by piece.

    .venv/bin/python scripts/role_accuracy.py [--split tuned|untouched|both] [--list]
        [--json OUT]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# corpus category (or a designed room's role) -> the roles that read it right. Case
# furniture of one category comes in every size (a 0.65 m cabinet is a nightstand by shape,
# a long low one a TV stand: where it stands decides its group); a desk without a modesty
# panel is a table; an office or desk chair with arms is an armchair as much as a chair.
CATEGORY_ROLES: dict[str, frozenset[str]] = {
    **{c: frozenset({"table"}) for c in (
        "dining_table", "dining_table_rect", "table", "table_rect", "table_square",
        "table_round", "dining_table_round", "round_table")},
    **{c: frozenset({"chair", "armchair"}) for c in (
        "dining_chair", "office_chair", "desk_chair", "office_chair_swivel", "bar_chair")},
    **{c: frozenset({"storage", "nightstand", "tv_stand"}) for c in (
        "cabinet", "dresser", "dresser_low", "bookshelf", "cabinet_open_shelf")},
    **{c: frozenset({"stool"}) for c in ("bar_stool", "stool_round", "stool_square")},
    "desk": frozenset({"desk", "table"}), "armchair": frozenset({"armchair", "chair"}),
    "sofa": frozenset({"sofa"}), "bed": frozenset({"bed"}),
    "nightstand": frozenset({"nightstand", "side_table"}),
    "side_table": frozenset({"side_table", "nightstand"}),
    "side_table_round": frozenset({"side_table", "nightstand"}),
    "coffee_table": frozenset({"coffee_table"}),
    "tv_stand": frozenset({"tv_stand"}), "tv_cabinet": frozenset({"tv_stand"}),
    "bench": frozenset({"bench"}),
    "storage": frozenset({"storage", "nightstand", "tv_stand"}),
    "stool": frozenset({"stool"}), "chair": frozenset({"chair", "armchair"}),
}
OUTCOMES = ("right", "undetermined", "wrong")


def outcome(role: str | None, settled: bool, accepted: frozenset[str]) -> str:
    if role is None or not settled:
        return "undetermined"
    return "right" if role in accepted else "wrong"


def _judge(name: str, category: str, vertices: Any, faces: Any, world: Any) -> dict[str, Any]:
    import numpy as np

    from island_tools.scene.furniture import UnitInput, classify, measure_unit

    u = UnitInput(name, np.asarray(world, float), np.asarray(vertices, float),
                  np.asarray(faces, np.int64))
    s = measure_unit(u)
    r = classify(s)
    accepted = CATEGORY_ROLES[category]
    return {"name": name, "category": category, "role": r.role, "settled": r.settled,
            "score": round(r.score, 2),
            "runner_up": None if r.runner_up is None else [r.runner_up[0],
                                                           round(r.runner_up[1], 2)],
            "outcome": outcome(r.role, r.settled, accepted),
            "size": f"{s.length:.2f}x{s.width:.2f}x{s.height:.2f} m"}


def corpus_rows(split: str) -> list[dict[str, Any]]:
    import numpy as np

    from fixtures import fronts_corpus as fc
    from fixtures import rooms

    rows = []
    for p in fc.front_pieces(split):
        v, f = p.load()
        sc = rooms._scale_of(p.name)
        row = _judge(p.name, p.category, v, f, np.diag([sc, sc, sc, 1.0]))
        row["source"] = p.source
        rows.append(row)
    return rows


_DESIGNED_ROLE = {"office_chair": "office_chair", "round_table": "table"}


def designed_rows(split: str) -> list[dict[str, Any]]:
    """Every grouped piece of the split's designed rooms as placed (anchors scaled per
    axis to the designer's footprint); a missing source gives no rows."""
    from fixtures import designed

    if designed.status() is not None:
        return []
    rows = []
    for name in designed.SPLITS[split]:
        room = designed.designed_room(name)
        for p in room.placed:
            if p.group is None:
                continue
            cat = _DESIGNED_ROLE.get(p.role, p.role)
            f = p.furniture
            row = _judge(f"{name}/{p.name} ({f.key})", cat, f.vertices, f.faces, p.pose)
            row["source"] = "designed"
            rows.append(row)
    return rows


def totals(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        for key in (r["source"], "all"):
            t = out.setdefault(key, {"pieces": 0, **dict.fromkeys(OUTCOMES, 0)})
            t["pieces"] += 1
            t[r["outcome"]] += 1
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=("tuned", "untouched", "both"), default="both")
    ap.add_argument("--list", action="store_true",
                    help="print every tuned piece not read right (never untouched ones)")
    ap.add_argument("--json", type=Path, help="write the totals here (atomic)")
    args = ap.parse_args(argv)
    splits = ("tuned", "untouched") if args.split == "both" else (args.split,)
    report: dict[str, Any] = {}
    for split in splits:
        rows = corpus_rows(split) + designed_rows(split)
        report[split] = totals(rows)
        if args.list and split == "tuned":
            for r in rows:
                if r["outcome"] != "right":
                    print(f"{r['outcome']:12} {r['category']:18} {r['role']!s:13} "
                          f"{'settled' if r['settled'] else 'unsettled':9} "
                          f"runner-up {r['runner_up']} {r['size']} {r['name']}")
    print(f"{'split':10} {'source':11} {'pieces':>6} " + " ".join(f"{o:>12}" for o in OUTCOMES))
    for split, t in report.items():
        for src, c in sorted(t.items()):
            print(f"{split:10} {src:11} {c['pieces']:>6} "
                  + " ".join(f"{c[o]:>12}" for o in OUTCOMES))
    if args.json:
        from island_tools.files.atomic import write_json

        write_json(args.json, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
