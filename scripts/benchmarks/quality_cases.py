"""Seeded random furniture groups for the ``quality`` bench section, and the solver's loop.

A case is ``make_case(pattern, seed)``: everything in it comes from
``numpy.random.default_rng(seed)``, so ``(pattern, seed)`` reproduces it exactly. It holds
real furniture of the corpus (``fixtures.assets``; kit assets at their life-size scale
carried by the pose, Infinigen assets already life size), the target spec, the starting
canonical poses (anchor unrotated at the origin, every object standing on the anchor's
floor) and, for the judge, each object's TRUE front from the manifests (rotated with any
yaw baked into a member's vertices).

Patterns: table patterns ``ring`` (kenney tableRound, 4-8 seats), ``row`` (TV stands or long
tables, 2-4 seats), ``2+2+1``, ``2+2+1+1``, ``L``, ``T``, ``free`` (a canonical layout such
as ``{"+x": 1, "-y": 2}``), and the conventions ``bed``, ``desk``, ``tv_stand`` and
``sofa``, whose spec is what ``island_tools.scene.validate.apply_convention`` makes of the
anchor role (as the scene pipeline does).

Perturbations (``Case.tags``), drawn per case: ``yaw`` (yaw errors of 90, -90, 180 deg or up
to 60 deg), ``push_in`` (members overlapping the anchor by 5-25 cm), ``bunched`` (every
member crowded on one side / in one arc), ``far`` (members 2-3 m from the anchor),
``mixed`` (each member its own one), plus ``rotmesh`` when a member's vertices carry a baked
random yaw (its front on no local axis) and ``corner_origin`` when a caysonverse asset (origin
at a back corner) is in the group. Starting footprints of members overlap each other by at
most ``START_OVERLAP_M2`` (push-ins into the anchor are the point; members into each other
are not).

Generator limits (cases it never makes, because no arrangement meets the spec): a
convention member (whose side is fixed: the anchor's front, or beside the bed's headboard)
never starts farther along an axis from roughly there than the magnitude policy lets a member
travel by iteration 19 (3 x 1.0 + 7 x 0.3 + 9 x 0.05 m: ``policy_budget_m``); the members
the pattern puts on an edge of the drawn layout must fit it by the documented slot rule
(``k (w_max + 0.10) <= L`` where other edges are occupied too, else the end slots' centres
must still lie on the edge: so a fitting choice of edges always exists, though the solver
may pick another), and ring
seats must fit side by side at the table (``w_max + 0.05 <= 2 r tan(180 / k)``, r the table's
inradius plus the clearance); a case that does not fit draws narrower seats or fewer of them.
Infinigen's desks are not used for the desk convention: their manifest front is ``none``
(a top on four legs), so "the desk's front" does not exist.

``run_loop`` is ``tests/test_solver.py::simulate``'s loop on these meshes: ``Solver.decide``
-> ``schemas.parse_transforms`` + ``policy.check_policy`` (a decision the adapter rejects
fails the case) -> ``frames.apply_member_delta`` about the footprint centre ->
``GeometryContext.compute``; it stops as ``adapter.run_group`` does: on a ``converged`` the
adapter's gate honours (from ``policy.MIN_ITER`` on, after an earlier move, moving nothing,
on a state whose ``review.review_island`` does not fail: the one verdict), on a decision
whose every delta is within the movement tolerance (``adapter.moves_nothing``: trivial
deltas are not applied, "no progress"), or after ``policy.EMPTY_STOP`` consecutive empty
iterations from MIN_ITER on, at most 20 iterations.
This is exactly what the Blender loop does minus rendering: the poses that loop reads back
from the saved .blend equal these to float32. ``LoopResult.review`` is the loop's verdict on
the final state (what run.json records), ``gate_refused`` the iterations whose converged the
gate refused.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

PATTERNS = ("ring", "row", "2+2+1", "2+2+1+1", "L", "T", "free",
            "bed", "desk", "tv_stand", "sofa")
CONVENTIONS = ("bed", "desk", "tv_stand", "sofa")
BASE_SEED = 20260301
MAX_ITER = 20
START_OVERLAP_M2 = 0.02
SLOT_MARGIN_M = 0.10          # the documented slot rule's gap between neighbours
ROT_MESH_PROB = 0.3           # per member, in the cases drawn with rotated meshes

K, INF, C = "kenney-cco/", "infinigen/", "caysonverse/"
KIT_CHAIRS = tuple(K + n for n in ("chair.glb", "chairCushion.glb", "chairModernCushion.glb",
                                   "chairModernFrameCushion.glb", "chairRounded.glb"))
DINING = tuple(f"{INF}dining_chair_ChairFactory_s{i}.glb" for i in range(1, 6))
OFFICE = tuple(f"{INF}office_chair_OfficeChairFactory_s{i}.glb" for i in (1, 10, 2, 4, 6)) + (
    C + "chairDesk.glb",)
STOOLS = tuple(f"{INF}bar_chair_BarChairFactory_s{i}.glb" for i in (1, 2, 3))
ARMCHAIRS = tuple(f"{INF}armchair_ArmChairFactory_s{i}.glb" for i in range(1, 5))
NIGHTSTANDS = tuple(f"{INF}nightstand_KitchenCabinetFactory_s{i}.glb" for i in (1, 11, 2, 4))
SIDE_TABLES = tuple(f"{INF}side_table_SideTableFactory_s{i}.glb" for i in (1, 2))
BEDS = tuple(f"{INF}bed_BedFactory_s{i}.glb" for i in range(1, 5))
TV_STANDS = tuple(f"{INF}tv_stand_TVStandFactory_s{i}.glb" for i in range(1, 5)) + (
    K + "cabinetTelevision.glb",)
SOFAS = tuple(f"{INF}sofa_SofaFactory_s{i}.glb" for i in range(1, 6)) + (
    K + "loungeSofa.glb", C + "loungeSofaLong.glb")
COFFEE = tuple(f"{INF}coffee_table_CoffeeTableFactory_s{i}.glb" for i in (1, 2, 3)) + (
    K + "tableCoffee.glb", C + "tableCoffee.glb")
LONG_TABLES = (K + "table.glb", K + "tableCross.glb",
               INF + "dining_table_TableDiningFactory_s2.glb")
SQUARE_TABLES = (INF + "dining_table_TableDiningFactory_s1.glb",
                 INF + "dining_table_TableDiningFactory_s3.glb")
SEATS = KIT_CHAIRS + DINING + OFFICE + STOOLS
FREE_LAYOUTS = ({"+x": 1, "-y": 2}, {"-y": 3}, {"+y": 2, "-x": 1}, {"+x": 1, "-x": 1, "-y": 1},
                {"-y": 2, "+y": 2}, {"+x": 1, "+y": 1}, {"-x": 1, "-y": 1, "+y": 1},
                {"+y": 1, "-y": 2, "+x": 1}, {"-x": 2}, {"+x": 1, "-x": 1})
SIDES = {"+x": np.array([1.0, 0.0]), "-x": np.array([-1.0, 0.0]),
         "+y": np.array([0.0, 1.0]), "-y": np.array([0.0, -1.0])}
# Measured life-size rule for a corpus asset that fixtures.assets.SIZING does not list.
EXTRA_SIZING = {C + "loungeSofaLong.glb": ("seat", 0.42)}


# ------------------------------------------------------------------------- furniture
@dataclass(frozen=True)
class Item:
    """One object: asset-local vertices (a baked yaw included), life-size scale, true front."""

    rel: str
    vertices: np.ndarray
    faces: np.ndarray
    scale: float
    front: np.ndarray | None      # unit XY in the (baked) local frame, None = symmetric
    baked_yaw_deg: float = 0.0

    def depth(self) -> float:
        """Footprint extent along the front, life size."""
        xy = self.vertices[:, :2] * self.scale
        if self.front is None:
            return float(np.ptp(xy, axis=0).min())
        return float(np.ptp(xy @ self.front))

    def lateral_width(self) -> float:
        """Footprint extent across the front (its seat width), life size."""
        xy = self.vertices[:, :2] * self.scale
        if self.front is None:
            return float(np.ptp(xy, axis=0).max())
        side = np.array([-self.front[1], self.front[0]])
        return float(np.ptp(xy @ side))


@cache
def _fronts() -> dict[str, tuple[float, float] | None]:
    from fixtures.assets import front_corpus

    return {e.rel: e.front for e in front_corpus()}


@cache
def _scale(rel: str) -> float:
    from fixtures import assets as fa

    if rel in fa.SIZING:
        return fa.life_scale(rel)
    if rel in EXTRA_SIZING:
        measure, target = EXTRA_SIZING[rel]
        mesh = fa.load_asset(rel)
        height = (fa.top_height(mesh.vertices) if measure == "top"
                  else fa.seat_height(mesh.vertices, mesh.faces))
        return target / height
    if rel.startswith(INF):
        return 1.0
    raise KeyError(f"no life-size scale for {rel}")


def _rot2(deg: float) -> np.ndarray:
    a = math.radians(deg)
    return np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])


def make_item(rel: str, baked_yaw_deg: float = 0.0) -> Item:
    from fixtures.assets import load_asset

    mesh = load_asset(rel)
    verts = np.array(mesh.vertices, dtype=float)
    front = _fronts()[rel]
    f = None if front is None else np.asarray(front, dtype=float)
    if baked_yaw_deg:
        r = np.eye(3)
        r[:2, :2] = _rot2(baked_yaw_deg)
        verts = verts @ r.T
        f = None if f is None else r[:2, :2] @ f
    return Item(rel, verts, np.array(mesh.faces), _scale(rel), f, baked_yaw_deg)


def _random_baked_yaw(rng: np.random.Generator) -> float:
    yaw = float(rng.uniform(10.0, 350.0))
    if abs(((yaw + 45.0) % 90.0) - 45.0) < 8.0:      # keep the front off every local axis
        yaw += 25.0
    return yaw


# ------------------------------------------------------------------------- poses
def rot_z4(deg: float) -> np.ndarray:
    m = np.eye(4)
    m[:2, :2] = _rot2(deg)
    return m


def pose_matrix(item: Item, yaw_deg: float, origin: np.ndarray) -> np.ndarray:
    m = rot_z4(yaw_deg) @ np.diag([item.scale, item.scale, item.scale, 1.0])
    m[:3, 3] = origin
    return m


def posed_vertices(item: Item, pose: np.ndarray) -> np.ndarray:
    return item.vertices @ pose[:3, :3].T + pose[:3, 3]


def front_dir(item: Item, pose: np.ndarray) -> np.ndarray | None:
    if item.front is None:
        return None
    f = pose[:2, :2] @ item.front
    return f / np.linalg.norm(f)


def yaw_facing(item: Item, direction: np.ndarray) -> float:
    """The yaw that turns the item's true front onto ``direction``."""
    if item.front is None:
        return 0.0
    return math.degrees(math.atan2(direction[1], direction[0])
                        - math.atan2(item.front[1], item.front[0]))


