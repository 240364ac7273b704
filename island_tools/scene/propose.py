"""``island-refine propose``: relation groups proposed from a plain scene's furniture.

A scene an artist made, downloaded or a generator wrote has no ``inputs/relation_graph.json``.
:func:`propose_units` reads the furniture units' evaluated geometry (one triangle array per
unit, in its root's frame, as ``worker.units`` evaluates it) and proposes the groups: each
with an anchor, members, the target-spec hints (``relation``) and a ``proposal`` block saying
how sure it is and why. Roles come from measured geometry, not names
(``island_tools.scene.furniture``); fronts and memberships from placement
(``island_tools.scene.members``); the units of a .blend from its hierarchy
(``island_tools.scene.scene_units``). A unit that qualifies for two anchors is proposed
with the better one but ``uncertain``, naming the other.

Doubt is never decided silently: a member that could belong to two anchors, a front or role
the geometry does not settle, a lopsided arrangement that matches no pattern, or a unit no
role fits standing where a member would, makes the group ``uncertain`` with the reasons.
Target specs come from ``validate.resolve_target_spec`` (the pipeline's own inference and
conventions) fed the role and, for tables, the pattern the members' edges show.

The graph document adds, per group, ``proposal`` (status, confidence, reasons, evidence,
member_confidence, uncertain_members) and, on top, ``proposed`` (by, scene_sha256,
unassigned); ``relation_graph.parse_relation_graph`` validates both
(docs/SCENE_PIPELINE.md, "Proposing a relation graph").
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import GeometryError, GroupInputError, UsageError, printable
from ..files import atomic
from ..files.jsonio import read_object
from ..iteration import RunJob, sha256_file
from ..measure.geometry import convex_signed_distance
from .errors import RelationGraphError
from .furniture import Role, Shape, UnitInput, classify, measure_unit, role_evidence
from .members import (
    BED_SIDE_GAP_M,
    TABLE_REACH_M,
    TV_MAX_M,
    Candidate,
    Front,
    before_sofa,
    beside_bed,
    detect_front,
    seat_at_table,
    seat_at_tv,
)
from .paths import SCENE_BLEND, ScenePaths, scene_locked
from .relation_graph import GRAPH_VERSION, HINT_KEYS, GroupSpec, parse_relation_graph
from .scene_units import read_scene_units

__all__ = ["UnitInput", "propose_for_run", "propose_scene", "propose_units", "proposal_lines"]

PROPOSED_BY = "island-refine propose"
FLOOR_TOL_M = 0.25           # a unit whose base is higher above the floor stands on nothing
UNKNOWN_MIN_HEIGHT_M = 0.4   # a unit no role fits, this tall and wide, near an anchor ...
UNKNOWN_MIN_SIDE_M = 0.3     # ... makes its group uncertain (it may be a member)
CONFIDENT = 0.5              # member / group confidence below this is uncertain
DEFAULT_CLEARANCE_M = {"table": 0.10, "long_table": 0.10, "round_table": 0.10,
                       "desk": 0.10, "bed": 0.05, "sofa": 0.40}
TV_CLEARANCE_RANGE_M = (1.2, 3.0)
ANCHOR_ROLES = ("table", "desk", "bed", "tv_stand", "sofa")
BESIDE_BED_ROLES = ("nightstand", "side_table")
CONTEXT_ROLES = ("wall", "flat")


# --------------------------------------------------------------------------- proposing
@dataclass
class _Piece:
    shape: Shape
    role: Role
    front: Front


def _anchor_role(p: _Piece) -> str | None:
    """A desk is a desk-shaped top with a front (its kneehole side); without one it is a
    table (seats anywhere around it)."""
    r = p.role.role
    if r == "desk":
        return "desk" if p.front.world is not None else "table"
    return r if r in ANCHOR_ROLES else None


def _candidates(m: _Piece, anchors: Mapping[str, _Piece]) -> list[Candidate]:
    mrole = m.role.role
    out: list[Candidate] = []
    for name, a in anchors.items():
        if name == m.shape.name:
            continue
        arole = _anchor_role(a)
        found = None
        if arole in ("table", "desk") and mrole in ("chair", "armchair", "stool"):
            found = seat_at_table(a.shape, m.shape, m.front, mrole)
            if found is not None and arole == "desk" and a.front.world is not None:
                if float(a.front.world @ (m.shape.centre - a.shape.centre)) <= 0:
                    found = None   # behind the desk
        elif arole == "tv_stand" and mrole in ("sofa", "armchair", "chair"):
            found = seat_at_tv(a.shape, a.front, m.shape, m.front)
        elif arole == "bed" and mrole in BESIDE_BED_ROLES:
            found = beside_bed(a.shape, a.front, m.shape)
        elif arole == "sofa" and mrole == "coffee_table":
            found = before_sofa(a.shape, a.front, m.shape)
        if found is not None:
            out.append(found)
    return sorted(out, key=lambda c: (-c.confidence, c.anchor))


def _edge_counts(a: Shape, members: Sequence[Shape]) -> dict[str, list[int]]:
    """Members per rectangle edge of the anchor, by role: long [a, b], short [c, d]."""
    counts = {"+l": 0, "-l": 0, "+s": 0, "-s": 0}
    for m in members:
        rel = m.centre - a.centre
        du = abs(float(rel @ a.e_long)) - a.length / 2.0
        dv = abs(float(rel @ a.e_short)) - a.width / 2.0
        if du > dv:
            counts["+s" if rel @ a.e_long > 0 else "-s"] += 1
        else:
            counts["+l" if rel @ a.e_short > 0 else "-l"] += 1
    return {"long": sorted([counts["+l"], counts["-l"]], reverse=True),
            "short": sorted([counts["+s"], counts["-s"]], reverse=True)}


def canonical_edges(a: Shape, members: Sequence[Shape]) -> dict[str, int]:
    """Members per edge of the anchor's footprint box in its canonical frame (the anchor's
    own axes, as ``geometry`` sorts members onto ``+x``/``-x``/``+y``/``-y``)."""
    q = (a.hull - a.origin) @ a.rot2
    lo, hi = q.min(axis=0), q.max(axis=0)
    mid, half = (lo + hi) / 2.0, (hi - lo) / 2.0
    out: dict[str, int] = {}
    for m in members:
        d = (m.centre - a.origin) @ a.rot2 - mid
        if abs(d[0]) - half[0] > abs(d[1]) - half[1]:
            edge = "+x" if d[0] > 0 else "-x"
        else:
            edge = "+y" if d[1] > 0 else "-y"
        out[edge] = out.get(edge, 0) + 1
    return dict(sorted(out.items()))


def _table_hints(a: Shape, members: Sequence[Shape]) -> tuple[dict[str, Any], str | None,
                                                                 str]:
    """(relation hints, why the pattern is unclear or None, evidence) for a table group."""
    k = len(members)
    if a.round:
        return {"anchor_role": "round_table", "pattern": "ring"}, None, \
            "round top: members in a ring"
    role = "long_table" if a.length / max(a.width, 1e-9) >= 1.5 else "table"
    edges = _edge_counts(a, members)
    shown = f"long edges {edges['long']}, short edges {edges['short']}"
    nonempty = sum(1 for v in (*edges["long"], *edges["short"]) if v)
    if nonempty == 1:
        return {"anchor_role": role, "pattern": "row"}, None, f"all {k} on one edge ({shown})"
    if edges == {"long": [2, 2], "short": [1, 0]}:
        return {"anchor_role": role, "pattern": "2+2+1"}, None, shown
    if edges == {"long": [2, 2], "short": [1, 1]}:
        return {"anchor_role": role, "pattern": "2+2+1+1"}, None, shown
    seen = canonical_edges(a, members)
    if len(seen) == 2 and {e[1] for e in seen} == {"x", "y"}:
        return {"anchor_role": role, "pattern": "L"}, None, f"two adjacent edges ({shown})"
    if edges["long"][0] == edges["long"][1] and edges["short"][0] == edges["short"][1]:
        layout = {"long": edges["long"][0], "short": edges["short"][0]}
        layout = {key: n for key, n in layout.items() if n}
        return ({"anchor_role": role, "pattern": "free", "layout": layout,
                 "free_note": f"proposed from the members' edges: {shown}"}, None, shown)
    if all(abs(v[0] - v[1]) <= 1 for v in edges.values()):
        # opposite edges within one member of each other: a tidy layout, kept as seen
        return ({"anchor_role": role, "pattern": "free", "layout": seen,
                 "free_note": f"proposed as seen: {shown}"}, None,
                f"{shown}: opposite edges within one member, kept as seen ({seen})")
    return ({"anchor_role": role, "pattern": "free", "layout": seen,
             "free_note": f"proposed as seen: {shown}"},
            f"pattern unclear: the {k} members sit on {shown}, lopsided and matching no "
            f"pattern; proposed as seen ({seen})", shown)


def _tv_clearance(a: Shape, members: Sequence[Shape]) -> float:
    gaps = [convex_signed_distance(m.hull, a.hull)[0] for m in members]
    lo, hi = TV_CLEARANCE_RANGE_M
    return round(min(hi, max(lo, float(np.median(gaps)))) / 0.05) * 0.05


def _group_hints(role: str, a: Shape, members: Sequence[Shape]
                 ) -> tuple[dict[str, Any], str | None, str]:
    if role == "table":
        hints, unclear, note = _table_hints(a, members)
        hints["clearance_m"] = DEFAULT_CLEARANCE_M["table"]
        return hints, unclear, note
    if role == "tv_stand":
        return ({"anchor_role": "tv_stand", "clearance_m": _tv_clearance(a, members)}, None,
                "convention: seats before the TV stand's front")
    if role == "bed" and len(members) != 2:
        seen = canonical_edges(a, members)
        return ({"anchor_role": "bed", "clearance_m": DEFAULT_CLEARANCE_M["bed"],
                 "pattern": "free", "facing": "parallel_to_anchor_long_axis",
                 "layout": {**seen, "align": "back"},
                 "free_note": f"{len(members)} beside the bed at the headboard, as seen"},
                None, f"{len(members)} beside the head end ({seen})")
    return ({"anchor_role": role, "clearance_m": DEFAULT_CLEARANCE_M.get(role, 0.10)}, None,
            f"convention of a {role}")


def _spec_check(gid: str, anchor: str, members: Sequence[str], hints: dict[str, Any],
                a: Shape) -> dict[str, Any]:
    """The hints as the pipeline will read them: ``validate.resolve_target_spec`` (the
    pipeline's inference and conventions) must turn them into a valid target spec."""
    from .validate import resolve_target_spec

    spec = GroupSpec(gid, anchor, tuple(members), dict(hints))
    shape = "round" if a.round else "rect"
    ratio = a.length / max(a.width, 1e-9)
    resolved, _ = resolve_target_spec(spec, shape, ratio, "relation_graph.json")
    return resolved.to_dict()


def _round(x: float) -> float:
    return round(float(x), 3) + 0.0


def propose_units(units: Mapping[str, UnitInput], unit_scale: float = 1.0,
                  context: Mapping[str, UnitInput] | None = None) -> dict[str, Any]:
    """The proposed relation graph (version 1, ``groups`` with ``proposal``, and
    ``proposed``) for ``units`` (name -> :class:`UnitInput`, scene units; ``unit_scale`` =
    metres per scene unit). ``context``: units that are surroundings only (walls, the room
    shell): never proposed, used to tell which side of a cabinet stands against a wall.
    Pure: no Blender, no files. ``proposed.scene_sha256`` is None (the caller that read a
    file fills it in)."""
    pieces: dict[str, _Piece] = {}
    unassigned: list[dict[str, Any]] = []
    walls: list[Shape] = []
    for u in (context or {}).values():
        try:
            walls.append(measure_unit(u, unit_scale))
        except GeometryError:
            continue
    shapes: dict[str, Shape] = {}
    for name in sorted(units):
        try:
            shapes[name] = measure_unit(units[name], unit_scale)
        except GeometryError as exc:
            unassigned.append({"name": name, "role": None, "reason": exc.reason})
    floor_z = min((s.base_z for s in shapes.values() if s.height > 0.05), default=0.0)
    unsettled: list[Shape] = []   # furniture-sized units no role fits
    for name, s in shapes.items():
        role = classify(s, name)
        if role.role in CONTEXT_ROLES:
            if role.role == "wall":
                walls.append(s)
            unassigned.append({"name": name, "role": role.role,
                               "reason": f"room shell ({role_evidence(s, role.role)}): "
                                         "context, not furniture"})
            continue
        if s.base_z - floor_z > FLOOR_TOL_M:
            unassigned.append({"name": name, "role": role.role,
                               "reason": f"its base is {s.base_z - floor_z:.2f} m above the "
                                         "floor: it stands on nothing a group is made of"})
            continue
        if role.role is None:
            if s.height >= UNKNOWN_MIN_HEIGHT_M and s.width >= UNKNOWN_MIN_SIDE_M:
                unsettled.append(s)
            best = role.runner_up
            unassigned.append({"name": name, "role": None,
                               "reason": f"no furniture role fits its geometry "
                                         f"({s.length:.2f}x{s.width:.2f} m, {s.height:.2f} m "
                                         f"tall; closest: {best[0]} {best[1]:.2f})"
                               if best else "no furniture role fits its geometry"})
            continue
        pieces[name] = _Piece(s, role, Front(None, "", 0.0))
    for p in pieces.values():
        p.front = detect_front(p.shape, p.role.role, walls)
    anchors = {n: p for n, p in pieces.items() if _anchor_role(p) is not None}
    # a sofa facing a TV stand is that stand's member, so it anchors no group of its own
    tv_stands = {n: q for n, q in anchors.items() if _anchor_role(q) == "tv_stand"}
    seated = {n for n, p in anchors.items() if _candidates(p, tv_stands)}
    live = {n: q for n, q in anchors.items() if n not in seated}
    taken: dict[str, tuple[Candidate, list[Candidate]]] = {}
    for name, p in pieces.items():
        if name in live:
            continue
        cands = _candidates(p, live)
        if cands:
            taken[name] = (cands[0], cands[1:])
    groups_by_anchor: dict[str, list[str]] = {}
    for name, (chosen, _) in taken.items():
        groups_by_anchor.setdefault(chosen.anchor, []).append(name)
    groups: list[dict[str, Any]] = []
    counters: dict[str, int] = {}
    in_group: set[str] = set()
    for anchor in sorted(groups_by_anchor, key=lambda n: (anchors[n].shape.centre[0],
                                                          anchors[n].shape.centre[1], n)):
        members = sorted(groups_by_anchor[anchor])
        groups.append(_group(anchor, members, pieces, taken, counters,
                             _unsettled_near(anchors[anchor], unsettled)))
        in_group.update([anchor, *members])
    for name, p in pieces.items():
        if name in in_group:
            continue
        unassigned.append({"name": name, "role": p.role.role, "reason": _why_alone(p, anchors)})
    return {"version": GRAPH_VERSION,
            "description": f"proposed by {PROPOSED_BY} from the furniture's geometry",
            "groups": groups,
            "proposed": {"by": PROPOSED_BY, "scene_sha256": None,
                         "unassigned": sorted(unassigned, key=lambda u: u["name"])}}


def _why_alone(p: _Piece, anchors: Mapping[str, _Piece]) -> str:
    role = p.role.role
    if role in ANCHOR_ROLES or (role == "table"):
        return f"{role_evidence(p.shape, role or '')}; nothing stands by it as a member would"
    if role in ("chair", "armchair", "stool"):
        return f"{role}: faces no table, desk or TV stand within reach"
    if role in BESIDE_BED_ROLES:
        return f"{role}: beside no bed's head end"
    if role == "coffee_table":
        return "coffee table: before no sofa's front (or its sofa belongs to another group)"
    return f"{role_evidence(p.shape, role or '')}: not a role of any group"


def _unsettled_near(a: _Piece, unsettled: Sequence[Shape]) -> list[str]:
    """Why the group may be missing a member: furniture-sized units no role fits standing
    where this anchor's members stand (they could be a seat the rules do not know)."""
    role = _anchor_role(a)
    reach = {"tv_stand": TV_MAX_M, "bed": BED_SIDE_GAP_M}.get(role or "", TABLE_REACH_M)
    out = []
    for s in unsettled:
        gap, _ = convex_signed_distance(s.hull, a.shape.hull)
        if gap <= reach:
            out.append(f"'{s.name}' ({s.length:.2f}x{s.width:.2f} m, {s.height:.2f} m tall) "
                       f"stands {max(gap, 0):.2f} m from the anchor and no role fits it: it "
                       "may be a member")
    return out


def _group(anchor: str, members: list[str], pieces: Mapping[str, _Piece],
           taken: Mapping[str, tuple[Candidate, list[Candidate]]],
           counters: dict[str, int], unsettled: Sequence[str] = ()) -> dict[str, Any]:
    a = pieces[anchor]
    role = _anchor_role(a) or "table"
    counters[role] = counters.get(role, 0) + 1
    gid = f"{role}_{counters[role]}"
    reasons: list[str] = []
    member_conf: dict[str, float] = {}
    member_evidence: dict[str, str] = {}
    uncertain: dict[str, str] = {}
    for m in members:
        best, others = taken[m]
        p = pieces[m]
        conf = best.confidence * (1.0 if p.role.settled else 0.6)
        member_evidence[m] = f"{role_evidence(p.shape, p.role.role or '')}; {best.evidence}"
        if others:
            o = others[0]
            uncertain[m] = f"also {max(o.gap_m, 0):.2f} m from '{o.anchor}': {o.evidence}"
            conf = min(conf, 0.45)
        elif not p.role.settled and p.role.runner_up:
            uncertain[m] = (f"role not settled: {p.role.role} {p.role.score:.2f} against "
                            f"{p.role.runner_up[0]} {p.role.runner_up[1]:.2f}")
            conf = min(conf, 0.45)
        elif conf < CONFIDENT:
            uncertain[m] = f"weak evidence ({conf:.2f}): {best.evidence}"
        member_conf[m] = _round(conf)
    hints, unclear, pattern_note = _group_hints(role, a.shape,
                                                [pieces[m].shape for m in members])
    anchor_conf = a.role.score * (1.0 if a.role.settled else 0.6)
    anchor_evidence = role_evidence(a.shape, role)
    if role == "desk":
        anchor_evidence += f"; one front ({a.front.how}): a desk"
    elif role in ("tv_stand", "bed", "sofa") and a.front.world is None:
        reasons.append(f"the {role}'s front is undetermined ({a.front.how}): its convention "
                       "cannot be placed")
        anchor_conf = min(anchor_conf, 0.45)
    elif role in ("tv_stand", "bed", "sofa"):
        anchor_evidence += f"; front {a.front.how}"
    if a.role.hinted:
        anchor_evidence += " (its name agrees)"
    if not a.role.settled and a.role.runner_up:
        reasons.append(f"anchor role not settled: {a.role.role} {a.role.score:.2f} against "
                       f"{a.role.runner_up[0]} {a.role.runner_up[1]:.2f}")
    if unclear:
        reasons.append(unclear)
    reasons.extend(unsettled)
    for m, why in uncertain.items():
        reasons.append(f"member '{m}': {why}")
    try:
        spec = _spec_check(gid, anchor, members, hints, a.shape)
    except RelationGraphError as exc:
        reasons.append(f"no valid target spec from the hints: {exc.reason}")
        hints = {k: v for k, v in hints.items() if k in ("anchor_role", "clearance_m")}
        spec = None
    confidence = min([anchor_conf, *member_conf.values()])
    if reasons:
        confidence = min(confidence, 0.45)
    status = "confident" if not reasons and confidence >= CONFIDENT else "uncertain"
    if status == "uncertain" and not reasons:
        reasons.append(f"low confidence ({confidence:.2f})")
    evidence = {"anchor": anchor_evidence, "members": member_evidence,
                "pattern": pattern_note}
    if spec is not None:
        evidence["target_spec"] = (f"{spec['anchor_role']}, pattern {spec['pattern']}, "
                                   f"facing {spec['facing']}, clearance "
                                   f"{spec['clearance_m']:.2f} m"
                                   + (f", layout {spec['layout']}" if spec.get("layout")
                                      else ""))
    return {"id": gid, "anchor": anchor, "members": members,
            "relation": {k: hints[k] for k in HINT_KEYS if k in hints},
            "proposal": {"status": status, "confidence": _round(confidence),
                         "reasons": reasons, "evidence": evidence,
                         "member_confidence": member_conf,
                         "uncertain_members": uncertain}}


def propose_scene(scene_dir: str | os.PathLike[str], run_job: RunJob,
                  force: bool = False) -> dict[str, Any]:
    """``island-refine propose --scene-dir S``: read ``S/blend/stage3-sub-planned.blend``
    only, propose, validate with ``parse_relation_graph`` and write
    ``S/inputs/relation_graph.json`` atomically. Returns the document.

    An existing graph is never overwritten without ``force`` (UsageError, exit 2); a scene
    in which no group is found writes nothing (RelationGraphError, exit 20)."""
    paths = ScenePaths(scene_dir)
    if not paths.scene_blend.is_file():
        raise GroupInputError("input scene is missing", file=str(paths.scene_blend),
                              fix=f"put the planned scene at <scene_dir>/{SCENE_BLEND}")
    # The run's lock: a graph a run (or a batch) is refining is never rewritten under it.
    with scene_locked(paths):
        return _propose_locked(paths, run_job, force)


def _propose_locked(paths: ScenePaths, run_job: RunJob, force: bool) -> dict[str, Any]:
    if paths.relation_graph.exists() and not force:
        raise UsageError("a relation graph is already there; propose never overwrites one",
                         file=str(paths.relation_graph),
                         fix="pass --force to replace it, or refine it as it is "
                             "(island-refine run)")
    sha = sha256_file(paths.scene_blend)
    with tempfile.TemporaryDirectory(prefix="island_refine_propose_") as tmp:
        units, unit_scale, left_out = read_scene_units(str(paths.scene_blend), run_job, tmp)
    doc = propose_units(units, unit_scale)
    doc["proposed"]["scene_sha256"] = sha
    doc["proposed"]["unassigned"] = sorted(doc["proposed"]["unassigned"] + left_out,
                                           key=lambda u: u["name"])
    if not doc["groups"]:
        raise RelationGraphError(
            f"no relation group found among the scene's {len(units)} furniture units "
            f"({len(doc['proposed']['unassigned'])} left out); nothing written",
            file=str(paths.relation_graph), field="groups",
            fix="write inputs/relation_graph.json by hand (docs/SCENE_PIPELINE.md)")
    parse_relation_graph(doc, str(paths.relation_graph))
    atomic.make_dir(paths.relation_graph.parent, parents=True, exist_ok=True)
    atomic.write_json(paths.relation_graph, doc)
    return doc


def propose_for_run(scene_dir: str | os.PathLike[str], run_job: RunJob,
                    force: bool = False) -> tuple[dict[str, Any], bool]:
    """``island-refine run --propose``: (the graph document, reused). A graph that
    ``propose`` wrote from this very scene file (``proposed.scene_sha256``) is reused, so a
    re-run of the same command resumes; any other graph there is replaced only with
    ``force`` (UsageError, exit 2, otherwise)."""
    paths = ScenePaths(scene_dir)
    if paths.relation_graph.is_file() and paths.scene_blend.is_file() and not force:
        doc = read_object(paths.relation_graph, RelationGraphError, "relation_graph.json",
                          "pass --force to propose it again")
        proposed = doc.get("proposed") if isinstance(doc, dict) else None
        if (isinstance(proposed, dict)
                and proposed.get("scene_sha256") == sha256_file(paths.scene_blend)):
            parse_relation_graph(doc, str(paths.relation_graph))
            return doc, True
    return propose_scene(scene_dir, run_job, force=force), False


def proposal_lines(doc: Mapping[str, Any], reused: bool = False) -> list[str]:
    """What ``propose`` says: one line per group (id, status, anchor, members; an uncertain
    group's reasons), then how many units were left out. Names are escaped
    (``errors.printable``): a name with ESC, a newline or a bidi override cannot drive the
    terminal or break a line."""
    head = "reused" if reused else "proposed"
    out = []
    for g in doc["groups"]:
        p = g["proposal"]
        line = (f"[propose] {g['id']}: {p['status']} ({p['confidence']:.2f}), anchor "
                f"{g['anchor']}, members {', '.join(g['members'])}")
        if p["status"] == "uncertain":
            line += f"; {'; '.join(p['reasons'])}"
        out.append(printable(line))
    left = doc["proposed"]["unassigned"]
    confident = sum(1 for g in doc["groups"] if g["proposal"]["status"] == "confident")
    out.append(f"[propose] {head} {len(doc['groups'])} groups ({confident} confident, "
               f"{len(doc['groups']) - confident} uncertain); {len(left)} objects in no "
               "group (proposed.unassigned)")
    return out
