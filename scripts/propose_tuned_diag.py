"""Tuned-split diagnostic of ``propose_units`` (issue 32): crowded generator rooms of TUNED
furniture, seeds 0-39 (the seeds thresholds are set on), and the tuned designed scenes, each
tidy and disordered, judged by ``tests/room_judge.judge_names``; prints the aggregate and
every row that is not "exact" or "uncertain, doubt named" (confident wrong, CONFIDENT
INCOMPLETE, uncertain unnamed, missed) with what the group held and why.

Never used on the untouched split (seeds >= 100 or untouched furniture): it refuses them.

    .venv/bin/python scripts/propose_tuned_diag.py [--seeds 0-39] [--plain] [--quiet]
"""
from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TUNED_SEEDS = range(0, 40)


def _seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    seeds = list(range(int(lo), int(hi or lo) + 1))
    if any(s not in TUNED_SEEDS for s in seeds):
        raise SystemExit("propose_tuned_diag: --seeds: only tuned seeds 0-39 "
                         "(fix: pass e.g. --seeds 0-39)")
    return seeds


def _rooms(seeds: list[int], plain: bool, designed_too: bool, draw: int = 0
           ) -> list[tuple[str, str, Any]]:
    from fixtures.rooms import disorder, random_room

    out = []
    for s in seeds:
        room = random_room("tuned", s, crowded=not plain)
        out.append((f"generator {s}", "tidy", room))
        out.append((f"generator {s}", "disordered", disorder(room, s + draw)))
    if designed_too:
        from fixtures import designed
        if designed.status() is None:
            for name in designed.SPLITS["tuned"]:
                room = designed.designed_room(name)
                out.append((name, "tidy", room))
                out.append((name, "disordered", disorder(room, 1)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0-39")
    ap.add_argument("--plain", action="store_true", help="not crowded rooms")
    ap.add_argument("--no-designed", action="store_true")
    ap.add_argument("--quiet", action="store_true", help="aggregates only")
    ap.add_argument("--cache", type=Path, help="a pickle of the rooms' units and truth and "
                    "of the measured fronts (forward_axis, not the proposer's logic): read "
                    "when there, written when not (a fast re-run while developing)")
    ap.add_argument("--draw", type=int, default=0,
                    help="another disorder of the same rooms: disorder seed = room seed + this")
    ap.add_argument("--only", help="only rooms whose label contains this (e.g. 'generator 7')")
    args = ap.parse_args(argv)
    from fixtures.rooms import room_units
    from island_tools.measure import meshcache
    from island_tools.scene.propose import propose_units
    from tests.room_judge import judge_names

    if args.cache and args.cache.is_file():
        with args.cache.open("rb") as fh:
            cached = pickle.load(fh)
        meshcache._REMEMBERED.update(cached["fronts"])
        rooms = cached["rooms"]
    else:
        rooms = [(label, state, room_units(room), room.truth)
                 for label, state, room in _rooms(_seeds(args.seeds), args.plain,
                                                  not args.no_designed, args.draw)]

    keys = ("truth_groups", "exact", "confident_wrong", "confident_incomplete",
            "uncertain_named", "uncertain_unnamed", "missed", "reach_unnamed")
    agg: dict[tuple[str, str], dict[str, int]] = {}
    t0 = time.perf_counter()
    for label, state, units, truth in rooms:
        if args.only and args.only != label:
            continue
        doc = propose_units(units)
        got = judge_names(truth, doc)
        a = agg.setdefault((label.split()[0], state), dict.fromkeys(keys, 0))
        for k in keys:
            a[k] += got[k]
        if args.quiet:
            continue
        by_anchor = {g["anchor"]: g for g in doc["groups"]}
        for gid, row in got["groups"].items():
            if row["verdict"] in ("exact", "uncertain, doubt named"):
                continue
            t = truth["groups"][gid]
            g = by_anchor.get(t["anchor"])
            print(f"--- {label} {state} {gid}: {row['verdict']}")
            print(f"    truth members {sorted(t['members'])} ambiguous "
                  f"{sorted(t.get('ambiguous', []))} reach {sorted(t.get('reach', []))}")
            if g is None:
                why = [u for u in doc["proposed"]["unassigned"] if u["name"] == t["anchor"]]
                print(f"    anchor unassigned: {why}")
                for m in t["members"]:
                    holder = [x["anchor"] for x in doc["groups"] if m in x["members"]]
                    print(f"    member {m}: held by {holder}")
                continue
            p = g["proposal"]
            print(f"    held {g['members']} status {p['status']}")
            for m in g["members"]:
                print(f"    holds {m}: {p['evidence']['members'][m]}")
            print(f"    doubtful {sorted(p['doubtful'])} uncertain "
                  f"{sorted(p['uncertain_members'])}")
            for r in p["reasons"]:
                print(f"    reason: {r}")
            for m in sorted((set(t["members"]) | set(t.get("reach", []))) - set(g["members"])):
                holder = [x["anchor"] for x in doc["groups"] if m in x["members"]]
                left = [u["reason"] for u in doc["proposed"]["unassigned"] if u["name"] == m]
                print(f"    not held {m}: held by {holder} {left}")
        for w in got["wrong"]:
            if "anchor_not_in_truth" in w:
                print(f"--- {label} {state}: confident group on a non-anchor {w}")
    if args.cache and not args.cache.is_file():
        fronts = {k: v for k, v in meshcache._REMEMBERED.items() if k[0] == "forward_axis"}
        with args.cache.open("wb") as fh:
            pickle.dump({"rooms": rooms, "fronts": fronts}, fh)
    print(f"{'source':10} {'state':11} " + " ".join(f"{k[:14]:>14}" for k in keys))
    for (src, state), a in sorted(agg.items()):
        print(f"{src:10} {state:11} " + " ".join(f"{a[k]:>14}" for k in keys))
    print(f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
