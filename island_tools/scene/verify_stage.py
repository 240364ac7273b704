"""Stages 3b and 4: verify a group's accepted round, route it (seed 000), resolve unknowns.

``verify_group`` writes ``verification.json`` from the accepted poses; ``route`` picks the
next step (unknowns first, then repair, else finalize); ``resolve_unknowns`` asks the
relation graph again for each open unknown and leaves unanswered ones open (the group is
then ``uncertain``: there is no default answer).
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ..files import atomic
from ..files.jsonio import read_object
from ..measure import meshcache
from ..measure.geometry import GeometryContext
from ..measure.obstacles import load as load_context
from ..review import infeasible_of
from ..schemas import load_metadata, load_target_spec, parse_target_spec
from . import verify
from .context import StageContext
from .errors import IntegrityError, RelationGraphError
from .group_files import load_poses, write_forward_axes
from .ledger import utc_now
from .paths import GroupPaths
from .relation_graph import GroupSpec, load_relation_graph
from .validate import doubt_line, hold_doubted_members, membership_doubt, reported_verdict

CHECKABLE_PATTERNS = ("ring", "row", "2+2+1", "2+2+1+1", "L", "T")


def geometry_context(ctx: StageContext, gid: str) -> tuple[GeometryContext, dict, dict, list[str]]:
    """Geometry context with the group's current meshes, forward axes and target spec."""
    gp = ctx.paths.group(gid)
    metadata = load_metadata(gp.metadata)
    spec = load_target_spec(gp.target_spec, len(metadata.refined_members)).to_dict()
    meshes, _ = meshcache.load_shared(gp.meshes)
    axes = read_object(gp.forward_axes, IntegrityError, "forward_axes.json",
                       "rerun the group")
    group_meshes = {n: meshes[n] for n in metadata.members}
    return (GeometryContext(group_meshes, metadata.anchor_id, axes, load_context(gp.context)),
            spec, axes, list(metadata.refined_members))


