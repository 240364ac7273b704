"""Verify one island from its measured geometry: review items, new unknowns, violation score.

Review items have seed 000's shape (``id``, ``verdict`` pass|fail|uncertain, ``reason``,
``item_kind`` object|constraint, ``target_id``, ``owner_id``, ``failure_family``,
``blocked_by``, ``confidence``, ``evidence``); ``evidence`` is an object of measured numbers.
Two passes, objects first:

* ``object_<member>``: present, forward axis known, not penetrating anything (the anchor,
  another member, or the island's fixed context: a wall, another group, a bystander);
* ``facing_<member>``, ``clearance_<member>``: blocked (uncertain, ``blocked_by`` =
  ``object_<member>``) unless that object review passed; an object review that is only
  uncertain (its front undetermined) blocks facing, not clearance (hull to hull). Facing is
  judged modulo the member's symmetry order (a 2- / 4-fold member on its error modulo
  180 / 90 degrees; a round or declared symmetric one passes as not applicable; one whose
  order was not measured is uncertain);
* ``pattern``, ``spacing``: group constraints, blocked by the object reviews of absent members
  (they only need positions).

Unknown first: a fact a check needs that is *missing* (a member whose front the mesh cannot
tell and nobody declared, a pattern the geometry cannot check) gives an ``uncertain`` item
plus an entry in ``new_unknowns`` instead of a fail. Thresholds and the violation score are
the constants below (documented in docs/SCENE_PIPELINE.md).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..measure.geometry import CLEARANCE_VIOLATION_TOL_M, DECLARED_SYMMETRIC_NOTE, front_status

FACING_TOL_DEG = 10.0
CLEARANCE_TOL_M = CLEARANCE_VIOLATION_TOL_M       # closer than target by more: fail
TOO_FAR_TOL_M = {"tight": 0.05, "loose": None}    # further than target by more: fail
TOO_FAR_DEFAULT_M = 0.25
SPACING_TOL_M = 0.05                              # max slot deviation along an edge
RING_GAP_CV_TOL = 0.05
# Violation score weights (units per point): see violation_score().
SCORE_FACING_DEG = 90.0
SCORE_CLEARANCE_M = 0.10
SCORE_SPACING_M = 0.10
SCORE_RING_CV = 0.10
SCORE_PENETRATION = 2.0
SCORE_PATTERN = 1.0

FAMILIES = {
    "absent": "subject_repair",
    "penetration": "layout_repair",
    "facing": "relation_repair",
    "clearance": "layout_repair",
    "spacing": "layout_repair",
    "pattern": "count_repair",
    "infeasible": "spec_repair",
}


def _r(x: float | None, nd: int = 6) -> float | None:
    return None if x is None else round(float(x), nd) + 0.0


def margin_confidence(value: float, threshold: float) -> float:
    """0.5 at the threshold, 1.0 once the value is a full threshold away from it."""
    if threshold <= 0:
        return 1.0
    return round(min(1.0, 0.5 + abs(value - threshold) / (2.0 * threshold)), 3)


def _item(id_: str, verdict: str, reason: str, kind: str, target: str, owner: str,
          family: str = "", blocked_by: str = "", confidence: float = 1.0,
          evidence: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"id": id_, "verdict": verdict, "reason": reason, "item_kind": kind,
            "target_id": target, "owner_id": owner,
            "failure_family": family if verdict != "pass" else "",
            "blocked_by": blocked_by, "confidence": confidence, "evidence": dict(evidence or {})}


def unknown_id(kind: str, target: str) -> str:
    return f"unknown_{kind}_{target}"


def _axis_entry(forward_axes: Mapping[str, Any], name: str) -> dict[str, Any]:
    entry = (forward_axes.get("members") or {}).get(name)
    return entry if isinstance(entry, dict) else {}


def too_far_tolerance(spacing: str) -> float | None:
    return TOO_FAR_TOL_M.get(spacing, TOO_FAR_DEFAULT_M)


def review_group(gid: str, geometry: Mapping[str, Any], target_spec: Mapping[str, Any],
                 forward_axes: Mapping[str, Any], expected_members: Iterable[str],
                 resolved: Mapping[str, Mapping[str, Any]] | None = None,
                 infeasible: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``verification.json`` body (without run bookkeeping) for one group.

    ``resolved``: unknown id -> its recorded resolution; a resolved unknown turns the check
    it blocked into "does not apply" instead of asking again.
    ``infeasible``: the solver's finding that the spec cannot be met without breaking a
    hard constraint (``{"reason": one line, "given_up": [...]}``, ``simple_refiner/
    infeasible.json``); with a reason it is the first item, ``group_infeasible``, a
    ``fail``, and the output's ``infeasible`` key carries it (None otherwise).
    """
    resolved = dict(resolved or {})
    measured = geometry.get("members", {})
    facing_rule = str(target_spec.get("facing", ""))
    spacing_rule = str(target_spec.get("spacing", ""))
    target_clearance = float(target_spec.get("clearance_m", 0.0))
    items: list[dict[str, Any]] = []
    unknowns: list[dict[str, Any]] = []
    object_verdict: dict[str, str] = {}
    absent: list[str] = []

    for name in expected_members:
        m = measured.get(name)
        oid = f"object_{name}"
        if m is None:
            absent.append(oid)
            items.append(_item(oid, "fail", f"'{name}' is not in the island", "object", name,
                               gid, FAMILIES["absent"], evidence={"present": False}))
            object_verdict[name] = "fail"
            continue
        axis = _axis_entry(forward_axes, name)
        evidence: dict[str, Any] = {
            "present": True, "forward_axis_local": axis.get("axis_local"),
            "forward_axis_method": axis.get("method"),
            "forward_axis_confidence": axis.get("confidence"),
            "penetrations_m": dict(m.get("penetrations") or {})}
        evidence["obstacle_penetrations_m"] = dict(m.get("obstacle_penetrations") or {})
        evidence["obstacle_clearance_m"] = m.get("obstacle_clearance_m")
        hits = {**(m.get("penetrations") or {}), **(m.get("obstacle_penetrations") or {})}
        if hits:
            worst = max(hits.values())
            others = ", ".join(sorted(hits))
            items.append(_item(oid, "fail", f"'{name}' penetrates {others} by up to "
                                            f"{worst:.3f} m", "object", name, gid,
                               FAMILIES["penetration"], evidence=evidence))
            object_verdict[name] = "fail"
            continue
        uid = unknown_id("forward_axis", name)
        status = front_status(axis)
        evidence["front_status"] = status
        if status == "undetermined" and facing_rule != "mixed" and uid not in resolved:
            items.append(_item(oid, "uncertain", f"the front of '{name}' could not be "
                                                 "determined from its mesh (detection "
                                                 f"confidence {axis.get('confidence')}) and no "
                                                 "override declares it: facing is not "
                                                 "measured; declare it with relation_graph"
                                                 f".json groups[].forward_axis.{name} or the "
                                                 "object's custom property forward_axis",
                               "object", name, gid,
                               FAMILIES["facing"], confidence=0.5, evidence=evidence))
            unknowns.append({
                "id": uid, "kind": "forward_axis", "owner_id": gid, "owner_kind": "group",
                "target_id": name, "review_id": oid, "status": "open",
                "question": f"Which local axis is the front of '{name}' (group '{gid}')? "
                            f"Mesh detection: {axis.get('method')} "
                            f"(confidence {axis.get('confidence')}). Answer with "
                            f"relation_graph.json groups[].forward_axis.{name} "
                            "(+X, -X, +Y, -Y, [x, y] or \"symmetric\"), or the object's "
                            "custom property forward_axis."})
            object_verdict[name] = "uncertain"
            continue
        if uid in resolved:
            evidence["forward_axis_resolution"] = resolved[uid]
        evidence["symmetry"] = axis.get("symmetry")
        evidence["facing_symmetry_order"] = m.get("facing_symmetry_order")
        front = {"front": "found", "symmetric": _symmetric_front(m, axis),
                 "undetermined": "not needed (facing is 'mixed')"}[status]
        if axis.get("method") == "override" and status == "front":
            front = "declared"
        items.append(_item(oid, "pass", f"'{name}' is present, its front is {front}, it "
                                        "penetrates nothing", "object", name, gid,
                           evidence=evidence))
        object_verdict[name] = "pass"

    column = t_column_followers(target_spec, measured)
    for name in expected_members:
        m = measured.get(name)
        oid = f"object_{name}"
        for check in ("facing", "clearance"):
            cid = f"{check}_{name}"
            # clearance is hull to hull: an undetermined front blocks facing only
            measurable = object_verdict.get(name) == "pass" or (
                check == "clearance" and object_verdict.get(name) == "uncertain")
            if (check == "facing" and m is not None and object_verdict.get(name) == "uncertain"
                    and m.get("facing_alignment_error_deg") is not None
                    and facing_rule != "mixed"):
                items.append(_alignment_item(cid, name, gid, m, facing_rule))
                continue
            if not measurable or m is None:
                items.append(_item(cid, "uncertain", f"blocked: the object review of '{name}' "
                                                     f"did not pass ({object_verdict[name]})",
                                   "constraint", name, gid, FAMILIES[check], oid, 0.5))
                continue
            if check == "facing":
                items.append(_facing_item(cid, name, gid, m, facing_rule,
                                          _axis_entry(forward_axes, name)))
            else:
                items.append(_clearance_item(cid, name, gid, m, target_clearance, spacing_rule,
                                             behind=name in column))

    group = geometry.get("group", {})
    blocked = ",".join(absent)
    pattern_uid = unknown_id("pattern", gid)
    if blocked:
        items.append(_item("pattern", "uncertain", "blocked: members are absent", "constraint",
                           gid, gid, FAMILIES["pattern"], blocked, 0.5))
        items.append(_item("spacing", "uncertain", "blocked: members are absent", "constraint",
                           gid, gid, FAMILIES["spacing"], blocked, 0.5))
    else:
        pattern_item = _pattern_item(gid, group, target_spec, resolved.get(pattern_uid))
        items.append(pattern_item)
        anchor_id = str((geometry.get("anchor") or {}).get("id") or gid)
        front_uid = unknown_id("forward_axis", anchor_id)
        if (pattern_item["verdict"] == "uncertain"
                and (group.get("pattern") or {}).get("needs") == "anchor_front"):
            if front_uid not in resolved:
                unknowns.append({
                    "id": front_uid, "kind": "forward_axis", "owner_id": gid,
                    "owner_kind": "group", "target_id": anchor_id, "review_id": "pattern",
                    "status": "open",
                    "question": f"Which local axis is the front of the anchor '{anchor_id}' "
                                f"(group '{gid}')? The layout is relative to it. Answer with "
                                f"relation_graph.json groups[].forward_axis.{anchor_id} (+X, "
                                "-X, +Y, -Y or [x, y]), or the object's custom property "
                                "forward_axis."})
        elif pattern_item["verdict"] == "uncertain":
            unknowns.append({
                "id": pattern_uid, "kind": "pattern", "owner_id": gid, "owner_kind": "group",
                "target_id": gid, "review_id": "pattern", "status": "open",
                "question": f"Pattern '{target_spec.get('pattern')}' of group '{gid}' cannot "
                            f"be checked ({group.get('pattern', {}).get('note')}). Which "
                            "checkable pattern should it be? Answer with relation_graph.json "
                            "groups[].relation.pattern."})
        items.append(_spacing_item(gid, group, measured, spacing_rule,
                                   str(target_spec.get("pattern", ""))))

    finding = None
    if infeasible and infeasible.get("reason"):
        finding = {"reason": str(infeasible["reason"]),
                   "given_up": [dict(g) for g in infeasible.get("given_up") or []]}
        items.insert(0, _item("group_infeasible", "fail", f"infeasible: {finding['reason']}",
                              "group", gid, gid, FAMILIES["infeasible"],
                              evidence={"given_up": finding["given_up"]}))
    counts = {v: sum(1 for i in items if i["verdict"] == v) for v in ("pass", "fail", "uncertain")}
    return {"group_id": gid, "review_results": items, "new_unknowns": unknowns,
            "infeasible": finding,
            "summary": {**counts, "total": len(items),
                        "pass_rate": round(counts["pass"] / len(items), 6) if items else 1.0,
                        "all_pass": counts["pass"] == len(items),
                        "verdict": group_verdict(counts),
                        "not_measured": not_measured(items)},
            "violation_score": violation_score(geometry, target_spec)}


