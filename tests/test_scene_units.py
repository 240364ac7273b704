"""Tier 1 (pure) tests of the scene pipeline: relation graph errors, target spec inference,
verify (review items, blocking, unknowns, score), the contract check from artifacts, the
append-only ledger and its dead-run detection, unknown resolution from the graph."""
from __future__ import annotations

import copy
import json
import os
import sqlite3
import subprocess
from pathlib import Path

import numpy as np
import pytest

from island_tools.files import atomic
from island_tools.measure import frames
from island_tools.scene import contract, verify
from island_tools.scene import ledger as ledger_mod
from island_tools.scene.errors import EXIT_RELATION_GRAPH, RelationGraphError
from island_tools.scene.ledger import Ledger
from island_tools.scene.relation_graph import parse_relation_graph, unsafe_id_reason
from island_tools.scene.validate import infer_target_spec

GOOD = {"version": 1, "groups": [
    {"id": "dining", "anchor": "table", "members": ["c1", "c2"]},
    {"id": "tv", "anchor": "cabinet", "members": ["c3"],
     "relation": {"clearance_m": 1.2}, "forward_axis": {"c3": "-Y"}}]}


def graph_with(**changes) -> dict:
    doc = copy.deepcopy(GOOD)
    doc["groups"][1].update(changes)
    return doc


# ------------------------------------------------------------------ relation graph
def test_good_graph_parses_and_hashes_structure_only() -> None:
    g = parse_relation_graph(GOOD, "rg.json")
    assert [x.id for x in g.groups] == ["dining", "tv"]
    assert g.group("tv").objects == ("cabinet", "c3")
    hinted = copy.deepcopy(GOOD)
    hinted["groups"][0]["forward_axis"] = {"c1": "+X"}
    hinted["groups"][0]["relation"] = {"pattern": "row"}
    assert parse_relation_graph(hinted, "rg.json").structure_sha256 == g.structure_sha256
    moved = graph_with(members=["c3", "c4"])
    assert parse_relation_graph(moved, "rg.json").structure_sha256 != g.structure_sha256


@pytest.mark.parametrize("doc,needle", [
    (graph_with(members=[]), "group 'tv' is empty"),
    (graph_with(members=["c3", "cabinet"]), "anchor 'cabinet' is also listed as a member"),
    (graph_with(members=["c1"], forward_axis={}),
     "object 'c1' is in two groups: 'dining' and 'tv'"),
    (graph_with(anchor="c2"), "object 'c2' is in two groups: 'dining' and 'tv'"),
    (graph_with(id="DINING"), "group id 'DINING' is used twice"),
    (graph_with(members=["c3", "c3"]), "group 'tv': member 'c3' is listed twice"),
    (graph_with(member=["c3"]), "group 'tv': unknown field"),
    (graph_with(relation={"pattern": "zigzag"}), "group 'tv': 'zigzag' is not one of"),
    (graph_with(relation={"clearance_m": -1.5}), "group 'tv': must be a finite number"),
    (graph_with(forward_axis={"c3": "up"}), "group 'tv': 'up' is not an axis"),
    (graph_with(forward_axis={"c9": "-Y"}), "override for 'c9', which is not in the group"),
    (graph_with(target_spec={"anchor_role": "tv", "member_count": 2, "pattern": "row",
                             "facing": "toward_anchor", "spacing": "tight",
                             "clearance_m": 1.0}),
     "group 'tv': member_count is 2 but the group lists 1 member besides"),
    ({"groups": []}, "must be a non-empty list"),
    ({"groups": [], "extra": 1}, "unknown top-level field"),
])
def test_bad_graph_is_one_line_naming_the_group(doc: dict, needle: str) -> None:
    with pytest.raises(RelationGraphError) as err:
        parse_relation_graph(doc, "inputs/relation_graph.json")
    message = str(err.value)
    assert needle in message, message
    assert "\n" not in message and "inputs/relation_graph.json" in message
    assert err.value.exit_code == EXIT_RELATION_GRAPH


