"""``metrics.json``: before/after figures per group and for the whole scene.

*Before* is measured on the input scene (world poses read at validate), *after* on the
merged scene as read back from ``blend/stage3-scene.blend`` by the merge job, both in each
group's canonical frame with the group's final target spec and forward axes (resolutions of
unknowns included), so the two columns differ only by the poses. Every group of the relation
graph is measured, flagged or not, except a group refused up front: its entry has
``status: "refused"``, its ``refusal_reason`` (the one-line cause and fix) and no figures
(``before``/``after`` null), and the scene says ``partial: true`` with ``groups_refused``.

Scene level: ``facing_error_mean_deg`` / ``facing_error_max_deg`` over every member with a
facing error, ``clearance_violations`` and ``penetration_pairs`` summed,
``spacing_max_deviation_m`` and ``ring_gap_cv`` the worst group, ``pass_rate`` = passing
review items / all review items, ``violation_score`` summed, ``groups_all_pass`` counted,
and each group's ``verdict``: ``fail`` if a review fails, ``uncertain`` if none fails but one
could not be measured (a front not found, a pattern that cannot be checked; ``not_measured``
names the member and what would resolve it), ``pass`` only when every review was measured
and passed (``groups_pass`` / ``groups_fail`` / ``groups_uncertain``). A group ``propose``
marked uncertain and refined anyway (``state.json::islands_uncertain``) has ``membership``
(its reasons, doubtful objects, doubted members) and is ``uncertain`` where its geometry
passes (``geometry_verdict`` beside it, the doubt first in ``not_measured``).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import UsageError
from ..files.jsonio import read_object
from ..measure import frames, meshcache
from ..measure.forward_axis import forward_axes_document
from ..measure.geometry import GeometryContext
from ..measure.obstacles import load as load_context
from ..measure.obstacles import to_frame
from ..review import infeasible_of
from .paths import ScenePaths
from .relation_graph import RelationGraph
from .validate import doubt_line, membership_doubt, reported_verdict
from .verify import geometry_summary, review_group


def _read(path, what: str) -> dict[str, Any]:
    return read_object(path, UsageError, what, "rerun the scene pipeline")


def _figures(geometry: Mapping[str, Any], review: Mapping[str, Any]) -> dict[str, Any]:
    return {**geometry_summary(geometry), "pass_rate": review["summary"]["pass_rate"],
            "reviews": {k: review["summary"][k] for k in ("pass", "fail", "uncertain", "total")},
            "verdict": review["summary"]["verdict"],
            "not_measured": review["summary"]["not_measured"],
            "violation_score": review["violation_score"],
            "infeasible": (review.get("infeasible") or {}).get("reason")}


def _with_doubt(review: dict[str, Any], doubt: Mapping[str, Any] | None) -> dict[str, Any]:
    """``review`` as reported when propose's membership doubt is open: a ``pass`` becomes
    ``uncertain`` with the doubt named first in ``not_measured``; ``geometry_verdict`` keeps
    what the geometry alone says (``validate.reported_verdict``)."""
    if doubt is None:
        return review
    summary = dict(review["summary"])
    summary.update(verdict=reported_verdict(summary["verdict"], doubt),
                   geometry_verdict=summary["verdict"],
                   not_measured=[doubt_line(doubt), *summary["not_measured"]])
    return {**review, "summary": summary}


def _moved(context: Mapping[str, tuple[np.ndarray, np.ndarray]], objects: Mapping[str, Any],
           after: Mapping[str, Any]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Context triangles (world, as validated) with every unit root that merge-back moved
    carried along to its merged pose."""
    out = {}
    for name, (verts, tris) in context.items():
        if name in after and not frames.degenerate(objects[name]["matrix_world"]):
            move = frames.as_matrix(after[name]) @ np.linalg.inv(
                frames.as_matrix(objects[name]["matrix_world"]))
            verts = np.asarray(verts) @ move[:3, :3].T + move[:3, 3]
        out[name] = (verts, tris)
    return out


def _scene_level(groups: list[tuple[dict, dict, dict]]) -> dict[str, Any]:
    """``groups``: (geometry, review, figures) per group."""
    facing = [m["facing_error_deg"] for geo, _, _ in groups for m in geo["members"].values()
              if m.get("facing_error_deg") is not None]
    spacing = [f["spacing_max_deviation_m"] for _, _, f in groups
               if f["spacing_max_deviation_m"] is not None]
    rings = [f["ring_gap_cv"] for _, _, f in groups if f["ring_gap_cv"] is not None]
    passed = sum(r["summary"]["pass"] for _, r, _ in groups)
    total = sum(r["summary"]["total"] for _, r, _ in groups)
    return {
        "facing_error_mean_deg": round(float(np.mean(facing)), 6) if facing else None,
        "facing_error_max_deg": round(float(max(facing)), 6) if facing else None,
        "clearance_violations": sum(f["clearance_violations"] or 0 for _, _, f in groups),
        "penetration_pairs": sum(f["penetration_pairs"] or 0 for _, _, f in groups),
        "spacing_max_deviation_m": max(spacing) if spacing else None,
        "ring_gap_cv": max(rings) if rings else None,
        "pass_rate": round(passed / total, 6) if total else 1.0,
        "reviews": {"pass": passed, "total": total},
        "violation_score": round(sum(f["violation_score"] for _, _, f in groups), 6),
        "groups_all_pass": sum(1 for _, r, _ in groups if r["summary"]["all_pass"]),
        # a group counts as passing only when every review was measured and passed
        "groups_pass": sum(1 for _, r, _ in groups if r["summary"]["verdict"] == "pass"),
        "groups_fail": sum(1 for _, r, _ in groups if r["summary"]["verdict"] == "fail"),
        "groups_uncertain": sum(1 for _, r, _ in groups
                                if r["summary"]["verdict"] == "uncertain"),
    }


