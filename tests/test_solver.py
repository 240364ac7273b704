"""Tier 1: the solver against the real geometry definitions, no Blender.

Each iteration: ``Solver.decide`` -> the adapter's schema and policy checks (every decision
must be one the adapter accepts) -> poses updated with ``frames.apply_member_delta`` (what
iter_step applies) -> ``GeometryContext.compute`` (what geometry.json reports). The loop
stops as the adapter's would: an honoured ``converged`` from iteration 5 on.
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from fixtures import specs
from island_tools import review
from island_tools.measure import frames
from island_tools.measure.forward_axis import forward_axes_document
from island_tools.measure.geometry import SLOT_GAP_M, GeometryContext
from island_tools.policy import MIN_ITER, check_policy
from island_tools.scene.verify import review_group
from island_tools.schemas import Metadata, parse_target_spec, parse_transforms
from island_tools.solver import Solver, min_cost_assignment, parse_free_quotas, parse_mixed_facing


@functools.cache
def arrangement(fixture: str, variant: str) -> specs.Arrangement:
    return specs.arrange(fixture, variant)


@dataclass
class Run:
    geometry: dict[str, Any]
    iters: int
    nonempty: list[int]
    new_penetrations: int
    decisions: list[dict[str, Any]] = field(default_factory=list)
    review_args: tuple[dict, dict, list[str]] = ({}, {}, [])   # target spec, axes, members

    @property
    def quality(self) -> dict[str, Any]:
        """The one verdict (``verify.review_group``, as ``review.review_island`` gives it)
        with the figures beside it; ``passed`` is a ``pass`` verdict."""
        target, axes, members = self.review_args
        rev = review_group("g", self.geometry, target, axes, members)
        verdict = rev["summary"]["verdict"]
        return {**review.figures(self.geometry), "verdict": verdict,
                "passed": verdict == "pass", "summary": rev["summary"],
                "failing": [i["reason"] for i in rev["review_results"]
                            if i["verdict"] == "fail"]}


def simulate(fixture: str, variant: str, spec: dict[str, Any] | None = None, first: int = 1,
             max_iter: int = 20) -> Run:
    arr = arrangement(fixture, variant)
    target = {**arr.target_spec(), **(spec or {})}
    overrides = {n: p["forward_axis"] for n, p in specs.member_props(fixture).items()
                 if "forward_axis" in p}
    axes = forward_axes_document(arr.meshes, arr.anchor, overrides)
    metadata = Metadata(arr.anchor, tuple(arr.names), np.eye(4), np.eye(4), arr.canonical)
    return run_decisions(arr.meshes, arr.anchor, axes, target, metadata, dict(arr.canonical),
                         range(first, max_iter + 1))


def run_decisions(meshes: dict, anchor: str, axes: dict, target: dict[str, Any],
                  metadata: Metadata, poses: dict, iters: range) -> Run:
    """The solver's loop as the adapter runs it: every decision through the contract's
    parse and magnitude-policy checks, poses moved as the worker moves them."""
    context = GeometryContext(meshes, anchor, axes)
    solver = Solver(meshes, anchor, axes, target)
    members = [n for n in metadata.members if n != anchor]
    geometry = context.compute(poses, target, 0)
    run = Run(geometry, 0, [], 0, review_args=(target, axes, members))
    for n in iters:
        decision = solver.decide(poses, geometry, n)
        run.decisions.append(decision)
        doc = {"iter": n, "members": decision["members"], "converged": decision["converged"],
               "_island_meta": {"model": "solver", "image_sha256": "0" * 64,
                                "generated_by": "test", "mode": "island_iter", "iter": n,
                                "timestamp_utc": "2026-01-01T00:00:00Z"}}
        transforms = parse_transforms(doc, "transforms.json", n, metadata)
        check_policy(transforms, n, len(members), geometry, "transforms.json")
        for name, delta in decision["members"].items():
            pivot = frames.footprint_centre_local(meshes[name][0])
            poses[name] = frames.apply_member_delta(poses[name], delta["delta_xyz"],
                                                    delta["delta_yaw_deg"], pivot)
        before = geometry["group"]["penetration_pairs"]
        geometry = context.compute(poses, target, n)
        run.new_penetrations += geometry["group"]["penetration_pairs"] > before
        run.geometry, run.iters = geometry, n
        if decision["members"]:
            run.nonempty.append(n)
        if decision["converged"] and n >= MIN_ITER:
            break
    return run


@pytest.mark.parametrize("fixture,variant",
                         [c for c in specs.all_cases() if c[1] != "correct"],
                         ids=[f"{f}__{v}" for f, v in specs.all_cases() if v != "correct"])
def test_every_perturbed_fixture_converges_by_min_iter(fixture: str, variant: str) -> None:
    run = simulate(fixture, variant)
    q = run.quality
    assert q["passed"], q
    assert run.iters == MIN_ITER and run.decisions[-1]["converged"]
    assert q["facing_error_max_deg"] <= 0.01 and q["clearance_error_max_m"] <= 1e-6
    assert q["spacing"] <= 1e-5 and q["penetration_pairs"] == 0
    assert run.new_penetrations == 0
    # One coordinated pattern-phase action fixes everything but a 1.35 m pull-out.
    assert run.nonempty == ([1, 2] if (fixture, variant) == ("tv_row_3", "pushed_in") else [1])


def _yaw(m: np.ndarray) -> float:
    return math.atan2(m[1, 0], m[0, 0])


def _bbox_centre(verts: np.ndarray, pose: np.ndarray) -> np.ndarray:
    w = verts @ pose[:3, :3].T + pose[:3, 3]
    return (w[:, :2].min(axis=0) + w[:, :2].max(axis=0)) / 2.0


@pytest.mark.parametrize("variant", ["turned_90", "facing_away", "bunched"])
def test_seats_far_beside_a_tv_stand_end_up_facing_its_screen(variant: str) -> None:
    """Near the stand (clearance 0.3 m) the row's end chairs stand so far beside it that
    square to its front they would see the screen 30 deg and more from the side: after the
    run every chair faces the stand's centre within 25 deg (the independent judge's line),
    measured here from the final poses and the chairs' facing in the fixture's correct
    layout (square to the -y edge), not from geometry.json."""
    spec = {"clearance_m": 0.3}
    arr, correct = arrangement("tv_row_3", variant), arrangement("tv_row_3", "correct")
    target = {**arr.target_spec(), **spec}
    overrides = {n: p["forward_axis"] for n, p in specs.member_props("tv_row_3").items()
                 if "forward_axis" in p}
    axes = forward_axes_document(arr.meshes, arr.anchor, overrides)
    metadata = Metadata(arr.anchor, tuple(arr.names), np.eye(4), np.eye(4), arr.canonical)
    poses = dict(arr.canonical)
    run = run_decisions(arr.meshes, arr.anchor, axes, target, metadata, poses, range(1, 21))
    assert run.quality["passed"], run.quality["failing"]
    centre = _bbox_centre(arr.meshes[arr.anchor][0], poses[arr.anchor])
    widest = 0.0
    for name in arr.names[1:]:
        verts = arr.meshes[name][0]
        # in the correct layout a chair faces +y (the row stands on the stand's -y side)
        yaw = _yaw(poses[name]) - _yaw(correct.canonical[name]) + math.pi / 2.0
        forward = np.array([math.cos(yaw), math.sin(yaw)])
        square_err = math.degrees(math.acos(np.clip(forward @ [0.0, 1.0], -1, 1)))
        to_screen = centre - _bbox_centre(verts, poses[name])
        err = math.degrees(math.acos(np.clip(
            forward @ to_screen / np.linalg.norm(to_screen), -1, 1)))
        assert err <= 25.0, (name, err, square_err)
        side = math.degrees(math.atan2(abs(to_screen[0]), abs(to_screen[1])))
        widest = max(widest, side)
    assert widest > 30.0   # the case bites: square, an end chair would miss the line


def test_a_correct_layout_gets_verification_moves_in_iter_1_then_converges() -> None:
    run = simulate("long_table_5", "correct")
    first = run.decisions[0]["members"]
    assert len(first) == 3 and all(max(map(abs, d["delta_xyz"])) == pytest.approx(0.01)
                                   for d in first.values())
    assert run.quality["passed"] and run.iters == MIN_ITER and run.nonempty == [1, 2]


def test_yaw_targets_are_per_member_never_one_delta_for_all() -> None:
    yaws = {name: d["delta_yaw_deg"]
            for name, d in simulate("long_table_6", "turned_90").decisions[0]["members"].items()}
    assert sorted({round(y) for y in yaws.values()}) == [-90, 90]


PATTERN_CASES = [
    # (pattern, fixture, variant, target_spec overrides)
    ("row", "tv_row_3", "bunched", {}),
    ("2+2+1", "long_table_5", "pushed_in", {}),
    ("2+2+1+1", "long_table_6", "too_far", {}),
    ("ring", "round_table_6", "bunched", {}),
    ("L", "long_table_6", "turned_90", {"pattern": "L"}),
    ("cluster", "long_table_5", "bunched", {"pattern": "cluster"}),
    ("free", "long_table_5", "facing_away", {"pattern": "free",
                                             "free_note": "3 chairs on -y, 2 on +y"}),
    ("row_reassigned", "long_table_5", "turned_90", {"pattern": "row"}),
    ("ring_on_rect", "long_table_6", "too_far", {"pattern": "ring"}),
]


@pytest.mark.parametrize("pattern,fixture,variant,spec", PATTERN_CASES,
                         ids=[c[0] for c in PATTERN_CASES])
def test_every_pattern_converges(pattern: str, fixture: str, variant: str, spec: dict) -> None:
    run = simulate(fixture, variant, spec)
    q = run.quality
    if pattern == "cluster":   # the geometry cannot check 'cluster': uncertain, never a pass
        assert q["verdict"] == "uncertain" and q["summary"]["fail"] == 0, q
        assert any("cluster" in line for line in q["summary"]["not_measured"])
    else:
        assert q["passed"], q
    assert run.new_penetrations == 0
    counts = {e: c for e, c in q["edge_counts"].items() if c}
    # L: six chairs on a 1.93 x 1.03 table; 5 + 1 would overfill the long edge
    # (5 x (0.375 + 0.10) = 2.375 m > 1.93 m), 4 + 2 fits both edges by the slot rule
    expected = {"L": [2, 4], "free": [2, 3], "row_reassigned": [5]}.get(pattern)
    if expected:
        assert sorted(counts.values()) == expected
    if pattern == "free":
        assert counts == {"-y": 3, "+y": 2}
    if pattern == "cluster":   # nobody changes edge
        assert counts == {"+x": 1, "+y": 2, "-y": 2}


def test_t_pattern_builds_a_centre_line() -> None:
    run = simulate("long_table_5", "too_far", {"pattern": "T"})
    g = run.geometry
    assert g["group"]["pattern"]["match"] is True and run.new_penetrations == 0
    assert g["group"]["facing_error_max_deg"] <= 0.01
    members = sorted(g["members"].values(), key=lambda m: m["clearance_m"])
    assert members[0]["clearance_m"] == pytest.approx(0.10, abs=1e-6)
    # One behind the other on the edge's centre line; each step = a chair depth + SLOT_GAP_M.
    centre_x = g["anchor"]["centre"][0]
    assert all(m["footprint_centre"][0] == pytest.approx(centre_x, abs=1e-6) for m in members)
    steps = np.diff([m["clearance_m"] for m in members])
    assert np.all(steps > SLOT_GAP_M + 0.3)


@pytest.mark.parametrize("facing,expected", [
    ("away_from_anchor", lambda inward, fwd: -inward),
    ("parallel_to_anchor_long_axis", lambda inward, fwd: np.array([math.copysign(1, fwd[0]), 0])),
])
def test_facing_modes(facing: str, expected: Any) -> None:
    run = simulate("long_table_5", "turned_90", {"facing": facing})
    assert run.quality["passed"], run.quality
    for m in run.geometry["members"].values():
        edge = run.geometry["anchor"]["edges"][m["edge"]]
        fwd = np.array(m["forward_canonical"])
        np.testing.assert_allclose(fwd, expected(-np.array(edge["normal"]), fwd), atol=1e-6)


def test_mixed_facing_follows_the_note_and_keeps_unmentioned_yaws() -> None:
    note = "chair_1 faces away, chair_2 faces the table"
    run = simulate("long_table_5", "turned_90", {"facing": "mixed", "free_note": note})
    q = run.quality   # 'mixed' facing is prose: not measured, so uncertain, never a pass
    assert q["verdict"] == "uncertain" and q["summary"]["fail"] == 0, q
    arr = arrangement("long_table_5", "turned_90")
    geo = run.geometry["members"]

    def inward(name: str) -> np.ndarray:
        return -np.array(run.geometry["anchor"]["edges"][geo[name]["edge"]]["normal"])

    np.testing.assert_allclose(geo["chair_1"]["forward_canonical"], -inward("chair_1"), atol=1e-6)
    np.testing.assert_allclose(geo["chair_2"]["forward_canonical"], inward("chair_2"), atol=1e-6)
    assert geo["chair_3"]["yaw_deg"] == pytest.approx(frames.yaw_deg(arr.canonical["chair_3"]),
                                                      abs=1e-6)


def test_loose_spacing_sits_further_out_within_the_tolerance() -> None:
    run = simulate("long_table_5", "pushed_in", {"spacing": "loose"})
    clearances = [m["clearance_m"] for m in run.geometry["members"].values()]
    assert run.quality["passed"] and all(c == pytest.approx(0.12, abs=1e-6) for c in clearances)


def test_loose_spacing_keeps_members_already_in_order_where_they_stand() -> None:
    """Bunched on their edges at the clearance, facing the table: 'loose' sets no evenness,
    so nothing is wrong and nothing moves but the contract's 0.01 m verification nudges of
    iteration 1 (even spacing would slide them apart)."""
    def largest_move(run: Run) -> float:
        return max((max(map(abs, d["delta_xyz"])) for dec in run.decisions
                    for d in dec["members"].values()), default=0.0)

    run = simulate("long_table_5", "bunched", {"spacing": "loose"})
    assert run.quality["passed"] and largest_move(run) == pytest.approx(0.01)
    assert not any(d["delta_yaw_deg"] for dec in run.decisions for d in dec["members"].values())
    even = simulate("long_table_5", "bunched")
    assert even.quality["passed"] and largest_move(even) > 0.2


@pytest.mark.parametrize("fixture,first,limit,cap", [("long_table_6", 4, 3, 0.3),
                                                     ("tv_row_3", 11, 1, 0.05)])
def test_member_and_micro_phases_move_the_worst_few_within_caps(fixture: str, first: int,
                                                               limit: int, cap: float) -> None:
    run = simulate(fixture, "bunched", first=first, max_iter=first + 15)
    assert run.quality["passed"] and run.new_penetrations == 0
    for decision in run.decisions:
        assert len(decision["members"]) <= limit
        assert all(abs(v) <= cap for d in decision["members"].values() for v in d["delta_xyz"])


def test_penetrating_member_uses_the_exception_in_the_member_phase() -> None:
    run = simulate("tv_row_3", "pushed_in", first=4)   # 1.35 m to go, 0.3 m phase cap
    first = run.decisions[0]["members"]
    assert len(first) == 1 and max(abs(v) for v in next(iter(first.values()))["delta_xyz"]) > 0.3
    assert run.quality["passed"] and run.new_penetrations == 0


def test_hungarian_matches_brute_force() -> None:
    rng = np.random.default_rng(7)
    for n in (1, 2, 5, 7):
        for _ in range(5):
            cost = rng.random((n, n)) * 10
            pick = min_cost_assignment(cost)
            best = min(sum(cost[i, p[i]] for i in range(n))
                       for p in itertools.permutations(range(n)))
            assert sorted(pick) == list(range(n))
            assert sum(cost[i, j] for i, j in enumerate(pick)) == pytest.approx(best)


def test_note_parsers() -> None:
    names = ["chair_1", "chair_2", "chair_10"]
    assert parse_mixed_facing("chair_1 faces away; the others face the table", names) == {
        "chair_1": "away_from_anchor", "chair_2": "toward_anchor", "chair_10": "toward_anchor"}
    assert parse_mixed_facing("chair_10 parallel to the long axis", names) == {
        "chair_1": None, "chair_2": None, "chair_10": "parallel_to_anchor_long_axis"}
    assert parse_free_quotas("2 chairs on -y, 2 on +y, 1 at the +x end", 5) == {
        "-y": 2, "+y": 2, "+x": 1}
    assert parse_free_quotas("2 chairs on -y, 2 on +y", 5) is None   # does not add up
    assert parse_free_quotas("a loose cluster by the window", 3) is None


# --------------------------------------------------------------------------- regressions
# Groups of corpus furniture from the quality bench (scripts/bench.py --section quality),
# each a case the solver once got wrong: (anchor, its life-size scale, members as (asset,
# scale, start position, start yaw deg), target spec).
CORPUS_CASES = {
    # three chairs whose row fits only a long edge: the short edge nearest to them holds
    # the slots' centres 0.27 m past its ends (the chairs then face the edge across empty
    # space, not the table)
    "row_overfull_edge": ("infinigen/dining_table_TableDiningFactory_s2.glb", 1.0, [
        ("kenney-cco/chairCushion.glb", 0.6465516771842154,
         (-1.0232862669290268, -0.990432157112331, -0.0008590000215917826), 171.6428014607183),
        ("caysonverse/chairDesk.glb", 1.9271948711446039,
         (1.9702213487301363, -3.266037417721471, -0.0008590000215917826), -146.76067139353495),
        ("infinigen/dining_chair_ChairFactory_s4.glb", 1.0,
         (1.2080149909901294, 3.4515714566299973, 0.45729040331207216), -119.97021196144536),
    ], {"anchor_role": "long_table", "member_count": 3, "pattern": "row",
        "facing": "toward_anchor", "spacing": "tight", "clearance_m": 0.05}),
    # a T whose third chair is wedged between the other two in iter 1: its outward
    # verification nudge goes deeper into a neighbour, and a 2-member decision in the
    # 3-member pattern phase is refused by the adapter
    "t_wedged_member": ("infinigen/dining_table_TableDiningFactory_s2.glb", 1.0, [
        ("infinigen/office_chair_OfficeChairFactory_s1.glb", 1.0,
         (-0.20638350741249156, 1.1952484695832486, -0.0008147718144755345), -133.52390229508657),
        ("infinigen/office_chair_OfficeChairFactory_s1.glb", 1.0,
         (0.8736276280492238, 1.1425633192918827, -0.0008147718144755345), 0.0),
        ("infinigen/office_chair_OfficeChairFactory_s1.glb", 1.0,
         (0.30964257270579193, 0.9457478557436226, -0.0008147718144755345), 90.0),
    ], {"anchor_role": "long_table", "member_count": 3, "pattern": "T",
        "facing": "toward_anchor", "spacing": "even_along_each_edge", "clearance_m": 0.1}),
    # a desk chair 4 m behind the desk: after sliding down the desk's side at the transit
    # margin it rests ON the obstacle's boundary, where the path used to cut straight
    # through the desk (then back off onto the far lane, oscillating)
    "desk_chair_from_behind": ("caysonverse/desk.glb", 1.9510542907174955, [
        ("infinigen/office_chair_OfficeChairFactory_s10.glb", 1.0,
         (1.8052617008031007, 4.051959421611638, 1.5806817827979103e-05), -124.62793036628769),
    ], {"anchor_role": "desk", "member_count": 1, "pattern": "free",
        "free_note": "convention: desk: the members at the desk's front",
        "facing": "toward_anchor", "spacing": "even_along_each_edge", "clearance_m": 0.05,
        "layout": {"front": 1, "align": "centre", "centre_on": "footprint"}}),
    "armchair_from_behind_a_tv_stand": ("kenney-cco/cabinetTelevision.glb", 0.6117908539299968, [
        ("infinigen/armchair_ArmChairFactory_s1.glb", 1.0,
         (0.6532142260279187, 3.208249818026155, 0.0517108328640461), -89.38813332186692),
    ], {"anchor_role": "tv_stand", "member_count": 1, "pattern": "free",
        "free_note": "convention: tv stand: the seats before its front",
        "facing": "toward_anchor", "spacing": "even_along_each_edge", "clearance_m": 1.5,
        "layout": {"front": 1, "align": "centre", "centre_on": "seat"}}),
    # a coffee table 3.6 m behind a rounded sofa, 0.3 m before its front: 5.46 m of
    # max-norm travel against 5.55 m the caps allow by iter 19; the Euclidean-shortest path
    # (down the side, then along the front) needs more iterations than there are
    "coffee_table_from_behind_a_sofa": ("caysonverse/loungeSofaLong.glb", 1.826086923395529, [
        ("kenney-cco/tableCoffee.glb", 0.6296850844952397,
         (1.6895403319803597, 3.6404297196424182, 0.0), 63.493865814077246),
    ], {"anchor_role": "sofa", "member_count": 1, "pattern": "free",
        "free_note": "convention: sofa: the members before the sofa's front",
        "facing": "toward_anchor", "spacing": "even_along_each_edge", "clearance_m": 0.3,
        "layout": {"front": 1, "align": "centre", "centre_on": "seat"}}),
    # two armchairs behind a TV stand, one of them 3.8 m out to the side: matched by
    # straight-line distance through the stand, it gets the far slot, round the stand's
    # other end, 5.8 m of max-norm travel where the caps allow 5.55 m by iter 19
    "armchairs_behind_a_tv_stand": ("infinigen/tv_stand_TVStandFactory_s1.glb", 1.0, [
        ("infinigen/armchair_ArmChairFactory_s1.glb", 1.0,
         (-3.7891986800907977, 1.816396193248521, 0.0517108328640461), -18.484287297698664),
        ("infinigen/armchair_ArmChairFactory_s1.glb", 1.0,
         (0.2708794548360435, 3.5202967832420065, 0.0517108328640461), -97.43089939804331),
    ], {"anchor_role": "tv_stand", "member_count": 2, "pattern": "free",
        "free_note": "convention: tv stand: the seats before its front",
        "facing": "toward_anchor", "spacing": "even_along_each_edge", "clearance_m": 1.0,
        "layout": {"front": 2, "align": "centre", "centre_on": "seat"}}),
}


def corpus_loop(case: str, max_iter: int = 20) -> Run:
    """``simulate`` on a CORPUS_CASES group (every decision through the adapter's checks)."""
    from fixtures.assets import load_asset

    anchor_rel, anchor_scale, members, spec_doc = CORPUS_CASES[case]
    names = [f"m{i}" for i in range(len(members))]
    meshes = {"anchor": (load_asset(anchor_rel).vertices, load_asset(anchor_rel).faces)}
    poses = {"anchor": np.diag([anchor_scale, anchor_scale, anchor_scale, 1.0])}
    for name, (rel, scale, xyz, yaw) in zip(names, members):
        mesh = load_asset(rel)
        meshes[name] = (mesh.vertices, mesh.faces)
        poses[name] = frames.translation(list(xyz)) @ frames.rot_z(yaw) @ np.diag(
            [scale, scale, scale, 1.0])
    spec = parse_target_spec(spec_doc, "target_spec.json", len(names)).to_dict()
    axes = forward_axes_document(meshes, "anchor", {})
    metadata = Metadata("anchor", ("anchor", *names), np.eye(4), np.eye(4), dict(poses))
    return run_decisions(meshes, "anchor", axes, spec, metadata, poses, range(1, max_iter + 1))


def _converged(run: Run) -> bool:
    return bool(run.decisions and run.decisions[-1]["converged"] and run.iters >= MIN_ITER)


def test_a_row_takes_an_edge_that_holds_it_not_the_nearest_overfull_one() -> None:
    run = corpus_loop("row_overfull_edge")
    assert _converged(run) and run.quality["passed"], run.quality
    g = run.geometry
    (edge,) = {m["edge"] for m in g["members"].values()}
    assert g["anchor"]["edges"][edge]["role"] == "long"
    half = g["anchor"]["edges"][edge]["length_m"] / 2.0
    # every chair's centre in front of the edge, so it faces the table, not past its corner
    assert all(abs(m["slot_offset_m"]) <= half for m in g["members"].values())


def test_a_wedged_member_takes_a_sideways_verification_nudge() -> None:
    run = corpus_loop("t_wedged_member")   # check_policy raises on a 2-member iter 1
    assert len(run.decisions[0]["members"]) == 3
    g = run.geometry   # a T's column: only the first meets the clearance (test above)
    assert _converged(run) and g["group"]["pattern"]["match"] is True
    assert g["group"]["facing_error_max_deg"] <= 0.01 and run.new_penetrations == 0


@pytest.mark.parametrize("case,limit", [("desk_chair_from_behind", 14),
                                        ("armchair_from_behind_a_tv_stand", 11),
                                        ("coffee_table_from_behind_a_sofa", 19)])
def test_a_member_from_behind_the_anchor_reaches_the_front_in_time(case: str,
                                                                   limit: int) -> None:
    run = corpus_loop(case)
    assert _converged(run) and run.quality["passed"], (run.iters, run.quality)
    assert run.iters <= limit and run.new_penetrations == 0
    # never a step back: the path keeps the footprint off the anchor all the way
    assert all(m["clearance_m"] >= -0.005 for m in run.geometry["members"].values())


def test_members_are_matched_to_slots_by_their_way_round_the_anchor() -> None:
    run = corpus_loop("armchairs_behind_a_tv_stand")
    assert _converged(run) and run.quality["passed"], (run.iters, run.quality)
    assert run.new_penetrations == 0
    # the far armchair (start y = 1.8) takes the slot on its own side of the stand (+y)
    assert run.geometry["members"]["m0"]["footprint_centre"][1] > 0.0


def test_path_from_a_point_on_the_obstacle_boundary_goes_round_it() -> None:
    from island_tools.solver import _around, _crosses

    square = np.array([[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]])
    for a, b in (((1.0, 0.0), (-1.5, 0.0)),          # on a side, target behind the polygon
                 ((1.0, 0.3), (-1.0, -0.2)),         # both on the boundary
                 ((1.0, 1.0), (-1.2, -1.0))):        # on a corner
        path = _around(square, np.array(a), np.array(b))
        assert np.allclose(path[0], a) and np.allclose(path[-1], b)
        assert len(path) > 2
        assert not any(_crosses(square, p, q) for p, q in itertools.pairwise(path))


def test_path_round_an_obstacle_is_the_quickest_under_the_per_axis_cap() -> None:
    """Max-norm length is what the per-axis cap charges: of the two ways round, the one
    whose legs move both axes together wins even when it is longer in metres."""
    from island_tools.solver import _around, _crosses

    def linf(path: list[np.ndarray]) -> float:
        return float(sum(np.abs(q - p).max() for p, q in itertools.pairwise(path)))

    # a wide obstacle, a member up and to the right, its slot low on the left
    box = np.array([[-1.0, -0.4], [1.0, -0.4], [1.0, 0.4], [-1.0, 0.4]])
    a, b = np.array([1.2, 3.5]), np.array([-0.3, -0.6])
    path = _around(box, a, b)
    assert not any(_crosses(box, p, q) for p, q in itertools.pairwise(path))
    right = [a, box[2], box[1], b]      # Euclidean-shorter: down the right side
    left = [a, box[3], box[0], b]       # Euclidean-longer, but quicker in iterations
    euclid = [float(sum(np.linalg.norm(q - p) for p, q in itertools.pairwise(x)))
              for x in (right, left)]
    assert euclid[0] < euclid[1] and linf(left) < linf(right)
    assert linf(path) == pytest.approx(linf(left))


def test_height_band_from_local_extremes_equals_every_vertex_transformed() -> None:
    """``Solver._z_span`` maps the unit's local z extremes for an upright pose instead of
    transforming every vertex; the floats must be the very ones the full transform gives
    (a yaw, a scale, a mirror, a height), and a tilted pose takes the full transform."""
    rng = np.random.default_rng(8)
    verts = rng.uniform(-0.5, 0.9, (3000, 3))
    faces = rng.integers(0, 3000, (5000, 3))
    spec = {"pattern": "free", "facing": "toward_anchor", "clearance_m": 0.1,
            "spacing": "even"}
    solver = Solver({"t": (verts, faces), "c": (verts * 0.5, faces)}, "t", {"members": {}},
                    spec)
    for yaw, scale, z in [(0.0, 1.0, 0.0), (37.0, 1.0, 0.25), (-121.5, 0.01, -3.7),
                          (90.0, -1.0, 1e-9), (200.0, 2.5, 12.0)]:
        c, s = math.cos(math.radians(yaw)), math.sin(math.radians(yaw))
        pose = np.eye(4)
        pose[:3, :3] = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) * scale
        pose[:3, 3] = [rng.normal(), rng.normal(), z]
        for name, v in (("t", verts), ("c", verts * 0.5)):
            world_z = (v @ pose[:3, :3].T + pose[:3, 3])[:, 2]
            assert solver._z_span(name, pose) == (world_z.min(), world_z.max())
    tilted = np.eye(4)
    tilted[:3, :3] = [[1.0, 0.0, 0.0], [0.0, math.cos(0.2), -math.sin(0.2)],
                      [0.0, math.sin(0.2), math.cos(0.2)]]
    world_z = (verts @ tilted[:3, :3].T)[:, 2]
    assert solver._z_span("t", tilted) == (world_z.min(), world_z.max())