@pytest.mark.parametrize("gid,reason", [
    ("a/b", "path separator"), ("a\\b", "path separator"), ("..", "starts with '.'"),
    ("x..y", "contains '..'"), (".hidden", "starts with '.'"), ("x" * 65, "65 characters"),
    ("tab\tid", "control character"), ("nl\nid", "control character"), ("", "is empty"),
    ("a b", "only letters"), ("caf\u00e9", "only letters"), (7, "must be a string"),
])
def test_unsafe_group_ids(gid, reason: str) -> None:
    assert reason in (unsafe_id_reason(gid) or "")
    with pytest.raises(RelationGraphError, match="not a safe directory name"):
        parse_relation_graph(graph_with(id=gid), "rg.json")


@pytest.mark.parametrize("gid", ["dining", "G1", "room-2.sofa_group", "x" * 64, "_a"])
def test_safe_group_ids(gid: str) -> None:
    assert unsafe_id_reason(gid) is None


def test_unknown_objects_need_the_scene_and_unit_roots_may_be_empties() -> None:
    g = parse_relation_graph(GOOD, "rg.json")
    scene = {"table": "MESH", "c1": "MESH", "c2": "MESH", "cabinet": "MESH", "c3": "MESH"}
    g.check_against_scene(scene)
    with pytest.raises(RelationGraphError, match="group 'tv': object 'c3' is not in the scene"):
        g.check_against_scene({k: v for k, v in scene.items() if k != "c3"})
    # an importer's Empty root (or a collection instance) names a unit; whether it has
    # geometry is the worker's to say (a refusal, exit 23)
    g.check_against_scene({**scene, "table": "EMPTY"})
    assert g.where("c2") == "groups[0].members[1]" and g.where("cabinet") == "groups[1].anchor"


def test_relation_may_be_a_plain_label_kept_as_a_note() -> None:
    doc = json.loads(json.dumps(GOOD))
    doc["groups"][0]["relation"] = "seated_around"
    g = parse_relation_graph(doc, "rg.json").groups[0]
    assert g.relation_label == "seated_around" and g.relation == {}
    doc["groups"][0]["relation"] = "  "
    with pytest.raises(RelationGraphError, match=r"groups\[0\]\.relation.*empty relation label"):
        parse_relation_graph(doc, "rg.json")
    doc["groups"][0]["relation"] = 3
    with pytest.raises(RelationGraphError, match="label string"):
        parse_relation_graph(doc, "rg.json")


# ------------------------------------------------------------------ inference
@pytest.mark.parametrize("shape,ratio,k,expected", [
    ("round", 1.0, 6, {"pattern": "ring", "spacing": "even_around_anchor",
                       "anchor_role": "round_table"}),
    ("rect", 1.9, 6, {"pattern": "2+2+1+1", "anchor_role": "long_table"}),
    ("rect", 1.9, 5, {"pattern": "2+2+1"}),
    ("rect", 1.2, 3, {"pattern": "row", "anchor_role": "table"}),
    ("rect", 1.9, 4, {"pattern": "free"}),
    ("rect", 1.9, 9, {"pattern": "free"}),
])
def test_target_spec_inference_rules(shape: str, ratio: float, k: int, expected: dict) -> None:
    g = parse_relation_graph({"groups": [{"id": "g", "anchor": "a",
                                          "members": [f"m{i}" for i in range(k)]}]}, "rg")
    doc = infer_target_spec(g.groups[0], shape, ratio)
    assert {key: doc[key] for key in expected} == expected
    assert doc["member_count"] == k and doc["facing"] == "toward_anchor"
    assert doc["clearance_m"] == 0.10


# ------------------------------------------------------------------ verify
SPEC = {"anchor_role": "long_table", "member_count": 2, "pattern": "row",
        "facing": "toward_anchor", "spacing": "even_along_each_edge", "clearance_m": 0.10}