@dataclass
class Case:
    pattern: str
    seed: int
    spec: dict[str, Any]
    anchor: Item
    members: list[Item]
    poses: dict[str, np.ndarray]          # "anchor", "m0", "m1", ...: starting poses
    tags: list[str] = field(default_factory=list)
    anchor_role: str = ""

    @property
    def names(self) -> list[str]:
        return [f"m{i}" for i in range(len(self.members))]

    def items(self) -> dict[str, Item]:
        return {"anchor": self.anchor, **dict(zip(self.names, self.members))}

    def describe(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "seed": self.seed, "tags": self.tags,
                "anchor": self.anchor.rel,
                "members": [m.rel + (f"@{m.baked_yaw_deg:.0f}deg" if m.baked_yaw_deg else "")
                            for m in self.members],
                "spec": self.spec,
                "repro": f"quality_cases.make_case({self.pattern!r}, {self.seed})"}


class _Placer:
    """Starting poses around the anchor, rejecting gross member-member overlaps."""

    def __init__(self, anchor: Item, rng: np.random.Generator) -> None:
        from shapely.geometry import MultiPoint

        self.rng = rng
        self.anchor_pose = np.diag([anchor.scale, anchor.scale, anchor.scale, 1.0])
        pts = posed_vertices(anchor, self.anchor_pose)
        self.floor = float(pts[:, 2].min())
        self.hull = MultiPoint([tuple(p) for p in pts[:, :2]]).convex_hull
        self.lo, self.hi = pts[:, :2].min(axis=0), pts[:, :2].max(axis=0)
        self.mid = (self.lo + self.hi) / 2.0
        self.centroid = np.array(self.hull.centroid.coords[0])
        self.placed: list[Any] = []

    def side_length(self, side: str) -> float:
        return float((self.hi - self.lo)[1 if side[1] == "x" else 0])

    def long_sides(self) -> tuple[str, str]:
        return ("+y", "-y") if (self.hi - self.lo)[0] >= (self.hi - self.lo)[1] else ("+x", "-x")

    def short_sides(self) -> tuple[str, str]:
        return ("+x", "-x") if self.long_sides()[0] == "+y" else ("+y", "-y")

    def _pose_at(self, item: Item, yaw: float, direction: np.ndarray, base: np.ndarray,
                 gap: float) -> tuple[np.ndarray, Any]:
        from shapely.geometry import MultiPoint

        pose = pose_matrix(item, yaw, np.zeros(3))
        pts = posed_vertices(item, pose)
        xy = pts[:, :2]
        centre = (xy.min(axis=0) + xy.max(axis=0)) / 2.0
        near = float(((xy - centre) @ direction).min())
        target = base + direction * (gap - near)
        pose[:2, 3] = target - centre
        pose[2, 3] = self.floor - float(pts[:, 2].min())
        hull = MultiPoint([tuple(p) for p in (xy - centre + target)]).convex_hull
        return pose, hull

    def at_side(self, item: Item, side: str, t: float, gap: float, yaw: float
                ) -> tuple[np.ndarray, Any]:
        n = SIDES[side]
        u = np.array([-n[1], n[0]])
        half = (self.hi - self.lo) / 2.0
        base = self.mid + n * float(np.abs(n) @ half) + u * t
        return self._pose_at(item, yaw, n, base, gap)

    def at_angle(self, item: Item, theta_deg: float, gap: float, yaw: float
                 ) -> tuple[np.ndarray, Any]:
        rho = np.array([math.cos(math.radians(theta_deg)), math.sin(math.radians(theta_deg))])
        pts = np.array(self.hull.exterior.coords)
        reach = float(((pts - self.centroid) @ rho).max())
        return self._pose_at(item, yaw, rho, self.centroid + rho * reach, gap)

    def fits(self, hull: Any) -> bool:
        limit = min(START_OVERLAP_M2, 0.1 * hull.area)
        return all(hull.intersection(h).area <= limit for h in self.placed)

    def accept(self, hull: Any) -> None:
        self.placed.append(hull)


