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
anchor, turned away from a TV stand a surer seat is before, beyond a desk's seats when its
front is undetermined), and a seat of another kind beside the anchor's seats (no back among
backs, a footprint of another size: ``_other_kind``) is named, not held. An uncertain group
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import GeometryError, GroupInputError, UsageError, printable
from ..files import atomic
from ..files.jsonio import read_object
from ..iteration import RunJob, sha256_file
from ..measure.geometry import convex_signed_distance
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
    AMBIGUOUS_COST,
    BED_SIDE_REACH_M,
    DESK_PLACE_M,
    MEMBER_ROLES,
    SEAT_FAR_M,
    SEAT_REACH_M,
    TV_REACH_M,
    Candidate,
    Front,
    assign,
    before_sofa,
    beside_bed,
    capacity,
    detect_front,
    seat_at_table,
    seat_at_tv,
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
TURNED_AWAY_DEG = 30.0       # a held seat turned further from its anchor is out of order
KIND_SIZE_M = 0.10           # a seat of another role this close in size is the same kind
KIND_SPREAD_M = 0.30         # seats of one role differing more than this a side: two kinds
# Seats of one set are one model (areas equal to the measuring grid); an armchair (0.75 m a
# side and up, 0.56 m2) beside an office chair (0.6 m, 0.36 m2) differs by 1.56x, beside a
# dining chair (0.45 x 0.5 m) by 2.5x, though the sides differ by less than KIND_SPREAD_M.
KIND_AREA_RATIO = 1.5        # footprint areas differing by more than this ratio: two kinds
# A back is the tall part of a seat (``Shape.tall_share``): the role rules score a back from
# 0.02 of the footprint (every tuned chair measures 0.028 or more) and none below 0.015
# (every tuned stool measures 0.000); between the two a seat's back is not settled and
# backs do not tell kinds apart.
BACK_MIN_SHARE = 0.02        # a seat with a back
NO_BACK_MAX_SHARE = 0.01     # a seat without one (a stool)
ANCHOR_ROLES = ("table", "desk", "bed", "tv_stand", "sofa")
BESIDE_BED_ROLES = ("nightstand", "side_table")


# --------------------------------------------------------------------------- proposing
def _anchor_role(p: _Piece) -> str | None:
    """A desk is a desk-shaped top with a front (its kneehole side); without one it is a
    table (seats anywhere around it)."""
    r = p.role.role
    if r == "desk":
        return "desk" if p.front.world is not None else "table"
    return r if r in ANCHOR_ROLES else None


def _candidates(m: _Piece, anchors: Mapping[str, _Piece], role: str | None = None
                ) -> list[Candidate]:
    """Every anchor ``m`` (taken as ``role``, by default its own) could belong to, the
    nearest first."""
    mrole = role or m.role.role
    out: list[Candidate] = []
    for name, a in anchors.items():
        arole = _anchor_role(a)
        if name == m.shape.name or arole is None or mrole not in MEMBER_ROLES[arole]:
            continue
        if arole in ("table", "desk"):
            found = seat_at_table(a.shape, a.front, arole, m.shape, m.front)
        elif arole == "tv_stand":
            found = seat_at_tv(a.shape, a.front, m.shape, m.front)
        elif arole == "bed":
            found = beside_bed(a.shape, a.front, m.shape)
        else:
            found = before_sofa(a.shape, a.front, m.shape)
        if found is not None:
            out.append(found)
    return sorted(out, key=lambda c: (c.cost, c.anchor))


def _round(x: float) -> float:
    return round(float(x), 3) + 0.0


@dataclass
class _Membership:
    """Who holds whom after the room's one assignment, and every doubt, where it is."""

    held: dict[str, Candidate]                   # member -> the candidate it holds
    candidates: dict[str, list[Candidate]]       # member-role object -> its anchors
    uncertain: dict[str, str]                    # held member -> why it is in doubt
    doubtful: dict[str, dict[str, str]]          # anchor -> object it does not hold -> why
    left: dict[str, str]                         # member-role object in no group -> why
    near: dict[str, dict[str, str]] = field(default_factory=dict)   # anchor -> unit by it