def member(facing=2.0, clearance=0.10, penetrations=None, note=None) -> dict:
    return {"facing_error_deg": facing, "facing_note": note, "clearance_m": clearance,
            "clearance_error_m": clearance - 0.10, "penetrations": penetrations or {},
            "forward_canonical": [0, 1], "facing_target": [0, 1]}


def geometry(members: dict, match=True, deviation=0.0, pairs=0) -> dict:
    return {"members": members, "group": {
        "member_count": {"observed": len(members), "target": 2, "match": len(members) == 2},
        "pattern": {"expected": {}, "observed": {}, "match": match,
                    "note": None if match is not None else "free: not checkable"},
        "edge_counts": {}, "penetration_pairs": pairs,
        "spacing": {"mode": "edges", "max_deviation_m": deviation,
                    "per_edge_max_deviation_m": {"-y": deviation}, "ring_gap_cv": None}}}


AXES = {"members": {"a": {"axis_local": [0, -1], "method": "footprint_rect_depth",
                          "confidence": 1.0},
                    "b": {"axis_local": [0, -1], "method": "footprint_rect_depth",
                          "confidence": 1.0}}}
ITEM_KEYS = {"id", "verdict", "reason", "item_kind", "target_id", "owner_id", "failure_family",
             "blocked_by", "confidence", "evidence"}


def by_id(review: dict) -> dict:
    return {i["id"]: i for i in review["review_results"]}


def test_all_pass_has_seed_shape_and_zero_score() -> None:
    review = verify.review_group("g", geometry({"a": member(), "b": member()}), SPEC, AXES,
                                 ["a", "b"])
    items = by_id(review)
    assert set(items) == {"object_a", "object_b", "facing_a", "facing_b", "clearance_a",
                          "clearance_b", "pattern", "spacing"}
    assert all(set(i) == ITEM_KEYS for i in items.values())
    assert all(i["verdict"] == "pass" and i["failure_family"] == "" for i in items.values())
    assert items["object_a"]["item_kind"] == "object"
    assert items["facing_a"]["evidence"]["facing_error_deg"] == 2.0
    assert review["summary"]["all_pass"] and review["new_unknowns"] == []
    assert review["violation_score"] == pytest.approx(4.0 / 90.0, abs=1e-6)


def test_failures_carry_families_numbers_and_block_constraints() -> None:
    g = geometry({"a": member(facing=90.0), "b": member(clearance=-0.2,
                                                         penetrations={"table": 0.2})},
                 match=False, deviation=0.3, pairs=1)
    items = by_id(verify.review_group("g", g, SPEC, AXES, ["a", "b", "c"]))
    assert items["facing_a"]["verdict"] == "fail"
    assert items["facing_a"]["failure_family"] == "relation_repair"
    assert items["object_b"]["verdict"] == "fail"
    assert items["object_b"]["evidence"]["penetrations_m"] == {"table": 0.2}
    for check in ("facing_b", "clearance_b"):
        assert items[check]["verdict"] == "uncertain"
        assert items[check]["blocked_by"] == "object_b"
    assert items["object_c"]["failure_family"] == "subject_repair"      # absent
    assert items["pattern"]["blocked_by"] == "object_c"                  # needs positions
    assert items["spacing"]["verdict"] == "uncertain"


def test_clearance_too_close_and_too_far() -> None:
    far = verify.review_group("g", geometry({"a": member(clearance=0.5), "b": member()}),
                              SPEC, AXES, ["a", "b"])
    assert by_id(far)["clearance_a"]["verdict"] == "fail"
    assert "further" in by_id(far)["clearance_a"]["reason"]
    loose = verify.review_group("g", geometry({"a": member(clearance=0.5), "b": member()}),
                                {**SPEC, "spacing": "loose"}, AXES, ["a", "b"])
    assert by_id(loose)["clearance_a"]["verdict"] == "pass"
    close = verify.review_group("g", geometry({"a": member(clearance=0.05), "b": member()}),
                                SPEC, AXES, ["a", "b"])
    assert by_id(close)["clearance_a"]["verdict"] == "fail"


