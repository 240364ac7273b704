"""Target specs of proposed groups (``island-refine propose``): from the anchor and the
members in order, never from where disordered members happen to stand.

A member is *in order* when it faces its anchor within ``TIDY_FACING_DEG`` (one without a
front always is); a group is when all are and their gaps lie within ``TIDY_GAP_M`` of the
median. A table's pattern is the usual arrangement of its member count at a table of its
size (``_standard_forms``) that its members show, or, out of order, the one nearest to what
is seen; members in order in no usual arrangement keep it as seen, and the group is
uncertain. A clearance is kept as seen where most members in order agree on it
(``AGREE_SHARE`` within ``AGREE_GAP_M``, inside ``SEEN_CLEARANCE_M``: a chair tucked under
its desk keeps its negative one); else the convention's, unless every member stands at
its place facing the table within 30 deg (then the clearance is not settled: uncertain).
:func:`group_hints` says how each value was inferred; :func:`spec_check` runs them through
``validate.resolve_target_spec``.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..measure.geometry import convex_signed_distance, watch_facing
from .doubt import FRONT_EVIDENCE
from .furniture import Role, Shape
from .members import Front, edge_normal, facing_error_deg
from .relation_graph import GroupSpec
from .sibling_fronts import settled_fronts
from .verify import TOO_FAR_DEFAULT_M

DEFAULT_CLEARANCE_M = {"table": 0.10, "long_table": 0.10, "round_table": 0.10,
                       "desk": 0.10, "bed": 0.05, "sofa": 0.40}
TV_CLEARANCE_RANGE_M = (1.2, 3.0)
# A clearance the members in order agree on is kept (a chair tucked under its desk, a
# designer's distance) when it lies in this range for the anchor's role; else the convention.
SEEN_CLEARANCE_M = {"table": (-0.6, 0.35), "desk": (-0.6, 0.35), "bed": (-0.05, 0.30),
                    "sofa": (0.15, 0.90), "tv_stand": (1.0, 3.5)}
MAX_SEEN_M = 0.35
TIDY_FACING_DEG = 10.0       # a member in order faces its anchor within this ...
# ... and one turned further but no more than this still faces it (membership's
# TURNED_AWAY_DEG, the same 30 deg): at its place in order such a turn may be a designer's
# (chairs turned up to 23 deg round a meeting table) or a small disorder; nothing measured
# tells them apart, so the group is left as laid out and uncertain, not turned back
TURNED_A_LITTLE_DEG = 30.0
TIDY_GAP_M = 0.05            # ... and a group in order has its gaps within this of the median
AGREE_GAP_M = 0.03           # members agree on a clearance within this of their median ...
AGREE_SHARE = 2.0 / 3.0      # ... when at least this share of all members do
SEAT_ROOM_M = 0.15           # a seat's width plus this along an edge (usual arrangements)
SQUARE_TOL_M = 0.03          # a top whose sides differ by less has no long edge
AS_SEEN = "as seen: "        # how a table's pattern was inferred when its members show it


@dataclass
class Piece:
    shape: Shape
    role: Role
    front: Front


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
    first: pairs across the long edges (with one or both ends, or one edge holding one more
    when the count is odd), a row (with one or both ends), both ends. An edge holds its
    length over seat width plus ``SEAT_ROOM_M``."""
    _, half = _canonical_box(a)
    if half[0] >= half[1]:
        (l0, l1), (s0, s1), length, width = ("+y", "-y"), ("+x", "-x"), 2 * half[0], 2 * half[1]
    else:
        (l0, l1), (s0, s1), length, width = ("+x", "-x"), ("+y", "-y"), 2 * half[1], 2 * half[0]
    per_long = max(1, int(length // (seat_w + SEAT_ROOM_M)))
    per_short = max(1 if width >= seat_w + 0.1 else 0, int(width // (seat_w + SEAT_ROOM_M)))
    out: list[tuple[str, dict[str, int]]] = []
    if k % 2 == 0 and k // 2 <= per_long:
        out.append(("pairs", {l0: k // 2, l1: k // 2}))
    for m in range(1, per_short + 1):
        n = (k - 2 * m) // 2
        if k % 2 == 0 and 1 <= n <= per_long:
            out.append(("pairs and both ends", {l0: n, l1: n, s0: m, s1: m}))
    n = (k - 1) // 2
    if k % 2 == 1 and 1 <= n <= per_long and per_short:
        out += [("pairs and one end", {l0: n, l1: n, s: 1}) for s in (s0, s1)]
    if k % 2 == 1 and k > 1 and n + 1 <= per_long:   # one long edge holds one more
        out += [("across the long edges", {l0: n + 1, l1: n}),
                ("across the long edges", {l0: n, l1: n + 1})]
    if k <= per_long:
        out += [("row", {e: k}) for e in (l0, l1)]
    if 1 <= k - 1 <= per_long and per_short:
        out += [("row and one end", {e: k - 1, s: 1}) for e in (l0, l1) for s in (s0, s1)]
    if 1 <= k - 2 <= per_long and per_short:
        out += [("row and both ends", {e: k - 2, s0: 1, s1: 1}) for e in (l0, l1)]
    if k % 2 == 0 and k // 2 <= per_short:
        out.append(("both ends", {s0: k // 2, s1: k // 2}))
    if k <= per_short:
        out += [("row", {e: k}) for e in (s0, s1)]
    return out


def _form_hints(role: str, name: str, counts: dict[str, int], square: bool = False
                ) -> dict[str, Any]:
    """Relation hints of a usual arrangement: its pattern when the contract names it, else
    a layout by edge role (by canonical edge on a square top, whose long and short edges
    are a toss-up)."""
    values = sorted(counts.values(), reverse=True)
    note = f"the usual arrangement of {sum(values)}: {name} ({counts})"
    if name == "row":
        return {"anchor_role": role, "pattern": "row"}
    if name == "row and one end":
        return {"anchor_role": role, "pattern": "L"}
    if name == "pairs and one end" and values[0] == 2:
        return {"anchor_role": role, "pattern": "2+2+1"}
    if name == "pairs and both ends" and values == [2, 2, 1, 1]:
        return {"anchor_role": role, "pattern": "2+2+1+1"}
    if square:
        layout: dict[str, int] = dict(counts)
    elif name == "pairs":
        layout = {"long": values[0]}
    elif name == "pairs and both ends":
        layout = {"long": values[0], "short": values[-1]}
    elif name == "both ends":
        layout = {"short": values[0]}
    else:
        layout = dict(counts)
    return {"anchor_role": role, "pattern": "free", "layout": layout, "free_note": note}


def _table_hints(a: Shape, members: Sequence[Shape], tidy: bool
                 ) -> tuple[dict[str, Any], str | None, str, str]:
    """(relation hints, why the pattern is unclear or None, evidence, how the pattern was
    inferred) for a table group: the usual arrangement of its member count at a table of
    its size (``_standard_forms``) the members' edges show; for members out of order, the
    one nearest to what is seen (a seat slid to another edge makes no lopsided layout). In
    order but in no usual arrangement, the layout is kept as seen and the group is
    uncertain: a designer's choice and a seat slid neatly look alike."""
    k = len(members)
    if a.round:
        return ({"anchor_role": "round_table", "pattern": "ring"}, None,
                "round top: members in a ring", "round top: a ring")
    role = "long_table" if a.length / max(a.width, 1e-9) >= 1.5 else "table"
    seen = canonical_edges(a, members)
    forms = _standard_forms(a, k, float(np.median([m.width for m in members])))
    order = {name: i for i, name in enumerate(dict.fromkeys(f[0] for f in forms))}

    def moves(counts: dict[str, int]) -> int:
        return sum(abs(seen.get(e, 0) - counts.get(e, 0)) for e in ("+x", "-x", "+y", "-y"))

    if forms:
        name, counts = min(forms, key=lambda f: (moves(f[1]), order[f[0]]))
        if moves(counts) == 0 or not tidy:
            _, half = _canonical_box(a)
            hints = _form_hints(role, name, counts, 2 * abs(half[0] - half[1]) < SQUARE_TOL_M)
            if moves(counts) == 0:
                return (hints, None, f"{name}, as seen ({seen})",
                        f"{AS_SEEN}{name} {counts}, a usual arrangement of {k}")
            return (hints, None, f"seen {seen}; members not in order",
                    f"from the anchor's size and {k} members, not in order: {name} {counts}, "
                    f"the usual arrangement nearest to the edges seen ({seen})")
    hints, unclear, note = _seen_hints(role, a, members)
    nearest = f"nearest usual one: {name} {counts}" if forms else f"no usual one of {k} fits"
    if unclear is None:
        unclear = (f"pattern unclear: the {k} members sit in order on {seen}, in no usual "
                   f"arrangement ({nearest}); proposed as seen")
    return hints, unclear, note, f"as seen ({seen}), in order but unusual ({nearest})"


def _member_order(role: str, a: Piece, members: Sequence[Piece]
                  ) -> list[tuple[float, float | None]]:
    """(footprint gap, facing error against the convention or None) per member."""
    out = []
    for m in members:
        gap, _ = convex_signed_distance(m.shape.hull, a.shape.hull)
        if role in ("table", "desk"):
            err = facing_error_deg(m.front, -edge_normal(a.shape, m.shape))
        elif role == "tv_stand" and m.front.world is not None:
            # a seat watching the TV stand: square to its front or turned to its centre,
            # as the review measures it (``geometry.watch_facing``)
            _, err = watch_facing(m.front.world, -edge_normal(a.shape, m.shape),
                                  a.shape.centre - m.shape.centre)
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


def _watching(order: Sequence[tuple[float, float | None]]) -> bool:
    """Seats of a TV stand in order: each faces it (square to its front or turned to its
    centre) within ``TIDY_FACING_DEG`` at a viewing distance in ``SEEN_CLEARANCE_M``."""
    lo, hi = SEEN_CLEARANCE_M["tv_stand"]
    return bool(order) and all(e is not None and e <= TIDY_FACING_DEG and lo <= g <= hi
                               for g, e in order)


def _turned_a_little(members: Sequence[Piece], order: Sequence[tuple[float, float | None]]
                     ) -> list[str]:
    """The members turned from their anchor by more than ``TIDY_FACING_DEG`` (each
    "'name' (N deg)"), when none is turned by more than ``TURNED_A_LITTLE_DEG`` and at least
    one other member is in order (a lone chair's place is no layout to keep); else []."""
    if (any(e is not None and e > TURNED_A_LITTLE_DEG for _, e in order)
            or not any(_in_order(e) for _, e in order)):
        return []
    return [f"'{m.shape.name}' ({e:.0f} deg)" for m, (_, e) in zip(members, order, strict=True)
            if not _in_order(e)]


def _laid_out(role: str, order: Sequence[tuple[float, float | None]]
              ) -> tuple[float, str] | None:
    """(the nearest gap floored to the cm, how) when every member's gap lies in the role's
    ``SEEN_CLEARANCE_M`` and within the review's too-far tolerance of the nearest (the
    layout passes the clearance review as it stands); else None."""
    gaps = [g for g, _ in order]
    lo, hi = SEEN_CLEARANCE_M.get(role, (0.0, MAX_SEEN_M))
    near = math.floor(min(gaps) * 100 + 1e-6) / 100 + 0.0
    if not (gaps and lo <= near and max(gaps) <= hi
            and max(gaps) - near <= TOO_FAR_DEFAULT_M):
        return None
    return near, (f"as laid out: all {len(gaps)} members spread {min(gaps):.2f}-"
                  f"{max(gaps):.2f} m, within the review's {TOO_FAR_DEFAULT_M:.2f} m too-far "
                  f"tolerance of the nearest ({near:.2f} m)")


def _clearance(role: str, order: Sequence[tuple[float, float | None]]) -> tuple[float, str]:
    """The clearance most members in order agree on (at least ``AGREE_SHARE`` of them
    within ``AGREE_GAP_M`` of the in-order members' median gap, inside
    ``SEEN_CLEARANCE_M``): the nearest of those, so none of them is too close. At a table
    or desk whose members are ALL in order but spread wider (a designer's chairs at
    0.06-0.21 m): the nearest, when the farthest stays within the review's too-far
    tolerance of it (``verify.TOO_FAR_DEFAULT_M``), so the layout passes as laid out.
    Else the convention's."""
    k = len(order)
    gaps = [g for g, e in order if _in_order(e)]
    lo, hi = SEEN_CLEARANCE_M.get(role, (0.0, MAX_SEEN_M))
    why = "no members in order"
    if gaps:
        med = float(np.median(gaps))
        agree = [g for g in gaps if abs(g - med) <= AGREE_GAP_M]
        near = math.floor(min(gaps) * 100 + 1e-6) / 100 + 0.0
        if (len(agree) < AGREE_SHARE * k - 1e-9 and role in ("table", "desk")
                and len(gaps) == k and lo <= near and max(gaps) <= hi
                and max(gaps) - near <= TOO_FAR_DEFAULT_M):
            return near, (f"as laid out: all {k} members in order, spread "
                          f"{min(gaps):.2f}-{max(gaps):.2f} m, within the review's "
                          f"{TOO_FAR_DEFAULT_M:.2f} m too-far tolerance of the nearest "
                          f"({near:.2f} m)")
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
        # loose spacing (``group_hints``): the clearance is the nearest a seat may watch
        # from, so the nearest seat's distance, never more: the median would push the sofa
        # of a room in depth back toward the wall behind it
        near = min(g for g, _ in order)
        lo, hi = TV_CLEARANCE_RANGE_M
        value = math.floor(min(hi, max(lo, near)) / 0.05 + 1e-6) * 0.05
        return value, (f"viewing distance: the nearest seat's {near:.2f} m within "
                       f"{lo:.1f}-{hi:.1f} m ({why})")
    value = DEFAULT_CLEARANCE_M.get(role, 0.10)
    return value, f"convention of a {role} ({value:.2f} m; {why})"


def group_hints(role: str, a: Piece, members: Sequence[Piece]
                 ) -> tuple[dict[str, Any], str | None, str, dict[str, str]]:
    """(relation hints, why the pattern is unclear or None, pattern evidence, how each
    hinted value was inferred). A member whose front the mesh leaves undetermined is judged
    by the front what is in order settles (``sibling_fronts``), and how each such front was
    settled, or why not, is said under ``forward_axis.<member>``."""
    fronts = settled_fronts(role, a, members)
    seen = [Piece(m.shape, m.role, Front(fronts[m.shape.name][0], "from what is in order",
                                         0.6))
            if fronts.get(m.shape.name, (None, ""))[0] is not None else m for m in members]
    hints, unclear, note, how = _hints(role, a, seen)
    how.update({f"{FRONT_EVIDENCE}{n}": line for n, (_, line) in sorted(fronts.items())})
    return hints, unclear, note, how


def _hints(role: str, a: Piece, members: Sequence[Piece]
           ) -> tuple[dict[str, Any], str | None, str, dict[str, str]]:
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
        placed = unclear is None and (a.shape.round or pattern_how.startswith(AS_SEEN))
        turned = _turned_a_little(members, order)
        laid = _laid_out(role, order) if placed and turned else None
        if laid is not None:
            # every member at its place, a usual arrangement as seen, at gaps the review
            # takes as laid out, some turned 10-30 deg: kept as laid out, the turn not settled
            near, laid_how = laid
            hints["clearance_m"] = near
            hints["spacing"] = "as_laid_out"
            how["clearance_m"] = laid_how
            how["spacing"] = (f"as laid out: all {k} members at their places "
                              + ("round the top" if a.shape.round else
                                 "in a usual arrangement as seen"))
            unclear = (f"facing not settled: {', '.join(turned)} turned from the table by more "
                       f"than {TIDY_FACING_DEG:g} deg but at most {TURNED_A_LITTLE_DEG:g}, every "
                       "member at its place: a designer's turn and a small disorder look alike, "
                       "so the group is left as laid out")
            return hints, unclear, note, how
        if (placed and k >= 2 and clearance_how.startswith("convention")
                and not any(e is not None and e > TURNED_A_LITTLE_DEG for _, e in order)):
            # every member at its place, facing the table within 30 deg, but no two-thirds of
            # them agree on a distance and their spread is wider than the review takes as laid
            # out (a meeting room's chairs tucked under and pulled out): a designer's distances
            # and a pull or push look alike, so the convention's clearance is not earned
            gaps = [g for g, _ in order]
            unclear = (f"clearance not settled: the {k} members stand at their places "
                       f"{min(gaps):.2f}-{max(gaps):.2f} m from the table, no "
                       f"{AGREE_SHARE:.0%} of them within {AGREE_GAP_M * 100:.0f} cm of each "
                       "other: a designer's distances and a pulled or pushed seat look alike, "
                       "so the group is left as it stands")
            return hints, unclear, note, how
        if placed and all(_in_order(e) for _, e in order):
            # every member faces the table, round or in a usual arrangement of its edges:
            # the places along the edges (round the ring) are the layout's (a designer's
            # row off-centre, three chairs at 90 deg round a round top), the pattern and the
            # clearance still judge them
            hints["spacing"] = "as_laid_out"
            where = "round the top" if a.shape.round else "in a usual arrangement as seen"
            how["spacing"] = (f"as laid out: all {k} members face the table within "
                              f"{TIDY_FACING_DEG:g} deg, {where}")
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
    if role == "tv_stand" and _watching(order):
        # seats in order stay as laid out: the nearest one's viewing distance is the
        # clearance, the others may sit further back ('loose': no evenness, no too-far)
        near = math.floor(min(g for g, _ in order) * 100 + 1e-6) / 100 + 0.0
        how["clearance_m"] = (f"as seen: the nearest of the {k} seats in order ({near:.2f} m), "
                              "a viewing distance")
        how["spacing"] = (f"loose: the {k} seats face the TV stand within "
                          f"{TIDY_FACING_DEG:g} deg at {SEEN_CLEARANCE_M['tv_stand'][0]:g}-"
                          f"{SEEN_CLEARANCE_M['tv_stand'][1]:g} m, in order: kept as laid "
                          "out, none nearer than the nearest")
        return ({"anchor_role": role, "clearance_m": near, "spacing": "loose"}, None,
                f"{note}; seats in order, kept as laid out", how)
    if role == "tv_stand":
        # a viewing distance is each seat's own: a seat further back than the others (an
        # armchair behind the sofa's line) is no fault, only one nearer than the clearance
        how["spacing"] = ("loose: seats watch the TV stand from their own distances, none "
                          "nearer than the clearance")
        return ({"anchor_role": role, "clearance_m": clearance, "spacing": "loose"}, None,
                note, how)
    return {"anchor_role": role, "clearance_m": clearance}, None, note, how


def spec_check(gid: str, anchor: str, members: Sequence[str], hints: dict[str, Any],
                a: Shape) -> dict[str, Any]:
    """The hints as the pipeline will read them: ``validate.resolve_target_spec`` (the
    pipeline's inference and conventions) must turn them into a valid target spec."""
    from .validate import resolve_target_spec

    spec = GroupSpec(gid, anchor, tuple(members), dict(hints))
    shape = "round" if a.round else "rect"
    ratio = a.length / max(a.width, 1e-9)
    resolved, _ = resolve_target_spec(spec, shape, ratio, "relation_graph.json")
    return resolved.to_dict()
