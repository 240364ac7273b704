"""Fronts and memberships of furniture units (``island-refine propose``).

A unit's front is ``island_tools.measure.forward_axis``'s (``mirror_relief``); when that is
undetermined, the side opposite its measured tall part (a backrest, a headboard) or, for
case furniture, the side away from a wall right behind it.

Membership rests on what disorder does not change: the footprint gap between a member and
an anchor (``convex_signed_distance`` of their hulls, negative when pushed in or under), the
role pair (``MEMBER_ROLES``), the side of the anchor it stands at and the anchor's capacity.
Facing only breaks ties (``FACING_WEIGHT``): a chair turned away 0.1 m from a table's edge
is that table's member. A seat belongs to a table or desk within ``SEAT_REACH_M`` (a desk's
front costs less than its ends), to a TV stand before its front (``TV_MIN_M`` to
``TV_REACH_M``); a nightstand or side table to the bed whose side it stands beside
(``BED_SIDE_REACH_M``) near the head end (``BED_HEAD_REACH_M``), one per side; a coffee
table to the sofa it stands before. Each test returns a :class:`Candidate` (cost, slot,
evidence in words) or None; :func:`assign` then gives every member to at most one anchor
slot over the whole room at once (the minimum-cost assignment, :func:`min_cost_assignment`).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..errors import GeometryError
from ..measure.forward_axis import detect_forward_axis
from ..measure.geometry import convex_signed_distance
from ..measure.meshcache import keyed_vertices, mesh_digest, remembered
from .furniture import Shape

MEMBER_ROLES: dict[str, tuple[str, ...]] = {
    "table": ("chair", "armchair", "stool"), "desk": ("chair", "armchair", "stool"),
    "tv_stand": ("sofa", "armchair", "chair"), "bed": ("nightstand", "side_table"),
    "sofa": ("coffee_table",)}
SEAT_REACH_M = 0.7           # a seat's footprint this close to a table's (disorder: 0.6 out)
# A lounge seat: an armchair this deep and wide (its footprint's smaller side) is sat in, not
# sat at a table or desk from (its seat's front is half a metre and more from where its back
# stands, the sitter out of the top's reach). Near a table or desk it is only a doubt (named,
# never held, never a kind of seat the table's seats are weighed against). Table and desk
# seats stand well below it: tuned chairs 0.37-0.59 m, desk armchairs on five-star bases
# 0.61-0.75 m; tuned lounge armchairs 1.06-1.32 m.
LOUNGE_SEAT_M = 0.95
SEAT_DOUBT_M = 1.0           # ... up to this, a seat no anchor holds is a doubt
SEAT_FAR_M = 0.45            # a seat held further out than a seat in order stands: a doubt
# Two tables of one model side by side are one seating a room splits by nearness: near
# enough that a seat between them stands within reach of both (a seat's reach plus its
# depth), equal in every dimension to the measuring grid. When they hold different numbers
# of seats, which table the odd seat belongs to is a guess whatever the gaps say.
TWIN_SIZE_M = 0.05
TWIN_APART_M = SEAT_REACH_M + 0.5
FACING_WEIGHT = 0.1          # cost of a seat turned fully away: a tie-breaker only
DESK_SIDE_COST = 0.3         # a seat at a desk's end rather than its front ...
DESK_BEHIND_COST = 0.6       # ... or behind it
SEAT_SPACING_M = 0.10        # between seats along an anchor's edge (capacity)
TV_MIN_M, TV_REACH_M = -0.3, 3.5   # pushed against the stand, or up to 3.5 m before it
TV_NEAR_M = 0.3              # nearer than this a seat is out of order: it costs more
TV_FACING_WEIGHT = 0.4
TV_CONE_DEG = 55.0           # "before its front": within this of the front direction
TV_BASE_COST = 0.35
TV_CAPACITY = 6
DESK_PLACE_M = 1.2
BED_SIDE_REACH_M = 0.8       # a nightstand this far out beside a bed (disorder: 0.6 out)
BED_HEAD_REACH_M = 1.1
BED_DOUBT_M = 1.0            # ... up to this beside it, one no bed holds is a doubt
BED_PUSHED_IN_M = 0.35       # a nightstand pushed into the bed this far is still beside it
SOFA_TABLE_GAP_M = (-0.2, 1.3)
SOFA_TABLE_BEST_M = 0.45
AMBIGUOUS_COST = 0.25        # a member this close in cost to a second anchor is in doubt
NONE_COST = 2.0              # more than any candidate costs
_NEVER = 1e6
WALL_BEHIND_M = 0.25
WALL_INSIDE_M = 0.1          # a piece this far into a wall's hull still stands at it


# --------------------------------------------------------------------------- fronts
@dataclass
class Front:
    world: np.ndarray | None
    how: str
    confidence: float
    symmetric: bool = False


class Placed(Protocol):
    """A measured piece with its front (``propose_spec.Piece``)."""

    shape: Shape
    front: Front


def snap(direction: np.ndarray, s: Shape) -> np.ndarray:
    """``direction`` snapped to the nearer footprint axis (a back stands on a side)."""
    axes = [s.e_long, -s.e_long, s.e_short, -s.e_short]
    return max(axes, key=lambda a: float(a @ direction))


def detect_front(s: Shape, role: str | None, walls: Sequence[Shape]) -> Front:
    v, f = s.local
    try:
        found = remembered("forward_axis", mesh_digest(v, f),
                           lambda: detect_forward_axis(keyed_vertices(v), f))
    except GeometryError:
        found = None
    if found is not None and found.axis_local is not None:
        d = s.rot2 @ np.asarray(found.axis_local, dtype=float)
        d /= max(float(np.linalg.norm(d)), 1e-12)
        return Front(d, f"detected ({found.method}, confidence {found.confidence:.2f})",
                      max(0.5, float(found.confidence)))
    if found is not None and found.status == "symmetric":
        return Front(None, f"symmetric (order {found.symmetry.get('order')})", 1.0, True)
    why = "" if found is None else found.detail.get("reason", "")
    if role in ("chair", "armchair", "sofa", "bed") and s.tall_share > 0.04:
        off = s.tall_offset
        extent = s.length if abs(off @ s.e_long) / max(s.length, 1e-9) > abs(
            off @ s.e_short) / max(s.width, 1e-9) else s.width
        if float(np.linalg.norm(off)) > 0.12 * extent:
            part = "headboard" if role == "bed" else "back"
            return Front(snap(-off, s), f"from the {part}'s side (detector undetermined: "
                                          f"{why})", 0.6)
    if role in ("tv_stand", "sofa", "bed", "desk", "nightstand"):
        found_wall = wall_behind(s, walls, (s.e_short, -s.e_short, s.e_long, -s.e_long))
        if found_wall is not None:
            back, w = found_wall
            return Front(-back, f"its back against wall '{w.name}' (detector "
                                 f"undetermined: {why})", 0.55)
    return Front(None, f"undetermined ({why})" if why else "undetermined", 0.0)


def wall_behind(s: Shape, walls: Sequence[Shape], backs: Sequence[np.ndarray]
                ) -> tuple[np.ndarray, Shape] | None:
    """(the side of ``backs`` that stands against a wall, the wall): the first side whose
    wall runs along it within ``WALL_BEHIND_M`` (up to ``WALL_INSIDE_M`` into it; None: no
    side does)."""
    if len(s.hull) < 3:
        return None
    for back in backs:
        for w in walls:
            if len(w.hull) < 3 or abs(float(w.e_long @ back)) > 0.3:
                continue
            gap, _ = convex_signed_distance(s.hull, w.hull)
            # deep inside a wall's hull is inside a room shell given as one mesh, not at it
            if (-WALL_INSIDE_M <= gap <= WALL_BEHIND_M
                    and float((w.centre - s.centre) @ back) > 0):
                return back, w
    return None


# --------------------------------------------------------------------------- membership
def _angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    c = float(a @ b) / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12)
    return math.degrees(math.acos(max(-1.0, min(1.0, c))))


def edge_normal(anchor: Shape, member: Shape) -> np.ndarray:
    """The outward normal of the anchor's edge the member stands at: away from the centre
    of a round anchor, else the normal of the rectangle side the member is outside of."""
    rel = member.centre - anchor.centre
    if anchor.round:
        return rel / max(float(np.linalg.norm(rel)), 1e-12)
    du = abs(float(rel @ anchor.e_long)) - anchor.length / 2.0
    dv = abs(float(rel @ anchor.e_short)) - anchor.width / 2.0
    if du > dv:
        return anchor.e_long * math.copysign(1.0, float(rel @ anchor.e_long))
    return anchor.e_short * math.copysign(1.0, float(rel @ anchor.e_short))


def facing_error_deg(member_front: Front, toward: np.ndarray) -> float | None:
    """How far the member's front is turned from ``toward`` (None: no front)."""
    if member_front.world is None:
        return None
    return _angle_deg(member_front.world, toward)