def test_undetermined_front_is_an_unknown_never_a_pass() -> None:
    """A front the mesh cannot tell (not measurably symmetric either) is an open unknown and
    an uncertain group: only a declared answer turns it into a measured check."""
    axes = copy.deepcopy(AXES)
    axes["members"]["b"] = {"axis_local": None, "method": "symmetric", "confidence": 0.4}
    g = geometry({"a": member(), "b": member(facing=None, note="front undetermined")})
    review = verify.review_group("g", g, SPEC, axes, ["a", "b"])
    items = by_id(review)
    assert items["object_b"]["verdict"] == "uncertain"
    assert items["object_b"]["evidence"]["front_status"] == "undetermined"
    assert items["facing_b"]["blocked_by"] == "object_b"
    assert not any(i["verdict"] == "fail" for i in items.values())
    assert review["summary"]["verdict"] == "uncertain" and not review["summary"]["all_pass"]
    [line] = review["summary"]["not_measured"]
    assert line.startswith("b: ") and "forward_axis" in line   # names member and the fix
    [unknown] = review["new_unknowns"]
    assert unknown["id"] == "unknown_forward_axis_b" and unknown["status"] == "open"
    assert "forward_axis" in unknown["question"]
    declared = copy.deepcopy(axes)
    declared["members"]["b"] = {"axis_local": [0.0, -1.0], "method": "override",
                                "confidence": 1.0}
    g2 = geometry({"a": member(), "b": member()})
    after = verify.review_group("g", g2, SPEC, declared, ["a", "b"])
    assert after["new_unknowns"] == [] and after["summary"]["verdict"] == "pass"


def test_measured_symmetry_is_checked_modulo_its_order() -> None:
    """Symmetry is a measured claim with an order: 2- and 4-fold members are judged on their
    error modulo 180 / 90 degrees, a round one passes where facing does not apply, and one
    whose order was not measured is uncertain, never a pass (tests/test_symmetry_facing.py
    measures the same on real geometry)."""
    axes = copy.deepcopy(AXES)
    axes["members"]["b"] = {"axis_local": None, "method": "symmetric", "confidence": 0.99}

    def sym(order, facing=None, note=None, modulus=None) -> dict:
        return {**member(facing=facing, note=note), "forward_canonical": None,
                "facing_symmetry_order": order, "facing_modulus_deg": modulus}

    round_ = verify.review_group("g", geometry({"a": member(), "b": sym(
        "continuous", note="round (continuous rotational symmetry): facing does not apply")}),
        SPEC, axes, ["a", "b"])
    assert round_["new_unknowns"] == [] and round_["summary"]["verdict"] == "pass"
    assert "measured round" in by_id(round_)["object_b"]["reason"]
    assert "not applicable: round piece" in by_id(round_)["facing_b"]["reason"]
    square = verify.review_group("g", geometry({"a": member(), "b": sym(4, 3.0, modulus=90.0)}),
                                 SPEC, axes, ["a", "b"])
    assert square["summary"]["verdict"] == "pass"
    assert "measured symmetric of order 4" in by_id(square)["object_b"]["reason"]
    bench = verify.review_group("g", geometry({"a": member(), "b": sym(2, 40.0, modulus=180.0)}),
                                SPEC, axes, ["a", "b"])
    assert by_id(bench)["facing_b"]["verdict"] == "fail"
    assert "modulo 180 deg" in by_id(bench)["facing_b"]["reason"]
    assert bench["violation_score"] == pytest.approx((2.0 + 40.0) / 90.0)
    # an order that was not measured (null, or an entry written before the field existed)
    unmeasured = verify.review_group("g", geometry({"a": member(), "b": sym(
        None, note="symmetry order not measured: ...")}), SPEC, axes, ["a", "b"])
    assert by_id(unmeasured)["facing_b"]["verdict"] == "uncertain"
    assert unmeasured["summary"]["verdict"] == "uncertain"
    assert "symmetry order not measured" in by_id(unmeasured)["facing_b"]["reason"]
    # a geometry.json written before symmetry orders says "symmetric: facing does not
    # apply" and no order: not measured either
    old = verify.review_group("g", geometry({"a": member(), "b": member(
        facing=None, note="symmetric: facing does not apply")}), SPEC, axes, ["a", "b"])
    assert old["summary"]["verdict"] == "uncertain"