def _membership(pieces: Mapping[str, _Piece], anchors: Mapping[str, _Piece],
                unsettled: Sequence[Shape]) -> tuple[dict[str, _Piece], _Membership]:
    """(the anchors that hold a group, who belongs where): coffee tables to sofas first (a
    sofa holding one anchors that group and is nobody's member), then one assignment of
    every other member-role object over the whole room (``members.assign``)."""
    sofas = {n: p for n, p in anchors.items() if _anchor_role(p) == "sofa"}
    tables = {n: _candidates(p, sofas) for n, p in pieces.items()
              if p.role.role == "coffee_table"}
    coffee = assign(tables, {n: {"front": 1} for n in sofas})
    holding = {c.anchor for c in coffee.values() if c is not None}
    live = {n: p for n, p in anchors.items() if _anchor_role(p) != "sofa" or n in holding}
    cands = {n: cs for n, p in pieces.items() if n not in live
             for cs in [_candidates(p, live)] if cs}
    caps = {n: capacity(_anchor_role(a) or "table", a.shape, a.front,
                        [pieces[m].shape.width for m, cs in cands.items()
                         if any(c.anchor == n for c in cs)]) for n, a in live.items()}
    chosen = assign(cands, caps)
    left: dict[str, str] = {}
    by_anchor: dict[str, list[str]] = {}
    for n, c in chosen.items():
        if c is not None:
            by_anchor.setdefault(c.anchor, []).append(n)
    for anchor, names in by_anchor.items():
        if _anchor_role(live[anchor]) in ("table", "desk"):
            for n, why in _odd_seats(names, pieces, chosen).items():
                chosen[n] = None
                left[n] = why
    orphans = _adopt_orphans(live, cands, chosen, caps)
    held = {n: c for n, c in chosen.items() if c is not None}
    facing_tv = _tv_references(held, live)
    out = _Membership(held, cands, {}, {}, {})
    for n, cs in cands.items():
        c = chosen.get(n)
        role = pieces[n].role.role
        if c is not None:
            others = [x for x in cs if x.anchor != c.anchor]
            # a seat turned away from its holder has lost the evidence of where it belongs:
            # another anchor near it is a doubt, whatever the gaps say
            turned = c.facing_deg is not None and c.facing_deg > TURNED_AWAY_DEG
            if others and (others[0].cost - c.cost < AMBIGUOUS_COST or turned):
                o = others[0]
                out.uncertain[n] = f"also {_gap_words(o.gap_m)} from '{o.anchor}': {o.evidence}"
                out.doubtful.setdefault(o.anchor, {})[n] = (
                    f"{role} held by '{c.anchor}' ({c.evidence}) but nearly as near to this "
                    f"anchor: {o.evidence}")
            elif n in orphans:
                out.uncertain[n] = orphans[n]
            elif (_anchor_role(live[c.anchor]) in ("table", "desk")
                  and c.gap_m > SEAT_FAR_M and others):
                # pulled out further than a seat in order stands, with another anchor near
                # it: which one it was pulled from is a guess (alone, it is its table's)
                o = others[0]
                out.uncertain[n] = (f"{c.gap_m:.2f} m from the edge, further out than a seat "
                                    f"at it stands in order ({SEAT_FAR_M:.2f} m), and "
                                    f"{_gap_words(o.gap_m)} from '{o.anchor}'")
                out.doubtful.setdefault(o.anchor, {})[n] = (
                    f"{role} held by '{c.anchor}' ({c.evidence}) but pulled out as far from "
                    f"it as it stands from this anchor: {o.evidence}")
            elif (_anchor_role(live[c.anchor]) == "tv_stand" and turned
                  and c.anchor in facing_tv and facing_tv[c.anchor][0] != n):
                # before a TV stand only facing tells a member from a seat that stands in
                # the room: beside a seat that faces it (or, none facing, the nearest), one
                # turned away is in doubt (a lone seat turned away is its member out of order)
                out.uncertain[n] = (f"turned {c.facing_deg:.0f} deg from the stand while "
                                    f"'{facing_tv[c.anchor][0]}' {facing_tv[c.anchor][1]}: it "
                                    "may be a seat that only stands in the room")
            continue
        for x in cs:
            why = left.get(n) or (
                "its places are held by members nearer to it" if x.holds else "too far out "
                "to be held")
            out.doubtful.setdefault(x.anchor, {})[n] = f"{role} {x.evidence}; not held: {why}"
        out.left[n] = (f"{role}: not held by an anchor within reach "
                       f"({left.get(n) or 'their places held by nearer members, or too far'}"
                       f"; named doubtful by {', '.join(repr(x.anchor) for x in cs)})")
    for n, p in pieces.items():   # a role not settled: it may be a member of another kind
        if n in live or p.role.settled or not p.role.runner_up:
            continue
        other, s2 = p.role.runner_up
        for x in _candidates(p, live, role=other):
            if (n in held and held[n].anchor == x.anchor) or x.anchor not in live:
                continue
            out.doubtful.setdefault(x.anchor, {}).setdefault(
                n, f"role not settled ({p.role.role} {p.role.score:.2f} against {other} "
                   f"{s2:.2f}): as a {other} it stands {x.evidence}")
    for anchor, a in live.items():
        for name, why in _unsettled_near(a, unsettled).items():
            out.doubtful.setdefault(anchor, {})[name] = why
        out.near[anchor] = _near_units(anchor, a, pieces, held)
    return live, out