@dataclass
class Candidate:
    """One (member, anchor) pair that could belong together: ``cost`` (lower is nearer;
    facing adds at most ``FACING_WEIGHT``), the anchor ``slot`` it would take and the
    evidence in words."""

    anchor: str
    cost: float
    evidence: str
    gap_m: float
    slot: str = "around"
    facing_deg: float | None = None   # how far the member is turned from facing the anchor
    side_cost: float = 0.0            # what standing at a desk's end or back added
    lone: bool = False                # the only anchor near it: its place settles it

    @property
    def holds(self) -> bool:
        """False for a candidate that is only a doubt: near, but never assigned."""
        return self.cost < NONE_COST

    @property
    def confidence(self) -> float:
        """1 for a member right at its anchor, 0.5 at cost 1 (a seat at the edge of its
        reach, or close but behind a desk), less beyond: weak evidence; at least 0.5 for a
        seat no other anchor stands near (``lone``: far out, it is still this one's)."""
        conf = max(0.3, 1.0 - 0.5 * min(1.4, self.cost))
        return max(conf, 0.5) if self.lone else conf


def _where(gap: float) -> str:
    return f"pushed {-gap:.2f} m in under it" if gap < 0 else f"{gap:.2f} m from its edge"


def _facing_words(error: float | None, what: str = "it") -> str:
    if error is None:
        return "no front to face with"
    if error <= 20.0:
        return f"facing {what} ({error:.0f} deg)"
    return f"turned {error:.0f} deg from {what} (facing only breaks ties)"


