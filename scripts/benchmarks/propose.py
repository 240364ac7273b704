"""Section ``propose``: ``island-refine propose`` on rooms of corpus furniture, judged by the
rooms' own truth.

Rooms are ``fixtures.rooms.random_room(split, seed)``: a dining table (or two side by side
with a chair at both their ends: the right answer for that chair is "uncertain"), a bed with
one or two nightstands, a TV stand with seats facing it, a desk with its chair, and
bystanders (a wardrobe against a wall, a lone stool, an armchair in a corner), every object
neutrally named and held as a plain mesh, an importer's Empty with child meshes or a
collection instance. Furniture comes from the FROZEN front-corpus split
(``fixtures/fronts_split.json``): ``tuned`` rooms use only tuned pieces (the proposer's
thresholds were set on tuned rooms of seeds 0-39), ``untouched`` rooms only untouched ones
(The Base Mesh, Gazebo Fuel, parametric seeds 1000-1029), never looked at while tuning. The
bench's rooms are seeds ``BENCH_SEED`` on, layouts no tuning saw in either split.

Each room is built as a .blend through the worker (``scene_build``) and proposed through
the product's path (``propose.propose_scene``: ``scene_read`` jobs, then
``propose_units``). The judge (:func:`judge`) compares names only:

* **found exactly**: truth groups with a proposed group of the same anchor and exactly its
  members (an ambiguous member may sit in either of its two groups);
* **member precision / recall** over (anchor, member) pairs, ambiguous members left out;
* **confidently wrong**: a ``confident`` group that is not exactly a truth group, plus every
  ambiguous member proposed without being marked uncertain (target 0);
* **bystanders kept out**: bystanders in no proposed group.

Then on ``RUN_ROOMS`` rooms per split (``--quick``: 1) ``island-refine run --propose`` runs
end to end (solver, 64 px renders, ``RUN_MAX_ITER`` iterations); **pass after run** is the
share of the rooms' truth groups whose proposed group was refined and ended with verdict
``pass`` (uncertain proposals are left as they are, so they count as not passed).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

TITLE = "propose: relation groups proposed from rooms of corpus furniture, judged by truth"
ROOMS = 20
QUICK_ROOMS = 2
RUN_ROOMS = 4
BENCH_SEED = 100
RUN_MAX_ITER = 8
LABELS = {"tuned": "TUNED split furniture (thresholds set on tuned rooms, seeds 0-39)",
          "untouched": "UNTOUCHED split furniture (never used for tuning)"}
COLUMNS = ["split", "rooms", "truth groups", "found exactly", "member precision",
           "member recall", "confidently wrong", "uncertain groups", "ambiguous flagged",
           "bystanders kept out", "run rooms", "pass after run --propose", "s/room"]


def judge(truth: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """Counts of one room's proposal against its truth (names only, no geometry)."""
    amb = {m for g in truth["groups"].values() for m in g["ambiguous"]}
    want = {g["anchor"]: set(g["members"]) - amb for g in truth["groups"].values()}
    true_pairs = {(a, m) for a, ms in want.items() for m in ms}
    got_pairs = {(g["anchor"], m) for g in doc["groups"] for m in g["members"] if m not in amb}

    def exact(g: dict[str, Any]) -> bool:
        return g["anchor"] in want and set(g["members"]) - amb == want[g["anchor"]]

    wrong = [g["id"] for g in doc["groups"]
             if g["proposal"]["status"] == "confident" and not exact(g)]
    amb_confident = [m for g in doc["groups"] for m in g["members"]
                     if m in amb and m not in g["proposal"]["uncertain_members"]]
    in_groups = {n for g in doc["groups"] for n in (g["anchor"], *g["members"])}
    return {"truth_groups": len(want),
            "found_exactly": sum(1 for a in want
                                 if any(g["anchor"] == a and exact(g) for g in doc["groups"])),
            "tp": len(true_pairs & got_pairs), "fp": len(got_pairs - true_pairs),
            "fn": len(true_pairs - got_pairs),
            "confidently_wrong": len(wrong) + len(amb_confident),
            "confidently_wrong_groups": wrong, "ambiguous_confident": amb_confident,
            "uncertain_groups": sum(1 for g in doc["groups"]
                                    if g["proposal"]["status"] == "uncertain"),
            "ambiguous": len(amb), "ambiguous_flagged": len(amb & in_groups) - len(amb_confident),
            "bystanders": len(truth["bystanders"]),
            "bystanders_out": sum(1 for b in truth["bystanders"] if b not in in_groups),
            "exact_confident_ids": {g["id"]: g["anchor"] for g in doc["groups"]
                                    if exact(g) and g["proposal"]["status"] == "confident"}}