@pytest.mark.parametrize("fixture,variant", [("long_table_6", "bunched"),
                                             ("round_table_6", "facing_away")])
def test_a_solver_reusing_its_last_targets_decides_as_a_fresh_one(fixture: str,
                                                                 variant: str) -> None:
    """A quiet iteration repeats the last state, and the solver keeps that state's targets
    (``_last_targets``): every decision of a whole run must equal a fresh solver's."""
    arr = arrangement(fixture, variant)
    overrides = {n: p["forward_axis"] for n, p in specs.member_props(fixture).items()
                 if "forward_axis" in p}
    axes = forward_axes_document(arr.meshes, arr.anchor, overrides)
    metadata = Metadata(arr.anchor, tuple(arr.names), np.eye(4), np.eye(4), arr.canonical)
    run = run_decisions(arr.meshes, arr.anchor, axes, arr.target_spec(), metadata,
                        dict(arr.canonical), range(1, 8))
    assert run.nonempty and len(run.decisions) >= 5 and not run.decisions[-1]["members"]
    context = GeometryContext(arr.meshes, arr.anchor, axes)
    poses = dict(arr.canonical)
    kept = Solver(arr.meshes, arr.anchor, axes, arr.target_spec())
    for n, want in enumerate(run.decisions, start=1):
        geometry = context.compute(poses, arr.target_spec(), n - 1)
        fresh = Solver(arr.meshes, arr.anchor, axes, arr.target_spec()).decide(
            poses, geometry, n)
        assert kept.decide(poses, geometry, n) == fresh == want
        for name, delta in want["members"].items():
            pivot = frames.footprint_centre_local(arr.meshes[name][0])
            poses[name] = frames.apply_member_delta(poses[name], delta["delta_xyz"],
                                                    delta["delta_yaw_deg"], pivot)
