"""The built-in deterministic solver: the ``solver`` policy of the agent adapter.

From one iteration's state (canonical poses, the group's mesh cache and forward axes,
target_spec.json and geometry.json) it computes a *target* pose for every member and moves
members toward it within the phase's magnitude policy (``policy.phase_for``). Targets are
built from the definitions geometry.json measures with (docs/ARCHITECTURE.md, "Geometry
definitions"), so a member at its target measures 0 slot/angle deviation and 0 clearance
error there, with the same polygon code (``geometry.convex_signed_distance``).

Slots
-----
Rect anchors (``geometry.json::anchor.shape == "rect"``), edges ``+x -x +y -y``:

* ``row``: all members on one edge; ``2+2+1``: 2 on each long edge and 1 on a short edge;
  ``2+2+1+1``: 2 + 2 long, 1 on each short edge; ``L``: two adjacent edges, any split;
  ``T``: one long edge as a centre line (geometry's rule: every member at t = 0), members in
  a column perpendicular to the edge, the first at the clearance, each next one
  ``SLOT_GAP_M`` behind the previous (only the first can meet clearance_m, and the per-edge
  even-spacing measure does not apply to a centre line).
* Every candidate edge configuration (which edge of a row, which short edge of a 2+2+1,
  which corner and split of an L, which long edge of a T) is scored by an optimal
  member-to-slot assignment (Hungarian algorithm, numpy; the squared travel from a member's
  footprint centre to the slot: the straight distance, or the shortest way round the
  anchor when the straight line runs through it) and the cheapest wins, so members on the
  wrong edge (bunched, pattern mismatch) are reassigned. A configuration asking an edge to
  hold more than fits it by the slot rule below (another edge occupied too: S > L; the
  only occupied edge: the end slots' centres past the edge's ends) costs
  ``OVERFULL_EDGE_COST_PER_M`` per metre over, so a fitting configuration always wins.
* ``cluster``: no geometric locus to aim at: every member keeps the edge it is on and gets
  the spacing, facing and clearance rules there. ``free``: counts read from ``free_note``
  when it names canonical edges (``"2 chairs on -y, 1 at the +x end"`` and the counts add
  up to member_count), else the cluster fallback. A ``2+2+1``/``2+2+1+1`` whose
  member_count is not 5/6 and an ``L`` of one member fall back the same way.
* Along an edge with k members: geometry's slots, t_i = -S/2 + S (i + 0.5) / k with
  S = max(L, k (w_max + 0.10)), w_max measured at the members' target yaws. Limitation: an
  edge asked to hold more members than fit (S well above L, e.g. six chairs in a row on a
  1.9 m table side, when no edge holds them) puts its end slots past the edge's ends, and
  geometry.json's nearest-edge rule then counts those members on the neighbouring edge.

Round anchors (``ring``, or an anchor geometry.json calls round, whatever the pattern):
k evenly spaced angles; phase = circular mean of the members' offsets from even spacing
(geometry's own definition), members assigned to angles by the same Hungarian step.

Spacing ``even_along_each_edge``/``even_around_anchor``/``tight``/``as_laid_out`` use the
slots above at exactly ``clearance_m`` (``as_laid_out`` is only reviewed for its pattern and
clearance, so a group in order never gets here for its spacing); ``loose`` aims
``LOOSE_EXTRA_M`` further out (inside the 0.03 m clearance tolerance), but repairs members
in place where it can: no evenness is asked (``_kept_loose``).
``even_around_anchor`` on a rect anchor uses the edge slots: those are what geometry.json
measures there.

Facing: ``toward_anchor`` = inward normal of the target edge (ring: toward the anchor
centre from the target position); ``away_from_anchor`` its reverse;
``parallel_to_anchor_long_axis`` = the anchor's front when it lies along the long axis, or
along either box axis when the layout packs the side edges toward the anchor's back or
front (``align``: a bed wider than it is long still runs head to foot along its front),
else whichever of +-long axis is closer to the member's forward
(``geometry.parallel_facing_target``, what geometry.json measures with); ``mixed``:
per-member directions read from ``free_note`` (``parse_mixed_facing``),
members it does not mention keep their yaw. A symmetric member of order 2 or 4
(``forward_axes.json`` ``symmetry``) turns its reference axis to the nearest yaw aligned with
the target modulo 180 / 90 degrees (the minimal turn, what geometry.json measures modulo);
round (continuous) members and those whose order was not measured keep their yaw. Each member
gets its own yaw delta (never one delta for all).

Clearance: the yaw pivots on the footprint centre and changes the footprint, so the
footprint at the target yaw (the member's current hull rotated about its pivot) is pushed
along the edge normal (ring: radially) until its signed distance to the anchor hull equals
the clearance target (solved in closed form on the Minkowski difference: ``_ConvexDistance``).

Moves
-----
Yaw is applied at once (uncapped). Translations follow a path of footprint centres that
keeps the footprint off the anchor: the configuration-space obstacle (anchor hull minus the
member's footprint at its target yaw, inflated by ``TRANSIT_MARGIN_M``) is convex, so the
path is the straight segment when it misses the obstacle, else the quickest way round its
boundary under the per-axis cap: the shortest in the max-norm over the obstacle's
visibility graph (Euclidean length breaks ties), since every capped iteration covers at
least one cap of max-norm length, so moving both axes together (round the far side of a
desk) can beat the Euclidean-shortest way (down the near side, then along the front); a
point resting on the obstacle's boundary follows it; a member inside it first leaves
along the nearest side ("move out before sliding along the edge"), and a target inside
the margin is approached last along its normal.
Each iteration a member advances along its path as far as the phase's per-axis cap allows.
Endpoints are then checked pairwise: a move that would make two footprints overlap more
than they do now (or a member overlap the anchor more) backs off along its path, the lower
priority member first, down to not moving at all. Phases:

* pattern (1-3): every member that needs a move moves. If fewer than 3 need one (the
  policy's minimum), iteration 1 and any iteration whose leftovers exceed the member-phase
  caps are padded with ``VERIFY_NUDGE_M`` verification moves of still members (the
  contract's "verification deltas", undone in a later iteration): outward, or, for a
  member wedged between others, the first of 16 directions (nearest outward first) that
  overlaps nothing more than now; otherwise
  the iteration stays empty and the leftovers wait for the member phase.
* member (4-10): the worst 1-3 (priority: penetrating, then on the wrong edge, then
  distance + yaw); micro (11+): the worst 1.
* exception: the worst member is penetrating and, in the member/micro phase, its path
  exceeds the phase cap, or, in the pattern phase, too few members need a move for a group
  move: it moves alone, up to ``EXCEPTION_CAP_M``. A pattern phase that can move a group
  does so (all members advance 1.0 m rather than one member 2.0 m).

The decision is ``converged: true`` with empty members once every member is within
``POSITION_TOL_M`` and ``YAW_TOL_DEG`` of its target (the adapter honours it from
``policy.MIN_ITER``).

Budget
------
A decision searches for at most ``budget_s`` seconds (``DECISION_BUDGET_S``). When that runs
out, the edge configurations not yet scored, the placements not yet tried for blocked
members (who then keep their current pose) and the member-phase members not yet tried are
left out; the decision is the best arrangement found, keeping every hard constraint, and
its ``reason_summary`` names the budget and what was cut. Under the budget the result does
not depend on time. The search has ``SEARCH_SHARE`` of the budget; the rest is kept for
moving a member whose scene pose breaks a hard constraint clear (``Solver._clear_place``):
that search is counted against the budget too (it runs until the budget is spent, and at
least the budget's remaining share after the search), tries first the places clear of
every obstacle's convex hull (all tested at once), and when the budget runs out the member
stays where it is for this decision, the reason says so, and the next decision goes on from
the place the search stopped at (``_clear_from``). A candidate placement the coarse hulls
prove blocked is not solved on the full hulls (``_offset_unless_blocked``; the same result,
sooner).

Settling an infeasible plan
---------------------------
When the kept plan gave something up, the current state breaks no hard constraint and is the
best seen, and what is left are small corrections (at most 3 members, none penetrating, each
within the member phase's cap), the decision is "no change ... settles here" rather than
holding them for the member phase (``_settles_infeasible``): no move can change the
hard-constraint state or the verdict, and the contract's three empty iterations end the run
at MIN_ITER, as a feasible room's convergence does.

Memory (no oscillation)
-----------------------
The solver remembers the run's states (``_trail``: every iteration's member poses, each
member's share of ``verify.violation_score`` and the group's score; ``decide_from_disk``
reads the iterations it has not seen from their directories, so a solver made mid-run knows
them too). While the current state scores worse than the best one seen, a member whose move
would return it to a pose it left (within ``REVISIT_SHARE`` of the phase cap and
``REVISIT_DEG``), or that stood still through the last decision for want of a move toward
its target, is *settled*: it goes back toward its best pose seen (a straight, capped move
that keeps the hard constraints) and stays there. Once nothing else moves the decision is
"no change" (converged, which the adapter's gate honours only if the review passes;
otherwise the contract's stop after ``EMPTY_STOP`` empty iterations ends the run), and
the reason and the given-up finding name each settled member, why, and its best iteration.
A revisit counts only after the member stood further than that from the pose. A move never
carries a footprint through a wall (an obstacle ``BARRIER_M`` or longer in plan) to its far
side (``_passes_through``: the hull swept along each leg of the move).
"""
from __future__ import annotations

import functools
import hashlib
import itertools
import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np

from .errors import GroupInputError
from .files.configfile import DEFAULTS
from .files.jsonio import read_object
from .iteration import FORWARD_AXES, Group, load_context, load_current_poses, load_meshes
from .measure import frames, meshcache
from .measure.forward_axis import undetermined_alignment
from .measure.geometry import (
    EDGE_ORDER,
    SLOT_GAP_M,
    WATCHED_ROLES,
    convex_hull_2d,
    convex_signed_distance,
    facing_symmetry,
    front_is_lengthwise,
    modulo_turn_deg,
    parallel_facing_target,
    simplify_hull,
    watch_arc,
)
from .measure.layout import layout_of, parse_note
from .measure.layout import opposite as opposite_edge
from .measure.layout import resolve as resolve_layout
from .measure.obstacles import Context as ObstacleContext
from .measure.obstacles import Obstacle
from .measure.obstacles import distances as obstacle_distances
from .measure.obstacles import penetrations as obstacle_penetrations
from .policy import EXCEPTION_CAP_M, Phase, penetrating_members, phase_for
from .scene.verify import (
    SCORE_CLEARANCE_M,
    SCORE_FACING_DEG,
    SCORE_PENETRATION,
    SCORE_SPACING_M,
    violation_score,
)

POSITION_TOL_M = 0.001
YAW_TOL_DEG = 0.1
WATCH_PASSES, WATCH_YAW_TOL_DEG = 6, 0.001   # a watching seat's slot and yaw, settled
LOOSE_KEEP_FACING_DEG = 5.0   # a loose group's member this near its facing stays (half tol)
TRANSIT_MARGIN_M = 0.02
VERIFY_NUDGE_M = 0.01
LOOSE_EXTRA_M = 0.02
BACKOFF_STEPS = 16
OBSTACLE_TOL_M = 0.005      # deeper into the fixed context than this is "inside" it
BLOCKED_SLOT_COST_PER_M = 1.0e4  # m^2 per metre inside: a blocked slot loses to any free one
OVERFULL_EDGE_COST_PER_M = 1.0e3  # m^2 per metre of overfull edge: a fitting choice wins
PATTERN_COUNTS = {"2+2+1": 5, "2+2+1+1": 6}
HARD_TOL_M = 1.0e-4          # a re-placed target must be this clear of walls and the anchor
MEMBER_GAP_M = SLOT_GAP_M   # and this far from every other member's footprint (the slot rule)
CLEARANCE_STEP_M = 0.02      # smaller clearances tried for a blocked slot, down to
MIN_CLEARANCE_M = 0.0
CLEAR_STEP_M = 0.05          # a member left inside something is moved clear in these steps,
CLEAR_REACH_M = 1.5          # up to this far (``Solver._clear_place``)
RING_STEP_DEG = 5.0          # turns round a ring tried for a blocked slot
SLIDE_STEP_M = 0.05          # positions along an edge tried for a blocked slot
MIN_MOVE_M = 1.0e-4          # a move under this and under MIN_TURN_DEG is no move
MIN_TURN_DEG = 0.01
# wall seconds one decision may search (Solver(budget_s=...); DIRECTORYS.yaml decision_budget_s)
DECISION_BUDGET_S: float = DEFAULTS["decision_budget_s"]
BUDGET_NOTE = "decision time budget"
SEARCH_SHARE = 0.7           # of the budget for the search; the rest for clearing (above)
HULL_TOL_M = 0.01            # the coarse footprint of the obstacle tests (``_penetrations``)
REVISIT_SHARE = 0.5          # a pose within this share of the phase cap of one left is a revisit
REVISIT_DEG = 5.0            # and within this turn
SCORE_EPS = 1e-6             # scores closer than this are equal
BARRIER_M = 2.0              # an obstacle this long in plan is a wall: no move goes through it
_EPS = 1e-9
_DISC = np.array([[math.cos(a), math.sin(a)] for a in np.linspace(0, 2 * math.pi, 16,
                                                                    endpoint=False)])
_FACING_WORDS = (("away", "away_from_anchor"), ("outward", "away_from_anchor"),
                 ("parallel", "parallel_to_anchor_long_axis"),
                 ("long axis", "parallel_to_anchor_long_axis"),
                 ("toward", "toward_anchor"), ("inward", "toward_anchor"),
                 ("face the", "toward_anchor"), ("faces the", "toward_anchor"),
                 ("facing the", "toward_anchor"))
_REST_WORDS = re.compile(r"\b(others?|rest|remaining|all|every|each)\b")
_QUOTA = re.compile(r"(\d+)\s+(?:[a-z_]+\s+){0,3}?(?:on|at)\s+(?:the\s+)?([+-][xy])(?!\w)")


# --------------------------------------------------------------------------- notes
def parse_mixed_facing(note: str, names: list[str]) -> dict[str, str | None]:
    """Per-member facing from a free_note ("chair_1 faces away; the others face the table").

    Clauses are split at , ; . and newlines; a clause naming members and one facing word
    sets those members; one with "others/rest/all/every/each" sets the default. Members
    neither named nor covered by a default map to None (keep their yaw).
    """
    named: dict[str, str] = {}
    default = None
    for clause in re.split(r"[;,.\n]+", note.lower()):
        mode = next((m for word, m in _FACING_WORDS if word in clause), None)
        if mode is None:
            continue
        mentioned = [n for n in names
                     if re.search(rf"(?<!\w){re.escape(n.lower())}(?!\w)", clause)]
        for n in mentioned:
            named[n] = mode
        if not mentioned and _REST_WORDS.search(clause):
            default = mode
    return {n: named.get(n, default) for n in names}