def _yaw_error(rng: np.random.Generator, big: bool) -> float:
    if big:
        return float(rng.choice([90.0, -90.0, 180.0, rng.uniform(-60.0, 60.0)]))
    return float(rng.uniform(-20.0, 20.0))


def _draw_tags(rng: np.random.Generator) -> list[str]:
    base = ["yaw", "push_in", "bunched", "far", "mixed"]
    tags = [str(rng.choice(base))]
    if rng.random() < 0.35:
        second = str(rng.choice([t for t in base if t not in tags and t != "mixed"]))
        if "mixed" not in tags:
            tags.append(second)
    return tags


def _member_states(rng: np.random.Generator, k: int, tags: list[str]) -> list[str]:
    """Per member: 'near', 'push' or 'far' (the yaw error is drawn separately)."""
    if "mixed" in tags:
        return [str(rng.choice(["near", "push", "far", "near"])) for _ in range(k)]
    states = ["near"] * k
    for tag, state, frac in (("push_in", "push", 0.6), ("far", "far", 0.5)):
        if tag in tags:
            chosen = rng.choice(k, size=max(1, int(round(frac * k))), replace=False)
            for i in chosen:
                states[int(i)] = state
    return states


def policy_budget_m(k: int) -> float:
    """How far one member can travel along one axis by iteration MAX_ITER - 1 under the
    adapter's magnitude policy (it must be at its slot one iteration before it can report
    converged), without the penetration exception."""
    from island_tools.policy import phase_for

    return sum(phase_for(n, k).cap_m for n in range(1, MAX_ITER))


