"""The review of a T: one column of members at the middle of a long edge, the first at the
clearance, the others behind it. Hand-written geometry documents (the fields
island_tools.measure.geometry writes), judged against numbers set here."""
from __future__ import annotations

from typing import Any

from island_tools.scene.verify import review_group, violation_score

SPEC = {"anchor_role": "long_table", "member_count": 3, "pattern": "T",
        "facing": "toward_anchor", "spacing": "even_along_each_edge", "clearance_m": 0.10}
AXES = {"members": {f"c{i}": {"axis_local": [0.0, -1.0], "method": "mirror_relief",
                              "confidence": 1.0, "status": "front",
                              "symmetry": {"order": 1, "confidence": 1.0,
                                           "reference_axis_local": [0.0, -1.0]}}
                    for i in range(3)}}


def _geometry(clearances: list[float], offset_m: float) -> dict[str, Any]:
    members = {f"c{i}": {"facing_error_deg": 1.0, "facing_note": None, "clearance_m": c,
                         "clearance_error_m": c - SPEC["clearance_m"], "penetrations": {},
                         "obstacle_penetrations": {}, "forward_canonical": [0.0, -1.0]}
               for i, c in enumerate(clearances)}
    return {"members": members, "anchor": {"id": "table"},
            "group": {"pattern": {"expected": {"nonempty_edges": 1, "edge_role": "long",
                                               "max_abs_offset_m": 0.3},
                                  "observed": {"nonempty_edges": [["north", "long"]],
                                               "max_abs_offset_m": offset_m},
                                  "match": offset_m <= 0.3, "note": None},
                      "member_count": {"target": 3, "observed": 3, "match": True},
                      "spacing": {"mode": "edges", "max_deviation_m": 0.48,
                                  "per_edge_max_deviation_m": {"north": 0.48}},
                      "penetration_pairs": 0, "obstacle_penetrations": 0}}


def _items(review: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {i["id"]: i for i in review["review_results"]}


def test_a_well_made_column_passes() -> None:
    # first at 0.10 m, the next two 0.55 m and 1.00 m out: behind it, not "too far"
    geometry = _geometry([0.10, 0.55, 1.00], 0.02)
    review = review_group("g", geometry, SPEC, AXES, ["c0", "c1", "c2"])
    items = _items(review)
    assert review["summary"]["verdict"] == "pass", [
        i["reason"] for i in review["review_results"] if i["verdict"] != "pass"]
    assert "behind the T column's first member" in items["clearance_c2"]["reason"]
    assert "centred" in items["spacing"]["reason"]
    assert violation_score(geometry, SPEC) < 0.1


def test_a_follower_too_close_and_an_off_centre_column_fail() -> None:
    geometry = _geometry([0.10, 0.02, 1.00], 0.02)     # c1 pushed into the anchor's margin
    geometry["members"]["c1"]["clearance_m"] = 0.02
    geometry["members"]["c1"]["clearance_error_m"] = -0.08
    # the first (nearest) member is now c1: c0 stands behind it, c1 misses the clearance
    items = _items(review_group("g", geometry, SPEC, AXES, ["c0", "c1", "c2"]))
    assert items["clearance_c1"]["verdict"] == "fail"
    off = _items(review_group("g", _geometry([0.10, 0.55, 1.00], 0.45), SPEC, AXES,
                              ["c0", "c1", "c2"]))
    assert off["spacing"]["verdict"] == "fail" and off["pattern"]["verdict"] == "fail"


def test_a_row_is_still_judged_on_every_member() -> None:
    spec = {**SPEC, "pattern": "row"}
    items = _items(review_group("g", _geometry([0.10, 0.55, 1.00], 0.02), spec, AXES,
                                ["c0", "c1", "c2"]))
    assert items["clearance_c2"]["verdict"] == "fail"        # 0.90 m too far on a row
