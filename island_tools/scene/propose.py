"""``island-refine propose``: relation groups proposed from a plain scene's furniture.

A scene an artist made, downloaded or a generator wrote has no ``inputs/relation_graph.json``.
:func:`propose_units` reads the furniture units' evaluated geometry (one triangle array per
unit, in its root's frame, as ``worker.units`` evaluates it) and proposes the groups: each
with an anchor, members, the target-spec hints (``relation``) and a ``proposal`` block saying
how sure it is and why. Roles come from measured geometry, not names
(``island_tools.scene.furniture``); fronts, candidates and the room's one assignment of
members to anchors from placement, facing only a tie-breaker
(``island_tools.scene.members``); the units of a .blend from its hierarchy
(``island_tools.scene.scene_units``).

Doubt is never decided silently: a member that could belong to two anchors, an object of a
member role within reach that the group does not hold (named in ``proposal.doubtful``), a
front or role the geometry does not settle, members in order in no usual arrangement, or a
unit no role fits standing where a member would, makes the group ``uncertain`` with the
reasons; so does a held seat whose place does not settle it (pulled far out near a second
anchor, turned away from a TV stand off the row of the seats before it, beyond a desk's
seats when its front is undetermined or the table may be a desk against a wall, held while
an as-near seat was left out for want of places, one of twin tables' uneven split), and a
seat of another
kind beside the anchor's seats (no back among backs, a footprint of another size) is named,
not held (``membership``). An uncertain group
names everything standing by its anchor; an anchor whose seats went nowhere keeps them as
doubts rather than vanish. Context (``CONTEXT_ROLES``) never makes a group uncertain.
Target specs come from the anchor and the members in order (``propose_spec.group_hints``:
the usual arrangement of their count at an anchor of this size, a clearance most members in
order agree on, else the convention), checked through ``validate.resolve_target_spec`` (the
pipeline's own inference and conventions);
``evidence.target_spec_inferred`` says how each value was inferred.

The graph document adds, per group, ``proposal`` (status, confidence, reasons, evidence,
member_confidence, uncertain_members, doubtful) and, on top, ``proposed`` (by, scene_sha256,
unassigned); ``relation_graph.parse_relation_graph`` validates both
(docs/SCENE_PIPELINE.md, "Proposing a relation graph").
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from typing import Any

from ..errors import GeometryError, GroupInputError, UsageError, printable
from ..files import atomic
from ..files.jsonio import read_object
from ..iteration import RunJob, sha256_file
from .errors import RelationGraphError
from .furniture import (
    CONTEXT_ROLES,
    WALL_LIKE_ROLES,
    Shape,
    UnitInput,
    classify,
    measure_unit,
    role_evidence,
)
from .members import (
    DESK_PLACE_M,
    Front,
    detect_front,
)
from .membership import (  # who belongs where, and the doubt rules
    ANCHOR_ROLES,
    BESIDE_BED_ROLES,
    _anchor_role,
    _Membership,
    _membership,
    _round,
)
from .paths import SCENE_BLEND, ScenePaths, scene_locked
from .propose_spec import Piece as _Piece
from .propose_spec import group_hints, spec_check
from .relation_graph import GRAPH_VERSION, HINT_KEYS, parse_relation_graph
from .scene_units import read_scene_units

__all__ = ["UnitInput", "propose_for_run", "propose_scene", "propose_units", "proposal_lines"]

PROPOSED_BY = "island-refine propose"
FLOOR_TOL_M = 0.25           # a unit whose base is higher above the floor stands on nothing
UNKNOWN_MIN_HEIGHT_M = 0.4   # a unit no role fits, this tall and wide, near an anchor ...
UNKNOWN_MIN_SIDE_M = 0.3     # ... makes its group uncertain (it may be a member) ...
UNKNOWN_MAX_SIDE_M = 4.0     # ... unless it is larger than furniture (a room's shell)
UNKNOWN_MAX_HEIGHT_M = 2.6
CONFIDENT = 0.5              # member / group confidence below this is uncertain


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
        role = classify(s, name, floor_z)
        if role.role in CONTEXT_ROLES:
            if role.role in WALL_LIKE_ROLES:
                walls.append(s)
            what = ("a prop, smaller than any member role or a screen" if role.role == "prop"
                    else "room shell")
            unassigned.append({"name": name, "role": role.role,
                               "reason": f"{what} ({role_evidence(s, role.role)}): "
                                         "context, not furniture"})
            continue
        if s.base_z - floor_z > FLOOR_TOL_M:
            unassigned.append({"name": name, "role": role.role,
                               "reason": f"its base is {s.base_z - floor_z:.2f} m above the "
                                         "floor: it stands on nothing a group is made of"})
            continue
        if role.role is None:
            if (UNKNOWN_MIN_HEIGHT_M <= s.height <= UNKNOWN_MAX_HEIGHT_M
                    and UNKNOWN_MIN_SIDE_M <= s.width and s.length <= UNKNOWN_MAX_SIDE_M):
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
    live, found = _membership(pieces, anchors, unsettled, walls)
    groups_by_anchor: dict[str, list[str]] = {}
    for name, c in found.held.items():
        groups_by_anchor.setdefault(c.anchor, []).append(name)
    groups: list[dict[str, Any]] = []
    counters: dict[str, int] = {}
    in_group: set[str] = set()
    for anchor in sorted(groups_by_anchor, key=lambda n: (live[n].shape.centre[0],
                                                          live[n].shape.centre[1], n)):
        members = sorted(groups_by_anchor[anchor])
        groups.append(_group(anchor, members, pieces, found, counters))
        in_group.update([anchor, *members])
    for name, p in pieces.items():
        if name in in_group:
            continue
        unassigned.append({"name": name, "role": p.role.role,
                           "reason": found.left.get(name) or _why_alone(p)})
    return {"version": GRAPH_VERSION,
            "description": f"proposed by {PROPOSED_BY} from the furniture's geometry",
            "groups": groups,
            "proposed": {"by": PROPOSED_BY, "scene_sha256": None,
                         "unassigned": sorted(unassigned, key=lambda u: u["name"])}}


def _why_alone(p: _Piece) -> str:
    role = p.role.role
    if role == "sofa":
        return ("sofa: no coffee table before it, and before no TV stand's front within "
                "reach")
    if role in ANCHOR_ROLES:
        return f"{role_evidence(p.shape, role or '')}; nothing stands by it as a member would"
    if role in ("chair", "armchair", "stool"):
        return f"{role}: within reach of no table, desk or TV stand"
    if role in BESIDE_BED_ROLES:
        return f"{role}: beside no bed's head end"
    if role == "coffee_table":
        return "coffee table: before no sofa's front (or its sofa belongs to another group)"
    return f"{role_evidence(p.shape, role or '')}: not a role of any group"


def _group(anchor: str, members: list[str], pieces: Mapping[str, _Piece],
           found: _Membership, counters: dict[str, int]) -> dict[str, Any]:
    a = pieces[anchor]
    role = _anchor_role(a) or "table"
    counters[role] = counters.get(role, 0) + 1
    gid = f"{role}_{counters[role]}"
    reasons: list[str] = []
    member_conf: dict[str, float] = {}
    member_evidence: dict[str, str] = {}
    uncertain: dict[str, str] = {}
    for m in members:
        best = found.held[m]
        p = pieces[m]
        conf = best.confidence * (1.0 if p.role.settled else 0.6)
        member_evidence[m] = f"{role_evidence(p.shape, p.role.role or '')}; {best.evidence}"
        if m in found.uncertain:
            uncertain[m] = found.uncertain[m]
            conf = min(conf, 0.45)
        elif not p.role.settled and p.role.runner_up:
            uncertain[m] = (f"role not settled: {p.role.role} {p.role.score:.2f} against "
                            f"{p.role.runner_up[0]} {p.role.runner_up[1]:.2f}")
            conf = min(conf, 0.45)
        elif conf < CONFIDENT:
            uncertain[m] = f"weak evidence ({conf:.2f}): {best.evidence}"
        member_conf[m] = _round(conf)
    hints, unclear, pattern_note, inferred = group_hints(role, a, [pieces[m] for m in members])
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
    elif a.role.role == "desk":   # read as a table: where its seat belongs is not settled
        reasons.append(f"a desk whose front is undetermined ({a.front.how}): read as a "
                       "table, the side its seat belongs at cannot be placed")
        anchor_conf = min(anchor_conf, 0.45)
    if a.role.hinted:
        anchor_evidence += " (its name agrees)"
    if not a.role.settled and a.role.runner_up:
        reasons.append(f"anchor role not settled: {a.role.role} {a.role.score:.2f} against "
                       f"{a.role.runner_up[0]} {a.role.runner_up[1]:.2f}")
    if unclear:
        reasons.append(unclear)
    if anchor in found.desk_reading:
        # read as a table its whole perimeter holds seats, as a desk only its front (one
        # per DESK_PLACE_M); where the readings hold different seats, the geometry has not
        # settled which, and the extra are in doubt
        why = found.desk_reading[anchor]
        at_desk = max(1, int(a.shape.length // DESK_PLACE_M))
        if len(members) > at_desk:
            extra = sorted(members, key=lambda m: (found.held[m].cost, m))[at_desk:]
            for m in extra:
                uncertain.setdefault(m, f"held only if '{anchor}' is a table: {why}, as a "
                                        f"desk it holds {at_desk}")
                member_conf[m] = min(member_conf[m], 0.45)
            reasons.append(f"desk or table: {why}; read as a table it holds {len(members)} "
                           f"seats, as a desk {at_desk} ({', '.join(repr(m) for m in extra)} "
                           "in doubt)")
    doubtful = {n: why for n, why in sorted(found.doubtful.get(anchor, {}).items())
                if n not in members and n != anchor}
    for n, why in doubtful.items():
        reasons.append(why if why.startswith(f"'{n}'") else f"'{n}' may be a member: {why}")
    for m, why in uncertain.items():
        reasons.append(f"member '{m}': {why}")
    try:
        spec = spec_check(gid, anchor, members, hints, a.shape)
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
    if status == "uncertain":   # whoever settles the doubt sees everything standing by it
        for n, why in sorted(found.near.get(anchor, {}).items()):
            if n not in members and n not in doubtful:
                doubtful[n] = why
                reasons.append(f"'{n}' stands by it: {why}")
        for m in members:   # ... and which of its members another anchor could hold
            other = [x for x in found.candidates.get(m, ()) if x.anchor != anchor and x.holds]
            if m not in uncertain and other:
                uncertain[m] = f"also within reach of '{other[0].anchor}': {other[0].evidence}"
                reasons.append(f"member '{m}': {uncertain[m]}")
    evidence: dict[str, Any] = {"anchor": anchor_evidence, "members": member_evidence,
                                "pattern": pattern_note}
    if spec is not None:
        evidence["target_spec"] = (f"{spec['anchor_role']}, pattern {spec['pattern']}, "
                                   f"facing {spec['facing']}, clearance "
                                   f"{spec['clearance_m']:.2f} m"
                                   + (f", layout {spec['layout']}" if spec.get("layout")
                                      else ""))
        if "facing" not in inferred:
            inferred["facing"] = (f"{spec['facing']}: "
                                  + ("the convention" if spec.get("layout") else "default"))
    evidence["target_spec_inferred"] = inferred
    return {"id": gid, "anchor": anchor, "members": members,
            "relation": {k: hints[k] for k in HINT_KEYS if k in hints},
            "proposal": {"status": status, "confidence": _round(confidence),
                         "reasons": reasons, "evidence": evidence,
                         "member_confidence": member_conf,
                         "uncertain_members": uncertain,
                         "doubtful": doubtful}}


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