def _place_members(placer: _Placer, members: list[Item], sides: list[str] | None,
                   tags: list[str], rng: np.random.Generator, clearance: float,
                   ring: bool = False, goal: Any = None) -> dict[str, np.ndarray]:
    """Starting poses. ``sides``: where each member starts (rect anchors), None for rings.
    ``goal(item, start_xy)``: roughly where the member must go (the conventions' fixed
    side); a start farther than the policy's per-axis budget from it is drawn again."""
    budget = policy_budget_m(len(members))
    k = len(members)
    states = _member_states(rng, k, tags)
    big_yaw = [("yaw" in tags) or ("mixed" in tags and rng.random() < 0.5) for _ in range(k)]
    if "yaw" in tags and not any(big_yaw):
        big_yaw[0] = True
    bunched = "bunched" in tags
    bunch_side = str(rng.choice(list(SIDES)))
    bunch_theta = float(rng.uniform(0.0, 360.0))
    poses: dict[str, np.ndarray] = {}
    cursor = None
    for i, item in enumerate(members):
        state = states[i]
        pose = None
        for attempt in range(400):
            spread = 1.0 + attempt / 40.0
            if state == "far":
                gap = float(rng.uniform(2.0, 3.0))
            elif state == "push":
                gap = -float(rng.uniform(0.05, 0.25))
            else:
                gap = clearance + float(rng.uniform(-0.02, 0.3)) * spread
            if ring or state == "far" or (bunched and ring):
                if bunched and state != "far":
                    theta = bunch_theta + (cursor or 0.0) + float(rng.uniform(0, 10)) * spread
                else:
                    theta = (float(rng.uniform(0, 360)) if state == "far" or sides is None
                             else 360.0 * i / k + float(rng.uniform(-25, 25)))
                rho = np.array([math.cos(math.radians(theta)), math.sin(math.radians(theta))])
                yaw = yaw_facing(item, -rho) if item.front is not None else \
                    float(rng.uniform(0, 360))
                yaw += _yaw_error(rng, big_yaw[i])
                pose, hull = placer.at_angle(item, theta, gap, yaw)
            else:
                side = bunch_side if bunched else sides[i]
                length = placer.side_length(side)
                if bunched:
                    t = -length / 2.0 + (cursor or 0.0) + float(rng.uniform(0, 0.1)) * spread
                    if t > length / 2.0 + 0.3:        # the side is full: a second row behind
                        t -= length
                        gap += 0.7
                else:
                    t = float(rng.uniform(-0.5, 0.5)) * length * min(spread, 1.6)
                n = SIDES[side]
                yaw = yaw_facing(item, -n) if item.front is not None else \
                    float(rng.uniform(0, 360))
                yaw += _yaw_error(rng, big_yaw[i])
                pose, hull = placer.at_side(item, side, t, gap, yaw)
            start = np.array(hull.centroid.coords[0])
            far_off = goal is not None and float(
                np.abs(goal(item, start) - start).max()) > budget
            if placer.fits(hull) and not far_off:
                break
            if attempt > 200:
                state = "far"      # a crowded start: put it out of the way
        else:                      # pragma: no cover - 400 draws of a far position failed
            raise RuntimeError("could not place a member without gross overlap")
        placer.accept(hull)
        if bunched:
            step = item.lateral_width() + 0.03
            cursor = (cursor or 0.0) + (step if not ring else math.degrees(
                step / max(float(np.ptp(placer.hull.exterior.coords, axis=0).max()) / 2.0
                           + clearance, 0.3)))
        poses[f"m{i}"] = pose
    return poses