def build_metrics(graph: RelationGraph, paths: ScenePaths, state: Mapping[str, Any]
                  ) -> dict[str, Any]:
    scene_doc = _read(paths.scene_objects, "scene_objects.json")
    objects = scene_doc["objects"]
    unit_scale = float(scene_doc.get("unit_scale") or 1.0)
    owners = scene_doc.get("context_owners") or {}
    context_world = load_context(paths.scene_context) or {}
    merged = _read(paths.merge_report, "merge_back.json")
    validated = _read(paths.island_groups, "island_groups.json")["groups"]
    meshes, _ = meshcache.load_shared(paths.scene_meshes)
    flagged = set(state["groups_needing_island"])
    failed = {f["id"]: f["reason"] for f in state["islands_failed"]}
    per_group: dict[str, Any] = {}
    columns: dict[str, list] = {"before": [], "after": []}
    # ``graph``: the relation graph without its refused groups (``validate.live_graph``)
    for g in graph.groups:
        gp = paths.group(g.id)
        rebuilt = g.id in flagged and gp.metadata.is_file()
        spec = (_read(gp.target_spec, "target_spec.json") if rebuilt
                else validated[g.id]["target_spec"])
        overrides = {n: objects[n]["props"]["forward_axis"] for n in g.objects
                     if "forward_axis" in objects[n]["props"]}
        overrides.update(g.forward_axis)
        if rebuilt:
            overrides.update(_read(gp.metadata, "metadata.json")
                             .get("forward_axis_overrides", {}))
        group_meshes = {n: meshes[n] for n in g.objects}
        axes = forward_axes_document(group_meshes, g.anchor, overrides)
        near = {n: context_world[n] for n in owners.get(g.id, []) if n in context_world}
        gstate = state["groups"].get(g.id, {})
        resolved = {u["id"]: u["resolution"] for u in gstate.get("unknowns", [])
                    if u.get("status") == "resolved"}
        world_before = {n: frames.as_matrix(objects[n]["matrix_world"]) for n in g.objects}
        _, m_inv = frames.canonical_frame(world_before[g.anchor], unit_scale)
        entry: dict[str, Any] = {
            "needs_island": g.id in flagged,
            "status": ("failed" if g.id in failed else
                       "completed" if g.id in state["islands_completed"] else
                       "not_flagged" if g.id not in flagged else "unfinished"),
            "failure_reason": failed.get(g.id),
            "rounds": len(gstate.get("rounds", [])),
            "accepted_round": gstate.get("accepted_round"),
            "target_spec": spec}
        doubt = membership_doubt(g)
        if doubt is not None:   # refined with propose's doubt open: never pass
            entry["membership"] = doubt
        for column in ("before", "after"):
            world = world_before if column == "before" else {
                n: frames.as_matrix(merged["after_poses"][n]) for n in g.objects}
            # other groups' units in the context are where that column has them: a moved
            # member of one group is checked against the other groups' members as merged
            obstacles = to_frame(_moved(near, objects, merged["after_poses"])
                                 if column == "after" else near, near, m_inv)
            context = GeometryContext(group_meshes, g.anchor, axes, obstacles or None)
            geometry = context.compute({n: m_inv @ world[n] for n in g.objects}, spec, 0)
            # after: the solver's infeasible finding for this group (None when none)
            review = _with_doubt(review_group(g.id, geometry, spec, axes, g.members, resolved,
                                              infeasible_of(gp.root) if column == "after"
                                              else None), doubt)
            figures = _figures(geometry, review)
            if doubt is not None:
                figures["geometry_verdict"] = review["summary"]["geometry_verdict"]
            entry[column] = figures
            columns[column].append((geometry, review, figures))
        per_group[g.id] = entry
    refused = list(state.get("islands_refused", []))
    for r in refused:   # not measured: its objects are as the input scene holds them
        per_group[r["id"]] = {"needs_island": False, "status": "refused",
                              "failure_reason": None, "refusal_reason": r["reason"],
                              "rounds": 0, "accepted_round": None, "target_spec": None,
                              "before": None, "after": None}
    return {
        "version": 1, "run_id": state.get("run_id"), "runs": list(state.get("runs", [])),
        "scene": {"groups_total": len(graph.groups) + len(refused),   # refused included
                  "groups_flagged": len(flagged),
                  "islands_completed": len(state["islands_completed"]),
                  "islands_failed": len(state["islands_failed"]),
                  "islands_refused": len(refused),
                  # partial: some groups were refused up front and left as they are
                  "partial": bool(refused),
                  "groups_refused": [r["id"] for r in refused],
                  "refused": refused,
                  "before": _scene_level(columns["before"]),
                  "after": _scene_level(columns["after"])},
        "groups": per_group,
        "definitions": "docs/SCENE_PIPELINE.md, 'metrics.json'",
    }