def test_uncheckable_pattern_is_an_unknown() -> None:
    review = verify.review_group("g", geometry({"a": member(), "b": member()}, match=None),
                                 {**SPEC, "pattern": "free", "free_note": "x"}, AXES, ["a", "b"])
    assert [u["id"] for u in review["new_unknowns"]] == ["unknown_pattern_g"]
    assert by_id(review)["pattern"]["verdict"] == "uncertain"


def test_violation_score_terms() -> None:
    g = geometry({"a": member(facing=45.0, clearance=0.0), "b": member()}, match=False,
                 deviation=0.05, pairs=1)
    # 45/90 + (2/90 for b) + 0.10/0.10 + 0.05/0.10 + 2 (pair) + 1 (pattern)
    assert verify.violation_score(g, SPEC) == pytest.approx(0.5 + 2 / 90 + 1 + 0.5 + 2 + 1)


# ------------------------------------------------------------------ contract check
def _metadata() -> dict:
    eye = frames.to_list(np.eye(4))
    return {"anchor_id": "t", "M_anchor_4x4": eye, "M_inv_4x4": eye, "members": ["t", "a", "b"],
            "canonical_poses": {"t": eye, "a": eye, "b": eye}}


def _transforms(n: int, members: dict, converged=False, final=False) -> dict:
    return {"iter": n, "members": members, "converged": converged, "final": final,
            "_island_meta": {"model": "m", "image_sha256": "0" * 64, "generated_by": "t",
                             "mode": "island_iter", "iter": n,
                             "timestamp_utc": "2026-01-01T00:00:00Z"}}


MOVE = {"a": {"delta_xyz": [0.1, 0, 0], "delta_yaw_deg": 0.0}}


def make_loop(root: Path, plan: list[dict], promote: bool = True, same_blend: bool = False
              ) -> Path:
    atomic.write_json(root / "metadata.json", _metadata())
    for n, spec in enumerate([{"members": {}}] + plan):
        d = root / "simple_refiner" / f"iter_{n}"
        d.mkdir(parents=True)
        (d / "island.blend").write_bytes(b"blend-0" if same_blend or n == 0 else
                                         f"blend-{n}".encode())
        atomic.write_json(d / "transforms.json", _transforms(n, **spec))
        (d / "current_state.json").write_text("{}")
    last = root / "simple_refiner" / f"iter_{len(plan)}" / "island.blend"
    (root / "island.blend").write_bytes(last.read_bytes() if promote else b"old")
    return root


def test_contract_ok(tmp_path: Path) -> None:
    plan = [{"members": MOVE}] * 4 + [{"members": {}, "converged": True, "final": True}]
    check = contract.check_loop(make_loop(tmp_path, plan), max_iter=20)
    assert check.ok, check.reason
    assert check.final_iter == 5 and check.nonempty_iters == [1, 2, 3, 4]
    assert [r["iter"] for r in check.iterations] == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("plan,kwargs,needle", [
    ([{"members": {}, "final": True}], {}, "iter_1 rule"),
    ([{"members": MOVE}, {"members": {}, "converged": True, "final": True}], {},
     "converged at iter_2 < MIN_ITER"),
    ([{"members": MOVE}] * 2, {}, "not marked final"),
    ([{"members": MOVE, "final": True}, {"members": MOVE, "final": True}], {},
     "iter_1 is marked final"),
    ([{"members": MOVE}, {"members": MOVE, "final": True}], {"same_blend": True},
     "byte-identical"),
    ([{"members": MOVE}, {"members": MOVE, "final": True}], {"promote": False},
     "was not promoted"),
    ([], {}, "iter_0 only"),
])
def test_contract_violations(tmp_path: Path, plan: list, kwargs: dict, needle: str) -> None:
    check = contract.check_loop(make_loop(tmp_path, plan, **kwargs), max_iter=20)
    assert not check.ok and needle in check.reason


