"""Issue 32: ``propose`` on real and disordered rooms, judged independently.

Rooms: crowded generator rooms (``fixtures.rooms.random_room(..., crowded=True)``) and
layouts designed by others (``fixtures.designed``, read from outside the repository; skipped
with the reason when absent), each tidy and disordered (``fixtures.rooms.disorder``). The
judge is ``tests/room_judge.py`` (names against the rooms' truth; the merged scene read back
with bpy and measured with numpy + shapely), never the proposer's geometry.

Tier 1 (pure): the fixtures are what they claim (disorder physically possible, the truth
complete), the judge can fail, and ``propose_units`` meets the HARD targets of issue 32 -
0 confident wrong and 0 CONFIDENT INCOMPLETE groups - on every room; the rest (exact groups,
spec equal to truth) is reported in the assertion message and by the bench
(``scripts/bench.py --section propose``). These targets are issue 32's: the proposer of
main before it may not meet them yet, and the failure message says so.
Tier 2 (bpy): one disordered room built as a .blend, ``island-refine run --propose`` as a
user runs it, the merged scene judged by measurement.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fixtures import designed, rooms
from tests.room_judge import dump, judge_names, judge_scene, scene_names

REPO = Path(__file__).resolve().parents[1]
TARGET = "issue-32 target (the proposer before issue 32 may not meet it yet)"
GEN_SEEDS = {"tuned": (200, 201), "untouched": (200, 201, 202)}


def _propose(room: rooms.Room) -> dict:
    from island_tools.scene.propose import propose_units
    from island_tools.scene.relation_graph import parse_relation_graph

    doc = propose_units(rooms.room_units(room))
    if doc["groups"]:   # none found: propose writes nothing (exit 20); every group missed
        parse_relation_graph(doc, "relation_graph.json")
    return doc


def _designed(name: str) -> rooms.Room:
    why = designed.status()
    if why is not None:
        pytest.skip(f"designed layouts missing: {why}")
    return designed.designed_room(name)


def _report(label: str, got: dict) -> str:
    rows = "; ".join(f"{g}: {r['verdict']}" for g, r in got["groups"].items())
    return (f"{label}: exact {got['exact']}/{got['truth_groups']}, confident wrong "
            f"{got['confident_wrong']} {got['wrong']}, CONFIDENT INCOMPLETE "
            f"{got['confident_incomplete']} {got['incomplete']}, uncertain named "
            f"{got['uncertain_named']}, unnamed {got['uncertain_unnamed']}, missed "
            f"{got['missed']}, spec {got['spec_equal']}/{got['spec_judged']} [{rows}]")


# ------------------------------------------------------------------ the fixtures
@pytest.mark.parametrize("seed", [200, 201, 202, 203])
def test_disorder_is_physically_possible_and_recorded(seed: int) -> None:
    room = rooms.random_room("untouched", seed, crowded=True)
    out = rooms.disorder(room, seed)
    truth = out.truth
    assert truth["state"] == "disordered" and room.truth["state"] == "tidy"
    assert truth["disorder"], "no member was disordered"
    for gid, g in truth["groups"].items():
        assert g["spec"] == room.truth["groups"][gid]["spec"], gid   # intended, not seen
    for i, p in enumerate(out.placed):
        if p.disorder is None:
            continue
        assert not rooms.in_wall(out, p), f"{p.name} in a wall after {p.disorder}"
        for j, o in enumerate(out.placed):
            assert j == i or not rooms.collides(p, o), f"{p.name} inside {o.name}: {p.disorder}"


def test_disorder_covers_what_users_do() -> None:
    seen: dict[str, float] = {"turn": 0.0, "pull": 0.0, "push": 0.0, "slide": 0.0}
    for seed in range(200, 206):
        for p in rooms.disorder(rooms.random_room("tuned", seed, crowded=True), seed).placed:
            d = p.disorder or {}
            seen["turn"] = max(seen["turn"], abs(d.get("turned_deg", 0.0)))
            seen["pull"] = max(seen["pull"], d.get("pulled_m", 0.0))
            seen["push"] = max(seen["push"], d.get("pushed_m", 0.0))
            seen["slide"] = max(seen["slide"], d.get("slid_deg", 0.0))
    assert seen["turn"] >= 120 and seen["pull"] >= 0.4 and seen["push"] > 0, seen
    assert seen["slide"] >= 90, seen


def test_crowded_room_has_two_tables_08_m_apart_reach_and_a_door() -> None:
    room = rooms.random_room("untouched", 200, crowded=True)
    truth = room.truth
    a, b = (next(p for p in room.placed if p.anchor and p.group == g)
            for g in ("cafe_a", "cafe_b"))
    assert rooms.footprint_gap(a, b) == pytest.approx(0.8, abs=0.02)
    assert any(g["reach"] for g in truth["groups"].values())
    assert any(w.kind == "door" for w in room.walls)
    assert len(truth["walls"]) == len(rooms.all_walls(room))


@pytest.mark.parametrize("name", [s.name for s in designed.SCENES])
def test_designed_scene_is_what_its_designer_laid_out(name: str) -> None:
    room = _designed(name)
    truth = room.truth
    assert truth["source"]["repo"] and truth["source"]["commit"] and truth["source"]["licence"]
    assert truth["groups"] and truth["walls"]
    for i, p in enumerate(room.placed):
        assert not rooms.in_wall(room, p), p.name
        for j, o in enumerate(room.placed):
            if j != i and p.group is not None and not p.anchor:
                assert not rooms.collides(p, o), (p.name, o.name)
    assert all(n.startswith(("Object_", "Sketchfab_model.", "Empty."))
               for n in truth["roles"])


# ------------------------------------------------------------------ the judge can fail
def _doc(groups: list[tuple[str, list[str], str, dict]]) -> dict:
    return {"groups": [{"id": f"g{i}", "anchor": a, "members": ms,
                        "relation": {"anchor_role": "table"},
                        "proposal": {"status": st, "reasons": [] if st == "confident"
                                     else ["x"], "uncertain_members": {}, "doubtful": d}}
                       for i, (a, ms, st, d) in enumerate(groups)]}


def test_judge_counts_confident_incomplete_wrong_and_named_doubt() -> None:
    truth = {"groups": {"t": {"anchor": "A", "members": ["m1", "m2"], "ambiguous": [],
                              "reach": ["s"], "spec": None}}, "bystanders": ["s", "z"]}
    got = judge_names(truth, _doc([("A", ["m1"], "confident", {})]))
    assert got["confident_incomplete"] == 1 and got["exact"] == 0
    got = judge_names(truth, _doc([("A", ["m1", "m2", "z"], "confident", {})]))
    assert got["confident_wrong"] == 1 and got["confident_incomplete"] == 0
    got = judge_names(truth, _doc([("A", ["m1"], "uncertain", {"m2": "turned away",
                                                                "s": "a stool in reach"})]))
    assert got["uncertain_named"] == 1 and got["confident_incomplete"] == 0
    got = judge_names(truth, _doc([("A", ["m1", "m2"], "confident", {})]))
    assert got["exact"] == 1 and got["reach_unnamed"] == 1
    got = judge_names(truth, _doc([("z", ["m1"], "confident", {})]))
    assert got["confident_wrong"] == 1 and got["missed"] == 1


# ------------------------------------------------------------------ propose_units: targets
def _hard_targets(label: str, room: rooms.Room) -> dict:
    got = judge_names(room.truth, _propose(room))
    assert got["confident_wrong"] == 0 and got["confident_incomplete"] == 0, \
        f"{TARGET}: 0 confident wrong, 0 CONFIDENT INCOMPLETE - {_report(label, got)}"
    return got


@pytest.mark.parametrize("split,seed", [(s, n) for s, seeds in GEN_SEEDS.items()
                                        for n in seeds])
@pytest.mark.parametrize("state", ["tidy", "disordered"])
def test_generator_rooms_meet_the_hard_targets(split: str, seed: int, state: str) -> None:
    room = rooms.random_room(split, seed, crowded=True)
    if state == "disordered":
        room = rooms.disorder(room, seed)
    _hard_targets(f"{split} generator {seed} {state}", room)


@pytest.mark.parametrize("name", [s.name for s in designed.SCENES])
@pytest.mark.parametrize("state", ["tidy", "disordered"])
def test_designed_rooms_meet_the_hard_targets(name: str, state: str) -> None:
    room = _designed(name)
    if state == "disordered":
        room = rooms.disorder(room, 1)
    _hard_targets(f"{name} {state}", room)


# ------------------------------------------------------------------ bpy end to end
def run_propose(scene: Path) -> None:
    """``island-refine run --propose`` on ``scene`` as a user runs it (the CLI, embedded bpy,
    small renders); 24 is fine: uncertain groups are reported, not passed."""
    cmd = [sys.executable, str(REPO / "scripts" / "refine_scene.py"), "run", "--scene-dir",
           str(scene), "--propose", "--blender-bin", "bpy", "--resolution", "64",
           "--samples", "1", "--max-iter", "4", "--max-rounds", "2", "--quiet"]
    proc = subprocess.run(cmd, cwd=REPO, env={**os.environ, "ISLAND_REFINER_DAEMON": "0"},
                          capture_output=True, text=True, timeout=1800, check=False)
    assert proc.returncode in (0, 24), proc.stderr[-2000:]


@pytest.mark.bpy
def test_run_propose_on_a_disordered_room_judged_by_measurement(
        tmp_path: Path, record_property: pytest.RecordProperty) -> None:
    room = rooms.disorder(rooms.random_room("untouched", 201, crowded=True), 201)
    scene = rooms.build_room(room, tmp_path / "room")
    truth = json.loads((scene / rooms.TRUTH_FILE).read_text())
    run_propose(scene)
    names = scene_names(truth) + truth["bystanders"]
    before = dump(scene / "blend" / "stage3-sub-planned.blend", names)
    after = dump(scene / "blend" / "stage3-scene.blend", names)
    judged = judge_scene(truth, after, before)
    # what the judge measures on the input: the disordered members stand wrong there
    faults_in = judge_scene(truth, before)
    moved_members = [n for n, d in truth["disorder"].items()
                     if d.get("turn_total_deg") and abs(d["turn_total_deg"]) > 30]
    assert any(not faults_in["groups"][g]["pass"] for g in truth["groups"]) or \
        not moved_members, faults_in
    # hard: nothing in or through walls; nothing penetrating that did not before; the graph
    # run --propose refined by holds no confident wrong or incomplete group
    assert judged["in_wall"] == [], judged
    assert judged["penetrations"] == [], judged
    doc = json.loads((scene / "inputs" / "relation_graph.json").read_text())
    got = judge_names(truth, doc)
    assert got["confident_wrong"] == 0 and got["confident_incomplete"] == 0, \
        f"{TARGET}: {_report('run --propose graph', got)}"
    # reported (issue 32's target: >= 90 %), not asserted: the bench tracks it
    g = len(truth["groups"])
    record_property("pass_after_run", f"{judged['passed']}/{g}")
    print(f"pass after run --propose (independent judge): {judged['passed']}/{g} "
          f"{json.dumps(judged['groups'])}")
    # untouched objects stay where they were
    for name in truth["bystanders"]:
        if f"{name}|matrix" in after:
            assert np.allclose(before[f"{name}|matrix"], after[f"{name}|matrix"], atol=1e-4)
