"""The independent room judge (tests/room_judge.py) on hand-made dumps: a tidy room is judged
against itself (a member the designer stood past the facing tolerance passes when left as
designed, and fails when the run turned it further), a disordered room by the tolerance; an
ambiguous member stands right at either of its two anchors, any other member at its own."""
from __future__ import annotations

import math

import numpy as np

from tests.room_judge import FACING_TOL_DEG, judge_scene

BOX_TRIS = np.array([[0, 1, 2], [0, 2, 3], [4, 5, 6], [4, 6, 7], [0, 1, 5], [0, 5, 4],
                     [1, 2, 6], [1, 6, 5], [2, 3, 7], [2, 7, 6], [3, 0, 4], [3, 4, 7]])


def _box(cx: float, cy: float, sx: float, sy: float, h: float, yaw_deg: float
         ) -> dict[str, np.ndarray]:
    t = math.radians(yaw_deg)
    rot = np.array([[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]])
    local = np.array([[-sx, -sy], [sx, -sy], [sx, sy], [-sx, sy]]) / 2
    xy = local @ rot.T + [cx, cy]
    verts = np.array([[*p, z] for z in (0.0, h) for p in xy])
    m = np.eye(4)
    m[:2, :2] = rot
    m[:2, 3] = [cx, cy]
    return {"verts": verts, "tris": BOX_TRIS, "matrix": m}


def _dump(chair_yaw: float) -> dict[str, np.ndarray]:
    # a 1.2 x 0.8 m table at the origin, a chair 0.1 m off its +y edge; the chair's front is
    # local -y, so yaw 0 faces the table square
    out: dict[str, np.ndarray] = {}
    for name, b in (("table", _box(0, 0, 1.2, 0.8, 0.75, 0)),
                    ("chair", _box(0, 0.7, 0.45, 0.45, 0.9, chair_yaw))):
        for k, v in b.items():
            out[f"{name}|{k}"] = v
    return out


def _truth(state: str) -> dict:
    return {"state": state, "fronts": {"chair": [0.0, -1.0], "table": [0.0, -1.0]},
            "groups": {"g": {"anchor": "table", "members": ["chair"],
                             "spec": {"anchor_role": "table"}}}}


def test_a_tidy_member_left_as_designed_past_the_tolerance_passes() -> None:
    yaw = FACING_TOL_DEG + 1.3   # the designer's own 26.3 deg
    res = judge_scene(_truth("tidy"), _dump(yaw), _dump(yaw))
    assert res["groups"]["g"] == {"pass": True, "faults": []}


def test_a_tidy_member_turned_further_by_the_run_fails() -> None:
    yaw = FACING_TOL_DEG + 1.3
    res = judge_scene(_truth("tidy"), _dump(yaw + 10.0), _dump(yaw))
    faults = res["groups"]["g"]["faults"]
    assert not res["groups"]["g"]["pass"]
    assert any("facing 36.3 deg" in f for f in faults), faults
    assert res["moved"] and res["moved"][0]["name"] == "chair"


def test_a_disordered_member_past_the_tolerance_fails_whatever_it_stood_at() -> None:
    yaw = FACING_TOL_DEG + 1.3
    res = judge_scene(_truth("disordered"), _dump(yaw), _dump(yaw))
    assert not res["groups"]["g"]["pass"]
    assert any("facing 26.3 deg" in f for f in res["groups"]["g"]["faults"])


def test_a_member_within_the_tolerance_passes_disordered_too() -> None:
    res = judge_scene(_truth("disordered"), _dump(10.0), _dump(40.0))
    assert res["groups"]["g"]["pass"], res["groups"]["g"]["faults"]


def _cafe(chair_y: float) -> dict[str, np.ndarray]:
    # two 1.2 x 0.8 m tables 1.4 m apart along y (table_a's edges at y = +-0.4, table_b's at
    # 1.8 and 2.6; table_b's own chair beyond it), a 0.45 m chair centred at ``chair_y``
    out: dict[str, np.ndarray] = {}
    for name, b in (("table_a", _box(0, 0, 1.2, 0.8, 0.75, 0)),
                    ("table_b", _box(0, 2.2, 1.2, 0.8, 0.75, 0)),
                    ("chair_b", _box(0, 2.925, 0.45, 0.45, 0.9, 180)),
                    ("odd", _box(0, chair_y, 0.45, 0.45, 0.9, 90))):
        for k, v in b.items():
            out[f"{name}|{k}"] = v
    return out


def _cafe_truth(ambiguous: bool) -> dict:
    table = {"anchor_role": "table"}
    return {"state": "disordered",
            "fronts": {"odd": [0.0, -1.0], "chair_b": [0.0, -1.0], "table_a": None,
                       "table_b": None},
            "groups": {"a": {"anchor": "table_a", "members": ["odd"],
                             "ambiguous": ["odd"] if ambiguous else [], "spec": table},
                       "b": {"anchor": "table_b", "members": ["chair_b"], "spec": table}}}


def test_an_ambiguous_member_stands_right_at_either_of_its_anchors_and_no_further() -> None:
    # 0.10 m from table_b's -y edge, 0.85 m out from table_a's +y edge
    at_b = judge_scene(_cafe_truth(True), _cafe(1.475), _cafe(0.8))
    assert at_b["groups"]["a"]["pass"], at_b["groups"]["a"]["faults"]
    # the same chair listed as table_a's own (not ambiguous): 0.85 m out from it
    own = judge_scene(_cafe_truth(False), _cafe(1.475), _cafe(0.8))
    assert not own["groups"]["a"]["pass"]
    assert any("odd: gap 0.85 m" in f for f in own["groups"]["a"]["faults"]), own
    # 0.8 m past table_b's far edge: near neither
    far = judge_scene(_cafe_truth(True), _cafe(2.6 + 0.8 + 0.225), _cafe(0.8))
    assert not far["groups"]["a"]["pass"]
    assert any(f.startswith("odd: gap") for f in far["groups"]["a"]["faults"]), far