def test_contract_max_iter_and_gaps(tmp_path: Path) -> None:
    root = make_loop(tmp_path, [{"members": MOVE}, {"members": MOVE, "final": True}])
    assert "exceed max_iter 1" in contract.check_loop(root, max_iter=1).reason
    (root / "simple_refiner" / "iter_1" / "current_state.json").unlink()
    assert "missing iter_1" in contract.check_loop(root, max_iter=20).reason


# ------------------------------------------------------------------ ledger
def test_ledger_is_append_only_wal_and_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    led = Ledger(path)
    led.run_started("r1", ["run"])
    led.decision("r1", "g", 1, "rollback", 2.0, 1.995, 0.01, "too small")
    mode = led.conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    for sql in ("UPDATE runs SET event = 'finished'", "DELETE FROM decisions"):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            led.conn.execute(sql)
    led.close()
    again = Ledger(path)
    [row] = again.rows("decisions")
    assert row["decision"] == "rollback" and row["delta"] == pytest.approx(0.005)
    assert again.run_status("r1") == "started"
    again.close()


def test_dead_running_run_is_marked_failed(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "ledger.sqlite")
    proc = subprocess.Popen(["sleep", "0"])
    proc.wait()
    led._insert("runs", run_id="dead", event="started", pid=proc.pid,
                proc_start=ledger_mod.process_start(os.getpid()), boot_id=ledger_mod.boot_id(),
                host=os.uname().nodename)
    me = os.getpid()
    # pid reused by another process: same pid, different start time -> dead
    led._insert("runs", run_id="reused", event="started", pid=me,
                proc_start=(ledger_mod.process_start(me) or 0) + 12345,
                boot_id=ledger_mod.boot_id(), host=os.uname().nodename)
    led._insert("runs", run_id="alive", event="started", pid=me,
                proc_start=ledger_mod.process_start(me), boot_id=ledger_mod.boot_id(),
                host=os.uname().nodename)
    led.run_started("done", [])
    led.run_finished("done", 0)
    dead = {d.run_id for d in led.mark_dead_runs()}
    assert dead == {"dead", "reused"}
    assert led.run_status("dead") == "failed" and led.run_status("alive") == "started"
    assert led.run_status("done") == "finished"
    assert "died without a terminal status" in led.rows("runs")[-1]["detail"]
    led.close()


# ------------------------------------------------------------------ resolution
def test_pattern_unknown_resolved_from_relation_hint_or_left_open(tmp_path: Path) -> None:
    from island_tools.scene.paths import GroupPaths
    from island_tools.scene.verify_stage import resolve_pattern

    gp = GroupPaths(tmp_path)
    spec = {**SPEC, "member_count": 4, "pattern": "free", "free_note": "inferred"}
    atomic.write_json(gp.target_spec, spec)
    plain = parse_relation_graph({"groups": [{"id": "g", "anchor": "t",
                                              "members": ["a", "b", "c", "d"]}]}, "rg").groups[0]
    assert resolve_pattern(gp, plain) is None   # no default answer: stays open
    assert json.loads(gp.target_spec.read_text())["pattern"] == "free"
    hinted = parse_relation_graph({"groups": [{"id": "g", "anchor": "t",
                                               "members": ["a", "b", "c", "d"],
                                               "relation": {"pattern": "L"}}]}, "rg").groups[0]
    res = resolve_pattern(gp, hinted)
    assert res == {**res, "source": "relation_graph", "value": "L"}
    assert json.loads(gp.target_spec.read_text())["pattern"] == "L"


