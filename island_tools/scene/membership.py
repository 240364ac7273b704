"""Who belongs to which anchor in a proposed scene: the room's one assignment of
member-role pieces to anchors (``members.assign``) and the doubt rules around it (a seat
another anchor could hold, turned away before a TV stand off its seats' row, pulled far out
near a second anchor, of another kind than the anchor's seats, an anchor whose seats went
nowhere). Split from
``propose`` (which builds the groups and the graph document from what this decides).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..measure.geometry import convex_signed_distance
from .furniture import Shape
from .members import (
    AMBIGUOUS_COST,
    BED_SIDE_REACH_M,
    MEMBER_ROLES,
    SEAT_FAR_M,
    SEAT_REACH_M,
    TV_NEAR_M,
    TV_REACH_M,
    Candidate,
    assign,
    before_sofa,
    beside_bed,
    capacity,
    far_rivals,
    seat_at_table,
    seat_at_tv,
    twin_doubts,
    twin_tables,
    wall_behind,
)
from .propose_spec import Piece as _Piece

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
# Two seats whose gaps to a place differ by no more than this stand as near (a seat's
# footprint is measured to the cm; disorder moves seats by 0.05 m and more): facing (and the
# anchor's kind of seat) breaks the tie, the "facing is at most a tie-breaker".
TIE_GAP_M = 0.10
# A row of seats before a TV stand: centres closer along its front than the seats' mean depth
# (tuned rows 0.07-0.82 m, a seat off the row 1.21 m), footprints at most a side table and a
# slide apart (tuned rows up to 0.5 m, off the row 0.98 m and more).
ROW_GAP_M = 0.8              # at most this between neighbours' footprints
LOUNGE_ROLES = frozenset({"sofa", "armchair"})   # seats a TV row mixes (one kind there)
ANCHOR_ROLES = ("table", "desk", "bed", "tv_stand", "sofa")
BESIDE_BED_ROLES = ("nightstand", "side_table")


# --------------------------------------------------------------------------- membership
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
    if (len(out) == 1 and out[0].holds and out[0].side_cost == 0.0
            and _anchor_role(anchors[out[0].anchor]) in ("table", "desk")):
        # the only anchor near it: a weak place (far out, turned) is no doubt of whose
        out = [replace(out[0], lone=True)]
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
    # anchor read as a table that may be a desk (holding one seat per DESK_PLACE_M) -> why
    desk_reading: dict[str, str] = field(default_factory=dict)


def _membership(pieces: Mapping[str, _Piece], anchors: Mapping[str, _Piece],
                unsettled: Sequence[Shape], walls: Sequence[Shape] = ()
                ) -> tuple[dict[str, _Piece], _Membership]:
    """(the anchors that hold a group, who belongs where): coffee tables to sofas first (a
    sofa holding one anchors that group and is nobody's member), then one assignment of
    every other member-role object over the whole room (``members.assign``). ``walls``:
    the room's walls (a table with its long side against one may be a desk)."""
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
    left: dict[str, str] = _facing_swaps(cands, chosen)
    by_anchor: dict[str, list[str]] = {}
    for n, c in chosen.items():
        if c is not None:
            by_anchor.setdefault(c.anchor, []).append(n)
    kind_tie: dict[str, str] = {}   # held seat -> why its kind holds only by a tie
    for anchor, names in by_anchor.items():
        if _anchor_role(live[anchor]) in ("table", "desk"):
            odd, tie = _odd_seats(names, pieces, chosen)
            for n, why in odd.items():
                chosen[n] = None
                left[n] = why
            kind_tie.update(tie)
    orphans = _adopt_orphans(live, cands, chosen, caps)
    held = {n: c for n, c in chosen.items() if c is not None}
    facing_tv = _tv_references(held, live)
    out = _Membership(held, cands, {}, {}, {})
    twins = twin_doubts(twin_tables(live, held, _anchor_role), held, cands)
    out.desk_reading = _desk_readings(live, walls)
    rivals: dict[tuple[str, str], list[tuple[float, str, Candidate]]] = {}
    for n, cs in cands.items():   # anchor slot -> who it left out for want of places
        if chosen.get(n) is None and n not in left:
            for x in cs:
                if x.holds:
                    rivals.setdefault((x.anchor, x.slot), []).append((x.cost, n, x))
    for n, cs in cands.items():
        c = chosen.get(n)
        role = pieces[n].role.role
        if c is not None:
            # another anchor within a seat's reach (one further out is no rival)
            others = [x for x in cs if x.anchor != c.anchor and x.holds]
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
            elif n in kind_tie:
                out.uncertain[n] = kind_tie[n]
            elif open_rivals := [r for r in rivals.get((c.anchor, c.slot), ())
                                 if r[0] - c.cost < AMBIGUOUS_COST
                                 and not _facing_breaks(c, r[2])]:
                # the anchor's places are all taken and a seat it left out stands nearly as
                # near, facing settling nothing: which is its member is a guess
                _, r, x = min(open_rivals)
                out.uncertain[n] = (f"'{r}' stands nearly as near ({x.evidence}) and "
                                    f"'{c.anchor}' has {caps[c.anchor][c.slot]} place(s) for "
                                    "them: which is its member is a guess")
            elif (_anchor_role(live[c.anchor]) in ("table", "desk") and c.gap_m > SEAT_FAR_M
                  and (far := far_rivals(n, c, others, live, pieces, held, _anchor_role))):
                # pulled far out near another anchor that could have lost it: whose is a guess
                o = far[0]
                out.uncertain[n] = (f"{c.gap_m:.2f} m from the edge, further out than a seat "
                                    f"at it stands in order ({SEAT_FAR_M:.2f} m), and "
                                    f"{_gap_words(o.gap_m)} from '{o.anchor}'")
                out.doubtful.setdefault(o.anchor, {})[n] = (
                    f"{role} held by '{c.anchor}' ({c.evidence}) but pulled out as far from "
                    f"it as it stands from this anchor: {o.evidence}")
            elif (_anchor_role(live[c.anchor]) == "tv_stand" and turned
                  and c.anchor in facing_tv and facing_tv[c.anchor][0] != n
                  and not _in_tv_row(n, c.anchor, pieces, held, facing_tv[c.anchor][0])
                  and not (c.gap_m <= TV_NEAR_M and _opposite(pieces[n], live[c.anchor]))):
                # before a TV stand a seat turned away in its seats' row (``_in_tv_row``) or
                # pushed against its front opposite the screen is its member; off the row,
                # beside a seat that faces it (none facing: the nearest), one turned away may
                # be a seat that only stands in the room (a lone one is its member)
                out.uncertain[n] = (f"turned {c.facing_deg:.0f} deg from the stand while "
                                    f"'{facing_tv[c.anchor][0]}' {facing_tv[c.anchor][1]}: it "
                                    "may be a seat that only stands in the room")
            elif n in twins:   # named by both tables: the other may have lost it
                out.uncertain[n] = twins[n][0]
                out.doubtful.setdefault(twins[n][1], {})[n] = (
                    f"{role} held by '{c.anchor}' ({c.evidence}) in doubt: {twins[n][0]}")
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


def _faces(c: Candidate) -> bool:
    return c.facing_deg is not None and c.facing_deg <= TURNED_AWAY_DEG


def _facing_breaks(win: Candidate, lose: Candidate) -> bool:
    """True when ``win`` holds the place over ``lose`` by facing: their gaps nearly tie
    (``TIE_GAP_M``) and only ``win`` faces the anchor."""
    return abs(win.gap_m - lose.gap_m) <= TIE_GAP_M and _faces(win) and not _faces(lose)


def _turn_words(c: Candidate) -> str:
    return ("has no front to face it with" if c.facing_deg is None
            else f"is turned {c.facing_deg:.0f} deg from it")


def _facing_swaps(cands: Mapping[str, Sequence[Candidate]],
                  chosen: dict[str, Candidate | None]) -> dict[str, str]:
    """Where the assignment gave a place to the nearer of two seats standing as near
    (``_facing_breaks``) and only the one left out faces the anchor, the place goes to it;
    returns seat that lost its place -> why (it stays named as a doubt, not held)."""
    offers: list[tuple[float, str, str, Candidate]] = []
    for r, cs in cands.items():
        if chosen.get(r) is not None:
            continue
        for x in cs:
            for n, c in chosen.items():
                if (c is not None and x.holds and (c.anchor, c.slot) == (x.anchor, x.slot)
                        and x.cost - c.cost < AMBIGUOUS_COST and _facing_breaks(x, c)):
                    offers.append((abs(x.gap_m - c.gap_m), r, n, x))
    out: dict[str, str] = {}
    for _, r, n, x in sorted(offers, key=lambda o: (o[0], o[1], o[2])):
        c = chosen.get(n)
        if chosen.get(r) is not None or c is None or (c.anchor, c.slot) != (x.anchor, x.slot):
            continue
        chosen[r], chosen[n] = x, None
        out[n] = (f"'{r}' stands as near ({_gap_words(x.gap_m)} against "
                  f"{_gap_words(c.gap_m)}) and faces it while this one {_turn_words(c)}: "
                  f"the place is '{r}''s")
    return out


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


def _desk_readings(live: Mapping[str, _Piece], walls: Sequence[Shape]) -> dict[str, str]:
    """Anchor read as a table -> why it may be a desk (a desk holds one seat per
    ``DESK_PLACE_M`` of its front, a table seats all round): a desk-shaped top whose front
    is undetermined, or a rectangular table with a long side against a wall, where a desk
    stands (one person at its open long side)."""
    out = {}
    for n, a in live.items():
        if _anchor_role(a) != "table" or a.shape.round:
            continue
        if a.role.role == "desk":
            out[n] = f"desk-shaped, its front undetermined ({a.front.how})"
            continue
        found = wall_behind(a.shape, walls, (a.shape.e_short, -a.shape.e_short))
        if found is not None:
            out[n] = (f"a table with its long side against wall '{found[1].name}', where a "
                      "desk stands")
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


def _in_tv_row(n: str, anchor: str, pieces: Mapping[str, _Piece],
               held: Mapping[str, Candidate], nearest: str) -> str | None:
    """The seat of TV stand ``anchor`` in whose row seat ``n`` stands, facing aside (None:
    none): a held seat facing the stand or, none facing, ``nearest`` when one of the two is
    opposite the screen; lounge seats (or one kind), centres closer along the stand's front
    than their mean depth and further apart across it (beside, not behind), footprints at
    most ``ROW_GAP_M`` apart. Behind, before, far beside the row or another kind: not."""
    a, p = pieces[anchor], pieces[n]
    if a.front.world is None or not p.role.settled:
        return None
    front = a.front.world / max(float(np.linalg.norm(a.front.world)), 1e-12)
    frame = np.c_[front, [-front[1], front[0]]]
    facing = any(c.anchor == anchor and _faces(c) for c in held.values())
    for r, c in sorted(held.items(), key=lambda rc: (rc[1].gap_m, rc[0])):
        q = pieces[r]
        if r == n or c.anchor != anchor or not (_faces(c) or (not facing and r == nearest)):
            continue
        if not facing and not any(_opposite(x, a) for x in (p, q)):
            continue
        lounge = {p.role.role, q.role.role} <= LOUNGE_ROLES
        if not lounge and _other_kind(p, q) is not None:
            continue
        d_fwd, d_side = np.abs((p.shape.centre - q.shape.centre) @ frame)
        apart, _ = convex_signed_distance(p.shape.hull, q.shape.hull)
        if (d_fwd < (p.shape.width + q.shape.width) / 2.0 and d_side > d_fwd
                and apart <= ROW_GAP_M):
            return r
    return None


def _opposite(p: _Piece, a: _Piece) -> bool:
    """True when ``p``'s footprint spans TV stand ``a``'s centre line: opposite the screen."""
    if (front := a.front.world) is None:
        return False
    side = np.array([-front[1], front[0]]) / max(float(np.linalg.norm(front)), 1e-12)
    across = (p.shape.hull - a.shape.centre) @ side
    return bool(across.min() <= 0.0 <= across.max())


def _adopt_orphans(live: Mapping[str, _Piece], cands: Mapping[str, Sequence[Candidate]],
                   chosen: dict[str, Candidate | None], caps: Mapping[str, Mapping[str, int]]
                   ) -> dict[str, str]:
    """An anchor left holding nothing while member-role objects no anchor holds stand near
    it (beyond a member's reach, or left out as another kind of seat) is not lost: it takes
    the nearest of them, up to its capacity per slot, as doubtful members (the group is
    uncertain, the doubt named); one whose seats within reach all went to an anchor holding
    several takes the one whose move costs least. Returns member -> why it is in doubt."""
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
    # still holding nothing while seats within its reach went to an anchor holding more
    # than one: it takes the one whose move costs least (the assignment's choice between
    # the two was a matter of cost, and an anchor with seats by it is not silently lost)
    count: dict[str, int] = {}
    for c2 in chosen.values():
        if c2 is not None:
            count[c2.anchor] = count.get(c2.anchor, 0) + 1
    moves: list[tuple[float, str, Candidate, str]] = []
    for n, cs in cands.items():
        now = chosen.get(n)
        if now is None:
            continue
        for c in cs:
            if c.holds and c.anchor in live and c.anchor not in count:
                moves.append((c.cost - now.cost, n, c, now.anchor))
    for _, n, c, donor in sorted(moves, key=lambda m: (m[0], m[1], m[2].anchor)):
        if c.anchor in count or count.get(donor, 0) < 2 or n in out:
            continue
        chosen[n] = c
        count[donor] -= 1
        count[c.anchor] = 1
        out[n] = (f"'{donor}' held it among {count[donor] + 1} and this anchor held nothing: "
                  f"{c.evidence}; taken as a doubtful member so the group is not lost")
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
               chosen: Mapping[str, Candidate | None]
               ) -> tuple[dict[str, str], dict[str, str]]:
    """(seats of another kind among a table's or a desk's -> why, held seats whose kind
    holds only by a tie -> why). A stool or an armchair beside its chairs, a lounge
    armchair beside a desk's office chair: not taken as members, but named
    (``_other_kind`` says what makes two kinds). The kind most seats are holds; where two
    kinds are as many, the nearer holds, and its seats are in doubt when the other stands
    nearly as near (``AMBIGUOUS_COST`` on average: which kind is the anchor's the geometry
    does not settle)."""
    if len(names) < 2:
        return {}, {}

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
        return {}, {}
    main = min(kinds, key=lambda k: (-len(k), sum(cost(n) for n in k)))
    # as many seats of another kind, nearly as near on average: which kind it is, is a guess
    rival = [k for k in kinds if k is not main and len(k) == len(main)
             and (sum(cost(n) for n in k) - sum(cost(n) for n in main)) / len(k)
             < AMBIGUOUS_COST]
    if rival:   # kinds as many and as near: the kind that faces it holds
        by_facing = _kind_by_facing([main, *rival], chosen)
        if by_facing is not None:
            main, rival = by_facing, []
    ref = pieces[main[0]]
    out = {}
    tie = {n: (f"its kind holds only by being nearer: as many seats of another kind "
               f"({', '.join(repr(x) for x in rival[0])}) stand nearly as near")
           for n in main} if rival else {}
    for kind in kinds:
        if kind is main:
            continue
        for n in kind:
            s = pieces[n].shape
            out[n] = (f"a {pieces[n].role.role} ({s.length:.2f}x{s.width:.2f} m, "
                      f"{s.height:.2f} m tall) among {len(main)} {ref.role.role}(s) "
                      f"({ref.shape.length:.2f}x{ref.shape.width:.2f} m): another kind of "
                      f"seat, {_other_kind(pieces[n], ref)}")
    return out, tie


def _kind_by_facing(kinds: list[list[str]], chosen: Mapping[str, Candidate | None]
                    ) -> list[str] | None:
    """Of kinds of seat as many at one anchor, the one whose seats all face it while no
    seat of the others does, standing on average as near as they (``TIE_GAP_M``) or
    nearer; None when facing does not settle it."""
    held = [[c for n in k if (c := chosen.get(n)) is not None] for k in kinds]
    if any(len(h) != len(k) or not h for h, k in zip(held, kinds)):
        return None
    facing = [i for i, h in enumerate(held) if all(_faces(c) for c in h)]
    if len(facing) != 1 or any(_faces(c) for i, h in enumerate(held) if i != facing[0]
                               for c in h):
        return None
    gaps = [sum(c.gap_m for c in h) / len(h) for h in held]
    win = facing[0]
    if gaps[win] > min(g for i, g in enumerate(gaps) if i != win) + TIE_GAP_M:
        return None
    return kinds[win]


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