def verify_group(ctx: StageContext, gid: str, k: int, accepted: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    gp, g = ctx.paths.group(gid), ctx.scene_state.group(gid)
    geo, spec, axes, members = geometry_context(ctx, gid)
    poses = load_poses(gp.round(accepted) / "poses.json")
    geometry = geo.compute(poses, spec, k)
    resolved = {u["id"]: u["resolution"] for u in g["unknowns"]
                if u["status"] == "resolved"}
    review = verify.review_group(gid, geometry, spec, axes, members, resolved,
                                 infeasible_of(gp.root))
    doc = {"group_id": gid, "round": k, "accepted_round": accepted,
           "source": "island_tools.scene.verify", "run_id": ctx.run_id,
           "generated_utc": utc_now(), "target_spec": spec,
           "thresholds": {"facing_tol_deg": verify.FACING_TOL_DEG,
                          "clearance_tol_m": verify.CLEARANCE_TOL_M,
                          "too_far_tol_m": verify.too_far_tolerance(spec["spacing"]),
                          "spacing_tol_m": verify.SPACING_TOL_M,
                          "ring_gap_cv_tol": verify.RING_GAP_CV_TOL},
           "review_results": review["review_results"],
           "new_unknowns": review["new_unknowns"],
           "resolved_unknowns": [u for u in g["unknowns"] if u["status"] == "resolved"],
           "summary": review["summary"], "violation_score": review["violation_score"]}
    # propose's membership doubt, still open: the group is reported uncertain whatever its
    # geometry says (a measured fail stays fail); the geometry's verdict is kept beside it
    doubt = membership_doubt(ctx.relation_graph.group(gid))
    reported = reported_verdict(review["summary"]["verdict"], doubt)
    if doubt is not None:
        doc["membership"] = {**doubt, "verdict": reported,
                             "geometry_verdict": review["summary"]["verdict"]}
    atomic.write_json(gp.verification, doc)
    g["verification"] = {k2: review["summary"][k2]
                         for k2 in ("pass", "fail", "uncertain", "total", "pass_rate",
                                    "verdict", "not_measured")}
    if doubt is not None:
        g["verification"].update(
            verdict=reported, geometry_verdict=review["summary"]["verdict"],
            not_measured=[doubt_line(doubt), *review["summary"]["not_measured"]])
    known = {u["id"] for u in g["unknowns"]}
    for u in review["new_unknowns"]:
        if u["id"] not in known:
            g["unknowns"].append({**u, "raised_round": k})
    ctx.scene_state.save()
    ctx.scene_state.trace(f"verify:{gid}:round_{k}")
    ctx.time("verify", time.perf_counter() - t0)
    return review


def route(ctx: StageContext, gid: str, k: int, review: Mapping[str, Any]) -> str:
    """Seed 000's branch after verify: unknowns first, then repair, else finalize.

    An unknown is asked once per round until it is answered; one that nobody answered
    (no override in the relation graph, no object property) stays open and the group
    ends ``uncertain``, never ``pass``. Repair rounds are for failed reviews only: a
    check that cannot be measured is not repaired by moving furniture."""
    ledger, last = ctx.run_ledger, k >= ctx.options.max_rounds
    summary = review["summary"]
    asked = {u["id"] for u in ctx.scene_state.group(gid)["unknowns"] if u.get("attempts")}
    fresh = [u for u in review["new_unknowns"] if u["id"] not in asked]
    if fresh:
        ids = ", ".join(u["id"] for u in fresh)
        if last:
            ledger.decision(ctx.run_id, gid, k, "finalize",
                            reason=f"max rounds reached with open unknowns: {ids}")
            return "stop"
        ledger.decision(ctx.run_id, gid, k, "resolve_unknowns",
                        reason=f"next round resolves {ids} first")
        ctx.say(f"{gid}: new unknowns {ids}: resolved before the next round")
        return "continue"
    if summary["fail"]:
        bad = [i["id"] for i in review["review_results"] if i["verdict"] == "fail"]
        if last:
            ledger.decision(ctx.run_id, gid, k, "finalize",
                            reason=f"max rounds reached; failing: {', '.join(bad)}")
            return "stop"
        families = sorted({i["failure_family"] for i in review["review_results"]
                           if i["verdict"] == "fail"})
        ledger.decision(ctx.run_id, gid, k, "repair",
                        reason=f"{len(bad)} review(s) failing ({', '.join(families)}): "
                        f"{', '.join(bad[:8])}")
        ctx.say(f"{gid}: {len(bad)} review(s) failing: repair round {k + 1}")
        return "continue"
    if summary["uncertain"]:
        lines = "; ".join(summary.get("not_measured") or [])
        ledger.decision(ctx.run_id, gid, k, "finalize",
                        reason=f"uncertain: not measured: {lines}")
        return "stop"
    ledger.decision(ctx.run_id, gid, k, "finalize", reason="all reviews pass")
    return "stop"


def resolve_unknowns(ctx: StageContext, gid: str, open_unknowns: list[dict[str, Any]], k: int
                     ) -> None:
    """Unknown first: fill each open unknown from the relation graph, read again (a
    person may have answered it since). No answer leaves it open (the group cannot pass
    on it); there is no default that turns an unmeasured check into a pass."""
    t0 = time.perf_counter()
    gp = ctx.paths.group(gid)
    try:
        fresh = hold_doubted_members(load_relation_graph(ctx.paths.relation_graph),
                                     ctx.options.uncertain_mode).group(gid)
    except (RelationGraphError, KeyError):
        assert ctx.graph is not None
        fresh = ctx.graph.group(gid)
    for u in open_unknowns:
        if u["kind"] == "forward_axis":
            resolution = resolve_forward_axis(gp, fresh, u["target_id"])
            ask = (f"groups[{fresh.index}].forward_axis.{u['target_id']} in "
                   "relation_graph.json, or the object's custom property forward_axis")
        else:
            resolution = resolve_pattern(gp, fresh)
            ask = f"groups[{fresh.index}].relation.pattern in relation_graph.json"
        u["attempts"] = int(u.get("attempts", 0)) + 1
        if resolution is None:
            u["unresolved"] = f"no answer yet: declare {ask}"
            ctx.run_ledger.decision(ctx.run_id, gid, k, "unknown_open",
                                    reason=f"{u['id']}: no answer; declare {ask}")
            ctx.say(f"{gid}: {u['id']} stays open: declare {ask}")
            continue
        u.update(status="resolved", resolution=resolution, resolved_round=k)
        u.pop("unresolved", None)
        ctx.run_ledger.decision(ctx.run_id, gid, k, "resolve_unknown",
                                reason=f"{u['id']}: {resolution['note']} "
                                f"(source: {resolution['source']})")
        ctx.say(f"{gid}: {u['id']} resolved: {resolution['note']}")
    ctx.scene_state.save()
    ctx.scene_state.trace(f"resolve_unknowns:{gid}:round_{k}")
    ctx.time("resolve_unknowns", time.perf_counter() - t0)


def resolve_forward_axis(gp: GroupPaths, fresh: GroupSpec, name: str
                         ) -> dict[str, Any] | None:
    value = fresh.forward_axis.get(name)
    if value is None:
        return None
    meta = read_object(gp.metadata, IntegrityError, "metadata.json", "rebuild the island")
    meta.setdefault("forward_axis_overrides", {})[name] = value
    atomic.write_json(gp.metadata, meta)
    write_forward_axes(gp)  # the loop reads the cached file: refresh it with the answer
    return {"source": "relation_graph", "value": value,
            "note": f"forward axis of '{name}' is {value!r} (override)", "at_utc": utc_now()}


def resolve_pattern(gp: GroupPaths, fresh: GroupSpec) -> dict[str, Any] | None:
    spec = read_object(gp.target_spec, IntegrityError, "target_spec.json", "rerun validate")
    hint = fresh.relation.get("pattern")
    if hint in CHECKABLE_PATTERNS and hint != spec.get("pattern"):
        new = {**spec, "pattern": hint}
        parse_target_spec(new, str(gp.target_spec), spec.get("member_count"))
        atomic.write_json(gp.target_spec, new)
        return {"source": "relation_graph", "value": hint,
                "note": f"pattern is '{hint}' (relation hint)", "at_utc": utc_now()}
    return None