def seat_at_table(a: Shape, af: Front, arole: str, m: Shape, mf: Front) -> Candidate | None:
    """A seat within ``SEAT_REACH_M`` of a table's or desk's footprint (pushed in or
    under it too), whatever way it is turned; at a desk with a front, its ends and back
    cost more than its front. Up to ``SEAT_DOUBT_M`` out it is only a doubt (a candidate
    that never holds: cost above ``NONE_COST``); so is a lounge seat (``LOUNGE_SEAT_M``)
    within reach."""
    gap, _ = convex_signed_distance(m.hull, a.hull)
    if gap > SEAT_DOUBT_M:
        return None
    normal = edge_normal(a, m)
    error = facing_error_deg(mf, -normal)
    if gap > SEAT_REACH_M:   # near, but further out than a seat at it: only a doubt
        return Candidate(a.name, NONE_COST + 1.0, f"{gap:.2f} m from its edge, beyond the "
                                                  f"{SEAT_REACH_M:.2f} m a seat stands at",
                         gap, facing_deg=error)
    if min(m.length, m.width) >= LOUNGE_SEAT_M:
        return Candidate(a.name, NONE_COST + 1.0, f"{_where(gap)}, a lounge seat "
                                                  f"({m.length:.2f}x{m.width:.2f} m, sat in, "
                                                  "not at a table)", gap, facing_deg=error)
    cost = max(gap, 0.0) / SEAT_REACH_M + FACING_WEIGHT * (
        0.5 if error is None else error / 180.0)
    side, extra = "", 0.0
    if arole == "desk" and af.world is not None and not a.round:
        front = snap(af.world, a)
        along = float(normal @ front)
        if along < -0.7:
            extra, side = DESK_BEHIND_COST, ", behind it"
        elif along < 0.7:
            extra, side = DESK_SIDE_COST, ", at its end"
        else:
            side = ", at its front"
    return Candidate(a.name, cost + extra, f"{_where(gap)}{side}, {_facing_words(error)}",
                     gap, facing_deg=error, side_cost=extra)