# ------------------------------------------------------------------------- patterns
def _pick(rng: np.random.Generator, pool: tuple[str, ...]) -> str:
    return str(pool[int(rng.integers(len(pool)))])


def _members(rng: np.random.Generator, pool: tuple[str, ...], k: int, rot: bool,
             same: bool = False) -> list[Item]:
    rels = [_pick(rng, pool)] * k if same else [_pick(rng, pool) for _ in range(k)]
    return [make_item(r, _random_baked_yaw(rng) if rot and rng.random() < ROT_MESH_PROB else 0.0)
            for r in rels]


def _edge_fits(widths: list[float], length: float, exclusive: bool) -> bool:
    """The documented slot rule: k cells over S = max(L, k (w_max + 0.10)). ``exclusive``:
    the only occupied edge, where the end slots' centres need only stay on the edge."""
    k = len(widths)
    if not k:
        return True
    span = k * (max(widths) + SLOT_MARGIN_M)
    if span <= length:
        return True
    return exclusive and span * (k - 1) / k <= length


def _spec(role: str, k: int, pattern: str, facing: str, spacing: str, clearance: float,
          note: str | None = None, layout: dict | None = None) -> dict[str, Any]:
    from island_tools.schemas import parse_target_spec

    doc: dict[str, Any] = {"anchor_role": role, "member_count": k, "pattern": pattern,
                           "facing": facing, "spacing": spacing, "clearance_m": clearance}
    if note:
        doc["free_note"] = note
    if layout:
        doc["layout"] = layout
    return parse_target_spec(doc, "target_spec.json", k).to_dict()


def _convention_spec(role: str, k: int, clearance: float) -> dict[str, Any]:
    from island_tools.scene.relation_graph import GroupSpec
    from island_tools.scene.validate import apply_convention
    from island_tools.schemas import parse_target_spec

    names = tuple(f"m{i}" for i in range(k))
    doc = apply_convention({"anchor_role": role, "member_count": k, "pattern": "row",
                            "facing": "toward_anchor", "spacing": "even_along_each_edge",
                            "clearance_m": clearance},
                           GroupSpec("g", "anchor", names, {"anchor_role": role}))
    return parse_target_spec(doc, "target_spec.json", k).to_dict()