def parse_free_quotas(note: str, member_count: int) -> dict[str, int] | None:
    """Canonical edge counts named in a free_note ("2 chairs on -y, 1 at the +x end"), if
    they add up (``island_tools.measure.layout.parse_note`` reads the other regular forms too)."""
    layout = parse_note(note, member_count)
    if not layout or not any(e in layout for e in EDGE_ORDER):
        return None
    return {e: int(layout[e]) for e in EDGE_ORDER if layout.get(e)}


# --------------------------------------------------------------------------- 2-D helpers
def _rotate(points: np.ndarray, deg: float) -> np.ndarray:
    a = math.radians(deg)
    c, s = math.cos(a), math.sin(a)
    return points @ np.array([[c, s], [-s, c]])


def _signed_angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    return math.degrees(math.atan2(a[0] * b[1] - a[1] * b[0], float(a @ b)))


def _distance(p: np.ndarray, q: np.ndarray) -> float:
    return convex_signed_distance(p, q)[0]


_BOX_SLACK_M = 1e-9   # a bounding-box gap this much past a threshold decides it exactly


def _box_gap(p: np.ndarray, q: np.ndarray) -> float:
    """A lower bound of two polygons' distance in O(n + m): the larger of their bounding
    boxes' gap and the gap of their projections on the line through their vertex means
    (round shapes side by side: a table and a stool overlap in their boxes). A bound past a
    threshold (by ``_BOX_SLACK_M``, for rounding) settles a distance test without the
    polygons' edges (O((n + m)^2) for dense footprints)."""
    gap = np.maximum(np.maximum(q.min(axis=0) - p.max(axis=0), p.min(axis=0) - q.max(axis=0)),
                     0.0)
    box = float(math.hypot(gap[0], gap[1]))
    d = q.mean(axis=0) - p.mean(axis=0)
    norm = float(math.hypot(d[0], d[1]))
    if norm < 1e-12:
        return box
    d = d / norm
    return max(box, float((q @ d).min() - (p @ d).max()))


def _distance_memo(memo: dict[Any, float], key: Any, p: np.ndarray, q: np.ndarray) -> float:
    """``_distance(p, q)``, kept in ``memo[key]``."""
    if key not in memo:
        memo[key] = _distance(p, q)
    return memo[key]


def _deeper(p: np.ndarray, q: np.ndarray, now: Callable[[], float]) -> bool:
    """``_distance(p, q) < min(now(), 0) - _EPS``: would footprint p overlap q more than a
    footprint does now? Boxes apart settle it (no overlap) without either distance."""
    if _box_gap(p, q) > _BOX_SLACK_M:
        return False
    return _distance(p, q) < min(now(), 0.0) - _EPS