def seat_at_tv(a: Shape, af: Front, m: Shape, mf: Front) -> Candidate | None:
    """A seat before a TV stand's front (within ``TV_CONE_DEG`` of it), ``TV_MIN_M`` to
    ``TV_REACH_M`` away, whatever way it is turned (facing weighs more here than at a table:
    ``TV_FACING_WEIGHT``, so a seat facing a table nearby is that table's)."""
    gap, _ = convex_signed_distance(m.hull, a.hull)
    if not TV_MIN_M <= gap <= TV_REACH_M:
        return None
    rel = m.centre - a.centre
    extra, front_words = 0.0, "before its front"
    if af.world is not None:
        front = af.world
    else:   # front unknown: before either long side, and less sure
        front = a.e_short * math.copysign(1.0, float(rel @ a.e_short))
        extra, front_words = 0.15, "beside a long side (its front undetermined)"
    if _angle_deg(front, rel) > TV_CONE_DEG:
        return None
    error = facing_error_deg(mf, a.centre - m.centre)
    cost = (TV_BASE_COST + 0.15 * max(0.0, gap - 2.5) + 0.3 * max(0.0, TV_NEAR_M - gap) + extra
            + TV_FACING_WEIGHT * (0.5 if error is None else min(error, 90.0) / 90.0))
    return Candidate(a.name, cost, f"{front_words}, {gap:.2f} m away, "
                                   f"{_facing_words(error, 'the stand')}", gap, "before",
                     facing_deg=error)


def beside_bed(a: Shape, af: Front, m: Shape) -> Candidate | None:
    """Beside a side of the bed (the sides run along its front direction; without a front,
    along its long axis), within ``BED_SIDE_REACH_M`` of it and ``BED_HEAD_REACH_M`` of the
    head end (the end away from its front). Slot: the side it stands at (one each)."""
    gap, _ = convex_signed_distance(m.hull, a.hull)
    if gap > BED_DOUBT_M or gap < -BED_PUSHED_IN_M:
        return None
    axis = snap(af.world, a) if af.world is not None else a.e_long
    across = np.array([-axis[1], axis[0]])
    depth = a.length if abs(float(axis @ a.e_long)) > 0.7 else a.width
    span = a.width if depth == a.length else a.length
    rel = m.centre - a.centre
    lateral = float(rel @ across)
    if abs(lateral) - span / 2.0 < -0.05:
        return None   # at an end, not beside a side
    along = float(rel @ axis)
    if af.world is not None:   # the head end is behind the front
        from_head, extra = depth / 2.0 + along, 0.0
    else:   # the head end unknown: either end, and less sure
        from_head, extra = depth / 2.0 - abs(along), 0.15
    if from_head > BED_HEAD_REACH_M:
        return None
    cost = (0.7 * max(gap, 0.0) / BED_SIDE_REACH_M
            + 0.3 * max(from_head, 0.0) / BED_HEAD_REACH_M + extra)
    words = f"beside its side ({max(gap, 0):.2f} m), {max(from_head, 0):.2f} m from its head end"
    if gap > BED_SIDE_REACH_M:   # near, but further out than a nightstand: only a doubt
        cost, words = NONE_COST + 1.0, f"{words}, beyond {BED_SIDE_REACH_M:.2f} m"
    return Candidate(a.name, cost, words, gap, "side+" if lateral > 0 else "side-")


def before_sofa(a: Shape, af: Front, m: Shape) -> Candidate | None:
    """Before the sofa's front (without one: before either long side, less sure),
    ``SOFA_TABLE_GAP_M`` from it."""
    gap, _ = convex_signed_distance(m.hull, a.hull)
    if not SOFA_TABLE_GAP_M[0] <= gap <= SOFA_TABLE_GAP_M[1]:
        return None
    rel = m.centre - a.centre
    if af.world is not None:
        front, extra = af.world, 0.0
    else:
        front, extra = a.e_short * math.copysign(1.0, float(rel @ a.e_short)), 0.15
    if float(rel @ front) <= 0 or abs(float(rel @ a.e_long)) > a.length / 2.0 + 0.3:
        return None
    cost = abs(gap - SOFA_TABLE_BEST_M) / 1.0 + extra
    return Candidate(a.name, cost, f"before its front, {gap:.2f} m away", gap, "front")


