"""Swivel chairs whose five-spoke base stands at an angle to the seat (issue 32, deliverable 6):
the front is the seat and backrest's, or ``undetermined`` - never a confident front off by
more - and a group holding such a chair is reviewed ``uncertain`` for its facing.

The hard case is a tub chair: a round seat under a backrest that wraps round it (the body's
minimum-area rectangle lies at any angle) with a height lever that breaks the sagittal
mirror plane. Before the fix its front came out 19-27 deg off at confidence 0.7 (the
rectangle's side taken for the front). Pure (no Blender); every chair is built here
(``fixtures.parametric.swivel_chair``, faces -Y before posing), so the truth is by
construction, never read from the detector.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from fixtures import parametric as par
from fixtures import specs
from island_tools.measure import forward_axis as fa
from island_tools.measure.forward_axis import detect_forward_axis, forward_axes_document

TOLERANCE_DEG = 5.0
# (star_deg, seed, lever, roundness, curve_r, segments, yaw): tub chairs whose front the
# detector before this fix put 19-27 deg off at confidence 0.7
WRONG_BEFORE = [(0.46, 14, True, 0.91, 0.24, 96, 106.8), (6.85, 14, True, 0.96, 0.26, 96, 170.5),
                (34.74, 21, True, 0.91, 0.30, 96, 144.6), (6.87, 14, True, 0.92, 0.32, 48, 165.6),
                (29.58, 21, True, 0.95, 0.31, 48, 227.2)]


def _error(axis: tuple[float, float] | None, yaw: float) -> float | None:
    """Degrees between a found front and the chair's true one (-Y turned by ``yaw``)."""
    if axis is None:
        return None
    truth = np.array([math.sin(math.radians(yaw)), -math.cos(math.radians(yaw))])
    return math.degrees(math.acos(max(-1.0, min(1.0, float(np.dot(axis, truth))))))


def _tub(star: float, seed: int, lever: bool, roundness: float, curve_r: float,
         segments: int = 96, arms: bool = False) -> tuple[np.ndarray, np.ndarray]:
    return par.swivel_chair(star_deg=star, seed=seed, arms=arms, lever=lever,
                            roundness=roundness, curve_r=curve_r, segments=segments)


@pytest.mark.parametrize("case", WRONG_BEFORE)
def test_a_tub_chair_front_25_deg_off_before_is_right_or_undetermined(case: tuple) -> None:
    star, seed, lever, roundness, curve_r, segments, yaw = case
    v, f = _tub(star, seed, lever, roundness, curve_r, segments)
    r = detect_forward_axis(par._yawed(v, yaw), f)
    err = _error(r.axis_local, yaw)
    assert err is None or err <= TOLERANCE_DEG, (r.status, err, r.confidence)
    if r.status == "undetermined":
        assert r.axis_local is None and "no mirror plane" in r.detail["reason"]


@pytest.mark.parametrize("seed", range(2))
def test_tub_chairs_over_any_base_angle_are_never_confidently_off(seed: int) -> None:
    """Round seats under wrapping backrests, with and without a lever and arms, bases turned
    0-36 deg (a five-spoke base repeats every 72) at any yaw."""
    rng = np.random.default_rng(100 + seed)
    found = 0
    for k in range(6):
        yaw = float(rng.uniform(0.0, 360.0))
        v, f = _tub(float(rng.uniform(0.0, 36.0)), int(rng.integers(0, 30)), bool(k % 2),
                    float(rng.uniform(0.9, 1.0)), float(rng.uniform(0.24, 0.32)),
                    int(rng.choice([48, 96])), arms=bool(k % 3 == 0))
        r = detect_forward_axis(par._yawed(v, yaw), f)
        err = _error(r.axis_local, yaw)
        assert err is None or err <= TOLERANCE_DEG, (k, yaw, r.status, err, r.confidence)
        found += err is not None
    assert found >= 3     # most are read right, not all called undetermined


def test_the_base_does_not_vote_for_the_front() -> None:
    """One seat and backrest over a base turned 0-36 deg: the same front every time."""
    for yaw in (23.0, 131.0):
        errs = []
        for star in np.linspace(0.0, 36.0, 5):
            v, f = par.swivel_chair(star_deg=float(star), seed=3, arms=True, lever=False,
                                    roundness=0.5, curve_r=0.6, star_r=0.38)
            r = detect_forward_axis(par._yawed(v, yaw), f)
            errs.append(_error(r.axis_local, yaw))
        assert all(e is not None and e <= 1.0 for e in errs), (yaw, errs)