def _near_units(anchor: str, a: _Piece, pieces: Mapping[str, _Piece],
                held: Mapping[str, Candidate]) -> dict[str, str]:
    """Every unit standing within a seat's reach of the anchor's footprint that it does not
    hold, with where it went: what an uncertain group names, so whoever settles the doubt
    sees all that stands by it."""
    out = {}
    for n, p in pieces.items():
        c = held.get(n)
        if n == anchor or (c is not None and c.anchor == anchor):
            continue
        gap, _ = convex_signed_distance(p.shape.hull, a.shape.hull)
        if gap > SEAT_REACH_M:
            continue
        where = (f"held by '{c.anchor}'" if c is not None else
                 "an anchor itself" if _anchor_role(p) is not None else "in no group")
        out[n] = f"a {p.role.role} {_gap_words(gap)} from the anchor, not held: {where}"
    return out


def _tv_references(held: Mapping[str, Candidate], live: Mapping[str, _Piece]
                   ) -> dict[str, tuple[str, str]]:
    """TV stand -> (the seat its other seats are judged against, why): one that faces it
    (the nearest such), else, when it holds several, the nearest (its place is the surest)."""
    seats: dict[str, list[tuple[str, Candidate]]] = {}
    for n, c in sorted(held.items()):
        if _anchor_role(live[c.anchor]) == "tv_stand":
            seats.setdefault(c.anchor, []).append((n, c))
    out = {}
    for anchor, held_here in seats.items():
        facing = [(c.gap_m, n) for n, c in held_here
                  if c.facing_deg is not None and c.facing_deg <= TURNED_AWAY_DEG]
        if facing:
            out[anchor] = (min(facing)[1], "faces it")
        elif len(held_here) > 1:
            out[anchor] = (min((c.gap_m, n) for n, c in held_here)[1],
                           "stands nearer and none faces it")
    return out


def _adopt_orphans(live: Mapping[str, _Piece], cands: Mapping[str, Sequence[Candidate]],
                   chosen: dict[str, Candidate | None], caps: Mapping[str, Mapping[str, int]]
                   ) -> dict[str, str]:
    """An anchor left holding nothing while member-role objects no anchor holds stand near
    it (beyond a member's reach, or left out as another kind of seat) is not lost: it takes
    the nearest of them, up to its capacity per slot, as doubtful members (the group is
    uncertain, the doubt named). Returns member -> why it is in doubt."""
    holding = {c.anchor for c in chosen.values() if c is not None}
    offers: list[tuple[float, str, Candidate]] = []
    for n, cs in cands.items():
        if chosen.get(n) is not None:
            continue
        for c in cs:
            if c.anchor not in holding and c.anchor in live:
                offers.append((c.gap_m, n, c))
    out: dict[str, str] = {}
    taken: dict[tuple[str, str], int] = {}
    for _, n, c in sorted(offers, key=lambda o: (o[0], o[1], o[2].anchor)):
        if n in out or c.anchor in holding:
            continue
        key = (c.anchor, c.slot)
        if taken.get(key, 0) >= caps.get(c.anchor, {}).get(c.slot, 1):
            continue
        taken[key] = taken.get(key, 0) + 1
        chosen[n] = c
        out[n] = (f"no anchor holds it and this one holds nothing else: {c.evidence}; taken "
                  "as a doubtful member so the group is not lost")
    return out


def _gap_words(gap: float) -> str:
    return f"{max(gap, 0):.2f} m" if gap >= 0 else f"pushed {-gap:.2f} m in"


def _has_back(p: _Piece) -> bool | None:
    """True / False where the tall part settles it, None between the two thresholds."""
    t = p.shape.tall_share
    return True if t >= BACK_MIN_SHARE else False if t <= NO_BACK_MAX_SHARE else None