def capacity(arole: str, a: Shape, af: Front, widths: Sequence[float]) -> dict[str, int]:
    """Members an anchor's edges hold, by slot: a table's perimeter (a desk's front) over
    the members' width plus ``SEAT_SPACING_M``; a bed one per side; a sofa one coffee
    table; a TV stand ``TV_CAPACITY`` seats."""
    if arole == "bed":
        return {"side+": 1, "side-": 1}
    if arole == "sofa":
        return {"front": 1}
    if arole == "tv_stand":
        return {"before": TV_CAPACITY}
    w = float(np.median(widths)) if len(widths) else 0.5
    if arole == "desk" and af.world is not None:
        # one person works at a desk's front per DESK_PLACE_M of it (a 1.0-1.6 m desk: one)
        along_front = abs(float(snap(af.world, a) @ a.e_long)) > 0.7
        edge = a.width if along_front else a.length
        return {"around": max(1, int(edge // DESK_PLACE_M))}
    else:
        edge = math.pi * a.length if a.round else 2.0 * (a.length + a.width)
    return {"around": max(1, int(edge // (w + SEAT_SPACING_M)))}


def place_free(arole: str, a: Shape, af: Front, seat: Shape, nearer: Sequence[Shape]) -> bool:
    """Whether table or desk ``a`` has a place left for ``seat`` by the edge it stands at,
    ``nearer`` (the anchor's own seats standing nearer to it than ``seat``) taken: a
    rectangular table's edge holds its length over the seat's width plus
    ``SEAT_SPACING_M`` (at least one), taken by the seats at that same edge; a round table
    or a desk with a front holds its ``capacity``, taken by all of them."""
    if a.round or (arole == "desk" and af.world is not None):
        places = capacity(arole, a, af, [seat.width])["around"]
        return len(nearer) < places
    normal = edge_normal(a, seat)
    edge = a.width if abs(float(normal @ a.e_long)) > 0.7 else a.length
    places = max(1, int(edge // (seat.width + SEAT_SPACING_M)))
    taken = sum(1 for s in nearer if float(edge_normal(a, s) @ normal) > 0.7)
    return taken < places


def far_rivals(n: str, c: Candidate, others: Sequence[Candidate],
               anchors: Mapping[str, Placed], pieces: Mapping[str, Placed],
               held: Mapping[str, Candidate], role_of: Callable[[Any], str | None]
               ) -> list[Candidate]:
    """Of the rival anchors ``others`` (each could hold it), those that could have lost
    seat ``n``, held by ``c`` further out than a seat in order stands: each, unless the
    places settle it - the rival is a table or desk standing further from the seat than its
    holder, whose places by it are all taken by its own seats standing nearer to it, while
    the holder has a place free by it (:func:`place_free`). Gaps alone settle nothing:
    disorder pulls a seat up to 0.6 m out and slides it to another edge, so a seat 0.2 m
    nearer one table may still be the other's. ``role_of``: an anchor's role (a desk
    without a front is a table)."""
    seat = pieces[n].shape

    def free(anchor: str, gap: float) -> bool:
        a = anchors[anchor]
        nearer = [pieces[m].shape for m, h in held.items()
                  if m != n and h.anchor == anchor and h.gap_m < gap]
        return place_free(role_of(a) or "table", a.shape, a.front, seat, nearer)

    own_free = free(c.anchor, c.gap_m)
    return [o for o in others
            if not (own_free and role_of(anchors[o.anchor]) in ("table", "desk")
                    and o.gap_m > c.gap_m and not free(o.anchor, o.gap_m))]


# --------------------------------------------------------------------------- assignment
def min_cost_assignment(cost: np.ndarray) -> list[int]:
    """The column of each row in a minimum-cost assignment of ``cost`` (rows <= columns,
    every row assigned, each column at most once): the Hungarian method with potentials,
    O(rows^2 columns), its inner loop over columns vectorised."""
    c = np.asarray(cost, dtype=float)
    n, m = c.shape
    if n > m:
        raise ValueError(f"{n} rows and only {m} columns")
    u, v = np.zeros(n + 1), np.zeros(m + 1)
    p = np.zeros(m + 1, dtype=np.int64)      # p[j]: the row (1-based) holding column j
    way = np.zeros(m + 1, dtype=np.int64)
    for i in range(1, n + 1):
        p[0], j0 = i, 0
        minv = np.full(m + 1, np.inf)
        used = np.zeros(m + 1, dtype=bool)
        while True:
            used[j0] = True
            i0 = int(p[j0])
            cur = c[i0 - 1] - u[i0] - v[1:]
            free = ~used[1:]
            better = free & (cur < minv[1:])
            minv[1:][better] = cur[better]
            way[1:][better] = j0
            masked = np.where(free, minv[1:], np.inf)
            j1 = int(np.argmin(masked)) + 1
            delta = float(masked[j1 - 1])
            held = np.flatnonzero(used)
            u[p[held]] += delta
            v[held] -= delta
            minv[1:][free] -= delta
            j0 = j1
            if p[j0] == 0:
                break
        while j0:
            j1 = int(way[j0])
            p[j0] = p[j1]
            j0 = j1
    out = [-1] * n
    for j in range(1, m + 1):
        if p[j]:
            out[int(p[j]) - 1] = j - 1
    return out


def assign(candidates: Mapping[str, Sequence[Candidate]],
           capacities: Mapping[str, Mapping[str, int]]) -> dict[str, Candidate | None]:
    """Each member to at most one anchor slot, over the whole room at once: the
    minimum-cost assignment of members to the anchors' slots (``capacities``: anchor ->
    slot -> how many) with a "none" for every member at ``NONE_COST`` (more than any
    candidate's cost, so a member is left out only when the places it could take are held
    by members nearer to them)."""
    names = sorted(n for n, cs in candidates.items() if cs)
    columns: list[tuple[str, str]] = []
    for anchor in sorted(capacities):
        for slot, cap in sorted(capacities[anchor].items()):
            wanted = sum(1 for n in names for c in candidates[n]
                         if c.anchor == anchor and c.slot == slot and c.holds)
            columns += [(anchor, slot)] * min(cap, wanted)
    out: dict[str, Candidate | None] = {n: None for n in candidates}
    if not names or not columns:
        return out
    index: dict[tuple[str, str], list[int]] = {}
    for j, key in enumerate(columns):
        index.setdefault(key, []).append(j)
    cost = np.full((len(names), len(columns) + len(names)), NONE_COST)
    cost[:, :len(columns)] = _NEVER
    by_column: dict[tuple[int, int], Candidate] = {}
    for i, n in enumerate(names):
        for c in candidates[n]:
            if not c.holds:
                continue
            for j in index.get((c.anchor, c.slot), ()):
                cost[i, j] = c.cost
                by_column[(i, j)] = c
    for i, j in enumerate(min_cost_assignment(cost)):
        out[names[i]] = by_column.get((i, j))
    return out


def twin_tables(live: Mapping[str, Placed], held: Mapping[str, Candidate],
                role_of: Callable[[Any], str | None]) -> dict[str, tuple[str, str]]:
    """Table -> (why its seats are in doubt, the other table): of two tables of one model
    standing side by side (``TWIN_SIZE_M``, ``TWIN_APART_M``), the one holding more seats
    (which of them is the pair's odd seat is not settled by where the seats stand).
    ``role_of``: an anchor's role."""
    tables = sorted(n for n, a in live.items() if role_of(a) == "table")
    count = {n: sum(1 for c in held.values() if c.anchor == n) for n in tables}
    out: dict[str, tuple[str, str]] = {}
    for i, a in enumerate(tables):
        for b in tables[i + 1:]:
            sa, sb = live[a].shape, live[b].shape
            size = np.abs(np.array([sa.length, sa.width, sa.height])
                          - np.array([sb.length, sb.width, sb.height]))
            if sa.round != sb.round or float(size.max()) > TWIN_SIZE_M or count[a] == count[b]:
                continue
            gap, _ = convex_signed_distance(sa.hull, sb.hull)
            if gap > TWIN_APART_M:
                continue
            full, other = (a, b) if count[a] > count[b] else (b, a)
            out.setdefault(full, (
                f"'{full}' and '{other}' are one model side by side ({max(gap, 0):.2f} m "
                f"apart): they hold {count[a] + count[b]} seats, {count[full]} here and "
                f"{count[other]} there, and which table the odd seat belongs to is not "
                "settled by where the seats stand", other))
    return out


def twin_doubts(twins: Mapping[str, tuple[str, str]], held: Mapping[str, Candidate],
                cands: Mapping[str, Sequence[Candidate]]) -> dict[str, tuple[str, str]]:
    """Seat -> (why it is in doubt, the other table), for the fuller table of twins
    (:func:`twin_tables`): the seats it holds that stand within a seat's reach of the other
    table (the odd seat can only be one of those: a seat beyond that reach is no candidate
    of the other table); where none does, every seat it holds, as the pair's doubt is still
    open. ``membership`` names each in both tables' groups."""
    out: dict[str, tuple[str, str]] = {}
    for full, (why, other) in twins.items():
        seats = sorted(n for n, c in held.items() if c.anchor == full)
        near = [n for n in seats if any(x.anchor == other for x in cands[n])]
        out.update(dict.fromkeys(near or seats, (why, other)))
    return out