def make_case(pattern: str, seed: int) -> Case:
    """The case ``(pattern, seed)`` (see the module docstring)."""
    if pattern not in PATTERNS:
        raise KeyError(f"unknown pattern {pattern!r} (known: {', '.join(PATTERNS)})")
    rng = np.random.default_rng(seed)
    tags = _draw_tags(rng)
    rot = rng.random() < 0.5
    for _ in range(50):
        built = _build(pattern, rng, rot, seed)
        if built is not None:
            break
    else:  # pragma: no cover - the pools always have a fitting draw
        raise RuntimeError(f"no fitting furniture for {pattern} seed {seed}")
    anchor, members, spec, sides, role = built
    placer = _Placer(anchor, rng)
    ring = pattern == "ring"
    goal = _goal(placer, anchor, spec["clearance_m"]) if pattern in CONVENTIONS else None
    poses = {"anchor": placer.anchor_pose,
             **_place_members(placer, members, None if ring else sides, tags, rng,
                              spec["clearance_m"], ring, goal)}
    if any(m.baked_yaw_deg for m in members):
        tags.append("rotmesh")
    if any(r.rel.startswith(C) for r in [anchor, *members]):
        tags.append("corner_origin")
    return Case(pattern, seed, spec, anchor, members, poses, tags, role)


def _goal(placer: _Placer, anchor: Item, clearance: float) -> Any:
    """Roughly where a convention puts a member (for the travel budget only, never judged):
    before the anchor's front side, or (bed) beside the headboard end on the nearer side."""
    front = anchor.front
    assert front is not None
    half = (placer.hi - placer.lo) / 2.0
    head = float(min(np.array(placer.hull.exterior.coords) @ front))

    def before_front(item: Item, start: np.ndarray) -> np.ndarray:
        n = SIDES[max(SIDES, key=lambda e: float(SIDES[e] @ front))]
        return placer.mid + n * (float(np.abs(n) @ half) + clearance + item.depth() / 2.0)

    def beside_head(item: Item, start: np.ndarray) -> np.ndarray:
        lateral = [e for e in SIDES if abs(float(SIDES[e] @ front)) < 0.5]
        n = SIDES[max(lateral, key=lambda e: float(SIDES[e] @ (start - placer.mid)))]
        p = placer.mid + n * (float(np.abs(n) @ half) + clearance + item.lateral_width() / 2.0)
        return p + front * (head + item.depth() / 2.0 - float(p @ front))

    return beside_head if anchor.rel in BEDS else before_front


def _build(pattern: str, rng: np.random.Generator, rot: bool, seed: int
           ) -> tuple[Item, list[Item], dict, list[str], str] | None:
    """(anchor, members, spec, starting sides, role), or None when the draw does not fit.
    Table anchors are drawn; a convention's anchor cycles through its pool with the seed
    (consecutive seeds: every bed, TV stand and sofa)."""
    if pattern == "ring":
        anchor = make_item(K + "tableRound.glb")
        k = int(rng.integers(4, 9))
        clearance = float(rng.choice([0.05, 0.1, 0.15]))
        members = _members(rng, SEATS, k, rot, same=rng.random() < 0.4)
        pts = anchor.vertices[:, :2] * anchor.scale
        inradius = float(np.ptp(pts, axis=0).min()) / 2.0
        room = 2.0 * (inradius + clearance) * math.tan(math.pi / k)
        if max(m.lateral_width() for m in members) + 0.05 > room:
            return None
        spec = _spec("round_table", k, "ring", "toward_anchor", "even_around_anchor", clearance)
        return anchor, members, spec, [], "round_table"
    if pattern in CONVENTIONS:
        return _build_convention(pattern, rng, rot, seed)
    tv = pattern == "row" and rng.random() < 0.5
    pool_a = TV_STANDS if tv else (LONG_TABLES + SQUARE_TABLES if pattern in ("L", "free")
                                   else LONG_TABLES)
    anchor = make_item(_pick(rng, pool_a))
    placer = _Placer(anchor, rng)
    longs, shorts = placer.long_sides(), placer.short_sides()
    layout = None
    if pattern == "row":
        k = int(rng.integers(2, 5))
        side = longs[int(rng.integers(2))]
        counts = {side: k}
    elif pattern == "2+2+1":
        k, counts = 5, {longs[0]: 2, longs[1]: 2, shorts[int(rng.integers(2))]: 1}
    elif pattern == "2+2+1+1":
        k, counts = 6, {longs[0]: 2, longs[1]: 2, shorts[0]: 1, shorts[1]: 1}
    elif pattern == "L":
        k = int(rng.integers(2, 5))
        q = int(rng.integers(1, k))
        counts = {longs[int(rng.integers(2))]: q, shorts[int(rng.integers(2))]: k - q}
    elif pattern == "T":
        k, counts = int(rng.integers(2, 4)), {longs[int(rng.integers(2))]: 0}
    else:  # free
        layout = dict(FREE_LAYOUTS[int(rng.integers(len(FREE_LAYOUTS)))])
        k, counts = sum(layout.values()), dict(layout)
    members = _members(rng, KIT_CHAIRS + DINING + OFFICE if not tv else KIT_CHAIRS + DINING
                       + ARMCHAIRS, k, rot, same=rng.random() < 0.4)
    widths = [m.lateral_width() for m in members]
    occupied = [e for e, q in counts.items() if q]
    if pattern != "T" and not all(
            _edge_fits(widths[:q], placer.side_length(e), len(occupied) == 1)
            for e, q in counts.items()):
        return None
    if tv:
        clearance = float(rng.choice([0.8, 1.0, 1.2, 1.5]))
        role = "tv_stand"
    else:
        clearance = float(rng.choice([0.05, 0.1, 0.15]))
        role = "long_table" if anchor.rel in LONG_TABLES else "dining_table"
    spacing = "tight" if rng.random() < 0.15 else "even_along_each_edge"
    # where members start: their pattern's sides, a third of them on a random side
    sides = [e for e, q in counts.items() for _ in range(q)] if pattern != "T" else \
        [occupied[0] if occupied else longs[0]] * k
    sides = [str(rng.choice(list(SIDES))) if rng.random() < 0.3 else s for s in sides]
    rng.shuffle(sides)
    note = None
    if pattern == "free":
        note = "layout: " + ", ".join(f"{q} on {e}" for e, q in layout.items())
    spec = _spec(role, k, pattern, "toward_anchor", spacing, clearance, note, layout)
    return anchor, members, spec, sides, role


