"""Tuned-split diagnostic of ``island-refine run --propose`` (issue 32): crowded generator
rooms of TUNED furniture, seeds 0-39, tidy and disordered (``--draw``: another disorder of
the same rooms), and the tuned designed scene; each room is built as a .blend, run through
the CLI as a user runs it (the bench's ``_run_cli``: ``refine_scene.py run --propose
--blender-bin bpy --resolution 64 --samples 1``, one at a time) and the merged scene is
judged by ``tests/room_judge.judge_scene``. Prints per truth group: pass / FAIL and why
(the judge's faults: facing, gap, shared surfaces, in a wall; moved on a tidy room), the
proposal's status and doubt, what the run did with the group (refined / held / left in
order / left uncertain / refused / failed) and its reported verdict; then the aggregate.

Never used on the untouched split (seeds outside 0-39, untouched furniture): it refuses them.

    .venv/bin/python scripts/propose_tuned_runs.py --seeds 0-9 [--tidy 0-3] [--draw 0]
        [--work /tmp/runs] [--json /tmp/runs.json] [--only 'generator 7']
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TUNED_SEEDS = range(0, 40)
MAX_ITER = 8          # the bench's RUN_MAX_ITER
EXIT_USAGE = 2


def seeds_of(text: str, what: str) -> list[int]:
    """``"3"``, ``"0-9"`` or ``"1,4,7"`` -> seeds; SystemExit (exit 2) outside 0-39."""
    out: list[int] = []
    try:
        for part in filter(None, text.split(",")):
            lo, _, hi = part.partition("-")
            out += range(int(lo), int(hi or lo) + 1)
    except ValueError:
        raise SystemExit(f"propose_tuned_runs: {what}: {text!r} is not a seed list "
                         "(fix: pass e.g. 0-9 or 1,4,7)") from None
    if any(s not in TUNED_SEEDS for s in out):
        raise SystemExit(f"propose_tuned_runs: {what}: only tuned seeds 0-39 "
                         "(fix: pass e.g. 0-9; untouched seeds are never debugged)")
    return out


def rooms_of(disordered: list[int], tidy: list[int], draw: int, designed_too: bool
             ) -> list[tuple[str, str, Any]]:
    """(label, state, Room): tuned crowded generator rooms, then the tuned designed scene."""
    from fixtures.rooms import disorder, random_room

    out = []
    for s in sorted(set(tidy) | set(disordered)):
        room = random_room("tuned", s, crowded=True)
        if s in tidy:
            out.append((f"generator {s}", "tidy", room))
        if s in disordered:
            out.append((f"generator {s}", "disordered", disorder(room, s + draw)))
    if designed_too:
        from fixtures import designed
        if designed.status() is None:
            for name in designed.SPLITS["tuned"]:
                room = designed.designed_room(name)
                out.append((name, "tidy", room))
                out.append((name, "disordered", disorder(room, 1 + draw)))
    return out


def _read(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def run_action(gid: str | None, scene: Path, proposal_members: list[str]
               ) -> dict[str, Any]:
    """What ``run --propose`` did with proposed group ``gid`` (read from the run's files):
    ``action`` refined / left in order (no review failed, or ``kept_in_order``), either
    "with the doubt open" (an uncertain proposal the run refines, its ``held`` members in
    doubt standing still) / left uncertain (an uncertain proposal not refined) / refused /
    failed / not proposed; the reported ``verdict`` and the ``why`` of a group not refined."""
    if gid is None:
        return {"action": "not proposed", "verdict": None, "why": ""}
    state = _read(scene / "state.json")
    islands = _read(scene / "json" / "island_groups.json")
    metrics = _read(scene / "metrics.json")
    refused = {r["id"]: r["reason"] for r in state.get("islands_refused", [])}
    failed = {r["id"]: r["reason"] for r in state.get("islands_failed", [])}
    m = (metrics.get("groups") or {}).get(gid) or {}
    verdict = (m.get("after") or {}).get("verdict", m.get("status"))
    if gid in refused:
        why = refused[gid]
        action = "left uncertain" if "uncertain proposal" in why else "refused"
        return {"action": action, "verdict": verdict, "why": why}
    if gid in failed:
        return {"action": "failed", "verdict": verdict, "why": failed[gid]}
    flagged = gid in (state.get("groups_needing_island") or [])
    g = (islands.get("groups") or {}).get(gid, {})
    action = "refined" if flagged else "left in order"
    why = g.get("kept_in_order", "") if not flagged else ""
    doubted = {r.get("id") for r in state.get("islands_uncertain") or []
               if isinstance(r, dict)}
    # refined with the doubt open: the members in doubt it held were taken out of its
    # members (validate's hold_doubted_members) and stood still as fixed context
    held = sorted(set(proposal_members) - set(g.get("members", proposal_members)))
    if gid in doubted:
        action = "refined, doubt open" if flagged else "in order, doubt open"
    return {"action": action, "verdict": verdict, "why": why, "held": held,
            "geometry_verdict": (m.get("after") or {}).get("geometry_verdict"),
            "not_measured": (m.get("after") or {}).get("not_measured") or []}


def judge_room(scene: Path, truth: dict[str, Any]) -> dict[str, Any]:
    """The merged scene measured by ``tests/room_judge`` (the bench's ``_judge_run``)."""
    from scripts.benchmarks.propose import _judge_run

    return _judge_run(scene, truth)


def _pose_change(before: Any, after: Any) -> tuple[float, float]:
    """(metres, degrees) between two 4x4 world matrices (floor plane, yaw)."""
    import math

    dx = float(after[0][3]) - float(before[0][3])
    dy = float(after[1][3]) - float(before[1][3])
    yaw = [math.degrees(math.atan2(float(m[1][0]), float(m[0][0]))) for m in (before, after)]
    return math.hypot(dx, dy), abs((yaw[1] - yaw[0] + 180.0) % 360.0 - 180.0)


def member_place(name: str, group_id: str | None, graph: dict[str, Any],
                 islands: dict[str, Any], objects: dict[str, Any],
                 after_poses: dict[str, Any]) -> dict[str, Any]:
    """Where a (failing) member stood in the proposal and the run: ``place`` held /
    held in doubt (a held member the run kept still) / doubtful (named, not held) / held by
    another group / in no group; ``moved_m`` and ``turned_deg`` by the run (0 when the
    merge did not move it)."""
    by_id = {g["id"]: g for g in graph.get("groups", [])}
    place = "in no group"
    g = by_id.get(group_id or "")
    if g is not None and name in g["members"]:
        refined = (islands.get("groups") or {}).get(group_id, {}).get("members")
        doubted = name in ((g.get("proposal") or {}).get("uncertain_members") or {})
        place = ("held in doubt" if doubted and (refined is None or name not in refined)
                 else "held")
    elif g is not None and name in ((g.get("proposal") or {}).get("doubtful") or {}):
        place = "doubtful"
    else:
        other = [x["id"] for x in graph.get("groups", []) if name in x["members"]]
        if other:
            place = f"held by {other[0]}"
    moved = turned = 0.0
    if name in after_poses and name in objects:
        moved, turned = _pose_change(objects[name]["matrix_world"], after_poses[name])
    return {"member": name, "place": place, "moved_m": round(moved, 3),
            "turned_deg": round(turned, 1)}


def group_rows(scene: Path, truth: dict[str, Any], judged: dict[str, Any]
               ) -> list[dict[str, Any]]:
    """One row per truth group: the judge's pass and faults, the proposal, the run's action."""
    graph = _read(scene / "inputs" / "relation_graph.json")
    by_anchor = {g["anchor"]: g for g in graph.get("groups", [])}
    moved = {x["name"]: x for x in judged.get("moved", [])}
    islands = _read(scene / "json" / "island_groups.json")
    objects = _read(scene / "json" / "scene_objects.json").get("objects") or {}
    after_poses = _read(scene / "json" / "merge_back.json").get("after_poses") or {}
    rows = []
    for gid, t in truth["groups"].items():
        j = judged.get("groups", {}).get(gid, {"pass": False, "faults": ["not judged: "
                                                                          "no merged scene"]})
        g = by_anchor.get(t["anchor"])
        p = (g or {}).get("proposal") or {}
        faults = list(j["faults"])
        faults += [f"{n}: moved {x['moved_m']} m / {x['turned_deg']} deg on a tidy room"
                   for n, x in moved.items() if n in (t["anchor"], *t["members"])]
        rows.append({
            "group": gid, "anchor": t["anchor"], "pass": bool(j["pass"]), "faults": faults,
            "truth_members": sorted(t["members"]), "reach": sorted(t.get("reach", [])),
            "role": (t.get("spec") or {}).get("anchor_role"),
            "disorder": {m: truth.get("disorder", {}).get(m) for m in t["members"]
                         if truth.get("disorder", {}).get(m)},
            "proposed": None if g is None else {
                "id": g["id"], "members": sorted(g["members"]), "status": p.get("status"),
                "reasons": list(p.get("reasons", [])),
                "doubtful": sorted(p.get("doubtful") or {}),
                "uncertain_members": sorted(p.get("uncertain_members") or {}),
                "relation": g.get("relation", {})},
            "run": run_action(None if g is None else g["id"], scene,
                              [] if g is None else list(g["members"])),
            "failing": [member_place(m, None if g is None else g["id"], graph, islands,
                                     objects, after_poses)
                        for m in sorted({f.split(":")[0] for f in j["faults"]}
                                        & set(t["members"]))]})
    return rows


def run_room(label: str, state: str, room: Any, work: Path, backend: Any,
             max_iter: int) -> dict[str, Any]:
    from fixtures.rooms import build_room
    from scripts.benchmarks.propose import _run_cli

    scene = work / f"{label}_{state}".replace(" ", "_")
    shutil.rmtree(scene, ignore_errors=True)
    t0 = time.perf_counter()
    build_room(room, scene, backend)
    code, seconds, err = _run_cli(scene, max_iter)
    truth = room.truth
    judged = judge_room(scene, truth)
    return {"room": label, "state": state, "scene": str(scene), "exit": code,
            "run_s": round(seconds, 1), "total_s": round(time.perf_counter() - t0, 1),
            "stderr": err if code not in (0, 24) else "",
            "in_wall": judged.get("in_wall", []), "penetrations": judged.get("penetrations", []),
            "groups": group_rows(scene, truth, judged)}


def print_room(r: dict[str, Any], failing_only: bool) -> None:
    ok = sum(g["pass"] for g in r["groups"])
    print(f"=== {r['room']} {r['state']}: {ok}/{len(r['groups'])} pass, exit {r['exit']}, "
          f"run {r['run_s']} s{'; ' + r['stderr'] if r['stderr'] else ''}")
    for g in r["groups"]:
        if failing_only and g["pass"]:
            continue
        run = g["run"]
        prop = g["proposed"]
        head = "pass" if g["pass"] else "FAIL"
        print(f"  {head} {g['group']} ({g['role']}, anchor {g['anchor']}): run "
              f"{run['action']}, verdict {run['verdict']}"
              + (f" (geometry {run['geometry_verdict']})" if run.get("geometry_verdict")
                 else ""))
        for f in g["faults"]:
            print(f"      judge: {f}")
        if prop is None:
            print("      proposal: none around this anchor")
        else:
            extra = sorted(set(prop["members"]) - set(g["truth_members"]))
            missing = sorted(set(g["truth_members"]) - set(prop["members"]))
            print(f"      proposal {prop['id']}: {prop['status']}, holds {prop['members']}"
                  + (f", missing {missing}" if missing else "")
                  + (f", extra {extra}" if extra else ""))
            if prop["doubtful"] or prop["uncertain_members"]:
                print(f"      doubt: doubtful {prop['doubtful']}, held in doubt "
                      f"{prop['uncertain_members']}")
            for reason in prop["reasons"]:
                print(f"      reason: {reason}")
        if not g["pass"]:
            for m, d in g["disorder"].items():
                print(f"      disorder {m}: {d}")
        for f in g.get("failing", []):
            print(f"      failing {f['member']}: {f['place']}, moved by the run "
                  f"{f['moved_m']} m / {f['turned_deg']} deg")
        if run.get("held"):
            print(f"      run held in doubt (not moved): {run['held']}")
        if run.get("why"):
            print(f"      run: {run['why'][:400]}")


def failing_places(results: list[dict[str, Any]]) -> dict[str, int]:
    """Failing members counted by their place (:func:`member_place`) and whether the run
    moved them (more than 2 cm or 2 deg): what a failure class rests on."""
    out: dict[str, int] = {}
    for r in results:
        for g in r["groups"]:
            for f in g.get("failing", []):
                still = f["moved_m"] <= 0.02 and f["turned_deg"] <= 2.0
                place = "held by another group" if f["place"].startswith("held by") \
                    else f["place"]
                key = f"{r['state']}: {place}, {'not moved' if still else 'moved'}"
                out[key] = out.get(key, 0) + 1
    return out


def aggregate(results: list[dict[str, Any]]) -> dict[str, dict[str, list[int]]]:
    """{state: {"all" | action: [passed, groups]}}."""
    out: dict[str, dict[str, list[int]]] = {}
    for r in results:
        per = out.setdefault(r["state"], {})
        for g in r["groups"]:
            for key in ("all", g["run"]["action"]):
                a = per.setdefault(key, [0, 0])
                a[0] += int(g["pass"])
                a[1] += 1
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seeds", default="0-9", help="disordered rooms (tuned seeds 0-39)")
    ap.add_argument("--tidy", default="0-3", help="tidy rooms ('' for none)")
    ap.add_argument("--draw", type=int, default=0,
                    help="another disorder of the same rooms: disorder seed = room seed + this")
    ap.add_argument("--designed", action="store_true",
                    help="the tuned designed scene too (servicesim_meeting)")
    ap.add_argument("--only", help="only rooms whose label is this (e.g. 'generator 7')")
    ap.add_argument("--max-iter", type=int, default=MAX_ITER)
    ap.add_argument("--work", type=Path, default=Path("/tmp/propose_tuned_runs"))
    ap.add_argument("--json", type=Path, help="write every row here (atomic)")
    ap.add_argument("--all-groups", action="store_true", help="print passing groups too")
    args = ap.parse_args(argv)
    from fixtures.fronts_corpus import SharedCorpusMissingError
    from worker.launch import resolve_blender

    try:
        rooms = rooms_of(seeds_of(args.seeds, "--seeds"), seeds_of(args.tidy, "--tidy"),
                         args.draw, args.designed)
    except SharedCorpusMissingError as exc:
        print(f"propose_tuned_runs: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.only:
        rooms = [x for x in rooms if x[0] == args.only]
    backend = resolve_blender("bpy", None)
    args.work.mkdir(parents=True, exist_ok=True)
    results = []
    t0 = time.perf_counter()
    for label, state, room in rooms:   # one at a time: the machine's cores are shared
        r = run_room(label, state, room, args.work / f"draw{args.draw}", backend,
                     args.max_iter)
        results.append(r)
        print_room(r, not args.all_groups)
        sys.stdout.flush()
    agg = aggregate(results)
    print(f"{'state':11} {'run action':22} {'pass':>10}")
    for state, per in sorted(agg.items()):
        for key, (ok, n) in sorted(per.items(), key=lambda kv: kv[0] != "all"):
            print(f"{state:11} {key:22} {ok:>4}/{n:<4} ({ok / n:.0%})")
    places = failing_places(results)
    if places:
        print("failing members by place in the proposal and whether the run moved them:")
        for key, n in sorted(places.items()):
            print(f"  {n:>4}  {key}")
    print(f"{time.perf_counter() - t0:.0f} s for {len(results)} rooms", file=sys.stderr)
    if args.json:
        from island_tools.files import atomic
        atomic.write_json(args.json, {"draw": args.draw, "rooms": results,
                                      "aggregate": agg})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