def _run_pass(scene: Path, run_job: Any, verdicts_for: dict[str, str]) -> tuple[int, dict]:
    """``run --propose`` on ``scene``; (groups that passed among ``verdicts_for``, the
    per-group verdicts)."""
    from island_tools.config import Settings
    from island_tools.scene.pipeline import RunOptions, run_scene
    from island_tools.scene.propose import propose_for_run

    propose_for_run(scene, run_job)
    options = RunOptions(max_iter=RUN_MAX_ITER, max_rounds=2,
                         settings=Settings(blender_bin="bpy", resolution=64, samples=1))
    run_scene(scene, options, run_job)
    metrics = json.loads((scene / "metrics.json").read_text())
    verdicts = {gid: (g["after"] or {}).get("verdict", g["status"])
                for gid, g in metrics["groups"].items()}
    passed = sum(1 for gid in verdicts_for if verdicts.get(gid) == "pass")
    return passed, verdicts


def run(args: argparse.Namespace) -> dict[str, Any]:
    from fixtures.rooms import build_room, random_room
    from island_tools.scene.propose import propose_scene
    from worker.launch import resolve_blender
    from worker.launch import run_job as _run

    backend = resolve_blender(getattr(args, "blender_bin", None) or "bpy", None)

    def run_job(job: dict) -> dict:
        return _run(job, backend)

    split = getattr(args, "split", None) or "both"
    parts = ("tuned", "untouched") if split == "both" else (split,)
    quick = bool(getattr(args, "quick", False))
    rooms = QUICK_ROOMS if quick else ROOMS
    run_rooms = 1 if quick else RUN_ROOMS
    if getattr(args, "smoke", False):   # one room of one split, run once (scripts/bench.py)
        rooms, parts = 1, parts[:1]
    work = Path(getattr(args, "work", "out/bench")) / "propose"
    shutil.rmtree(work, ignore_errors=True)
    rows, data = [], {}
    for part in parts:
        totals: dict[str, Any] = {}
        per_room = []
        passed = run_groups = 0
        t0 = time.perf_counter()
        for i in range(rooms):
            seed = BENCH_SEED + i
            scene = build_room(random_room(part, seed), work / part / f"room_{seed}", backend)
            truth = json.loads((scene / "room_truth.json").read_text())
            doc = propose_scene(scene, run_job)
            got = judge(truth, doc)
            if i < run_rooms:
                ok, verdicts = _run_pass(scene, run_job, got["exact_confident_ids"])
                passed += ok
                run_groups += got["truth_groups"]
                got["verdicts"] = verdicts
            per_room.append({"seed": seed, **got})
            for k, v in got.items():
                if isinstance(v, int):
                    totals[k] = totals.get(k, 0) + v
            print(f"bench propose: {part} room {seed}: {got['found_exactly']}/"
                  f"{got['truth_groups']} exact, {got['confidently_wrong']} confidently "
                  "wrong", file=sys.stderr)
        seconds = (time.perf_counter() - t0) / rooms
        tp, fp, fn = totals["tp"], totals["fp"], totals["fn"]
        rows.append([LABELS[part], rooms, totals["truth_groups"],
                     f"{totals['found_exactly']}/{totals['truth_groups']}",
                     round(tp / max(tp + fp, 1), 3), round(tp / max(tp + fn, 1), 3),
                     totals["confidently_wrong"], totals["uncertain_groups"],
                     f"{totals['ambiguous_flagged']}/{totals['ambiguous']}",
                     f"{totals['bystanders_out']}/{totals['bystanders']}", run_rooms,
                     f"{passed}/{run_groups}" + (f" ({passed / run_groups:.0%})"
                                                 if run_groups else ""),
                     round(seconds, 1)])
        data[part] = {"totals": totals, "rooms": per_room, "pass_after_run": [passed,
                                                                             run_groups]}
    return {"columns": COLUMNS, "rows": rows, "data": data,
            "notes": ["judged by the rooms' truth (names only); an ambiguous member must be "
                      "proposed uncertain", "pass after run --propose: truth groups whose "
                      "proposed group was confident, refined and ended 'pass', of all truth "
                      f"groups in the first {run_rooms} room(s) of each split"]}