def _build_convention(pattern: str, rng: np.random.Generator, rot: bool, seed: int
                      ) -> tuple[Item, list[Item], dict, list[str], str] | None:
    if pattern == "bed":
        anchor = make_item(BEDS[seed % len(BEDS)])
        members = _members(rng, NIGHTSTANDS + NIGHTSTANDS + SIDE_TABLES, 2, rot,
                           same=rng.random() < 0.5)
        clearance = float(rng.choice([0.03, 0.05, 0.08]))
        role = "bed"
    elif pattern == "desk":
        anchor = make_item(C + "desk.glb")
        k = 1 if rng.random() < 0.7 else 2
        members = _members(rng, OFFICE + DINING, k, rot, same=rng.random() < 0.5)
        clearance = float(rng.choice([0.03, 0.05, 0.1]))
        role = "desk"
    elif pattern == "tv_stand":
        anchor = make_item(TV_STANDS[seed % len(TV_STANDS)])
        k = int(rng.integers(1, 4))
        members = _members(rng, ARMCHAIRS + KIT_CHAIRS + DINING, k, rot,
                           same=rng.random() < 0.4)
        clearance = float(rng.choice([0.8, 1.0, 1.2, 1.5]))
        role = "tv_stand"
    else:  # sofa
        anchor = make_item(SOFAS[seed % len(SOFAS)])
        if rng.random() < 0.5:
            members = _members(rng, COFFEE, 1, rot)
            clearance = float(rng.choice([0.3, 0.4, 0.5]))
        else:
            members = _members(rng, ARMCHAIRS + KIT_CHAIRS, int(rng.integers(1, 3)), rot,
                               same=rng.random() < 0.5)
            clearance = float(rng.choice([0.8, 1.0, 1.2]))
        role = "sofa"
    spec = _convention_spec(role, len(members), clearance)
    front = anchor.front
    placer = _Placer(anchor, rng)
    if pattern != "bed":
        assert front is not None
        front_side = max(SIDES, key=lambda e: float(SIDES[e] @ front))
        if not _edge_fits([m.lateral_width() for m in members], placer.side_length(front_side),
                          True):
            return None
    sides = [str(rng.choice(list(SIDES))) for _ in members]
    return anchor, members, spec, sides, role