@pytest.mark.parametrize("yaw", [16.8, 106.8])
def test_the_mirror_search_ignores_the_base_and_a_lever(yaw: float) -> None:
    """The plane search over the top view finds the seat's sagittal plane (mod 90 deg)
    within 1.5 deg, whatever the base and a lever sticking out on one side do."""
    for star in (0.0, 20.0, 34.0):
        v, f = _tub(star, 14, True, 0.91, 0.24)
        angles = fa._mirror_search_angles(par._yawed(v, yaw), f)
        off = [abs((math.degrees(a) - yaw + 45.0) % 90.0 - 45.0) for a in angles]
        assert angles and min(off) <= 1.5, (star, [round(math.degrees(a), 2) for a in angles])


def test_a_desk_chair_of_undetermined_front_makes_its_facing_uncertain() -> None:
    """The path propose -> run -> review rests on: a member whose front the mesh does not
    settle is reviewed ``uncertain`` for its facing (with an open unknown asking for the
    axis), never passed; the same group with a chair whose front is found passes facing."""
    from island_tools.measure.geometry import GeometryContext
    from island_tools.scene import verify

    arr = specs.arrange("desk_chair", "correct")
    target = arr.target_spec()
    (chair,) = arr.members

    def review(meshes: dict) -> dict:
        axes = forward_axes_document(meshes, arr.anchor, {})
        geometry = GeometryContext(meshes, arr.anchor, axes, {}).compute(
            arr.canonical, target, 0)
        out = verify.review_group("g", geometry, target, axes, arr.members)
        return {"axes": axes, "items": {i["id"]: i for i in out["review_results"]},
                "review": out}

    found = review(arr.meshes)
    assert found["axes"]["members"][chair]["status"] == "front"
    assert found["items"][f"facing_{chair}"]["verdict"] == "pass"

    star, seed, lever, roundness, curve_r, segments, yaw = WRONG_BEFORE[0]
    v, f = _tub(star, seed, lever, roundness, curve_r, segments)
    # the tub chair at the desk chair's size, its local frame turned as in the hard case
    own = arr.meshes[chair][0]
    scale = float(np.ptp(own[:, 2])) / float(np.ptp(v[:, 2]))
    local = par._yawed(v, yaw) * scale
    local[:, :2] += (own[:, :2].min(axis=0) + own[:, :2].max(axis=0)) / 2 - (
        local[:, :2].min(axis=0) + local[:, :2].max(axis=0)) / 2
    local[:, 2] += float(own[:, 2].min()) - float(local[:, 2].min())
    meshes = {**arr.meshes, chair: (local, f)}
    got = review(meshes)
    assert got["axes"]["members"][chair]["status"] == "undetermined"
    assert got["items"][f"object_{chair}"]["verdict"] == "uncertain"
    assert "could not be determined" in got["items"][f"object_{chair}"]["reason"]
    assert got["items"][f"facing_{chair}"]["verdict"] == "uncertain"
    assert any(u["kind"] == "forward_axis" and u["target_id"] == chair
               for u in got["review"]["new_unknowns"])


def test_a_tub_chair_of_undetermined_front_is_still_its_desks_member() -> None:
    """Membership does not rest on the front: the tub chair before a desk, turned toward
    it or away, is the desk's member; its facing is then left to the review (above)."""
    from island_tools.measure import frames
    from island_tools.scene.furniture import UnitInput
    from island_tools.scene.propose import propose_units

    desk = par.generate("desk", 4)
    dv, df = np.asarray(desk.vertices, float), np.asarray(desk.faces, np.int64)
    star, seed, lever, roundness, curve_r, segments, yaw = WRONG_BEFORE[0]
    v, f = _tub(star, seed, lever, roundness, curve_r, segments)
    local = par._yawed(v, yaw)           # the hard case's local frame
    assert detect_forward_axis(local, f).status == "undetermined"
    gap = float(dv[:, 1].min()) - 0.45
    for turn in (180.0, 0.0):            # facing the desk (+Y), then turned away
        # world yaw so that the chair's true front (-Y turned by ``yaw``) ends at -Y, then
        # ``turn`` more
        chair = UnitInput("Object_2", frames.translation((0.0, gap, 0.0))
                          @ frames.rot_z(-yaw + turn), local, np.asarray(f, np.int64))
        doc = propose_units({"Object_1": UnitInput("Object_1", np.eye(4), dv, df),
                             "Object_2": chair})
        (g,) = doc["groups"]
        assert g["anchor"] == "Object_1" and g["members"] == ["Object_2"], turn