def group_verdict(counts: Mapping[str, int]) -> str:
    """``fail`` if any review fails, else ``uncertain`` if any could not be measured, else
    ``pass``: a group is never a pass on a check that was not measured."""
    if counts.get("fail"):
        return "fail"
    return "uncertain" if counts.get("uncertain") else "pass"


def not_measured(items: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per uncertain review that blocks others or stands alone: what was not
    measured, naming the member, and what would resolve it."""
    out = []
    for i in items:
        if i["verdict"] != "uncertain" or i["blocked_by"]:
            continue
        out.append(f"{i['target_id']}: {i['reason']}")
    return out


def _declared(m: Mapping[str, Any], axis: Mapping[str, Any]) -> bool:
    return axis.get("method") == "override" or m.get("facing_note") == DECLARED_SYMMETRIC_NOTE


def _symmetric_front(m: Mapping[str, Any], axis: Mapping[str, Any]) -> str:
    """The object review's words for a symmetric member's front, by its symmetry order."""
    order = m.get("facing_symmetry_order")
    how = "declared" if _declared(m, axis) else "measured"
    if order in (2, 4):
        return (f"{how} symmetric of order {order} (facing checked modulo "
                f"{360 // int(order)} deg)")
    if order == "continuous":
        return ("declared symmetric (facing does not apply)" if how == "declared" else
                "measured round (continuous symmetry: facing does not apply)")
    return f"{how} symmetric with its symmetry order not measured (facing is not measured)"


def _facing_item(cid: str, name: str, gid: str, m: Mapping[str, Any], rule: str,
                 axis: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A front: pass within FACING_TOL_DEG of the target. A 2- or 4-fold symmetric member:
    the same on its error modulo 180 / 90 degrees. A round (continuous) or declared
    symmetric member: a pass where facing does not apply, saying which. Anything else
    without an error (symmetry order not measured, 'mixed', a centre on the anchor's, a
    vertical front) was not measured, so it is uncertain, never a pass."""
    err = m.get("facing_error_deg")
    order = m.get("facing_symmetry_order")
    modulus = m.get("facing_modulus_deg")
    ev = {"facing_error_deg": err, "forward_canonical": m.get("forward_canonical"),
          "facing_target": m.get("facing_target"), "rule": rule, "tolerance_deg": FACING_TOL_DEG,
          "symmetry_order": order, "modulus_deg": modulus,
          "reference_canonical": m.get("facing_reference_canonical")}
    if err is None:
        note = m.get("facing_note") or "no facing error was computed"
        if order == "continuous":
            why = ("declared symmetric: facing does not apply"
                   if _declared(m, axis or {}) else
                   "round piece (continuous symmetry): facing does not apply")
            return _item(cid, "pass", f"not applicable: {why}", "constraint", name, gid,
                         evidence={**ev, "applicable": False, "note": note})
        # symmetry order not measured, 'mixed' facing (prose in free_note), a centre on the
        # anchor's, a vertical front: facing was not measured, so it is not a pass
        return _item(cid, "uncertain", f"facing of '{name}' is not measured: {note}",
                     "constraint", name, gid, FAMILIES["facing"], confidence=0.5,
                     evidence={**ev, "applicable": None, "note": note})
    sym = ""
    if order in (2, 4) and modulus is not None:
        sym = f" modulo {float(modulus):g} deg (symmetric of order {order})"
    if err <= FACING_TOL_DEG:
        return _item(cid, "pass", f"'{name}' faces its target within {err:.2f} deg{sym}",
                     "constraint", name, gid, confidence=margin_confidence(err, FACING_TOL_DEG),
                     evidence=ev)
    return _item(cid, "fail", f"'{name}' is {err:.1f} deg off its {rule} target{sym}",
                 "constraint", name, gid, FAMILIES["facing"],
                 confidence=margin_confidence(err, FACING_TOL_DEG), evidence=ev)


def _alignment_item(cid: str, name: str, gid: str, m: Mapping[str, Any], rule: str
                    ) -> dict[str, Any]:
    """An undetermined front measured by its line (geometry's ``facing_alignment_error_deg``:
    its front line modulo 180 deg): turned further than FACING_TOL_DEG off it, it misses its
    target whichever way its front points, a fail; on it, which way it faces is still not
    known, uncertain (never a pass; blocked by the object's open front)."""
    err = float(m["facing_alignment_error_deg"])
    modulus = float(m.get("facing_alignment_modulus_deg") or 180.0)
    ev = {"facing_error_deg": None, "alignment_error_deg": err, "alignment_modulus_deg": modulus,
          "facing_target": m.get("facing_target"), "rule": rule, "tolerance_deg": FACING_TOL_DEG,
          "front": "undetermined"}
    if err > FACING_TOL_DEG:
        return _item(cid, "fail", f"'{name}' is {err:.1f} deg off its {rule} target whichever "
                                  f"way it faces (its front line measured modulo {modulus:g} "
                                  "deg; its front is undetermined)", "constraint", name, gid,
                     FAMILIES["facing"], confidence=margin_confidence(err, FACING_TOL_DEG),
                     evidence=ev)
    return _item(cid, "uncertain", f"'{name}' is square to its {rule} target within "
                                   f"{err:.2f} deg modulo {modulus:g} deg, but which way it "
                                   "faces is not measured: its front is undetermined",
                 "constraint", name, gid, FAMILIES["facing"], f"object_{name}", 0.5,
                 evidence=ev)


def t_column_followers(target_spec: Mapping[str, Any], measured: Mapping[str, Any]
                       ) -> set[str]:
    """The members of a T's column behind its first one (the member nearest the anchor):
    they stand ``SLOT_GAP_M`` behind each other, so only the first can meet the clearance
    and none of them has a slot along the edge."""
    if target_spec.get("pattern") != "T" or not measured:
        return set()
    first = min(measured, key=lambda n: float(measured[n].get("clearance_m") or 0.0))
    return set(measured) - {first}


def _clearance_item(cid: str, name: str, gid: str, m: Mapping[str, Any], target: float,
                    spacing_rule: str, behind: bool = False) -> dict[str, Any]:
    c = float(m["clearance_m"])
    err = float(m["clearance_error_m"])
    far = None if behind else too_far_tolerance(spacing_rule)
    ev = {"clearance_m": _r(c), "target_m": target, "clearance_error_m": _r(err),
          "too_close_tol_m": CLEARANCE_TOL_M, "too_far_tol_m": far, "t_column_behind": behind}
    if err < -CLEARANCE_TOL_M:
        return _item(cid, "fail", f"'{name}' is {-err:.3f} m closer to the anchor than the "
                                  f"{target:.2f} m clearance", "constraint", name, gid,
                     FAMILIES["clearance"], confidence=margin_confidence(-err, CLEARANCE_TOL_M),
                     evidence=ev)
    if far is not None and err > far:
        return _item(cid, "fail", f"'{name}' is {err:.3f} m further from the anchor than the "
                                  f"{target:.2f} m clearance", "constraint", name, gid,
                     FAMILIES["clearance"], confidence=margin_confidence(err, far), evidence=ev)
    limit = far if far is not None and err > 0 else CLEARANCE_TOL_M
    where = " (behind the T column's first member: only too close fails)" if behind else ""
    return _item(cid, "pass", f"clearance {c:.3f} m against a {target:.2f} m target{where}",
                 "constraint", name, gid, confidence=margin_confidence(abs(err), limit),
                 evidence=ev)


def _pattern_item(gid: str, group: Mapping[str, Any], spec: Mapping[str, Any],
                  resolution: Mapping[str, Any] | None) -> dict[str, Any]:
    pattern = group.get("pattern", {})
    count = group.get("member_count", {})
    ev = {"pattern": spec.get("pattern"), "expected": pattern.get("expected"),
          "observed": pattern.get("observed"), "match": pattern.get("match"),
          "note": pattern.get("note"), "edge_counts": group.get("edge_counts"),
          "member_count": count}
    if count and count.get("match") is False:
        return _item("pattern", "fail", f"{count.get('observed')} members, the spec expects "
                                        f"{count.get('target')}", "constraint", gid, gid,
                     FAMILIES["pattern"], evidence=ev)
    match = pattern.get("match")
    if match is True:
        return _item("pattern", "pass", f"pattern '{spec.get('pattern')}' matches",
                     "constraint", gid, gid, evidence=ev)
    if match is False:
        return _item("pattern", "fail", f"pattern '{spec.get('pattern')}' expected "
                                        f"{pattern.get('expected')}, observed "
                                        f"{pattern.get('observed')}", "constraint", gid, gid,
                     FAMILIES["pattern"], evidence=ev)
    if resolution is not None:
        return _item("pattern", "pass", f"not applicable: {resolution.get('note')}",
                     "constraint", gid, gid, evidence={**ev, "applicable": False,
                                                       "resolution": dict(resolution)})
    fix = ("declare the anchor's front with relation_graph.json groups[].forward_axis"
           if pattern.get("needs") == "anchor_front" else
           "declare a checkable pattern or a layout with relation_graph.json "
           "groups[].relation")
    return _item("pattern", "uncertain", f"pattern '{spec.get('pattern')}' cannot be checked: "
                                         f"{pattern.get('note')}; {fix}",
                 "constraint", gid, gid,
                 FAMILIES["pattern"], confidence=0.5, evidence=ev)


def _spacing_item(gid: str, group: Mapping[str, Any], measured: Mapping[str, Any], rule: str,
                  pattern: str = "") -> dict[str, Any]:
    spacing = group.get("spacing", {})
    ev: dict[str, Any] = {"rule": rule, "mode": spacing.get("mode"),
                          "max_deviation_m": spacing.get("max_deviation_m"),
                          "per_edge_max_deviation_m": spacing.get("per_edge_max_deviation_m"),
                          "ring_gap_cv": spacing.get("ring_gap_cv")}
    if rule == "loose":
        return _item("spacing", "pass", "not applicable: 'loose' sets no evenness or distance "
                                        "beyond the clearance", "constraint", gid, gid,
                     evidence={**ev, "applicable": False})
    if rule == "as_laid_out":
        # the proposer saw every member in order: their places along the edges are the
        # layout's; the pattern (which edges) and the clearance (both ways) still judge them
        return _item("spacing", "pass", "not applicable: 'as_laid_out' keeps the members' "
                                        "places along the edges (the pattern and the "
                                        "clearance still apply)", "constraint", gid, gid,
                     evidence={**ev, "applicable": False})
    if pattern == "T":
        # a T's members stand in one column at the edge's middle: its evenness is that
        # column's centring (measured with the pattern), not slots along the edge
        observed = ((group.get("pattern") or {}).get("observed") or {}).get("max_abs_offset_m")
        tol = ((group.get("pattern") or {}).get("expected") or {}).get("max_abs_offset_m")
        if observed is None or tol is None:
            return _item("spacing", "uncertain", "T column centring was not measured",
                         "constraint", gid, gid, FAMILIES["spacing"], confidence=0.5,
                         evidence=ev)
        ev.update(t_centring_offset_m=observed, tolerance_m=tol)
        verdict = "pass" if float(observed) <= float(tol) else "fail"
        return _item("spacing", verdict, f"T column centred within {float(observed):.3f} m of "
                                         f"the edge's middle (tolerance {float(tol):.3f} m)",
                     "constraint", gid, gid, FAMILIES["spacing"],
                     confidence=margin_confidence(float(observed), float(tol)), evidence=ev)
    if rule == "tight":
        worst = max((float(m["clearance_error_m"]) for m in measured.values()), default=0.0)
        tol = TOO_FAR_TOL_M["tight"] or 0.0
        ev.update(max_clearance_error_m=_r(worst), tolerance_m=tol)
        verdict = "pass" if worst <= tol else "fail"
        return _item("spacing", verdict, f"members sit at most {worst:.3f} m beyond the "
                                         "clearance ('tight')", "constraint", gid, gid,
                     FAMILIES["spacing"], confidence=margin_confidence(worst, tol), evidence=ev)
    if spacing.get("mode") == "ring":
        cv = spacing.get("ring_gap_cv")
        value = float(cv or 0.0)
        ev["tolerance"] = RING_GAP_CV_TOL
        verdict = "pass" if value <= RING_GAP_CV_TOL else "fail"
        return _item("spacing", verdict, f"ring gap CV {value:.3f} (tolerance "
                                         f"{RING_GAP_CV_TOL})", "constraint", gid, gid,
                     FAMILIES["spacing"], confidence=margin_confidence(value, RING_GAP_CV_TOL),
                     evidence=ev)
    value = float(spacing.get("max_deviation_m") or 0.0)
    ev["tolerance_m"] = SPACING_TOL_M
    verdict = "pass" if value <= SPACING_TOL_M else "fail"
    return _item("spacing", verdict, f"max slot deviation {value:.3f} m (tolerance "
                                     f"{SPACING_TOL_M} m)", "constraint", gid, gid,
                 FAMILIES["spacing"], confidence=margin_confidence(value, SPACING_TOL_M),
                 evidence=ev)


def hard_violations(geometry: Mapping[str, Any]) -> int:
    """How many hard constraints a state breaks: penetrating pairs (members, the anchor)
    plus members inside the fixed context (walls, other groups' units, bystanders)."""
    group = geometry.get("group", {})
    return int(group.get("penetration_pairs") or 0) + int(group.get("obstacle_penetrations")
                                                          or 0)


def violation_score(geometry: Mapping[str, Any], target_spec: Mapping[str, Any]) -> float:
    """One number per group, 0 = every measured constraint met; lower is better.

    score = sum over members of facing_error_deg / 90 (where facing is measured: a front's
            error, a 2- or 4-fold symmetric member's error modulo 180 / 90 degrees)
          + sum over members of |clearance_error_m| / 0.10 (for 'loose', and for a T
            column's members behind its first, only the part closer than the target counts)
          + spacing: sum over edges of the max slot deviation / 0.10, or ring_gap_cv / 0.10
            (only for the even_* spacings); for a T the column's centring offset beyond its
            tolerance / 0.10
          + 2 per penetrating pair + 2 per member inside an obstacle + 1 for a pattern
            mismatch + 1 for a member-count mismatch.
    """
    spacing_rule = str(target_spec.get("spacing", ""))
    column = t_column_followers(target_spec, geometry.get("members", {}))
    score = 0.0
    for name, m in geometry.get("members", {}).items():
        if m.get("facing_error_deg") is not None:
            score += float(m["facing_error_deg"]) / SCORE_FACING_DEG
        err = float(m.get("clearance_error_m") or 0.0)
        if spacing_rule == "loose" or name in column:
            err = min(err, 0.0)
        score += abs(err) / SCORE_CLEARANCE_M
    group = geometry.get("group", {})
    spacing = group.get("spacing", {})
    if target_spec.get("pattern") == "T":
        pattern = group.get("pattern") or {}
        offset = (pattern.get("observed") or {}).get("max_abs_offset_m")
        tol = (pattern.get("expected") or {}).get("max_abs_offset_m")
        if offset is not None and tol is not None:
            score += max(0.0, float(offset) - float(tol)) / SCORE_SPACING_M
    elif spacing_rule.startswith("even_"):
        if spacing.get("mode") == "ring":
            score += float(spacing.get("ring_gap_cv") or 0.0) / SCORE_RING_CV
        else:
            score += sum(float(v) for v in (spacing.get("per_edge_max_deviation_m") or {})
                         .values()) / SCORE_SPACING_M
    score += SCORE_PENETRATION * int(group.get("penetration_pairs") or 0)
    score += SCORE_PENETRATION * int(group.get("obstacle_penetrations") or 0)
    if (group.get("pattern") or {}).get("match") is False:
        score += SCORE_PATTERN
    if (group.get("member_count") or {}).get("match") is False:
        score += SCORE_PATTERN
    return round(score, 6) + 0.0


def geometry_summary(geometry: Mapping[str, Any]) -> dict[str, Any]:
    """The before/after figures metrics.json reports for one group."""
    group = geometry.get("group", {})
    spacing = group.get("spacing", {})
    return {"facing_error_mean_deg": group.get("facing_error_mean_deg"),
            "facing_error_max_deg": group.get("facing_error_max_deg"),
            "clearance_violations": group.get("clearance_violations"),
            "penetration_pairs": group.get("penetration_pairs"),
            "spacing_max_deviation_m": spacing.get("max_deviation_m"),
            "ring_gap_cv": spacing.get("ring_gap_cv"),
            "pattern_match": (group.get("pattern") or {}).get("match")}


def findings(review: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The failed checks of a review, with their numbers (json/island_groups.json)."""
    return [{"check": i["id"], "reason": i["reason"], "failure_family": i["failure_family"],
             "evidence": i["evidence"]}
            for i in review["review_results"] if i["verdict"] == "fail"]