def _halfplanes(poly: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    d = np.roll(poly, -1, axis=0) - poly
    n = np.stack([d[:, 1], -d[:, 0]], axis=1)
    n /= np.linalg.norm(n, axis=1)[:, None]
    return n, np.einsum("ij,ij->i", n, poly)


def _inside(poly: np.ndarray, p: np.ndarray) -> bool:
    n, off = _halfplanes(poly)
    return bool(np.all(off - n @ p > _EPS))


def _exit_point(poly: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The nearest point just outside a convex polygon, for a point inside it."""
    n, off = _halfplanes(poly)
    slack = off - n @ p
    i = int(np.argmin(slack))
    return p + n[i] * (slack[i] + 1e-6)


def _crosses(poly: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    """Does segment a-b pass through the polygon's interior (Cyrus-Beck clipping)?"""
    n, off = _halfplanes(poly)
    d = b - a
    num = off - _EPS - n @ a
    den = n @ d
    parallel = np.abs(den) < 1e-15
    if np.any(parallel & (num < 0)):
        return False
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = num / den
    lo = max([0.0, *ratio[(~parallel) & (den < 0)]])
    hi = min([1.0, *ratio[(~parallel) & (den > 0)]])
    return hi - lo > 1e-9


def _crosses_many(poly: np.ndarray, a: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``_crosses(poly, a, p)`` for every row p of ``points`` at once."""
    n, off = _halfplanes(poly)
    num = off - _EPS - n @ a
    den = (points - a) @ n.T                                           # (k, e)
    parallel = np.abs(den) < 1e-15
    blocked = np.any(parallel & (num < 0)[None, :], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = num[None, :] / den
    lo = np.max(np.where(~parallel & (den < 0), ratio, 0.0), axis=1, initial=0.0)
    hi = np.min(np.where(~parallel & (den > 0), ratio, 1.0), axis=1, initial=1.0)
    return ~blocked & (hi - lo > 1e-9)


def _around(poly: np.ndarray, a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    """The quickest path a -> b outside a convex polygon (both points outside it or on
    its boundary), under the magnitude policy's per-axis cap.

    Each iteration a member may move up to the cap along each axis at once, so the time a
    path takes is bounded by its length in the max-norm (every capped iteration uses up at
    least one cap of it), not by its Euclidean length: going round a sofa's corner, the
    Euclidean-shortest path (hugging the side, then sliding along the front) can need
    several iterations more than one whose legs move both axes together. The path is
    the max-norm-shortest one (Euclidean length breaks ties) over the polygon's visibility
    graph - a, b and the polygon's vertices; a leg between two points is allowed when it
    does not enter the polygon's interior, so a point resting on the boundary follows it
    rather than cutting through.
    """
    if not _crosses(poly, a, b):
        return [a, b]
    k = len(poly)
    nodes = np.vstack([a, b, poly])
    size = k + 2
    weight = np.full((size, size), np.inf)

    def leg(i: int, j: int) -> None:
        d = nodes[j] - nodes[i]
        weight[i, j] = weight[j, i] = float(np.abs(d).max()) + 1e-3 * float(np.linalg.norm(d))

    # what each end sees of the polygon's vertices, for all of them at once: O(k) tests of
    # O(k) edges each, vectorised (a dense footprint's obstacle has hundreds of vertices)
    seen = [~_crosses_many(poly, nodes[end], poly) for end in (0, 1)]
    for i in range(k):
        leg(2 + i, 2 + (i + 1) % k)
        for end in (0, 1):
            if seen[end][i]:
                leg(end, 2 + i)
    dist = np.full(size, np.inf)
    dist[0] = 0.0
    prev = np.full(size, -1)
    done = np.zeros(size, dtype=bool)
    for _ in range(size):
        u = int(np.argmin(np.where(done, np.inf, dist)))
        if not np.isfinite(dist[u]) or u == 1:
            break
        done[u] = True
        better = dist[u] + weight[u] < dist
        dist[better] = dist[u] + weight[u][better]
        prev[better] = u
    if not np.isfinite(dist[1]):  # pragma: no cover - a convex polygon never blocks both
        return [a, b]
    route = [1]
    while route[-1] != 0:
        route.append(int(prev[route[-1]]))
    return [nodes[i].copy() for i in reversed(route)]


def _length(path: list[np.ndarray]) -> float:
    return float(sum(np.linalg.norm(q - p) for p, q in itertools.pairwise(path)))


def _walk(path: list[np.ndarray], cap: float) -> list[np.ndarray]:
    """The prefix of ``path`` that stays within +-cap of its start on every axis."""
    cap *= 1.0 - 1e-9  # never exceed the cap through rounding
    p0 = path[0]
    out = [p0]
    for q in path[1:]:
        p = out[-1]
        if np.all(np.abs(q - p0) <= cap):
            out.append(q)
            continue
        d = q - p
        s = 1.0
        for i in range(2):
            if abs(d[i]) > 1e-15:
                s = min(s, (math.copysign(cap, d[i]) - (p[i] - p0[i])) / d[i])
        out.append(p + max(0.0, s) * d)
        break
    return out


def _upto(path: list[np.ndarray], share: float) -> list[np.ndarray]:
    """The path's points up to ``share`` of its length, ending on ``_point_at`` there."""
    s = _length(path) * share
    out = [path[0]]
    for p, q in itertools.pairwise(path):
        seg = float(np.linalg.norm(q - p))
        if s <= seg:
            break
        out.append(q)
        s -= seg
    end = _point_at(path, _length(path) * share)
    if float(np.abs(end - out[-1]).max()) > 0.0:
        out.append(end)
    return out


def _point_at(path: list[np.ndarray], s: float) -> np.ndarray:
    for p, q in itertools.pairwise(path):
        seg = float(np.linalg.norm(q - p))
        if s <= seg:
            return p + (q - p) * (s / seg if seg > 0 else 0.0)
        s -= seg
    return path[-1]


_SUPPORT_NEIGHBOURS = np.arange(-1, 2)
_NEAR_EDGE_M = 1e-9   # an edge line a point is this far inside of may still hold its nearest point
_SCREEN_SLACK_M = 1e-6   # the offsets' few ulps, and then some
MEMO_PAIRS = 512        # prepared Minkowski differences a solver keeps
MEMO_OFFSETS = 50_000   # solved offsets and footprint depths it keeps


def _alone(name: str, make: Callable[[], Any]) -> Callable[[], dict[str, Any] | None]:
    """A candidate for one member, as the {member: target} the search tries (None: it
    surely breaks a hard constraint)."""
    def one() -> dict[str, Any] | None:
        target = make()
        return None if target is None else {name: target}
    return one


def _remember(memo: dict[Any, Any], key: Any, value: Any, limit: int) -> None:
    """memo[key] = value, forgetting everything first when the memo is full (what is
    remembered only saves time: the values are pure functions of their keys)."""
    if len(memo) >= limit:
        memo.clear()
    memo[key] = value


def _support_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i, j) whose sums a[i] + b[j] include every vertex of the convex polygon
    A + B (a, b: CCW convex polygons): a vertex of the sum is the sum of the two
    polygons' support points in a direction inside both vertices' normal cones, and the
    cones of the sum are cut by both polygons' edge normals, so the directions halfway
    between consecutive edge normals (sorted by angle) find them all; two neighbours each
    way are added against near-ties (near-collinear vertices of a dense float32 hull)."""
    normals = np.vstack([np.roll(p, -1, axis=0) - p for p in (a, b)]) @ np.array(
        [[0.0, -1.0], [1.0, 0.0]])
    angle = np.sort(np.arctan2(normals[:, 1], normals[:, 0]))
    mid = (angle + np.append(angle[1:], angle[0] + 2.0 * math.pi)) / 2.0
    dirs = np.stack([np.cos(mid), np.sin(mid)], axis=1)
    i = np.argmax(a @ dirs.T, axis=0)
    j = np.argmax(b @ dirs.T, axis=0)
    ii = (i[:, None, None] + _SUPPORT_NEIGHBOURS[None, :, None]) % len(a)
    jj = (j[:, None, None] + _SUPPORT_NEIGHBOURS[None, None, :]) % len(b)
    pair = np.unique((ii * len(b) + jj).ravel())
    return pair // len(b), pair % len(b)


def _minkowski_difference(obstacle: np.ndarray, hull: np.ndarray) -> np.ndarray:
    """Q - P (CCW convex hull of every q - p): P translated by x meets Q iff x is in it, and
    the signed distance of P + x to Q is the signed distance of the point x to Q - P
    (outside: the Euclidean gap; inside: minus the distance to its boundary, which is the
    separating-axis depth, Q - P's edge normals being both polygons' edge normals).

    Built from the candidate pairs of ``_support_pairs`` (O(n + m) points, the same
    differences) rather than all n x m: a 1000-vertex round table less a 400-vertex stool
    is 400k points, whose hull dominated a crowded decision."""
    if len(obstacle) < 3 or len(hull) < 3:
        return convex_hull_2d((obstacle[:, None, :] - hull[None, :, :]).reshape(-1, 2))
    i, j = _support_pairs(obstacle, -hull)
    return convex_hull_2d(obstacle[i] - hull[j])


def _minkowski_sum(poly: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """P + S (CCW convex hull of every p + s), from ``_support_pairs``' candidates."""
    if len(poly) < 3 or len(shape) < 3:
        return convex_hull_2d((poly[:, None, :] + shape[None, :, :]).reshape(-1, 2))
    i, j = _support_pairs(poly, shape)
    return convex_hull_2d(poly[i] + shape[j])


class _ConvexDistance:
    """Signed distance of points to a CCW convex polygon (> 0 outside: the distance to the
    nearest edge segment; <= 0 inside: minus the distance to the nearest edge), the edges
    prepared once; and where a ray first reaches a given signed distance (``crossing``)."""

    def __init__(self, poly: np.ndarray) -> None:
        d = np.roll(poly, -1, axis=0) - poly
        length = np.linalg.norm(d, axis=1)
        keep = length > 0
        self.a, self.d, length = poly[keep], d[keep], length[keep]
        self.normal = np.stack([self.d[:, 1], -self.d[:, 0]], axis=1) / length[:, None]
        self.inv_sq = 1.0 / (length * length)

    def __call__(self, points: np.ndarray) -> np.ndarray:
        a, d, normal = self.a, self.d, self.normal
        rel = points[:, None, :] - a[None, :, :]                        # (k, e, 2)
        sides = (rel * normal).sum(axis=2)
        side = sides.max(axis=1)                                        # > 0: outside an edge
        out = side.copy()
        outside = np.flatnonzero(side > 0.0)
        if not len(outside):
            return out
        # An outside point's nearest boundary point lies on an edge whose line it is
        # outside of, or on a vertex of one: only those edges and their neighbours (against
        # rounding) are measured; each distance is the same float, so is their minimum.
        near = sides[outside] > -_NEAR_EDGE_M
        near |= np.roll(near, 1, axis=1) | np.roll(near, -1, axis=1)
        row, col = np.nonzero(near)
        r = rel[outside[row], col]
        t = np.clip((r * d[col]).sum(axis=1) * self.inv_sq[col], 0.0, 1.0)
        gap = np.sqrt(((r - t[:, None] * d[col]) ** 2).sum(axis=1))
        starts = np.flatnonzero(np.r_[True, row[1:] != row[:-1]])
        out[outside] = np.minimum.reduceat(gap, starts)
        return out

    def crossing(self, base: np.ndarray, direction: np.ndarray, target: float,
                 lo: float = 0.0) -> float:
        """The smallest r >= lo with signed distance(base + r * direction) >= target.

        The signed distance is convex along the ray, so from a start below ``target`` the
        crossing is unique and solved in closed form. Inside (target <= 0) the polygon shrunk
        by -target is the intersection of its edges' half-planes moved in: the first edge
        line reached. Outside, the polygon grown by ``target`` lies inside every moved
        edge line and holds every vertex's disc: the ray leaves it on a moved edge (the
        first line reached) or on a vertex's arc (the last disc left), whichever of the two
        bounds has the distance. The result is then raised by a few ulps until the
        distance measured there is ``target`` or more: the same guarantee as a bisection,
        at one evaluation instead of hundreds."""
        direction = np.asarray(direction, dtype=float)
        p0 = np.asarray(base, dtype=float) + lo * direction
        if self(p0[None, :])[0] >= target:
            return lo
        nd = self.normal @ direction
        s0 = ((p0[None, :] - self.a) * self.normal).sum(axis=1)
        up = nd > 0.0
        t = float(((target - s0[up]) / nd[up]).min()) if up.any() else math.inf
        if target > 0.0:
            w = p0[None, :] - self.a
            dd = float(direction @ direction)
            b = w @ direction
            disc = b * b - dd * ((w * w).sum(axis=1) - target * target)
            ok = disc >= 0.0
            if ok.any():
                arc = float(((-b[ok] + np.sqrt(disc[ok])) / dd).max())
                if arc < t and self((p0 + arc * direction)[None, :])[0] >= target - _EPS:
                    t = arc
        if not t <= _MAX_OFFSET_M:
            raise ValueError("clearance offset does not converge")
        r = lo + max(t, 0.0)
        step = 4.0 * float(np.finfo(float).eps) * max(1.0, abs(r))
        while self((np.asarray(base, dtype=float) + r * direction)[None, :])[0] < target:
            r += step
            step *= 2.0
        return r


_MAX_OFFSET_M = 1e4


def _solve_offset(hull_rel: np.ndarray, base: np.ndarray, direction: np.ndarray,
                  obstacle: np.ndarray, target: float, lo: float = 0.0,
                  signed: _ConvexDistance | None = None) -> float:
    """r >= lo with signed distance(hull_rel + base + r * direction, obstacle) == target:
    the distance of the point base + r * direction to the Minkowski difference
    (``_ConvexDistance.crossing``), the smallest such r."""
    if signed is None:
        signed = _ConvexDistance(_minkowski_difference(obstacle, hull_rel))
    return signed.crossing(base, direction, target, lo)


def min_cost_assignment(cost: np.ndarray) -> list[int]:
    """Row -> column minimising the total of a square cost matrix (Hungarian, O(n^3)).

    Implemented here rather than taken from scipy, which island_tools does not depend on.
    """
    n = cost.shape[0]
    u, v = np.zeros(n + 1), np.zeros(n + 1)
    match = [0] * (n + 1)      # column j -> row (1-based; 0 = free)
    way = [0] * (n + 1)
    for i in range(1, n + 1):
        match[0] = i
        j0 = 0
        minv = np.full(n + 1, np.inf)
        used = np.zeros(n + 1, dtype=bool)
        while True:
            used[j0] = True
            i0 = match[j0]
            free = np.flatnonzero(~used[1:]) + 1
            cur = cost[i0 - 1, free - 1] - u[i0] - v[free]
            better = cur < minv[free]
            minv[free[better]] = cur[better]
            for j in free[better]:
                way[j] = j0
            j1 = int(free[np.argmin(minv[free])])
            delta = minv[j1]
            for j in range(n + 1):
                if used[j]:
                    u[match[j]] += delta
                    v[j] -= delta
                else:
                    minv[j] -= delta
            j0 = j1
            if match[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            match[j0] = match[j1]
            j0 = j1
    out = [0] * n
    for j in range(1, n + 1):
        out[match[j] - 1] = j - 1
    return out


# --------------------------------------------------------------------------- state
@dataclass(frozen=True)
class _MeshData:
    vertices: np.ndarray
    local_hull: np.ndarray
    pivot_local: np.ndarray
    axis_local: np.ndarray | None   # the front, or a 2- / 4-fold member's reference axis
    seat_local: np.ndarray
    z_range: tuple[float, float]   # local vertex z, lowest and highest
    modulus_deg: float = 360.0     # facing is aligned modulo this turn (180 / 90: symmetric)


@dataclass(frozen=True)
class _Edge:
    name: str
    normal: np.ndarray
    tangent: np.ndarray
    length: float
    role: str
    half: float                 # distance from the anchor centre to this edge


@dataclass(frozen=True)
class _Anchor:
    round: bool
    centre: np.ndarray
    long_dir: np.ndarray
    hull: np.ndarray
    edges: dict[str, _Edge]
    front: np.ndarray | None = None     # the anchor's front (geometry.json::anchor.front)
    front_edge: str | None = None
    seat: np.ndarray | None = None      # the anchor's seat centre (layout centre_on seat)


@dataclass(frozen=True)
class _Member:
    name: str
    pivot: np.ndarray
    hull_rel: np.ndarray        # current footprint relative to the pivot
    forward: np.ndarray | None  # the front, or a symmetric member's reference axis
    edge: str                   # geometry.json's current edge
    penetrating: bool
    seat_rel: np.ndarray = field(default_factory=lambda: np.zeros(2))  # seat centre - pivot
    modulus_deg: float = 360.0  # its facing is aligned modulo this turn
    yaw_now_deg: float = 0.0    # its current yaw (rotation about z), for sticky targets


@dataclass(frozen=True)
class _Target:
    edge: str
    centre: np.ndarray
    yaw_deg: float              # delta from the current yaw
    hull_rel: np.ndarray        # footprint at the target yaw, relative to the pivot


@dataclass(frozen=True)
class _Plan:
    member: _Member
    target: _Target
    paths: Sequence[list[np.ndarray]]   # candidates, preferred first
    needed: bool
    priority: float

    @property
    def name(self) -> str:
        return self.member.name


class _Paths(Sequence[list[np.ndarray]]):
    """A plan's candidate paths, each made when first asked for (the fallback lane round a
    dense anchor costs as much as the preferred path, and most moves never need it)."""

    def __init__(self, makers: list[Callable[[], list[np.ndarray]]]) -> None:
        self._makers = makers
        self._made: dict[int, list[np.ndarray]] = {}

    def __len__(self) -> int:
        return len(self._makers)

    @overload
    def __getitem__(self, i: int) -> list[np.ndarray]: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[list[np.ndarray]]: ...

    def __getitem__(self, i: int | slice) -> list[np.ndarray] | Sequence[list[np.ndarray]]:
        if isinstance(i, slice):
            return [self[j] for j in range(len(self))[i]]
        j = range(len(self))[i]
        if j not in self._made:
            self._made[j] = self._makers[j]()
        return self._made[j]


@dataclass(frozen=True)
class _Move:
    point: np.ndarray
    yaw_deg: float
    hull: np.ndarray


@dataclass(frozen=True)
class _Visit:
    """One state of the run as the solver saw it (iteration k's poses and geometry.json)."""
    poses: dict[str, tuple[np.ndarray, float]]   # member -> (footprint centre, yaw deg)
    member_scores: dict[str, float]              # ``member_score`` of each member there
    score: float                                 # the group's ``verify.violation_score``
    hard: frozenset[str]                         # members that broke a hard constraint there


def member_score(entry: Mapping[str, Any], spacing: str) -> float:
    """One member's share of ``verify.violation_score`` from its geometry.json entry (its
    facing and clearance errors, its slot deviation under an even spacing, its
    penetrations), with the same weights: lower is better, 0 = all met."""
    score = float(entry.get("facing_error_deg") or 0.0) / SCORE_FACING_DEG
    err = float(entry.get("clearance_error_m") or 0.0)
    if spacing == "loose":
        err = min(err, 0.0)
    score += abs(err) / SCORE_CLEARANCE_M
    if spacing.startswith("even_"):
        score += abs(float(entry.get("slot_deviation_m") or 0.0)) / SCORE_SPACING_M
    score += SCORE_PENETRATION * (len(entry.get("penetrations") or {})
                                  + len(entry.get("obstacle_penetrations") or {}))
    return score


def _plan_shape(vertices: np.ndarray, faces: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(plan hull, footprint centre, seat centre) of a unit's local mesh, once per mesh in
    this process (``meshcache.remembered``): the hull of a 200k-triangle chair costs a
    tenth of a second, per member per decision otherwise."""
    def compute() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        v = meshcache.keyed_vertices(vertices)
        return (convex_hull_2d(v[:, :2]), frames.footprint_centre_local(v),
                frames.seat_centre_local(v))

    return meshcache.remembered("solver.plan_shape", meshcache.mesh_digest(vertices, faces),
                                compute)


class Solver:
    """One group's solver: meshes, axes and the target spec are fixed; poses change."""

    def __init__(self, meshes: Mapping[str, tuple[np.ndarray, np.ndarray]], anchor_id: str,
                 forward_axes: Mapping[str, Any], target_spec: Mapping[str, Any],
                 context: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
                 budget_s: float = DECISION_BUDGET_S) -> None:
        if not budget_s > 0.0:
            raise ValueError(f"budget_s must be > 0 s, got {budget_s!r}")
        self.anchor_id = anchor_id
        self.budget_s = float(budget_s)
        self._deadline = math.inf
        self._started = -math.inf
        self._clear_deadline: float | None = None
        self._budget_hit = False
        self._budget_cuts: list[str] = []
        self._screened = 0   # candidates the coarse proof ruled out (``_offset_unless_blocked``)
        self._screen_others: Mapping[str, np.ndarray] = {}
        self._infeasible_now = False   # this decision's kept plan gave something up
        self.spec = dict(target_spec)
        self.member_ids = sorted(n for n in meshes if n != anchor_id)
        axes = forward_axes.get("members", {})
        self._mesh: dict[str, _MeshData] = {}
        for name, (verts, faces) in meshes.items():
            axis, modulus = None, 360.0
            entry = axes.get(name) if name != anchor_id else None
            if isinstance(entry, Mapping) and "axis_local" in entry:
                # what geometry.json measures: a front, or a 2- / 4-fold reference axis
                sym = facing_symmetry(name, entry)
                if sym.order in (1, 2, 4) and sym.axis is not None:
                    axis, modulus = sym.axis, sym.modulus_deg or 360.0
                elif (aligned := undetermined_alignment(entry)) is not None:
                    # no front: squared to its target by its front line (one mirror plane), what
                    # geometry.json measures of it (which way it faces stays unknown)
                    axis, modulus = np.array(aligned[0], dtype=float), aligned[1]
            hull, pivot, seat = _plan_shape(verts, faces)
            v = np.asarray(verts, dtype=float)
            self._mesh[name] = _MeshData(v, hull, pivot, axis, seat,
                                         (float(v[:, 2].min()), float(v[:, 2].max())), modulus)
        facing = self.spec["facing"]
        if facing == "mixed":
            self._facing = parse_mixed_facing(self.spec.get("free_note") or "", self.member_ids)
        else:
            self._facing = {n: facing for n in self.member_ids}
        self.clearance_m = float(self.spec["clearance_m"]) + (
            LOOSE_EXTRA_M if self.spec["spacing"] == "loose" else 0.0)
        self.layout = layout_of(self.spec)
        # seats watching their anchor (a TV stand) aim within geometry's watch arc
        self._watched = str(self.spec.get("anchor_role", "")) in WATCHED_ROLES
        self._context = ObstacleContext(context) if context else None
        self._band: list[Obstacle] = []
        self._travel_obstacles: dict[tuple[str, str], np.ndarray] = {}
        self._signed_memo: dict[tuple[bytes, bytes], _ConvexDistance] = {}
        # the anchor less a target footprint, and that inflated by a margin (``_path``)
        self._transit_memo: dict[tuple[Any, ...], np.ndarray] = {}
        self._offset_memo: dict[tuple[Any, ...], float] = {}
        self._depth_memo: dict[bytes, dict[str, float]] = {}
        self._coarse_memo: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        self._coarse_depth_memo: dict[bytes, dict[str, float]] = {}
        self._gap_memo: dict[tuple[bytes, str], float | None] = {}
        self._last_targets: dict[str, tuple[dict[str, _Target], list[dict[str, Any]]]] = {}
        self._sticky: tuple[dict[str, tuple[np.ndarray, float, str]],
                            list[dict[str, Any]], set[str]] | None = None
        # what this run has tried (``_remember_state``): the states seen, and the members
        # that went back to their best pose seen and stay there (``_recall``)
        self._trail: dict[int, _Visit] = {}
        self._settled: dict[str, str] = {}
        self._clear_from: dict[str, tuple[bytes, int]] = {}   # ``_clear_place`` cut short
        self._hulls_of: tuple[list[Obstacle] | None, list[np.ndarray]] = (None, [])

    @classmethod
    def for_group(cls, group: Group, budget_s: float = DECISION_BUDGET_S) -> Solver:
        meshes, _ = load_meshes(group)
        axes = read_object(group.root / FORWARD_AXES, GroupInputError, "forward_axes.json",
                           "rerun init_iter0.py")
        return cls(meshes, group.metadata.anchor_id, axes, group.target_spec.to_dict(),
                   load_context(group), budget_s=budget_s)

    def _out_of_time(self, cut: str) -> bool:
        """Has this decision's time budget run out? The first time it has, ``cut`` (what
        the search leaves out from here) is recorded for the reason."""
        if time.perf_counter() < self._deadline:
            return False
        if cut not in self._budget_cuts:
            self._budget_cuts.append(cut)
        self._budget_hit = True
        return True

    def _offset(self, hull_rel: np.ndarray, base: np.ndarray, direction: np.ndarray,
                obstacle: np.ndarray, target: float, lo: float = 0.0) -> float:
        """``_solve_offset``, remembered (a pure function of its arguments: the same float),
        the Minkowski difference of each (obstacle, footprint) pair prepared once: a
        blocked member's slides along an edge share one, and a member still blocked in
        the next decision (kept where it stands, its footprint unchanged) finds its
        candidates' positions without solving them again."""
        pair = (obstacle.tobytes(), hull_rel.tobytes())
        key = (*pair, np.asarray(base, dtype=float).tobytes(),
               np.asarray(direction, dtype=float).tobytes(), float(target), float(lo))
        if key in self._offset_memo:
            return self._offset_memo[key]
        signed = self._signed_memo.get(pair)
        if signed is None:
            signed = _ConvexDistance(_minkowski_difference(obstacle, hull_rel))
            _remember(self._signed_memo, pair, signed, MEMO_PAIRS)
        r = _solve_offset(hull_rel, base, direction, obstacle, target, lo, signed)
        _remember(self._offset_memo, key, r, MEMO_OFFSETS)
        return r

    def _offset_unless_blocked(self, hull_rel: np.ndarray, base: np.ndarray,
                               direction: np.ndarray, obstacle: np.ndarray,
                               target: float) -> float | None:
        """``_offset``, or None when the footprint there is surely deeper than
        ``HARD_TOL_M`` in the fixed context: a candidate that cannot keep the hard
        constraints is then not solved on the full hulls (a round table's 900 vertices
        less a stool's 240 cost ~0.03 s a solve). The proof takes the coarse hulls
        (``_coarse``: containing each, within ``HULL_TOL_M``), whose signed distance is at
        most 2 ``HULL_TOL_M`` below the exact one: solved for the target and for 2
        ``HULL_TOL_M`` less they bracket the exact offset [r1, r2]; the coarse footprint
        at r2 is at most ``HULL_TOL_M`` deeper than the exact one there, and depth changes
        by at most the distance moved, so a coarse depth beyond ``HARD_TOL_M`` +
        ``HULL_TOL_M`` + (r2 - r1) is beyond ``HARD_TOL_M`` wherever the exact offset
        lands; likewise a footprint surely within ``MEMBER_GAP_M`` of a member placed so far
        (``_screen_others``, set while ``_keep_hard`` searches). Otherwise the exact
        offset, the same float as without the screen."""
        if self._band:
            coarse_hull, coarse_obstacle = self._coarse(hull_rel), self._coarse(obstacle)
            if len(coarse_hull) < len(hull_rel) or len(coarse_obstacle) < len(obstacle):
                r2 = self._offset(coarse_hull, base, direction, coarse_obstacle, target)
                r1 = self._offset(coarse_hull, base, direction, coarse_obstacle,
                                  target - 2.0 * HULL_TOL_M)
                at = coarse_hull + base + r2 * np.asarray(direction, dtype=float)
                slack = HULL_TOL_M + (r2 - r1) + _SCREEN_SLACK_M
                depth = max(obstacle_penetrations(at, self._band).values(), default=0.0)
                # the same bound for the members placed so far: the exact footprint is at
                # most ``slack`` further from one than the coarse one at r2
                if depth > HARD_TOL_M + slack or any(
                        _box_gap(at, o) + slack < MEMBER_GAP_M
                        and _distance(at, o) + slack < MEMBER_GAP_M
                        for o in self._screen_others.values()):
                    self._screened += 1
                    return None
        return self._offset(hull_rel, base, direction, obstacle, target)

    def _penetrations(self, hull: np.ndarray) -> dict[str, float]:
        """``obstacles.penetrations`` against the band, remembered per footprint (the band
        is fixed while it is the same object), the same floats: first with the footprint
        simplified to ``HULL_TOL_M`` (``_coarse``: it contains the footprint, so an
        obstacle it does not overlap, the footprint does not either), then with the
        footprint itself against the obstacles the coarse one overlaps. Most tests of a
        search are clear, and a dense mesh's footprint has hundreds of vertices."""
        key = np.ascontiguousarray(hull, dtype=float).tobytes()
        found = self._depth_memo.get(key)
        if found is None:
            found = self._coarse_depths(hull)
            if found and len(self._coarse(hull)) < len(hull):
                found = obstacle_penetrations(hull, [ob for ob in self._band
                                                     if ob.name in found])
            _remember(self._depth_memo, key, found, MEMO_OFFSETS)
        return found

    def _coarse_depths(self, hull: np.ndarray) -> dict[str, float]:
        """``obstacles.penetrations`` of ``_coarse(hull)``, remembered per footprint: each
        at least the footprint's own depth (0 when absent) and at most ``HULL_TOL_M``
        more."""
        key = np.ascontiguousarray(hull, dtype=float).tobytes()
        found = self._coarse_depth_memo.get(key)
        if found is None:
            found = obstacle_penetrations(self._coarse(hull), self._band)
            _remember(self._coarse_depth_memo, key, found, MEMO_OFFSETS)
        return found

    def _coarse(self, hull: np.ndarray) -> np.ndarray:
        """``simplify_hull(hull, HULL_TOL_M)``, remembered per shape: a footprint moved or
        turned (a candidate placement) is the same shape, its vertices in the same order
        (the key: its edge lengths in that order), and the simplified one moves and turns
        with it (checked: the remembered shape so moved must land on ``hull``)."""
        if len(hull) <= 4:
            return hull
        edges = np.roll(hull, -1, axis=0) - hull
        key = np.round(np.hypot(edges[:, 0], edges[:, 1]), 7).tobytes()
        known = self._coarse_memo.get(key)
        if known is not None:
            shape, coarse = known
            a = math.atan2(edges[0, 1], edges[0, 0])
            e0 = shape[1] - shape[0]
            turn = a - math.atan2(e0[1], e0[0])
            c, s = math.cos(turn), math.sin(turn)
            rot = np.array([[c, -s], [s, c]])
            if np.abs((shape - shape[0]) @ rot.T + hull[0] - hull).max() <= 1e-9:
                return (coarse - shape[0]) @ rot.T + hull[0]
        coarse = simplify_hull(hull, HULL_TOL_M)
        _remember(self._coarse_memo, key, (hull.copy(), coarse), MEMO_PAIRS)
        return coarse

    def _blocker_gap(self, hull: np.ndarray, blocker: str) -> float | None:
        """``obstacles.distances(hull, band).get(blocker)``: that obstacle only, remembered
        (the anchor's distance to what blocks it, for the reason)."""
        key = (hull.tobytes(), blocker)
        if key not in self._gap_memo:
            self._gap_memo[key] = obstacle_distances(
                hull, [ob for ob in self._band if ob.name == blocker]).get(blocker)
        return self._gap_memo[key]

    @property
    def _band_names(self) -> list[str]:
        return [ob.name for ob in self._band]

    def _passes_through(self, hull_rel: np.ndarray, points: list[np.ndarray]) -> bool:
        """Does the footprint ``hull_rel`` carried along ``points`` cross a barrier of the
        fixed context (an obstacle ``BARRIER_M`` or longer in plan: a wall; deeper than
        ``OBSTACLE_TOL_M``) that it is in at neither end: a move through a wall to the
        room behind it? A move through a column or a unit stands for the way round it
        (the paths go round the anchor only), as before. The swept area of each leg is the
        hull of its two ends' footprints."""
        barriers = {ob.name for ob in self._band if float(np.max(ob.hi - ob.lo)) >= BARRIER_M}
        if len(points) < 2 or not barriers:
            return False
        ends = set(self._band_names) - barriers
        for p in (points[0], points[-1]):
            ends |= {k for k, d in self._penetrations(hull_rel + p).items() if d > OBSTACLE_TOL_M}
        # the coarse footprint (within HULL_TOL_M, containing it) swept along a leg contains
        # the footprint's sweep: where it meets no barrier, the footprint does not either
        coarse_rel = self._coarse(hull_rel)
        walls = [ob for ob in self._band if ob.name in barriers]
        for a, b in itertools.pairwise(points):
            if float(np.abs(b - a).max()) <= _EPS:
                continue
            coarse = obstacle_penetrations(
                convex_hull_2d(np.vstack([coarse_rel + a, coarse_rel + b])), walls)
            if not any(d > OBSTACLE_TOL_M and k not in ends for k, d in coarse.items()):
                continue
            swept = convex_hull_2d(np.vstack([hull_rel + a, hull_rel + b]))
            if any(d > OBSTACLE_TOL_M and k not in ends
                   for k, d in self._penetrations(swept).items()):
                return True
        return False

    def _obstacle_depth(self, hull: np.ndarray) -> float:
        """How deep a footprint sits inside the fixed context (0 when clear of it)."""
        if not self._band:
            return 0.0
        return max(self._penetrations(hull).values(), default=0.0)

    def decide_from_disk(self, group: Group, n: int, phase: Phase) -> dict[str, Any]:
        """Decide iteration n from iteration n-1's current_state.json and geometry.json;
        the earlier iterations' states this solver has not seen (a solver made mid-run) are
        read from their directories first: what the run tried is on disk."""
        for k in range(n - 1):
            if k not in self._trail:
                try:
                    geometry_k = read_object(group.iter_dir(k) / "geometry.json",
                                             GroupInputError, "geometry.json",
                                             f"rerun iter_step.py --iter {k}")
                    poses_k = load_current_poses(group, k)
                except GroupInputError:   # only what it remembers is missing: not fatal
                    continue
                self._remember_state(k, poses_k, geometry_k)
        geometry = read_object(group.iter_dir(n - 1) / "geometry.json", GroupInputError,
                               "geometry.json", f"rerun iter_step.py --iter {n - 1}")
        return self.decide(load_current_poses(group, n - 1), geometry, n, phase)

    # ----------------------------------------------------------------- memory
    def _remember_state(self, k: int, poses: Mapping[str, np.ndarray],
                        geometry: Mapping[str, Any]) -> None:
        """Record state k (iteration k's poses and geometry.json) in the run's trail. A
        state before one already recorded starts a new run: the later ones are forgotten."""
        if any(j >= k for j in self._trail):
            self._trail = {j: v for j, v in self._trail.items() if j < k}
            self._settled = {} if k == 0 else self._settled
        spacing = str(self.spec.get("spacing", ""))
        seen: dict[str, tuple[np.ndarray, float]] = {}
        for name in self.member_ids:
            pose = np.asarray(poses[name], dtype=float)
            pivot = frames.pivot_in_frame(pose, self._mesh[name].pivot_local)[:2]
            _, rot, _ = frames.decompose(pose)
            seen[name] = (pivot, math.degrees(math.atan2(rot[1, 0], rot[0, 0])))
        entries = geometry.get("members") or {}
        hard = frozenset(penetrating_members(geometry)) | frozenset(
            n for n in self.member_ids if (entries.get(n) or {}).get("obstacle_penetrations"))
        self._trail[k] = _Visit(seen, {n: member_score(entries.get(n) or {}, spacing)
                                       for n in self.member_ids},
                                violation_score(geometry, self.spec), hard)

    def _best_pose(self, name: str) -> tuple[int, np.ndarray, float, float]:
        """(iteration, centre, yaw, score) of the member's best-scoring pose in the trail
        that broke no hard constraint (the earliest of equals; the latest pose when every
        one did): a member is never sent back into something."""
        clean = [j for j in self._trail if name not in self._trail[j].hard]
        k = (min(clean, key=lambda j: (self._trail[j].member_scores[name], j)) if clean
             else max(self._trail))
        centre, yaw = self._trail[k].poses[name]
        return k, centre, yaw, self._trail[k].member_scores[name]

    def _regressed(self, n: int) -> bool:
        """Is the current state (n - 1) worse than the best state of the trail?"""
        now = self._trail.get(n - 1)
        return now is not None and now.score > min(
            v.score for v in self._trail.values()) + SCORE_EPS

    def _revisits(self, name: str, point: np.ndarray, yaw_deg: float, n: int,
                  cap: float) -> int | None:
        """The earlier state (before n - 1) whose pose of the member ``point``/``yaw_deg``
        returns to (within ``REVISIT_SHARE`` of the phase cap and ``REVISIT_DEG``) after
        leaving it (the member now stands further than that from it), or None. Its best
        pose is no revisit: going back there is what ``_recall`` does."""
        best = self._best_pose(name)
        tol = REVISIT_SHARE * cap
        now = self._trail[n - 1].poses[name][0]
        for k in sorted(self._trail):
            if k >= n - 1:
                break
            centre, yaw = self._trail[k].poses[name]
            near = (float(np.abs(point - centre).max()) <= tol
                    and float(np.abs(now - centre).max()) > tol
                    and abs((yaw_deg - yaw + 180.0) % 360.0 - 180.0) <= REVISIT_DEG)
            if near and not (float(np.abs(point - best[1]).max()) <= REVISIT_SHARE * cap
                             and abs((yaw_deg - best[2] + 180.0) % 360.0 - 180.0)
                             <= REVISIT_DEG):
                return k
        return None

    def _stuck(self, name: str, n: int) -> bool:
        """Did the member stand still through the last decision (states n - 2 and n - 1
        hold the same pose)?"""
        a, b = self._trail.get(n - 2), self._trail.get(n - 1)
        if a is None or b is None:
            return False
        (pa, ya), (pb, yb) = a.poses[name], b.poses[name]
        return (float(np.abs(pa - pb).max()) < MIN_MOVE_M
                and abs((ya - yb + 180.0) % 360.0 - 180.0) < MIN_TURN_DEG)

    def _recall(self, plans: list[_Plan], members: dict[str, _Member], anchor: _Anchor
                ) -> list[_Plan]:
        """The plans with every settled member's replaced by the way back to its best pose
        seen (a straight line; not needed once it is there): it stays there."""
        out = []
        for p in plans:
            if p.name not in self._settled:
                out.append(p)
                continue
            m = members[p.name]
            _, centre, yaw_abs, _ = self._best_pose(p.name)
            turn = (yaw_abs - m.yaw_now_deg + 180.0) % 360.0 - 180.0
            target = _Target(m.edge, centre.copy(), turn, _rotate(m.hull_rel, turn))
            distance = float(np.linalg.norm(centre - m.pivot))
            needed = distance > POSITION_TOL_M or abs(turn) > YAW_TOL_DEG
            out.append(_Plan(m, target, ([m.pivot, centre.copy()],), needed,
                             distance + abs(turn) / 180.0 + (10.0 if m.penetrating else 0.0)))
        return out

    def _at_best(self, m: _Member) -> bool:
        """Does member ``m`` stand at its best pose seen (within a move's tolerance)?"""
        _, centre, yaw, _ = self._best_pose(m.name)
        return (float(np.abs(m.pivot - centre).max()) < MIN_MOVE_M
                and abs((m.yaw_now_deg - yaw + 180.0) % 360.0 - 180.0) < MIN_TURN_DEG)

    def _settle_note(self, moved: Sequence[str], members: Mapping[str, _Member]) -> str:
        """The reason's sentence for the settled members: each goes back toward its best
        pose seen in this decision (``moved``), stands there already, or cannot get nearer
        it and stays where it stands (what the decision does, not what it meant to)."""
        if not self._settled:
            return ""
        parts = []
        for name in sorted(self._settled):
            k, _, _, score = self._best_pose(name)
            best = f"its best pose seen (iter {k}, member score {score:.2f})"
            if name in moved:
                then = f"it goes back toward {best} and stays there"
            elif self._at_best(members[name]):
                then = f"it stays at {best}"
            else:
                then = f"it cannot get nearer {best} and stays where it stands"
            parts.append(f"{name} {self._settled[name]}, so {then}")
        return " No oscillation: " + "; ".join(parts) + "."

    # ----------------------------------------------------------------- state
    def _footprint(self, name: str, pose: np.ndarray) -> np.ndarray:
        """The footprint hull exactly as geometry.py builds it."""
        data = self._mesh[name]
        lin = pose[:3, :3]
        tol = 1e-9 * max(float(np.abs(lin).max()), 1e-300)
        if max(abs(lin[2, 0]), abs(lin[2, 1]), abs(lin[0, 2]), abs(lin[1, 2])) <= tol:
            return convex_hull_2d(data.local_hull @ lin[:2, :2].T + pose[:2, 3])
        return convex_hull_2d(frames.transform_points(pose, data.vertices)[:, :2])

    def _state_key(self, poses: Mapping[str, np.ndarray], geometry: Mapping[str, Any]) -> str:
        """Everything ``_targets`` reads: the poses (the context band follows from them),
        the anchor's edges and front, each member's edge and whether it penetrates."""
        digest = hashlib.sha1()
        for name in [self.anchor_id, *self.member_ids]:
            digest.update(np.ascontiguousarray(poses[name], dtype=float).tobytes())
        digest.update(json.dumps([geometry["anchor"],
                                  [geometry["members"][n]["edge"] for n in self.member_ids],
                                  sorted(penetrating_members(geometry))],
                                 sort_keys=True, allow_nan=True).encode())
        return digest.hexdigest()

    def _z_span(self, name: str, pose: np.ndarray) -> tuple[float, float]:
        """Lowest and highest world z of a posed unit. When the pose's z row has no x/y
        terms (an upright unit), z is ``a * z_local + t``, monotone in z_local, so the
        extremes are the local ones mapped: the same floats as transforming every vertex
        (x * 0 and y * 0 add nothing), without touching 200k vertices per decision."""
        data = self._mesh[name]
        a, t = float(pose[2, 2]), float(pose[2, 3])
        if pose[2, 0] == 0.0 and pose[2, 1] == 0.0 and np.isfinite(a):
            ends = sorted((data.z_range[0] * a + t, data.z_range[1] * a + t))
            return ends[0], ends[1]
        z = frames.transform_points(pose, data.vertices)[:, 2]
        return float(z.min()), float(z.max())

    def _anchor(self, poses: Mapping[str, np.ndarray], geometry: Mapping[str, Any]) -> _Anchor:
        doc = geometry["anchor"]
        edges = {}
        centre = np.asarray(doc["centre"], dtype=float)
        for name, e in (doc.get("edges") or {}).items():
            normal = np.asarray(e["normal"], dtype=float)
            edges[name] = _Edge(name, normal, np.asarray(e["tangent"], dtype=float),
                                float(e["length_m"]), e["role"],
                                float(normal @ (np.asarray(e["midpoint"]) - centre)))
        long_dir = np.array([1.0, 0.0] if doc["long_axis"] == "x" else [0.0, 1.0])
        front = (doc.get("front") or {}).get("direction")
        pose = np.asarray(poses[self.anchor_id])
        return _Anchor(doc["shape"] == "round", centre, long_dir,
                       self._footprint(self.anchor_id, pose), edges,
                       None if front is None else np.asarray(front, dtype=float),
                       (doc.get("front") or {}).get("edge"),
                       frames.pivot_in_frame(pose, self._mesh[self.anchor_id].seat_local)[:2])

    def _members(self, poses: Mapping[str, np.ndarray], geometry: Mapping[str, Any]
                 ) -> dict[str, _Member]:
        hot = penetrating_members(geometry)
        out = {}
        for name in self.member_ids:
            pose = np.asarray(poses[name], dtype=float)
            data = self._mesh[name]
            pivot = frames.pivot_in_frame(pose, data.pivot_local)[:2]
            forward = None
            if data.axis_local is not None:
                _, rot, _ = frames.decompose(pose)
                f = (rot @ np.array([data.axis_local[0], data.axis_local[1], 0.0]))[:2]
                norm = float(np.linalg.norm(f))
                forward = f / norm if norm > 1e-12 else None
            seat = frames.pivot_in_frame(pose, data.seat_local)[:2]
            _, rot_now, _ = frames.decompose(pose)
            out[name] = _Member(name, pivot, self._footprint(name, pose) - pivot, forward,
                                geometry["members"][name]["edge"], name in hot, seat - pivot,
                                data.modulus_deg,
                                math.degrees(math.atan2(rot_now[1, 0], rot_now[0, 0])))
        return out

    # ----------------------------------------------------------------- targets
    def _kept_loose(self, targets: dict[str, _Target], members: dict[str, _Member],
                    geometry: Mapping[str, Any], anchor: _Anchor) -> dict[str, _Target]:
        """``targets`` of a ``loose`` group (no evenness) repaired in place: a member on its
        target's edge keeps its place along it and its depth where that is no nearer than
        the clearance; one already in order (facing within half the review's tolerance,
        no nearer than the clearance, penetrating nothing) does not move at all (a seat
        watching a TV from further back than the others is no fault). A place that comes
        within ``MEMBER_GAP_M`` of another member's target falls back to the slot."""
        if self.spec["spacing"] != "loose" or anchor.round:
            return targets
        out = dict(targets)
        for name, t in targets.items():
            m, entry = members[name], geometry["members"][name]
            if t.edge != m.edge or m.penetrating or t.edge not in anchor.edges:
                continue
            facing = entry.get("facing_error_deg")
            if ((facing is None or float(facing) <= LOOSE_KEEP_FACING_DEG)
                    and float(entry.get("clearance_error_m") or 0.0) >= 0.0
                    and not entry.get("penetrations")
                    and not entry.get("obstacle_penetrations")):
                out[name] = _Target(m.edge, m.pivot.copy(), 0.0, m.hull_rel)
                continue
            edge = anchor.edges[t.edge]
            base = anchor.centre + edge.tangent * float(edge.tangent @ (m.pivot - anchor.centre))
            yaw, hull = self._edge_hull(m, edge, anchor, m.pivot)
            r = max(self._offset(hull, base, edge.normal, anchor.hull, self.clearance_m),
                    float(edge.normal @ (m.pivot - base)))
            out[name] = _Target(t.edge, base + r * edge.normal, yaw, hull)
        still = {n for n, t in out.items() if t is not targets[n] and t.yaw_deg == 0.0
                 and np.array_equal(t.centre, members[n].pivot)}
        for name in sorted(out):
            if out[name] is targets[name]:
                continue
            mine = out[name].hull_rel + out[name].centre
            # two members both standing still as they are make no new conflict
            if any(_distance(mine, o.hull_rel + o.centre) < MEMBER_GAP_M
                   for n, o in out.items() if n != name and not {n, name} <= still):
                out[name] = targets[name]
        return out

    def _yaw_to(self, m: _Member, inward: np.ndarray, anchor: _Anchor,
                at: np.ndarray | None = None) -> float:
        """The turn to the member's facing target; a seat watching its anchor, its
        footprint centred ``at``: to the end of geometry's watch arc nearest square
        (``geometry.watch_arc``: square where that is within the cap) - one direction
        per place whatever the seat's yaw now, so its slot and yaw settle together."""
        mode = self._facing[m.name]
        if mode is None or m.forward is None:
            return 0.0
        if mode == "toward_anchor" and at is not None and self._watches(m, anchor):
            want = watch_arc(inward, anchor.centre - at)
        elif mode == "toward_anchor":
            want = inward
        elif mode == "away_from_anchor":
            want = -inward
        else:   # parallel: resolved against the anchor's front, as geometry.json measures it
            want = parallel_facing_target(anchor.long_dir, anchor.front, m.forward,
                                          front_is_lengthwise(self.layout))
        turn = _signed_angle_deg(m.forward, want)
        if m.modulus_deg < 360.0:   # symmetric: the nearest aligned yaw modulo its order
            turn = modulo_turn_deg(turn, m.modulus_deg)
        return turn

    def _watches(self, m: _Member, anchor: _Anchor) -> bool:
        return (self._watched and not anchor.round and m.modulus_deg >= 360.0
                and self._facing[m.name] == "toward_anchor")

    def _edge_hull(self, m: _Member, edge: _Edge, anchor: _Anchor,
                   at: np.ndarray | None = None) -> tuple[float, np.ndarray]:
        """(turn, footprint) of the member facing its target from ``edge``; a watching
        seat with its pivot ``at``, turned into the watch arc seen from there (without
        ``at``: square to the edge)."""
        yaw = self._yaw_to(m, -edge.normal, anchor, at)
        return yaw, _rotate(m.hull_rel, yaw)

    def _aligned(self, edge: _Edge, anchor: _Anchor) -> float | None:
        """+1/-1 when the layout packs this (side) edge toward the anchor's back or front
        end (the direction the packing runs along the tangent), else None."""
        align = (self.layout or {}).get("align", "centre")
        if (align == "centre" or anchor.front is None or anchor.front_edge is None
                or edge.name in (anchor.front_edge, opposite_edge(anchor.front_edge))):
            return None
        sign = 1.0 if float(edge.tangent @ anchor.front) >= 0.0 else -1.0
        return -sign if align == "front" else sign

    def _edge_targets(self, edge: _Edge, ordered: list[_Member], anchor: _Anchor
                      ) -> dict[str, _Target]:
        """Geometry's slots on one edge, at the clearance target: even slots (by footprint
        centre, or by seat when the layout centres on seats), or packed against the
        anchor's back or front end when the layout aligns the side edges. A seat watching
        the anchor is placed square first, then turned into its watch arc as seen from
        that slot and placed again, until its yaw holds (WATCH_PASSES at most)."""
        square = {m.name: self._edge_hull(m, edge, anchor) for m in ordered}
        out = self._edge_slots(edge, ordered, anchor, square)
        for _ in range(WATCH_PASSES if any(self._watches(m, anchor) for m in ordered) else 0):
            posed = {m.name: self._edge_hull(m, edge, anchor, out[m.name].centre)
                     for m in ordered}
            if all(abs(posed[n][0] - out[n].yaw_deg) < WATCH_YAW_TOL_DEG for n in posed):
                break
            out = self._edge_slots(edge, ordered, anchor, posed)
        return out

    def _edge_slots(self, edge: _Edge, ordered: list[_Member], anchor: _Anchor,
                    posed: dict[str, tuple[float, np.ndarray]]) -> dict[str, _Target]:
        """``_edge_targets`` for the members posed (yaw, hull) as given."""
        sign = self._aligned(edge, anchor)
        out = {}
        if sign is not None:
            order = sorted(ordered, key=lambda m: sign * float(edge.tangent @ m.pivot))
            cursor = float((sign * (anchor.hull @ edge.tangent)).min())
            for m in order:
                yaw, hull = posed[m.name]
                u = sign * (hull @ edge.tangent)
                along = sign * (cursor - float(u.min()))
                base = anchor.centre + edge.tangent * (along - float(edge.tangent
                                                                     @ anchor.centre))
                r = self._offset(hull, base, edge.normal, anchor.hull, self.clearance_m)
                out[m.name] = _Target(edge.name, base + r * edge.normal, yaw, hull)
                cursor += float(np.ptp(u)) + SLOT_GAP_M
            return out
        by_seat = bool(self.layout and self.layout["centre_on"] == "seat")
        origin = anchor.seat if by_seat and anchor.seat is not None else anchor.centre
        widths = [np.ptp(posed[m.name][1] @ edge.tangent) for m in ordered]
        k = len(ordered)
        span = max(edge.length, k * (max(widths) + SLOT_GAP_M))
        for i, m in enumerate(ordered):
            yaw, hull = posed[m.name]
            seat = _rotate(m.seat_rel[None, :], yaw)[0] if by_seat else np.zeros(2)
            t = -span / 2.0 + span * (i + 0.5) / k - float(edge.tangent @ seat)
            base = anchor.centre + edge.tangent * (t + float(edge.tangent
                                                             @ (origin - anchor.centre)))
            r = self._offset(hull, base, edge.normal, anchor.hull, self.clearance_m)
            out[m.name] = _Target(edge.name, base + r * edge.normal, yaw, hull)
        return out

    def _column_targets(self, edge: _Edge, ordered: list[_Member], anchor: _Anchor
                        ) -> dict[str, _Target]:
        """T: a centre line out of the edge midpoint, SLOT_GAP_M between members."""
        out = {}
        obstacle, gap, lo = anchor.hull, self.clearance_m, 0.0
        for m in ordered:
            yaw, hull = self._edge_hull(m, edge, anchor)
            r = self._offset(hull, anchor.centre, edge.normal, obstacle, gap, lo)
            centre = anchor.centre + r * edge.normal
            out[m.name] = _Target(edge.name, centre, yaw, hull)
            obstacle, gap, lo = hull + centre, SLOT_GAP_M, r
        return out

    def _edge_configs(self, members: dict[str, _Member], anchor: _Anchor
                      ) -> tuple[list[dict[str, int]], bool]:
        """Candidate {edge: count} configurations for the pattern, and whether T columns."""
        pattern, k = self.spec["pattern"], len(members)
        longs = [e for e in EDGE_ORDER if anchor.edges[e].role == "long"]
        shorts = [e for e in EDGE_ORDER if anchor.edges[e].role == "short"]
        if pattern == "row":
            return [{e: k} for e in EDGE_ORDER], False
        if pattern == "T":
            return [{e: k} for e in longs], True
        if PATTERN_COUNTS.get(pattern) == k:
            if pattern == "2+2+1":
                return [{longs[0]: 2, longs[1]: 2, s: 1} for s in shorts], False
            return [{longs[0]: 2, longs[1]: 2, shorts[0]: 1, shorts[1]: 1}], False
        if pattern == "L" and k >= 2:
            return [{ex: q, ey: k - q} for ex in ("+x", "-x") for ey in ("+y", "-y")
                    for q in range(1, k)], False
        if self.layout is not None and pattern in ("free", "cluster"):
            edges = {e: {"role": anchor.edges[e].role} for e in EDGE_ORDER}
            counts = resolve_layout(self.layout, edges, anchor.front_edge)
            if counts is not None:
                return [{e: q for e, q in counts.items() if q}], False
        return [], False   # cluster and the documented fallbacks: keep every member's edge

    def _slot_cost(self, m: _Member, edge: _Edge, t: float, depth_before: float,
                   anchor: _Anchor) -> float:
        """Squared travel to a slot (round the anchor when the straight line crosses it:
        ``_travel_m``), plus a prohibitive cost for a slot inside the fixed
        context (a wall, another group), growing with the depth: configurations that avoid
        it win, and where none can, the one that goes least deep."""
        point = self._approx_slot(m, edge, t, depth_before, anchor)
        cost = self._travel_m(m, edge, anchor, point) ** 2
        if self._band:
            depth = self._obstacle_depth(self._edge_hull(m, edge, anchor)[1] + point)
            if depth > OBSTACLE_TOL_M:   # when every configuration is blocked: the least deep
                cost += BLOCKED_SLOT_COST_PER_M * depth
        return cost

    def _travel_m(self, m: _Member, edge: _Edge, anchor: _Anchor, point: np.ndarray) -> float:
        """How far the member travels to ``point``: the straight distance, or, when that
        line runs through the anchor, the length of the shortest way round it (the
        anchor's configuration-space obstacle for the member's footprint at the edge's
        target yaw). A member far behind the anchor is then matched to the slot it can
        reach, not the one nearest as the crow flies through the table."""
        key = (m.name, edge.name)
        obstacle = self._travel_obstacles.get(key)
        if obstacle is None:
            hull = self._edge_hull(m, edge, anchor)[1]
            obstacle = _minkowski_difference(anchor.hull, hull)
            self._travel_obstacles[key] = obstacle
        a, b = m.pivot, point
        if len(obstacle) < 3 or _inside(obstacle, a) or not _crosses(obstacle, a, b):
            return float(np.linalg.norm(b - a))
        hull = convex_hull_2d(np.vstack([obstacle, a, b]))
        ia = np.flatnonzero(np.linalg.norm(hull - a, axis=1) < 1e-9)
        ib = np.flatnonzero(np.linalg.norm(hull - b, axis=1) < 1e-9)
        if not len(ia) or not len(ib):   # on the obstacle's boundary: near enough straight
            return float(np.linalg.norm(b - a))
        k = len(hull)
        ccw = [hull[(ia[0] + i) % k] for i in range((ib[0] - ia[0]) % k + 1)]
        cw = [hull[(ia[0] - i) % k] for i in range((ia[0] - ib[0]) % k + 1)]
        return min(_length(ccw), _length(cw))

    def _approx_slot(self, m: _Member, edge: _Edge, t: float, depth_before: float,
                     anchor: _Anchor) -> np.ndarray:
        """Where the member would sit in a slot (for the assignment cost; exact comes later)."""
        _, hull = self._edge_hull(m, edge, anchor)
        r = edge.half + self.clearance_m + depth_before + float(np.max(hull @ -edge.normal))
        return anchor.centre + edge.tangent * t + edge.normal * r

    def _overfull_m(self, layout: dict[str, list[_Member]], anchor: _Anchor) -> float:
        """How far the edges of a configuration are asked to hold more than fits them, by
        the documented slot rule at the members' target yaws (S = k (w_max + 0.10)): on an
        edge shared with others the whole span must fit the edge (S <= L), or neighbours
        collide at the corner; on the only occupied edge the end slots' centres must stay
        on it (S (k - 1) / k <= L), or those members sit past the corner, facing the edge
        across empty space instead of the anchor. 0 when everything fits."""
        over = 0.0
        for e, ms in layout.items():
            edge = anchor.edges[e]
            q = len(ms)
            w = max(float(np.ptp(self._edge_hull(m, edge, anchor)[1] @ edge.tangent))
                    for m in ms)
            need = q * (w + SLOT_GAP_M)
            if len(layout) == 1:
                need *= (q - 1) / q
            over += max(0.0, need - edge.length)
        return over

    def _assign_edges(self, members: dict[str, _Member], anchor: _Anchor,
                      configs: list[dict[str, int]], column: bool
                      ) -> dict[str, list[_Member]]:
        names = sorted(members)
        best: tuple[float, dict[str, list[_Member]]] | None = None
        for done, config in enumerate(configs):
            if best is not None and self._out_of_time(
                    f"{done} of {len(configs)} edge configurations scored"):
                break
            slots: list[tuple[str, int, float, float]] = []
            for e, q in config.items():
                edge = anchor.edges[e]
                w = max(np.ptp(self._edge_hull(members[n], edge, anchor)[1] @ edge.tangent)
                        for n in names)
                d = max(np.ptp(self._edge_hull(members[n], edge, anchor)[1] @ edge.normal)
                        for n in names)
                span = max(edge.length, q * (w + SLOT_GAP_M))
                for j in range(q):
                    if column:
                        slots.append((e, j, 0.0, j * (d + SLOT_GAP_M)))
                    else:
                        slots.append((e, j, -span / 2.0 + span * (j + 0.5) / q, 0.0))
            cost = np.array([[self._slot_cost(members[n], anchor.edges[e], t, before, anchor)
                              for e, _, t, before in slots] for n in names])
            pick = min_cost_assignment(cost)
            layout: dict[str, list[tuple[int, _Member]]] = {}
            for i, j in enumerate(pick):
                layout.setdefault(slots[j][0], []).append((slots[j][1], members[names[i]]))
            total = float(sum(cost[i, j] for i, j in enumerate(pick)))
            if not column:
                total += OVERFULL_EDGE_COST_PER_M * self._overfull_m(
                    {e: [m for _, m in v] for e, v in layout.items()}, anchor)
            if best is None or total < best[0] - 1e-12:
                best = (total, {e: [m for _, m in sorted(v, key=lambda x: x[0])]
                                for e, v in layout.items()})
        assert best is not None
        return best[1]

    def _ring_targets(self, members: dict[str, _Member], anchor: _Anchor
                      ) -> dict[str, _Target]:
        names = sorted(members)
        k = len(names)
        rel = {n: members[n].pivot - anchor.centre for n in names}
        theta = sorted((math.atan2(rel[n][1], rel[n][0]), n) for n in names)
        base = 2.0 * math.pi * np.arange(k) / k
        offsets = np.array([t for t, _ in theta]) - base
        phase = math.atan2(float(np.sin(offsets).sum()), float(np.cos(offsets).sum()))
        dirs = [np.array([math.cos(phase + b), math.sin(phase + b)]) for b in base]
        anchor_rel = anchor.hull - anchor.centre

        def posed(m: _Member, rho: np.ndarray) -> tuple[float, np.ndarray]:
            yaw = self._yaw_to(m, -rho, anchor)
            return yaw, _rotate(m.hull_rel, yaw)

        cost = np.zeros((k, k))
        for i, n in enumerate(names):
            for j, rho in enumerate(dirs):
                r = (float(np.max(anchor_rel @ rho)) + self.clearance_m
                     + float(np.max(posed(members[n], rho)[1] @ -rho)))
                cost[i, j] = float(np.sum((rel[n] - r * rho) ** 2))
        out = {}
        for i, j in enumerate(min_cost_assignment(cost)):
            m = members[names[i]]
            yaw, hull = posed(m, dirs[j])
            r = self._offset(hull, anchor.centre, dirs[j], anchor.hull, self.clearance_m)
            out[m.name] = _Target("ring", anchor.centre + r * dirs[j], yaw, hull)
        return out

    def _targets(self, members: dict[str, _Member], anchor: _Anchor) -> dict[str, _Target]:
        """The target pose of every member (see the module docstring)."""
        self._travel_obstacles = {}
        if anchor.round:
            return self._ring_targets(members, anchor)
        configs, column = self._edge_configs(members, anchor)
        if configs:
            layout = self._assign_edges(members, anchor, configs, column)
        else:
            layout = {}
            for m in members.values():
                layout.setdefault(m.edge, []).append(m)
            for e, ms in layout.items():
                ms.sort(key=lambda m: (float(anchor.edges[e].tangent @ m.pivot), m.name))
        out: dict[str, _Target] = {}
        for e, ordered in layout.items():
            build = self._column_targets if column else self._edge_targets
            out.update(build(anchor.edges[e], ordered, anchor))
        return out

    # ----------------------------------------------------------------- hard constraints
    def _blocker(self, hull: np.ndarray) -> tuple[float, str | None]:
        """(depth inside the fixed context, the obstacle it is deepest in)."""
        if not self._band:
            return 0.0, None
        found = self._penetrations(hull)
        if not found:
            return 0.0, None
        name = min(found, key=lambda k: (-found[k], k))
        return found[name], name

    def _keeps_hard(self, hull: np.ndarray, others: Mapping[str, np.ndarray],
                    anchor: _Anchor) -> bool:
        """Clear of the fixed context, the anchor and every other member's footprint."""
        if self._band:
            coarse = self._coarse_depths(hull)
            # the coarse footprint is at most HULL_TOL_M deeper than the footprint itself
            if max(coarse.values(), default=0.0) > HARD_TOL_M + HULL_TOL_M:
                return False
            if coarse and self._blocker(hull)[0] > HARD_TOL_M:
                return False
        if _box_gap(hull, anchor.hull) <= _BOX_SLACK_M and (
                _distance(hull, anchor.hull) < -HARD_TOL_M):
            return False
        return all(_box_gap(hull, o) >= MEMBER_GAP_M + _BOX_SLACK_M
                   or _distance(hull, o) >= MEMBER_GAP_M for o in others.values())

    def _alternatives(self, m: _Member, t: _Target, anchor: _Anchor
                      ) -> list[tuple[float, Callable[[], _Target | None], dict[str, Any]]]:
        """Candidate targets keeping the hard constraints for a blocked member, each with
        its cost (what is given up, weighted) and what it gives up: a smaller clearance on
        the same line, a turn round a ring, a slide along the edge, another edge. The cost
        does not depend on where exactly the candidate lands, so each target is built only
        when asked for (cheapest first, until one fits)."""
        out: list[tuple[float, Callable[[], _Target | None], dict[str, Any]]] = []
        c0 = self.clearance_m
        cs = [c for c in np.arange(c0 - CLEARANCE_STEP_M, -_EPS, -CLEARANCE_STEP_M)
              if c >= MIN_CLEARANCE_M - _EPS]
        if anchor.round or t.edge == "ring":
            rel = t.centre - anchor.centre
            base_deg = math.degrees(math.atan2(rel[1], rel[0]))
            direction = rel / max(float(np.linalg.norm(rel)), 1e-12)
            for c in cs:
                def closer(c: float = c) -> _Target | None:
                    r = self._offset_unless_blocked(t.hull_rel, anchor.centre, direction,
                                                    anchor.hull, c)
                    if r is None:
                        return None
                    return _Target(t.edge, anchor.centre + r * direction, t.yaw_deg,
                                   t.hull_rel)
                out.append((10.0 * (c0 - c), closer,
                            {"constraint": "clearance_m", "from": c0, "to": float(c)}))
            for step in range(1, int(180 / RING_STEP_DEG) + 1):
                for sign in (1.0, -1.0):
                    turn = sign * step * RING_STEP_DEG

                    def turned(turn: float = turn) -> _Target | None:
                        a = math.radians(base_deg + turn)
                        rho = np.array([math.cos(a), math.sin(a)])
                        yaw = self._yaw_to(m, -rho, anchor)
                        hull = _rotate(m.hull_rel, yaw)
                        r = self._offset_unless_blocked(hull, anchor.centre, rho, anchor.hull,
                                                        c0)
                        if r is None:
                            return None
                        return _Target("ring", anchor.centre + r * rho, yaw, hull)
                    out.append((abs(turn) / 20.0, turned,
                                {"constraint": "even_ring", "moved_deg": float(turn)}))
            return out
        edge = anchor.edges[t.edge]
        foot = anchor.centre + edge.tangent * float(edge.tangent @ (t.centre - anchor.centre))
        for c in cs:
            def nearer(c: float = c) -> _Target | None:
                r = self._offset_unless_blocked(t.hull_rel, foot, edge.normal, anchor.hull, c)
                if r is None:
                    return None
                return _Target(t.edge, foot + r * edge.normal, t.yaw_deg, t.hull_rel)
            out.append((10.0 * (c0 - c), nearer,
                        {"constraint": "clearance_m", "from": c0, "to": float(c)}))
        for e2 in EDGE_ORDER:
            if e2 not in anchor.edges:
                continue
            other = anchor.edges[e2]
            yaw, hull = self._edge_hull(m, other, anchor)
            t_now = float(other.tangent @ (t.centre - anchor.centre)) if e2 == t.edge else 0.0
            reach = other.length / 2.0
            for along in np.arange(-reach, reach + _EPS, SLIDE_STEP_M):
                def slid(along: float = float(along), other: _Edge = other,
                         yaw: float = yaw, hull: np.ndarray = hull) -> _Target | None:
                    base = anchor.centre + other.tangent * along
                    r = self._offset_unless_blocked(hull, base, other.normal, anchor.hull, c0)
                    if r is not None and self._watches(m, anchor):
                        yaw, hull = self._edge_hull(m, other, anchor, base + r * other.normal)
                        r = self._offset_unless_blocked(hull, base, other.normal,
                                                        anchor.hull, c0)
                    if r is None:
                        return None
                    return _Target(other.name, base + r * other.normal, yaw, hull)
                if e2 == t.edge:
                    cost, what = 5.0 * abs(float(along) - t_now), {
                        "constraint": "even_spacing", "moved_m": abs(float(along) - t_now)}
                else:
                    cost, what = 3.0 + 0.5 * abs(float(along)), {
                        "constraint": "pattern", "from_edge": t.edge, "to_edge": e2}
                out.append((cost, slid, what))
        return out

    def _respaced(self, m: _Member, targets: dict[str, _Target], unresolved: set[str],
                  members: dict[str, _Member], anchor: _Anchor
                  ) -> list[tuple[float, Callable[[], dict[str, _Target] | None],
                                  dict[str, Any]]]:
        """A blocked member moved to another edge of a rect anchor, that edge's members
        re-spaced by the slot rule with it (cost 3.5: after a free place on that edge),
        built when asked for (None: the slots do not solve)."""
        t = targets[m.name]
        if anchor.round or t.edge not in anchor.edges:
            return []
        out: list[tuple[float, Callable[[], dict[str, _Target] | None], dict[str, Any]]] = []
        for e2 in EDGE_ORDER:
            if e2 == t.edge or e2 not in anchor.edges:
                continue
            edge = anchor.edges[e2]
            on = [members[n] for n, u in targets.items()
                  if n != m.name and u.edge == e2 and n not in unresolved]
            where = {n: float(edge.tangent @ targets[n].centre) for n in (x.name for x in on)}
            where[m.name] = float(edge.tangent @ m.pivot)
            ordered = sorted([*on, m], key=lambda x: (where[x.name], x.name))

            def respace(edge: _Edge = edge, ordered: list[_Member] = ordered
                        ) -> dict[str, _Target] | None:
                try:
                    return self._edge_targets(edge, ordered, anchor)
                except ValueError:
                    return None
            out.append((3.5, respace, {"constraint": "pattern", "from_edge": t.edge,
                                       "to_edge": e2, "respaced": len(on)}))
        return out

    def _keep_hard(self, targets: dict[str, _Target], members: dict[str, _Member],
                   anchor: _Anchor) -> tuple[dict[str, _Target], list[dict[str, Any]]]:
        """Targets that keep every hard constraint, and what was given up for them.

        A target inside the fixed context (or, after a blocked member was re-placed, on
        another member) is replaced by the cheapest alternative (``_alternatives``) that is
        clear of the context, the anchor and every other member's target; a member with
        none stays where it is (its target is its current pose). Each replacement is
        recorded: member, the soft constraint given up, by how much, the blocker. When the
        decision's time budget runs out, the members not yet placed stay where they are
        too (recorded with ``"budget_s"``): what was found so far keeps every hard
        constraint, the search stops."""
        if not self._band:
            return targets, []
        out = dict(targets)
        blocked: dict[str, str] = {}
        for name in sorted(out):
            t = out[name]
            depth, blocker = self._blocker(t.hull_rel + t.centre)
            if depth > OBSTACLE_TOL_M and blocker is not None:
                blocked[name] = blocker
        given_up: list[dict[str, Any]] = []
        for name, blocker in blocked.items():
            m = members[name]
            others = {n: out[n].hull_rel + out[n].centre for n in out
                      if n != name and n not in blocked}
            others.update({n: members[n].hull_rel + members[n].pivot
                           for n in blocked if n != name and n not in
                           {g["member"] for g in given_up}})
            others.update({g["member"]: out[g["member"]].hull_rel + out[g["member"]].centre
                           for g in given_up})
            gap = self._blocker_gap(anchor.hull, blocker)
            gap = None if gap is None else max(0.0, gap)   # touching reads 0.00, not -0.00
            entry: dict[str, Any] = {"member": name, "blocker": blocker,
                                     "blocker_gap_m": None if gap is None else round(gap, 3),
                                     "edge": out[name].edge}
            options: list[tuple[float, Callable[[], dict[str, _Target] | None],
                                dict[str, Any]]] = [
                (cost, _alone(name, make), what)
                for cost, make, what in self._alternatives(m, out[name], anchor)]
            options += self._respaced(m, out, set(blocked) - {g["member"] for g in given_up},
                                      members, anchor)

            def fits(cands: dict[str, _Target], others: dict[str, np.ndarray] = others
                     ) -> bool:
                for n, c in cands.items():
                    rest = {o: h for o, h in others.items() if o not in cands}
                    rest.update({o: d.hull_rel + d.centre for o, d in cands.items() if o != n})
                    if not self._keeps_hard(c.hull_rel + c.centre, rest, anchor):
                        return False
                return True

            found = None
            self._screen_others = others
            for _, make, what in sorted(options, key=lambda x: x[0]):
                if self._out_of_time(f"placements for {name} searched in part"):
                    break
                cands = make()
                if cands is not None and fits(cands):
                    found = (cands, what)
                    break
            self._screen_others = {}
            if found is not None:
                out.update(found[0])
                entry.update(found[1])
            else:
                out[name] = _Target(m.edge, m.pivot.copy(), 0.0, m.hull_rel)
                entry.update({"constraint": "placement", "kept": "scene pose"})
                if self._budget_hit:
                    entry["budget_s"] = self.budget_s
                inside = self._inside_of(m.hull_rel + m.pivot, others, anchor)
                if inside:   # its scene pose breaks a hard constraint: never keep that
                    clear = self._clear_place(m, others, anchor)
                    if clear is None:
                        entry["inside"] = inside
                        if m.name in self._clear_from:   # cut by the budget, not done
                            entry["budget_s"] = self.budget_s
                            entry["clear_searched"] = self._clear_from[m.name][1]
                    else:
                        out[name] = clear
                        entry.update({"kept": "moved clear", "moved_m": round(float(
                            np.linalg.norm(clear.centre - m.pivot)), 3), "was_in": inside})
            given_up.append(entry)
        return out, given_up

    def _inside_of(self, hull: np.ndarray, others: Mapping[str, np.ndarray],
                   anchor: _Anchor) -> list[str]:
        """What a footprint is inside: obstacles, the anchor, other members' footprints
        (empty: it overlaps nothing)."""
        out = sorted(k for k, d in self._penetrations(hull).items() if d > HARD_TOL_M) \
            if self._band else []
        if _box_gap(hull, anchor.hull) <= _BOX_SLACK_M and (
                _distance(hull, anchor.hull) < -HARD_TOL_M):
            out.append("the anchor")
        out += sorted(n for n, o in others.items()
                      if _box_gap(hull, o) <= _BOX_SLACK_M
                      and _distance(hull, o) < -HARD_TOL_M)
        return out

    def _clear_place(self, m: _Member, others: Mapping[str, np.ndarray], anchor: _Anchor
                     ) -> _Target | None:
        """The nearest pose (same yaw; ``CLEAR_STEP_M`` steps up to ``CLEAR_REACH_M``, 16
        directions, outward from the anchor first) where a member whose own pose breaks a
        hard constraint keeps them all; None when there is none in reach, or when the
        decision's budget ran out first (``_clear_from`` keeps where the search stopped, the
        next decision goes on from there; the reason says so).

        Counted against the decision's budget: it may run until the budget is spent, and
        at least the budget's clearing share (1 - ``SEARCH_SHARE``) after the search. The
        candidates clear of every obstacle's, the anchor's and the other members' convex
        hulls (tested at once, as points against their Minkowski differences) are tried
        first, then the rest (an obstacle is only its triangles, less than its hull), each
        with the exact ``_keeps_hard``."""
        out = m.pivot - anchor.centre
        out = out / max(float(np.linalg.norm(out)), 1e-12)
        dirs = np.array(sorted(_DISC, key=lambda d: -float(d @ out)))
        rings = np.arange(CLEAR_STEP_M, CLEAR_REACH_M + _EPS, CLEAR_STEP_M)
        centres = (m.pivot[None, None, :] + rings[:, None, None] * dirs[None, :, :]).reshape(-1, 2)
        free = np.ones(len(centres), dtype=bool)
        shapes = [(h, -HARD_TOL_M) for h in self._band_hulls()]
        shapes += [(anchor.hull, -HARD_TOL_M)]
        shapes += [(o, MEMBER_GAP_M) for o in others.values()]
        for shape, clear in shapes:
            if len(shape) >= 3:
                signed = _ConvexDistance(_minkowski_difference(shape, m.hull_rel))
                free &= signed(centres) >= clear
        order = np.concatenate([np.flatnonzero(free), np.flatnonzero(~free)])
        where = np.ascontiguousarray(m.hull_rel + m.pivot).tobytes()
        done = self._clear_from.pop(m.name, None)
        start = int(done[1]) if done is not None and done[0] == where else 0
        if self._clear_deadline is None:
            # the clearing's share of the budget, whatever the search used of its own
            self._clear_deadline = max(self._started + self.budget_s, time.perf_counter()
                                       + (1.0 - SEARCH_SHARE) * self.budget_s)
        for i in range(start, len(order)):
            if time.perf_counter() >= self._clear_deadline:
                # the budget is spent: the places not tried wait for the next decision
                self._budget_hit = True
                self._clear_from[m.name] = (where, i)
                cut = f"{i} of {len(order)} clear places for {m.name} tried"
                if cut not in self._budget_cuts:
                    self._budget_cuts.append(cut)
                return None
            centre = centres[order[i]]
            if self._keeps_hard(m.hull_rel + centre, others, anchor):
                return _Target(m.edge, centre, 0.0, m.hull_rel)
        return None

    def _band_hulls(self) -> list[np.ndarray]:
        """The convex hull of each obstacle of the band in the floor plane, once per band."""
        if self._hulls_of[0] is not self._band:
            self._hulls_of = (self._band, [ob.hull for ob in self._band])
        return self._hulls_of[1]

    def _conflicts(self, targets: dict[str, _Target], members: dict[str, _Member],
                   anchor: _Anchor) -> set[str]:
        """Members whose target breaks a hard constraint (in the context, the anchor or
        within the slot gap of another target) and who are not already there."""
        out = set()
        for n, t in targets.items():
            others = {o: u.hull_rel + u.centre for o, u in targets.items() if o != n}
            if not (self._blocker(t.hull_rel + t.centre)[0] <= OBSTACLE_TOL_M
                    and self._keeps_hard(t.hull_rel + t.centre, others, anchor)) and (
                    float(np.linalg.norm(t.centre - members[n].pivot)) > POSITION_TOL_M):
                out.add(n)
        return out

    def _sticky_targets(self, members: dict[str, _Member], anchor: _Anchor
                        ) -> tuple[dict[str, _Target], list[dict[str, Any]]] | None:
        """The last infeasible plan (absolute centres and yaws) in the current state, while
        it keeps every hard constraint it kept when it was made: a plan that had to give
        something up is not re-derived from each state (the assignment would swap which
        member gives way). A conflict the plan was made with (a target beside a member
        kept where the scene had it: re-planning gives it again) does not end it."""
        if self._sticky is None or set(self._sticky[0]) != set(members):
            return None
        out = {}
        for n, (centre, yaw_abs, edge) in self._sticky[0].items():
            m = members[n]
            turn = (yaw_abs - m.yaw_now_deg + 180.0) % 360.0 - 180.0
            out[n] = _Target(edge, centre, turn, _rotate(m.hull_rel, turn))
        if self._conflicts(out, members, anchor) - self._sticky[2]:
            return None
        return out, self._sticky[1]

    def infeasible_reason(self, given_up: list[dict[str, Any]]) -> str:
        """One line a person understands: what blocks, what was given up, by how much."""
        if not given_up:
            return ""
        spec = self.spec
        k = len(self.member_ids)
        first = given_up[0]
        where = ("the anchor" if first.get("edge") in (None, "ring")
                 else f"the anchor's {first['edge']} edge")
        gap = first.get("blocker_gap_m")
        head = (f"{first['blocker']} is {gap:.2f} m from {where}" if gap is not None
                else f"{first['blocker']} blocks {where}" if first.get("blocker")
                else "the moves toward the pattern go round in circles")
        if spec["pattern"] == "ring":
            soft = f"an even ring of {k} does not fit"
        else:
            soft = (f"pattern {spec['pattern']} at {self.clearance_m:g} m clearance "
                    f"does not fit")
        parts = []
        for g in given_up:
            c = g["constraint"]
            if c == "even_ring":
                parts.append(f"{g['member']} moved {abs(g['moved_deg']):.0f} deg")
            elif c == "clearance_m":
                parts.append(f"{g['member']} at clearance {g['to']:.2f} m "
                             f"(not {g['from']:g})")
            elif c == "even_spacing":
                parts.append(f"{g['member']} slid {g['moved_m']:.2f} m along {g['edge']}")
            elif c == "pattern":
                parts.append(f"{g['member']} moved from {g['from_edge']} to {g['to_edge']}")
            else:
                why = ("the decision time budget ran out before a free place was found"
                       if "budget_s" in g else "no free place")
                if g.get("kept") == "best pose seen" and g.get("short_of_best"):
                    parts.append(f"{g['member']} kept where it stands, as near its best pose "
                                 f"seen (iter {g['best_iter']}) as it gets: it {g['why']}")
                elif g.get("kept") == "best pose seen":
                    parts.append(f"{g['member']} kept at its best pose seen (iter "
                                 f"{g['best_iter']}): it {g['why']}")
                elif g.get("kept") == "moved clear":
                    parts.append(f"{g['member']} moved {g['moved_m']:.2f} m clear of "
                                 f"{', '.join(g['was_in'])} ({why} on the pattern)")
                elif g.get("inside") and g.get("clear_searched") is not None:
                    parts.append(f"{g['member']} left inside {', '.join(g['inside'])} for now "
                                 f"({why}; {g['clear_searched']} clear places tried, the "
                                 "search goes on next iteration)")
                elif g.get("inside"):
                    parts.append(f"{g['member']} left inside {', '.join(g['inside'])} ({why}, "
                                 f"none within {CLEAR_REACH_M:g} m either)")
                else:
                    parts.append(f"{g['member']} kept where the scene had it ({why})")
        kept = k - len(given_up)
        on = "the ring" if spec["pattern"] == "ring" else "their slots"
        return f"{head}: {soft}; {kept} kept on {on}, " + ", ".join(parts)

    # ----------------------------------------------------------------- moves
    def _path(self, m: _Member, target: _Target, anchor: _Anchor, margin: float
              ) -> list[np.ndarray]:
        """Footprint-centre path keeping the footprint ``margin`` off the anchor (docstring)."""
        a, b = m.pivot, target.centre
        key = (anchor.hull.tobytes(), target.hull_rel.tobytes(), float(margin))
        obstacle = self._transit_memo.get(key)
        if obstacle is None:   # a pure function of the key: both margins, every decision
            minkowski = self._transit_memo.get(key[:2])
            if minkowski is None:
                minkowski = _minkowski_difference(anchor.hull, target.hull_rel)
                _remember(self._transit_memo, key[:2], minkowski, MEMO_PAIRS)
            obstacle = _minkowski_sum(minkowski, margin / math.cos(math.pi / 16) * _DISC)
            _remember(self._transit_memo, key, obstacle, MEMO_PAIRS)
        head, tail = [a], [b]
        if _inside(obstacle, a):
            head.append(_exit_point(obstacle, a))
        if _inside(obstacle, b):
            tail.insert(0, _exit_point(obstacle, b))
        return head[:-1] + _around(obstacle, head[-1], tail[0]) + tail[1:]

    def _plan(self, m: _Member, target: _Target, anchor: _Anchor, lane_m: float) -> _Plan:
        distance = float(np.linalg.norm(target.centre - m.pivot))
        needed = distance > POSITION_TOL_M or abs(target.yaw_deg) > YAW_TOL_DEG
        paths: Sequence[list[np.ndarray]] = ([m.pivot, target.centre],)
        if needed and distance > _EPS:
            # Preferred: hug the anchor. Fallback when that endpoint collides with another
            # member: the transit lane behind every seated member (made only if asked for).
            paths = _Paths([functools.partial(self._path, m, target, anchor, margin)
                            for margin in (TRANSIT_MARGIN_M, lane_m)])
        priority = (_length(paths[0]) + abs(target.yaw_deg) / 180.0
                    + (10.0 if m.penetrating else 0.0) + (5.0 if target.edge != m.edge else 0.0))
        return _Plan(m, target, paths, needed, priority)

    def _resolve(self, plans: list[_Plan], members: dict[str, _Member], anchor: _Anchor,
                 cap: float) -> dict[str, _Move]:
        """Endpoints within the cap that create no new overlap.

        A member whose endpoint makes two footprints overlap more than they do now (or
        itself overlap the anchor more) is the victim: the lower-priority mover of the pair.
        A victim first switches to its next candidate path, then backs off along it in
        ``BACKOFF_STEPS`` steps, down to not moving; this terminates because every round
        moves some victim one step closer to not moving.
        """
        now = {n: m.hull_rel + m.pivot for n, m in members.items()}
        walked: dict[tuple[str, int], list[np.ndarray]] = {}

        def prefix(n: str, c: int) -> list[np.ndarray]:   # a candidate walked up to the cap
            if (n, c) not in walked:
                walked[(n, c)] = _walk(by_name[n].paths[c], cap)
            return walked[(n, c)]
        choice = {p.name: 0 for p in plans}
        level = {p.name: BACKOFF_STEPS for p in plans}
        by_name = {p.name: p for p in plans}
        rank = {p.name: i for i, p in enumerate(plans)}   # plans come worst first
        anchor_now: dict[str, float] = {}
        obstacle_now = {p.name: self._obstacle_depth(now[p.name]) if self._band else 0.0
                        for p in plans}
        pair_now: dict[tuple[str, str], float] = {}
        names = sorted(members)

        def endpoint(n: str) -> tuple[np.ndarray, np.ndarray] | None:
            if n not in level or level[n] < 0:
                return None
            path = prefix(n, choice[n])
            pt = _point_at(path, _length(path) * level[n] / BACKOFF_STEPS)
            return pt, by_name[n].target.hull_rel + pt

        while True:
            ends = {n: endpoint(n) for n in names}
            hulls = {n: now[n] if (end := ends[n]) is None else end[1] for n in names}
            victims = set()
            for n in level:
                if ends[n] is not None and _deeper(hulls[n], anchor.hull, functools.partial(
                        _distance_memo, anchor_now, n, now[n], anchor.hull)):
                    victims.add(n)
                elif ends[n] is not None and self._band and (
                        self._obstacle_depth(hulls[n]) > obstacle_now[n] + _EPS):
                    victims.add(n)   # never deeper into a wall or another group
                elif ends[n] is not None and self._band and self._passes_through(
                        by_name[n].target.hull_rel, _upto(
                            prefix(n, choice[n]), level[n] / BACKOFF_STEPS)):
                    victims.add(n)   # nor through one to its far side
            for i, a in enumerate(names):
                for b in names[i + 1:]:
                    if ends[a] is None and ends[b] is None:
                        continue
                    if _deeper(hulls[a], hulls[b], functools.partial(
                            _distance_memo, pair_now, (a, b), now[a], now[b])):
                        movers = [x for x in (a, b) if ends[x] is not None]
                        victims.add(max(movers, key=rank.__getitem__))
            if not victims:
                break
            for n in victims:
                if level[n] == BACKOFF_STEPS and choice[n] + 1 < len(by_name[n].paths):
                    choice[n] += 1
                else:
                    level[n] -= 1
        out = {}
        for n, end in ends.items():
            if end is None:
                continue
            move = _Move(end[0], by_name[n].target.yaw_deg, end[1])
            if (float(np.abs(move.point - members[n].pivot).max()) >= MIN_MOVE_M
                    or abs(move.yaw_deg) >= MIN_TURN_DEG):   # nothing left: no move
                out[n] = move
        return out

    def _nudges(self, moves: dict[str, _Move], members: dict[str, _Member], anchor: _Anchor,
                want: int) -> dict[str, _Move]:
        """Outward verification moves of still members until ``want`` members move."""
        out = dict(moves)
        hulls = {n: out[n].hull if n in out else m.hull_rel + m.pivot
                 for n, m in members.items()}
        for n in sorted(members):
            if len(out) >= want:
                break
            if n in out:
                continue
            m = members[n]
            if anchor.round or m.edge not in anchor.edges:
                outward = m.pivot - anchor.centre
                outward = outward / max(float(np.linalg.norm(outward)), 1e-12)
            else:
                outward = anchor.edges[m.edge].normal
            # outward first; a member wedged between others (its outward nudge would go
            # deeper into a neighbour) takes the first other direction that overlaps
            # nothing more than now, closest to outward first
            directions = [outward, *sorted(_DISC, key=lambda d: -float(d @ outward))]
            here: dict[str, float] = {}   # distances now, measured when a test needs them
            depth_now = self._obstacle_depth(hulls[n]) if self._band else 0.0
            for direction in directions:
                hull = hulls[n] + direction * VERIFY_NUDGE_M
                if any(_deeper(hull, hulls[o], functools.partial(
                        _distance_memo, here, o, hulls[n], hulls[o])) for o in hulls if o != n):
                    continue
                if _deeper(hull, anchor.hull, functools.partial(
                        _distance_memo, here, "", hulls[n], anchor.hull)):
                    continue
                if self._band and self._obstacle_depth(hull) > depth_now + _EPS:
                    continue
                out[n] = _Move(m.pivot + direction * VERIFY_NUDGE_M, 0.0, hull)
                hulls[n] = hull
                break
        return out

    def _select(self, needed: list[_Plan], members: dict[str, _Member], anchor: _Anchor,
                phase: Phase) -> dict[str, _Move]:
        """Worst first, up to the phase's member limit, skipping members that cannot move."""
        chosen: list[_Plan] = []
        moves: dict[str, _Move] = {}
        for plan in needed:
            if phase.max_members is not None and len(chosen) >= phase.max_members:
                break
            if chosen and self._out_of_time(f"{len(chosen)} of {len(needed)} member(s) "
                                            "tried for this move"):
                break
            trial = self._resolve(chosen + [plan], members, anchor, phase.cap_m)
            if plan.name in trial:
                chosen.append(plan)
                moves = trial
        return moves

    def decide(self, poses: Mapping[str, np.ndarray], geometry: Mapping[str, Any], n: int,
               phase: Phase | None = None) -> dict[str, Any]:
        """The decision ``{"members", "converged", "reason_summary"}`` for iteration n."""
        phase = phase or phase_for(n, len(self.member_ids))
        self._started = time.perf_counter()
        self._deadline = self._started + SEARCH_SHARE * self.budget_s
        self._clear_deadline = None
        self._budget_hit, self._budget_cuts = False, []
        self._remember_state(n - 1, poses, geometry)
        if self._context is not None:
            spans = [self._z_span(k, np.asarray(poses[k], dtype=float))
                     for k in [self.anchor_id, *self.member_ids]]
            band = self._context.band(spans[0][0], max(hi for _, hi in spans))
            if band is not self._band:
                self._depth_memo, self._gap_memo, self._coarse_depth_memo = {}, {}, {}
            self._band = band
        anchor = self._anchor(poses, geometry)
        members = self._members(poses, geometry)
        key = self._state_key(poses, geometry)
        cached = self._last_targets.get(key)
        if cached is None:   # quiet iterations repeat the last state: its targets stand
            cached = self._sticky_targets(members, anchor)
            if cached is None:
                cached = self._keep_hard(self._kept_loose(self._targets(members, anchor),
                                                          members, geometry, anchor),
                                         members, anchor)
                if cached[1]:   # an infeasible plan is kept: re-planning each state churns
                    self._sticky = ({n: (t.centre.copy(), members[n].yaw_now_deg + t.yaw_deg,
                                         t.edge) for n, t in cached[0].items()}, cached[1],
                                    self._conflicts(cached[0], members, anchor))
                else:
                    self._sticky = None
            self._last_targets = {key: cached}
            if any(g.get("clear_searched") is not None for g in cached[1]):
                # a clear place still being searched for: the next decision goes on with it
                self._sticky, self._last_targets = None, {}
        targets, given_up = cached
        self._infeasible_now = bool(given_up)
        infeasible = self.infeasible_reason(given_up)
        tail = f" Infeasible: {infeasible}." if infeasible else ""
        tail += self._budget_note(given_up)
        depth = max(float(np.ptp(t.hull_rel, axis=0).max()) for t in targets.values())
        lane = self.clearance_m + depth + SLOT_GAP_M
        plans = [self._plan(members[name], targets[name], anchor, lane)
                 for name in self.member_ids]
        # No oscillation: a member that returns to a pose it left, or stands still for
        # want of a move, while the state is worse than the best one seen goes back to its
        # best pose seen and stays there (``_recall``); decided again with it settled.
        while True:
            decision, moves = self._choose(self._recall(plans, members, anchor), members,
                                           anchor, phase, n)
            if not self._regressed(n):
                break
            cap = EXCEPTION_CAP_M if "penetration exception" in decision[
                "reason_summary"] else phase.cap_m
            flagged = {}
            for name, mv in moves.items():
                if name in self._settled:
                    continue
                k = self._revisits(name, mv.point, members[name].yaw_now_deg + mv.yaw_deg,
                                   n, cap)
                if k is not None:
                    flagged[name] = f"would return to its pose of iter {k} without improving"
            for p in plans:
                if (p.needed and p.name not in moves and p.name not in self._settled
                        and self._stuck(p.name, n)):
                    flagged[p.name] = "cannot move on toward its target"
            if not flagged:
                break
            self._settled.update(flagged)
        if self._settled:
            given_up = self._settled_given_up(given_up, members, list(decision["members"]))
            infeasible = self.infeasible_reason(given_up)
            tail = (f" Infeasible: {infeasible}." if infeasible else "") + self._budget_note(
                given_up)
        decision["reason_summary"] += self._settle_note(list(decision["members"]),
                                                        members) + tail
        decision["given_up"] = given_up
        return decision

    def _settled_given_up(self, given_up: list[dict[str, Any]],
                          members: Mapping[str, _Member], moved: Sequence[str]
                          ) -> list[dict[str, Any]]:
        """``given_up`` with each settled member's entry saying where it stays instead of
        the place it could not reach (an entry added for a member the plan had not given
        anything up for); entries naming a blocker first. ``short_of_best``: it neither
        stands at its best pose seen nor goes back toward it in this decision (``moved``):
        it cannot get nearer and stays where it stands."""
        def settled(name: str) -> dict[str, Any]:
            return {"constraint": "placement", "kept": "best pose seen",
                    "best_iter": self._best_pose(name)[0], "why": self._settled[name],
                    "short_of_best": name not in moved and not self._at_best(members[name])}

        out = []
        for g in given_up:
            name = g["member"]
            if name in self._settled:
                g = {k: g[k] for k in ("member", "blocker", "blocker_gap_m", "edge") if k in g}
                g.update(settled(name))
            out.append(g)
        listed = {g["member"] for g in out}
        for name in sorted(set(self._settled) - listed):
            out.append({"member": name, "blocker": None, "blocker_gap_m": None, "edge": None,
                        **settled(name)})
        return sorted(out, key=lambda g: g.get("blocker") is None)

    def _choose(self, plans: list[_Plan], members: dict[str, _Member], anchor: _Anchor,
                phase: Phase, n: int) -> tuple[dict[str, Any], dict[str, _Move]]:
        """The decision for these plans (reason without its tail) and the moves in it."""
        needed = sorted((p for p in plans if p.needed), key=lambda p: (-p.priority, p.name))
        if n > 1 and needed and self._settles_infeasible(needed, n):
            names = ", ".join(sorted(p.name for p in needed))
            return {"members": {}, "converged": True,
                    "reason_summary": "no change: the pattern cannot be met (below) and every "
                                      "member keeps every hard constraint; the small "
                                      f"corrections left ({names}) change no hard "
                                      "constraint, so the arrangement settles here."}, {}
        if n > 1 and needed and all(p.name in self._settled for p in needed) and not (
                self._resolve(needed, members, anchor, phase.cap_m)):
            needed = []   # settled members that cannot get nearer their best pose: no change
        if not needed and n > 1:
            if self._settled:   # done: the adapter's gate still reviews the state
                return {"members": {}, "converged": True,
                        "reason_summary": "no change: every member is at its target or as "
                                          "near its best pose seen as it can get."}, {}
            return {"members": {}, "converged": True,
                    "reason_summary": "every member is at its slot, facing and clearance "
                                      "target; nothing to move."}, {}
        worst = needed[0] if needed else None
        cap, note = phase.cap_m, phase.label
        beyond_cap = worst is not None and (
            _length(_walk(worst.paths[0], phase.cap_m)) < _length(worst.paths[0]) - _EPS)
        if worst is not None and worst.member.penetrating and (
                len(needed) < phase.min_members if phase.name == "pattern" else beyond_cap):
            cap, note = EXCEPTION_CAP_M, f"penetration exception for {worst.name}"
            moves = self._resolve([worst], members, anchor, cap)
        elif phase.max_members is None:
            moves = self._resolve(needed, members, anchor, cap)
        else:
            moves = self._select(needed, members, anchor, phase)
        real = len(moves)
        short_of_pattern = (phase.name == "pattern" and cap == phase.cap_m
                            and 0 < len(moves) < phase.min_members)
        if short_of_pattern or (n == 1 and not moves):
            member_cap = phase_for(4, len(self.member_ids)).cap_m
            fits_later = len(needed) <= 3 and all(
                _length(_walk(p.paths[0], member_cap)) >= _length(p.paths[0]) - _EPS
                for p in needed)
            if n > 1 and fits_later:
                return {"members": {}, "converged": False,
                        "reason_summary": f"{len(needed)} member(s) need small corrections; "
                                          "they wait for the member phase (iter 4)."}, moves
            moves = self._nudges(moves, members, anchor, phase.min_members)
        reassigned = [p.name for p in needed if p.name in moves and p.target.edge != p.member.edge
                      and p.name not in self._settled]
        return ({"members": {name: self._delta(members[name], mv)
                             for name, mv in sorted(moves.items())},
                 "converged": False,
                 "reason_summary": self._summary(note, real, len(moves) - real, len(needed),
                                                 reassigned)}, moves)

    def _settles_infeasible(self, needed: list[_Plan], n: int) -> bool:
        """Does an infeasible plan settle now? When the kept plan gave something up, the
        state n - 1 breaks no hard constraint and what is left are small corrections (at
        most 3 members, none penetrating, each within the member phase's cap), no move
        can change the hard-constraint state or the verdict: the decision is "no change",
        so an infeasible room stops with the contract's empty iterations as soon as a
        feasible one converges (rather than waiting for the member phase to make them).
        The same in every state that meets it: a fresh solver decides the same."""
        now = self._trail.get(n - 1)
        if (not self._infeasible_now or now is None or now.hard or len(needed) > 3
                or self._regressed(n)):
            return False
        member_cap = phase_for(4, len(self.member_ids)).cap_m
        return all(not p.member.penetrating
                   and _length(_walk(p.paths[0], member_cap)) >= _length(p.paths[0]) - _EPS
                   for p in needed)

    def _budget_note(self, given_up: list[dict[str, Any]]) -> str:
        """The reason's sentence when this decision's search (or the plan it keeps) was cut
        short by the time budget; empty otherwise."""
        cuts = list(self._budget_cuts)
        if not self._budget_hit:
            kept = [g["member"] for g in given_up if "budget_s" in g]
            if not kept:
                return ""
            cuts = [f"the kept plan's search for {', '.join(kept)} was cut short"]
        inside = [g["member"] for g in given_up if g.get("inside")]
        keeps = ("it keeps every hard constraint" if not inside else
                 f"it keeps every hard constraint except for {', '.join(inside)}, left inside "
                 "what the scene had it in")
        return (f" The {BUDGET_NOTE} ({self.budget_s:g} s) ran out: {'; '.join(cuts)}; "
                f"this is the best arrangement found, and {keeps}.")

    @staticmethod
    def _delta(m: _Member, move: _Move) -> dict[str, Any]:
        d = move.point - m.pivot   # components that cannot change a verdict are written 0
        d = np.where(np.abs(d) < MIN_MOVE_M, 0.0, d)
        return {"delta_xyz": [float(d[0]), float(d[1]), 0.0],
                "delta_yaw_deg": (float(move.yaw_deg) if abs(move.yaw_deg) >= MIN_TURN_DEG
                                  else 0.0)}

    def _summary(self, note: str, real: int, nudges: int, needed: int,
                 reassigned: list[str]) -> str:
        spec = self.spec
        text = (f"{note}: {real} of {needed} member(s) off target moved toward their "
                f"{spec['pattern']} slots ({spec['facing']}, clearance {self.clearance_m:g} m)")
        if reassigned:
            text += f", reassigning {', '.join(reassigned)} to another edge"
        if nudges:
            text += f", plus {nudges} {VERIFY_NUDGE_M} m verification move(s)"
        return text + "."