def test_facing_that_was_not_measured_is_uncertain_not_a_pass() -> None:
    """'mixed' facing is prose (free_note); a member centred on the anchor has no direction
    to face: neither is a measurement, so neither is a pass."""
    for note in ("mixed: see free_note",
                 "member footprint centre coincides with the anchor centre"):
        g = geometry({"a": member(), "b": member(facing=None, note=note)})
        review = verify.review_group("g", g, SPEC, AXES, ["a", "b"])
        item = by_id(review)["facing_b"]
        assert item["verdict"] == "uncertain" and "not measured" in item["reason"], note
        assert review["summary"]["verdict"] == "uncertain"
        assert any(line.startswith("b: ") for line in review["summary"]["not_measured"])


def test_runs_of_one_process_in_one_second_get_their_own_ids(tmp_path, monkeypatch) -> None:
    """A long-lived process (the MCP server, the add-on) that resumes a cancelled scene at
    once must log a new run: the same '<stamp>-<pid>' id hid the resumed run's 'started'."""
    from island_tools.scene import run as run_module
    from island_tools.scene.ledger import Ledger

    monkeypatch.setattr(run_module, "stamp", lambda: "20261201_120000")
    ledger = Ledger(tmp_path / "ledger.sqlite")
    try:
        ids = []
        for _ in range(3):
            run_id = run_module._new_run_id(ledger)
            ledger.run_started(run_id, ["island-refine", "run"])
            ids.append(run_id)
        base = f"20261201_120000-{os.getpid()}"
        assert ids == [base, f"{base}.2", f"{base}.3"]
    finally:
        ledger.close()


# ----------------------------------------------------------------------------- refusals
def test_a_refusal_costs_its_group_and_any_group_holding_its_objects() -> None:
    from island_tools.scene.state import SceneState, scene_exit_code
    from island_tools.scene.validate import entangled_refusals, refusal_record

    graph = parse_relation_graph({"groups": [
        {"id": "a", "anchor": "a.t", "members": ["a.c1", "a.c2"]},
        {"id": "b", "anchor": "b.t", "members": ["b.c1"]},
        {"id": "c", "anchor": "c.t", "members": ["c.c1"]}]}, "rg.json")
    live = graph.without(["b"])
    assert [g.id for g in live.groups] == ["a", "c"]
    assert live.structure_sha256 == graph.structure_sha256 and graph.group_of("b.c1") == "b"
    # b's chair stands on a tray parented to a's second chair: refusing b alone would carry
    # it along with a.c2, so a is refused too, naming the object and the fix; c is not
    objects = {n: {"parent": None} for n in graph.object_names}
    objects["tray"] = {"parent": "a.c2"}
    objects["b.c1"] = {"parent": "tray"}
    entangled = entangled_refusals(graph, {"b"}, objects)
    assert list(entangled) == ["a"]
    record = refusal_record(graph, entangled["a"])
    assert record["reason"].startswith("field 'groups[0].members[1]': member 'a.c2': 'a.c2' "
                                       "holds 'b.c1' of refused group 'b'")
    assert "fix: unparent 'b.c1'" in record["reason"]
    assert entangled_refusals(graph, {"a", "b"}, objects) == {}
    state = SceneState(Path("/nonexistent/state.json"), json.loads(json.dumps(
        {"islands_completed": ["c"], "islands_failed": [], "islands_refused": [],
         "groups": {}})))
    state.save = lambda: None  # type: ignore[method-assign]
    assert scene_exit_code(state.doc) == 0
    state.set_refused({"b": {"reason": "field 'x': member 'b.c1': keyframed"}})
    assert state.doc["islands_refused"] == [{"id": "b", "reason":
                                             "field 'x': member 'b.c1': keyframed"}]
    assert state.doc["groups"]["b"]["status"] == "refused"
    assert scene_exit_code(state.doc) == 24
    state.doc["islands_failed"] = [{"id": "c", "reason": "boom"}]
    assert scene_exit_code(state.doc) == 21