def _other_kind(a: _Piece, b: _Piece) -> str | None:
    """Why seats ``a`` and ``b`` are of two kinds (None: one kind). One kind when their
    backs agree (or one is not settled), their footprint areas differ by at most
    ``KIND_AREA_RATIO``, and they share a role and differ by at most ``KIND_SPREAD_M`` a
    side, or differ in role but not in size (``KIND_SIZE_M``: the same piece read
    differently)."""
    ba, bb = _has_back(a), _has_back(b)
    if ba is not None and bb is not None and ba != bb:
        return "one has a back, the other none"
    area_a = a.shape.length * a.shape.width
    area_b = b.shape.length * b.shape.width
    ratio = max(area_a, area_b) / max(min(area_a, area_b), 1e-6)
    if ratio > KIND_AREA_RATIO:
        return f"footprint areas differ {ratio:.1f}x (more than {KIND_AREA_RATIO:.1f}x)"
    da = np.array([a.shape.length, a.shape.width, a.shape.height])
    d = np.abs(da - np.array([b.shape.length, b.shape.width, b.shape.height]))
    if a.role.role == b.role.role:
        if float(d[:2].max()) <= KIND_SPREAD_M:
            return None
        return f"sides differ by {float(d[:2].max()):.2f} m (more than {KIND_SPREAD_M:.2f})"
    if bool(np.all(d <= KIND_SIZE_M)):
        return None
    return f"another role and size (differ by {float(d.max()):.2f} m)"


def _odd_seats(names: Sequence[str], pieces: Mapping[str, _Piece],
               chosen: Mapping[str, Candidate | None]) -> dict[str, str]:
    """Seats of another kind among a table's or a desk's (a stool or an armchair beside its
    chairs, a lounge armchair beside a desk's office chair): not taken as members, but
    named (``_other_kind`` says what makes two kinds). The kind most seats are (ties: the
    nearer) holds."""
    if len(names) < 2:
        return {}

    def cost(n: str) -> float:
        c = chosen.get(n)
        return c.cost if c is not None else 0.0

    kinds: list[list[str]] = []
    for n in sorted(names, key=lambda x: (cost(x), x)):   # the nearest seat founds a kind
        for kind in kinds:
            if _other_kind(pieces[n], pieces[kind[0]]) is None:
                kind.append(n)
                break
        else:
            kinds.append([n])
    if len(kinds) < 2:
        return {}
    main = min(kinds, key=lambda k: (-len(k), sum(cost(n) for n in k)))
    ref = pieces[main[0]]
    out = {}
    for kind in kinds:
        if kind is main:
            continue
        for n in kind:
            s = pieces[n].shape
            out[n] = (f"a {pieces[n].role.role} ({s.length:.2f}x{s.width:.2f} m, "
                      f"{s.height:.2f} m tall) among {len(main)} {ref.role.role}(s) "
                      f"({ref.shape.length:.2f}x{ref.shape.width:.2f} m): another kind of "
                      f"seat, {_other_kind(pieces[n], ref)}")
    return out


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
    live, found = _membership(pieces, anchors, unsettled)
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


def _unsettled_near(a: _Piece, unsettled: Sequence[Shape]) -> dict[str, str]:
    """Why the group may be missing a member: furniture-sized units no role fits standing
    where this anchor's members stand (they could be a seat the rules do not know)."""
    role = _anchor_role(a)
    reach = {"tv_stand": TV_REACH_M, "bed": BED_SIDE_REACH_M}.get(role or "", SEAT_REACH_M)
    out = {}
    for s in unsettled:
        gap, _ = convex_signed_distance(s.hull, a.shape.hull)
        if gap <= reach:
            out[s.name] = (f"'{s.name}' ({s.length:.2f}x{s.width:.2f} m, {s.height:.2f} m "
                           f"tall) stands {max(gap, 0):.2f} m from the anchor and no role "
                           "fits it: it may be a member")
    return out


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
    if a.role.hinted:
        anchor_evidence += " (its name agrees)"
    if not a.role.settled and a.role.runner_up:
        reasons.append(f"anchor role not settled: {a.role.role} {a.role.score:.2f} against "
                       f"{a.role.runner_up[0]} {a.role.runner_up[1]:.2f}")
    if unclear:
        reasons.append(unclear)
    if role == "table" and a.role.role == "desk":
        # desk-shaped, its front undetermined: read as a table its whole perimeter holds
        # seats, as a desk only its front (one per DESK_PLACE_M); where the readings hold
        # different seats, the geometry has not settled which, and the extra are in doubt
        at_desk = max(1, int(a.shape.length // DESK_PLACE_M))
        if len(members) > at_desk:
            extra = sorted(members, key=lambda m: (found.held[m].cost, m))[at_desk:]
            for m in extra:
                uncertain.setdefault(m, f"held only if '{anchor}' is a table: desk-shaped, its "
                                        f"front undetermined ({a.front.how}), as a desk it "
                                        f"holds {at_desk}")
                member_conf[m] = min(member_conf[m], 0.45)
            reasons.append(f"desk or table: a desk-shaped top whose front is undetermined, "
                           f"read as a table it holds {len(members)} seats, as a desk "
                           f"{at_desk} ({', '.join(repr(m) for m in extra)} in doubt)")
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
