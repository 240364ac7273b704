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

import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import GeometryError, GroupInputError, UsageError
from ..files import atomic
from ..files.jsonio import read_object
from ..iteration import RunJob, sha256_file
from ..measure.geometry import convex_signed_distance
from .errors import RelationGraphError
from .furniture import Role, Shape, UnitInput, classify, measure_unit, role_evidence
from .members import (
    AMBIGUOUS_COST,
    BED_SIDE_REACH_M,
    MEMBER_ROLES,
    SEAT_REACH_M,
    TV_REACH_M,
    Candidate,
    Front,
    assign,
    before_sofa,
    beside_bed,
    capacity,
    detect_front,
    edge_normal,
    facing_error_deg,
    seat_at_table,
    seat_at_tv,
)
from .paths import SCENE_BLEND, ScenePaths
from .relation_graph import GRAPH_VERSION, HINT_KEYS, GroupSpec, parse_relation_graph
from .scene_units import read_scene_units

__all__ = ["UnitInput", "propose_for_run", "propose_scene", "propose_units", "proposal_lines"]

PROPOSED_BY = "island-refine propose"
FLOOR_TOL_M = 0.25           # a unit whose base is higher above the floor stands on nothing
UNKNOWN_MIN_HEIGHT_M = 0.4   # a unit no role fits, this tall and wide, near an anchor ...
UNKNOWN_MIN_SIDE_M = 0.3     # ... makes its group uncertain (it may be a member) ...
UNKNOWN_MAX_SIDE_M = 4.0     # ... unless it is larger than furniture (a room's shell)
UNKNOWN_MAX_HEIGHT_M = 2.6
CONFIDENT = 0.5              # member / group confidence below this is uncertain
DEFAULT_CLEARANCE_M = {"table": 0.10, "long_table": 0.10, "round_table": 0.10,
                       "desk": 0.10, "bed": 0.05, "sofa": 0.40}
TV_CLEARANCE_RANGE_M = (1.2, 3.0)
# A clearance the members in order agree on is kept (a chair tucked under its desk, a
# designer's distance) when it lies in this range for the anchor's role; else the convention.
SEEN_CLEARANCE_M = {"table": (-0.6, 0.35), "desk": (-0.6, 0.35), "bed": (-0.05, 0.30),
                    "sofa": (0.15, 0.90), "tv_stand": (1.0, 3.5)}
MAX_SEEN_M = 0.35
TIDY_FACING_DEG = 10.0       # a member in order faces its anchor within this ...
TIDY_GAP_M = 0.05            # ... and a group in order has its gaps within this of the median
AGREE_GAP_M = 0.03           # members agree on a clearance within this of their median ...
AGREE_SHARE = 2.0 / 3.0      # ... when at least this share of all members do
SEAT_ROOM_M = 0.15           # a seat's width plus this along an edge (usual arrangements)
KIND_SIZE_M = 0.10           # a seat of another role this close in size is the same kind
ANCHOR_ROLES = ("table", "desk", "bed", "tv_stand", "sofa")
BESIDE_BED_ROLES = ("nightstand", "side_table")
# Context, never a member and never a doubt (furniture.CONTEXT_ROLES on the room branch);
# walls, doors and windows also tell which side of a cabinet stands against a wall.
CONTEXT_ROLES = ("wall", "flat", "door", "window", "ceiling", "prop")
WALL_ROLES = ("wall", "door", "window")


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


def _canonical_box(a: Shape) -> tuple[np.ndarray, np.ndarray]:
    """(centre, half extents) of the anchor's footprint box in its canonical frame (the
    anchor's own axes, as ``geometry`` sorts members onto ``+x``/``-x``/``+y``/``-y``)."""
    q = (a.hull - a.origin) @ a.rot2
    lo, hi = q.min(axis=0), q.max(axis=0)
    return (lo + hi) / 2.0, (hi - lo) / 2.0


def canonical_edges(a: Shape, members: Sequence[Shape]) -> dict[str, int]:
    """Members per edge of the anchor's footprint box in its canonical frame."""
    mid, half = _canonical_box(a)
    out: dict[str, int] = {}
    for m in members:
        d = (m.centre - a.origin) @ a.rot2 - mid
        if abs(d[0]) - half[0] > abs(d[1]) - half[1]:
            edge = "+x" if d[0] > 0 else "-x"
        else:
            edge = "+y" if d[1] > 0 else "-y"
        out[edge] = out.get(edge, 0) + 1
    return dict(sorted(out.items()))


