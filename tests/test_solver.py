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
from island_tools import frames
from island_tools.adapter import MIN_ITER, check_policy, quality
from island_tools.forward_axis import forward_axes_document
from island_tools.geometry import SLOT_GAP_M, GeometryContext
from island_tools.schemas import Metadata, parse_transforms
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

    @property
    def quality(self) -> dict[str, Any]:
        return quality(self.geometry)


def simulate(fixture: str, variant: str, spec: dict[str, Any] | None = None, first: int = 1,
             max_iter: int = 20) -> Run:
    arr = arrangement(fixture, variant)
    target = {**arr.target_spec(), **(spec or {})}
    overrides = {n: p["forward_axis"] for n, p in specs.member_props(fixture).items()
                 if "forward_axis" in p}
    axes = forward_axes_document(arr.meshes, arr.anchor, overrides)
    context = GeometryContext(arr.meshes, arr.anchor, axes)
    solver = Solver(arr.meshes, arr.anchor, axes, target)
    metadata = Metadata(arr.anchor, tuple(arr.names), np.eye(4), np.eye(4), arr.canonical)
    poses = dict(arr.canonical)
    geometry = context.compute(poses, target, 0)
    run = Run(geometry, 0, [], 0)
    for n in range(first, max_iter + 1):
        decision = solver.decide(poses, geometry, n)
        run.decisions.append(decision)
        doc = {"iter": n, "members": decision["members"], "converged": decision["converged"],
               "_island_meta": {"model": "solver", "image_sha256": "0" * 64,
                                "generated_by": "test", "mode": "island_iter", "iter": n,
                                "timestamp_utc": "2026-01-01T00:00:00Z"}}
        transforms = parse_transforms(doc, "transforms.json", n, metadata)
        check_policy(transforms, n, len(arr.members), geometry, "transforms.json")
        for name, delta in decision["members"].items():
            pivot = frames.footprint_centre_local(arr.meshes[name][0])
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
    assert q["passed"] and run.new_penetrations == 0, q
    counts = {e: c for e, c in q["edge_counts"].items() if c}
    expected = {"L": [1, 5], "free": [2, 3], "row_reassigned": [5]}.get(pattern)
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
    assert run.quality["passed"]
    arr = arrangement("long_table_5", "turned_90")
    geo = run.geometry["members"]

    def inward(name: str) -> np.ndarray:
        return -np.array(run.geometry["anchor"]["edges"][geo[name]["edge"]]["normal"])

    np.testing.assert_allclose(geo["chair_1"]["forward_canonical"], -inward("chair_1"), atol=1e-6)
    np.testing.assert_allclose(geo["chair_2"]["forward_canonical"], inward("chair_2"), atol=1e-6)
    assert geo["chair_3"]["yaw_deg"] == pytest.approx(frames.yaw_deg(arr.canonical["chair_3"]),
                                                      abs=1e-6)


def test_loose_spacing_sits_further_out_within_the_tolerance() -> None:
    run = simulate("long_table_5", "bunched", {"spacing": "loose"})
    clearances = [m["clearance_m"] for m in run.geometry["members"].values()]
    assert run.quality["passed"] and all(c == pytest.approx(0.12, abs=1e-6) for c in clearances)


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