# ------------------------------------------------------------------------- the loop
@dataclass
class LoopResult:
    poses: dict[str, np.ndarray]
    iters: int
    converged: bool
    rejected: str | None
    nonempty: list[int]
    seconds: float
    geometry: dict[str, Any] = field(default_factory=dict)   # the final state's, as measured
    axes: dict[str, Any] = field(default_factory=dict)        # forward axes of the case
    review: dict[str, Any] | None = None    # review.review_island of the final state
    gate_refused: list[int] = field(default_factory=list)     # converged refused: review fails
    stop: str = ""
    decide_seconds: list[float] = field(default_factory=list)  # Solver.decide, per iteration
    reasons: list[str] = field(default_factory=list)           # each decision's reason_summary
    given_up: list[dict[str, Any]] = field(default_factory=list)  # the last decision's
    solver: Any = None                                         # for infeasible_reason


def run_loop(case: Case, max_iter: int = MAX_ITER,
             context: dict[str, tuple[np.ndarray, np.ndarray]] | None = None) -> LoopResult:
    """``tests/test_solver.py::simulate``'s loop (see the module docstring); ``context``:
    the island's fixed obstacles (``context.npz``'s meshes), for solver and geometry."""

    import time

    from island_tools import review
    from island_tools.adapter import moves_nothing, no_progress_reason
    from island_tools.errors import IslandError
    from island_tools.measure import frames
    from island_tools.measure.forward_axis import forward_axes_document
    from island_tools.measure.geometry import GeometryContext
    from island_tools.policy import EMPTY_STOP, MIN_ITER, check_policy
    from island_tools.schemas import Metadata, parse_transforms
    from island_tools.solver import Solver

    t0 = time.perf_counter()
    items = case.items()
    meshes = {n: (it.vertices, it.faces) for n, it in items.items()}
    names = ["anchor", *case.names]
    axes = forward_axes_document(meshes, "anchor", {})
    geo = GeometryContext(meshes, "anchor", axes, context)
    solver = Solver(meshes, "anchor", axes, case.spec, context=context)
    poses = {n: np.array(p) for n, p in case.poses.items()}
    metadata = Metadata("anchor", tuple(names), np.eye(4), np.eye(4), dict(poses))
    geometry = geo.compute(poses, case.spec, 0)
    inputs = review.ReviewInputs("case", dict(case.spec), axes, tuple(case.names))
    result = LoopResult(poses, 0, False, None, [], 0.0, axes=axes,
                        stop=f"max_iter ({max_iter}) reached", solver=solver)
    empty = 0
    for n in range(1, max_iter + 1):
        t_decide = time.perf_counter()
        decision = solver.decide(poses, geometry, n)
        result.decide_seconds.append(time.perf_counter() - t_decide)
        result.reasons.append(str(decision.get("reason_summary", "")))
        result.given_up = list(decision.get("given_up") or [])
        # the adapter's convergence gate (write_decision): MIN_ITER, an earlier move, no move
        # now, and the review of the state it would stop on (this one) does not fail
        honoured = (bool(decision["converged"]) and n >= MIN_ITER and bool(result.nonempty)
                    and not decision["members"])
        if honoured and review.verdict(review.review_island(inputs, geometry)) == "fail":
            honoured = False
            result.gate_refused.append(n)
        doc = {"iter": n, "members": decision["members"], "converged": decision["converged"],
               "_island_meta": {"model": "solver", "image_sha256": "0" * 64,
                                "generated_by": "bench", "mode": "island_iter", "iter": n,
                                "timestamp_utc": "2026-01-01T00:00:00Z"}}
        try:
            transforms = parse_transforms(doc, "transforms.json", n, metadata)
            check_policy(transforms, n, len(case.members), geometry, "transforms.json")
        except IslandError as exc:
            result.rejected = f"iter {n}: {exc}"
            result.iters = n
            break
        for name, delta in decision["members"].items():
            if transforms.members[name].trivial:   # within the movement tolerance: not applied
                continue
            pivot = frames.footprint_centre_local(meshes[name][0])
            poses[name] = frames.apply_member_delta(poses[name], delta["delta_xyz"],
                                                    delta["delta_yaw_deg"], pivot)
        geometry = geo.compute(poses, case.spec, n)
        result.iters = n
        empty = 0 if decision["members"] else empty + 1
        if decision["members"]:
            result.nonempty.append(n)
        if honoured:
            result.converged = True
            result.stop = f"converged at iter {n}"
            break
        if moves_nothing(decision["members"]):
            result.stop = no_progress_reason(n)
            break
        if n >= MIN_ITER and empty >= EMPTY_STOP:
            result.stop = f"{empty} consecutive empty iterations at iter {n}"
            break
    result.poses = poses
    result.geometry = geometry
    result.review = review.review_island(inputs, geometry)
    result.seconds = time.perf_counter() - t0
    return result