def _seen_hints(role: str, a: Shape, members: Sequence[Shape]
                ) -> tuple[dict[str, Any], str | None, str]:
    """A table group's pattern as its members' edges show it (a group in order)."""
    k = len(members)
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


def _standard_forms(a: Shape, k: int, seat_w: float) -> list[tuple[str, dict[str, int]]]:
    """The usual arrangements of ``k`` seats at a rect table of this size, the most usual
    first: pairs across the long edges, with one or both ends, a row, a row and an end,
    both ends. An edge holds its length over seat width plus ``SEAT_ROOM_M``."""
    _, half = _canonical_box(a)
    if half[0] >= half[1]:
        (l0, l1), (s0, s1), length, width = ("+y", "-y"), ("+x", "-x"), 2 * half[0], 2 * half[1]
    else:
        (l0, l1), (s0, s1), length, width = ("+x", "-x"), ("+y", "-y"), 2 * half[1], 2 * half[0]
    per_long = max(1, int(length // (seat_w + SEAT_ROOM_M)))
    per_short = max(1 if width >= seat_w + 0.1 else 0, int(width // (seat_w + SEAT_ROOM_M)))
    out: list[tuple[str, dict[str, int]]] = []
    n = k // 2
    if k % 2 == 0 and n <= per_long:
        out.append(("pairs", {l0: n, l1: n}))
    n = (k - 2) // 2
    if k % 2 == 0 and 1 <= n <= per_long and per_short:
        out.append(("pairs and both ends", {l0: n, l1: n, s0: 1, s1: 1}))
    n = (k - 1) // 2
    if k % 2 == 1 and 1 <= n <= per_long and per_short:
        out += [("pairs and one end", {l0: n, l1: n, s: 1}) for s in (s0, s1)]
    if k <= per_long:
        out += [("row", {e: k}) for e in (l0, l1)]
    if 2 <= k and k - 1 <= per_long and per_short:
        out += [("row and one end", {e: k - 1, s: 1}) for e in (l0, l1) for s in (s0, s1)]
    if k == 2 and per_short:
        out.append(("both ends", {s0: 1, s1: 1}))
    if k <= per_short:
        out += [("row", {e: k}) for e in (s0, s1)]
    return out


def _form_hints(role: str, name: str, counts: dict[str, int]) -> dict[str, Any]:
    values = sorted(counts.values(), reverse=True)
    note = f"the usual arrangement of {sum(values)}: {name} ({counts})"
    if name == "row":
        return {"anchor_role": role, "pattern": "row"}
    if name == "row and one end":
        return {"anchor_role": role, "pattern": "L"}
    if name == "pairs and one end" and values[0] == 2:
        return {"anchor_role": role, "pattern": "2+2+1"}
    if name == "pairs and both ends" and values[0] == 2:
        return {"anchor_role": role, "pattern": "2+2+1+1"}
    if name == "pairs":
        layout: dict[str, int] = {"long": values[0]}
    elif name == "pairs and both ends":
        layout = {"long": values[0], "short": 1}
    elif name == "both ends":
        layout = {"short": 1}
    else:
        layout = dict(counts)
    return {"anchor_role": role, "pattern": "free", "layout": layout, "free_note": note}


def _table_hints(a: Shape, members: Sequence[Shape], tidy: bool
                 ) -> tuple[dict[str, Any], str | None, str, str]:
    """(relation hints, why the pattern is unclear or None, evidence, how the pattern was
    inferred) for a table group. A group in order keeps the pattern its members show; one
    out of order gets the usual arrangement of its member count nearest to what is seen,
    so a seat slid to another edge makes no lopsided layout."""
    k = len(members)
    if a.round:
        return ({"anchor_role": "round_table", "pattern": "ring"}, None,
                "round top: members in a ring", "round top: a ring")
    role = "long_table" if a.length / max(a.width, 1e-9) >= 1.5 else "table"
    if tidy:
        hints, unclear, note = _seen_hints(role, a, members)
        return hints, unclear, note, f"as seen, the {k} members in order ({note})"
    seen = canonical_edges(a, members)
    forms = _standard_forms(a, k, float(np.median([m.width for m in members])))
    if not forms:
        hints, unclear, note = _seen_hints(role, a, members)
        return hints, unclear, note, (f"as seen: no usual arrangement of {k} fits the "
                                      f"anchor ({note})")
    order = {name: i for i, name in enumerate(dict.fromkeys(f[0] for f in forms))}

    def moves(counts: dict[str, int]) -> int:
        return sum(abs(seen.get(e, 0) - counts.get(e, 0)) for e in ("+x", "-x", "+y", "-y"))

    name, counts = min(forms, key=lambda f: (moves(f[1]), order[f[0]]))
    shown = f"seen {seen}"
    how = (f"from the anchor's size and {k} members, not in order: {name} {counts}, the "
           f"usual arrangement nearest to the edges {shown}")
    return _form_hints(role, name, counts), None, f"{shown}; members not in order", how


def _member_order(role: str, a: _Piece, members: Sequence[_Piece]
                  ) -> list[tuple[float, float | None]]:
    """(footprint gap, facing error against the convention or None) per member."""
    out = []
    for m in members:
        gap, _ = convex_signed_distance(m.shape.hull, a.shape.hull)
        if role in ("table", "desk"):
            err = facing_error_deg(m.front, -edge_normal(a.shape, m.shape))
        elif role == "tv_stand":
            err = facing_error_deg(m.front, a.shape.centre - m.shape.centre)
        elif role == "bed" and a.front.world is not None:
            err = facing_error_deg(m.front, a.front.world)
        else:
            err = None
        out.append((float(gap), err))
    return out


def _in_order(err: float | None) -> bool:
    return err is None or err <= TIDY_FACING_DEG


def _tidy(order: Sequence[tuple[float, float | None]]) -> bool:
    """Every member faces its anchor within ``TIDY_FACING_DEG`` and stands within
    ``TIDY_GAP_M`` of the members' median gap."""
    gaps = [g for g, _ in order]
    med = float(np.median(gaps))
    return all(_in_order(e) for _, e in order) and all(abs(g - med) <= TIDY_GAP_M
                                                        for g in gaps)


def _clearance(role: str, order: Sequence[tuple[float, float | None]]) -> tuple[float, str]:
    """The clearance most members in order agree on (at least ``AGREE_SHARE`` of them
    within ``AGREE_GAP_M`` of the in-order members' median gap, inside
    ``SEEN_CLEARANCE_M``): the nearest of those, so none of them is too close; else the
    convention's."""
    k = len(order)
    gaps = [g for g, e in order if _in_order(e)]
    lo, hi = SEEN_CLEARANCE_M.get(role, (0.0, MAX_SEEN_M))
    why = "no members in order"
    if gaps:
        med = float(np.median(gaps))
        agree = [g for g in gaps if abs(g - med) <= AGREE_GAP_M]
        if len(agree) < AGREE_SHARE * k - 1e-9:
            why = (f"only {len(agree)} of {k} members in order agree within "
                   f"{AGREE_GAP_M * 100:.0f} cm")
        elif not lo <= med <= hi:
            why = f"the members' {med:.2f} m is outside {lo:.2f}-{hi:.2f} m for a {role}"
        else:
            value = math.floor(min(agree) * 100 + 1e-6) / 100 + 0.0
            return value, (f"as seen: the nearest of the {len(agree)} of {k} members in order "
                           f"that agree within {AGREE_GAP_M * 100:.0f} cm ({value:.2f} m)")
    if role == "tv_stand":
        med = float(np.median([g for g, _ in order]))
        lo, hi = TV_CLEARANCE_RANGE_M
        value = round(min(hi, max(lo, med)) / 0.05) * 0.05
        return value, (f"viewing distance: the seats' median {med:.2f} m within "
                       f"{lo:.1f}-{hi:.1f} m ({why})")
    value = DEFAULT_CLEARANCE_M.get(role, 0.10)
    return value, f"convention of a {role} ({value:.2f} m; {why})"


def _group_hints(role: str, a: _Piece, members: Sequence[_Piece]
                 ) -> tuple[dict[str, Any], str | None, str, dict[str, str]]:
    """(relation hints, why the pattern is unclear or None, pattern evidence, how each
    hinted value was inferred)."""
    order = _member_order(role, a, members)
    clearance, clearance_how = _clearance(role, order)
    k = len(members)
    how = {"anchor_role": f"{role}: from its geometry", "member_count": f"{k} members held",
           "clearance_m": clearance_how}
    if role == "table":
        hints, unclear, note, pattern_how = _table_hints(a.shape, [m.shape for m in members],
                                                         _tidy(order))
        hints["clearance_m"] = clearance
        how["anchor_role"] = f"{hints['anchor_role']}: from the top's shape"
        how["pattern"] = pattern_how
        return hints, unclear, note, how
    if role == "bed" and k != 2:
        seen = canonical_edges(a.shape, [m.shape for m in members])
        how["pattern"] = f"{k} beside the head end, as seen ({seen}): the convention places two"
        return ({"anchor_role": "bed", "clearance_m": clearance,
                 "pattern": "free", "facing": "parallel_to_anchor_long_axis",
                 "layout": {**seen, "align": "back"},
                 "free_note": f"{k} beside the bed at the headboard, as seen"},
                None, f"{k} beside the head end ({seen})", how)
    how["pattern"] = f"convention of a {role}"
    note = ("convention: seats before the TV stand's front" if role == "tv_stand"
            else f"convention of a {role}")
    return {"anchor_role": role, "clearance_m": clearance}, None, note, how


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


@dataclass
class _Membership:
    """Who holds whom after the room's one assignment, and every doubt, where it is."""

    held: dict[str, Candidate]                   # member -> the candidate it holds
    candidates: dict[str, list[Candidate]]       # member-role object -> its anchors
    uncertain: dict[str, str]                    # held member -> why it is in doubt
    doubtful: dict[str, dict[str, str]]          # anchor -> object it does not hold -> why
    left: dict[str, str]                         # member-role object in no group -> why


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
    held = {n: c for n, c in chosen.items() if c is not None}
    out = _Membership(held, cands, {}, {}, {})
    for n, cs in cands.items():
        c = chosen.get(n)
        role = pieces[n].role.role
        if c is not None:
            others = [x for x in cs if x.anchor != c.anchor]
            if others and others[0].cost - c.cost < AMBIGUOUS_COST:
                o = others[0]
                out.uncertain[n] = f"also {_gap_words(o.gap_m)} from '{o.anchor}': {o.evidence}"
                out.doubtful.setdefault(o.anchor, {})[n] = (
                    f"{role} held by '{c.anchor}' ({c.evidence}) but nearly as near to this "
                    f"anchor: {o.evidence}")
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
    return live, out


def _gap_words(gap: float) -> str:
    return f"{max(gap, 0):.2f} m" if gap >= 0 else f"pushed {-gap:.2f} m in"


def _odd_seats(names: Sequence[str], pieces: Mapping[str, _Piece],
               chosen: Mapping[str, Candidate | None]) -> dict[str, str]:
    """Seats of another kind among a table's (a stool or an armchair among its chairs):
    not taken as members, but named. The kind most seats are (ties: the nearer) holds;
    a seat of another role the size of those (``KIND_SIZE_M``) is the same piece read
    differently and stays."""
    kinds: dict[str, list[str]] = {}
    for n in names:
        kinds.setdefault(pieces[n].role.role or "", []).append(n)
    if len(kinds) < 2:
        return {}

    def nearness(kind: str) -> tuple[int, float]:
        return (-len(kinds[kind]), sum(c.cost for n in kinds[kind]
                                       if (c := chosen.get(n)) is not None))

    main = min(kinds, key=nearness)
    size = np.median([[pieces[n].shape.length, pieces[n].shape.width, pieces[n].shape.height]
                      for n in kinds[main]], axis=0)
    out = {}
    for kind, ns in kinds.items():
        if kind == main:
            continue
        for n in ns:
            s = pieces[n].shape
            if np.all(np.abs(np.array([s.length, s.width, s.height]) - size) <= KIND_SIZE_M):
                continue
            out[n] = (f"a {kind} ({s.length:.2f}x{s.width:.2f} m, {s.height:.2f} m tall) among "
                      f"{len(kinds[main])} {main}(s) of another size: another kind of seat")
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
        role = classify(s, name)
        if role.role in CONTEXT_ROLES:
            if role.role in WALL_ROLES:
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
    hints, unclear, pattern_note, inferred = _group_hints(role, a, [pieces[m] for m in members])
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
    doubtful = {n: why for n, why in sorted(found.doubtful.get(anchor, {}).items())
                if n not in members and n != anchor}
    for n, why in doubtful.items():
        reasons.append(why if why.startswith(f"'{n}'") else f"'{n}' may be a member: {why}")
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
    group's reasons), then how many units were left out."""
    head = "reused" if reused else "proposed"
    out = []
    for g in doc["groups"]:
        p = g["proposal"]
        line = (f"[propose] {g['id']}: {p['status']} ({p['confidence']:.2f}), anchor "
                f"{g['anchor']}, members {', '.join(g['members'])}")
        if p["status"] == "uncertain":
            line += f"; {'; '.join(p['reasons'])}"
        out.append(line)
    left = doc["proposed"]["unassigned"]
    confident = sum(1 for g in doc["groups"] if g["proposal"]["status"] == "confident")
    out.append(f"[propose] {head} {len(doc['groups'])} groups ({confident} confident, "
               f"{len(doc['groups']) - confident} uncertain); {len(left)} objects in no "
               "group (proposed.unassigned)")
    return out
