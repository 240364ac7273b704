"""Roles of real pieces read right or called undetermined (issue 32, deliverable 6), one
test per class fixed this session, with the real mesh: a 4.52 m conference table (the
tuned designed meeting room), a seat for one against a seat for several (an armchair is no
sofa, a seat between the two is not settled), a bench is no coffee table, a
closed round stool is no settled nightstand, a 1.0 m table, the 1.29 m high-back office
chair. Judged by the corpus categories and the pieces' own construction, never through the
classifier's numbers. Tuned split only (``fixtures/fronts_split.json``; parametric seeds
0-29; the tuned designed scene).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from fixtures import fronts_corpus as fc
from fixtures import parametric as par
from fixtures import rooms
from island_tools.measure import frames
from island_tools.scene.furniture import Role, UnitInput, classify, measure_unit

TUNED_SEEDS = range(0, 30)


def _role(v: np.ndarray, f: np.ndarray, world: np.ndarray | None = None) -> Role:
    w = np.eye(4) if world is None else world
    return classify(measure_unit(UnitInput("Object_1", w, np.asarray(v, float),
                                           np.asarray(f, np.int64))))


def _posed(yaw: float, scale=(1.0, 1.0, 1.0)) -> np.ndarray:
    return (frames.translation((1.3, -0.4, 0.0)) @ frames.rot_z(yaw)
            @ np.diag([*scale, 1.0]))


def _corpus(names: set[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    reason = fc.shared_corpus_status()
    if reason and fc.corpus_required():
        pytest.fail(reason)
    out = {}
    for p in fc.front_pieces("tuned", sources=("assets", "shared"), missing_shared="skip"):
        if p.name in names:
            v, f = p.load()
            out[p.name] = (np.asarray(v, float) * rooms._scale_of(p.name),
                           np.asarray(f, np.int64))
    if reason:
        names = {n for n in names if not n.startswith("shared:")}
    assert set(out) == names, sorted(names - set(out))
    return out


def _seat(parts: list[tuple[float, float, float, float, float, float]]
          ) -> tuple[np.ndarray, np.ndarray]:
    m = par._Mesh()
    for b in parts:
        m.box(*b)
    return m.mesh()


def _upholstered(inner: float, depth: float = 0.85, leg_rest: float = 0.0, arm: float = 0.15
                 ) -> tuple[np.ndarray, np.ndarray]:
    """A seat ``inner`` m wide between two ``arm`` m arms, its back at +Y (0.2 m thick,
    0.85 m tall), the seat 0.42 m up; ``leg_rest`` m of a low platform (0.12 m) before it
    (a chaise)."""
    hw = inner / 2 + arm
    parts = [(-inner / 2, inner / 2, -depth / 2, depth / 2 - 0.2, 0.0, 0.42),   # the seat
             (-hw, hw, depth / 2 - 0.2, depth / 2, 0.0, 0.85),                # the back
             (-hw, -inner / 2, -depth / 2, depth / 2, 0.0, 0.62),            # the arms
             (inner / 2, hw, -depth / 2, depth / 2, 0.0, 0.62)]
    if leg_rest:
        parts.append((-inner / 2, inner / 2, -depth / 2 - leg_rest, -depth / 2, 0.0, 0.12))
    return _seat(parts)


# --------------------------------------------------------------------------- tables
def test_a_conference_table_4_5_m_long_is_a_table() -> None:
    """A tuned corpus table scaled per axis to the ServiceSim meeting room's 4.52 x 1.22 m
    conference table (0.72 m top, knee room under it) is a table; so is the one the
    designed room places, and its ten chairs are its group."""
    v, f = par.generate("table_rect", 3).vertices, par.generate("table_rect", 3).faces
    ext = np.ptp(np.asarray(v), axis=0)
    for yaw in (0.0, 37.0):
        r = _role(v, f, _posed(yaw, (4.52 / ext[0], 1.22 / ext[1], 0.72 / ext[2])))
        assert (r.role, r.settled) == ("table", True), r
    from fixtures import designed

    why = designed.status()
    if why is not None:
        pytest.skip(why)
    from fixtures.rooms import room_units
    from island_tools.scene.propose import propose_units

    room = designed.designed_room("servicesim_meeting")
    anchors = [p for p in room.placed if p.anchor]
    table = max(anchors, key=lambda p: float(np.ptp(
        frames.transform_points(p.pose, p.furniture.vertices)[:, 0])) + float(np.ptp(
            frames.transform_points(p.pose, p.furniture.vertices)[:, 1])))
    pts = frames.transform_points(table.pose, table.furniture.vertices)
    assert max(np.ptp(pts[:, 0]), np.ptp(pts[:, 1])) > 4.0
    assert _role(table.furniture.vertices, table.furniture.faces, table.pose).role == "table"
    doc = propose_units(room_units(room))
    truth = room.truth["groups"]
    (gid,) = [g for g, t in truth.items() if t["anchor"] == table.name]
    (got,) = [g for g in doc["groups"] if g["anchor"] == table.name]
    assert sorted(got["members"]) == sorted(truth[gid]["members"])
    assert len(got["members"]) == 10


@pytest.mark.parametrize("size", [(1.0, 1.0), (1.0, 0.6), (0.6, 0.6)])
def test_a_1_m_table_at_dining_height_is_a_table(size: tuple[float, float]) -> None:
    v, f = par.bar_table(size[0], size[1], 0.74)
    r = _role(v, f, _posed(21.0))
    assert (r.role, r.settled) == ("table", True), (size, r)


# --------------------------------------------------------------------------- seats
def test_a_seat_for_one_is_an_armchair_and_a_seat_for_several_a_sofa() -> None:
    """The same arms and back: a 0.6 m seat is an armchair, a 1.4 m one a sofa (with a leg
    rest before it too); a 0.9 m seat between wide arms (1.3 m overall: one seat or two?)
    is not settled."""
    for yaw in (0.0, 125.0):
        one = _role(*_upholstered(0.6), _posed(yaw))
        assert (one.role, one.settled) == ("armchair", True), one
        two = _role(*_upholstered(1.4), _posed(yaw))
        assert (two.role, two.settled) == ("sofa", True), two
        between = _role(*_upholstered(0.9, arm=0.2), _posed(yaw))
        assert between.role is None or not between.settled, between
        long_chaise = _role(*_upholstered(1.6, leg_rest=0.6), _posed(yaw))
        assert (long_chaise.role, long_chaise.settled) == ("sofa", True), long_chaise


def test_real_armchairs_and_sofas_are_never_read_as_each_other() -> None:
    """KayKit's armchair (0.8 m seat between fat arms) is an armchair, its couch a sofa;
    Infinigen's armchairs with a leg rest are armchairs, its chaise sofa whose seat runs
    0.97 m a sofa or not settled; no tuned parametric sofa is an armchair. (Infinigen's
    sofa_SofaFactory_s3, a seat for one, 0.68 m, with a leg rest, reads as an armchair:
    its geometry is that of the armchairs; not settling it waits for the proposer to keep
    a TV group confident over a seat that is an armchair or a sofa: see the report.)"""
    inf = "assets:infinigen/"
    pieces = _corpus({"shared:kaykit_armchair", "shared:kaykit_couch",
                      f"{inf}sofa_SofaFactory_s1.glb",
                      *(f"{inf}armchair_ArmChairFactory_s{i}.glb" for i in (1, 2, 4)),
                      "assets:kenney-cco/loungeSofa.glb"})
    want = {"shared:kaykit_armchair": ("armchair", True), "shared:kaykit_couch": ("sofa", True),
            "assets:kenney-cco/loungeSofa.glb": ("sofa", True),
            **{f"{inf}armchair_ArmChairFactory_s{i}.glb": ("armchair", True) for i in (1, 2, 4)}}
    for name, (v, f) in pieces.items():
        for yaw in (0.0, 64.0):
            r = _role(v, f, _posed(yaw))
            if name in want:
                assert (r.role, r.settled) == want[name], (name, yaw, r)
            else:
                assert r.role in ("armchair", "sofa") and (r.role == "sofa" or not r.settled), (
                    name, yaw, r)
    for seed in TUNED_SEEDS:
        p = par.generate("sofa", seed)
        r = _role(p.vertices, p.faces)
        assert (r.role, r.settled) == ("sofa", True), (seed, r)


def test_a_seat_between_wide_flat_arms_is_an_armchair() -> None:
    """Infinigen's armchair_ArmChairFactory_s3 (1.37 x 1.32 m): wide flat arms at 0.84-0.89 m
    cover more of its footprint from above than the 0.45 m seat between them, with a leg
    rest at 0.23 m. The seat, not the arm tops, is its surface: an armchair at every yaw
    (it was "no role fits", so its TV group held it as a doubt). The same arms built by
    hand around a seat and a seat alone tell the same."""
    name = "assets:infinigen/armchair_ArmChairFactory_s3.glb"
    v, f = _corpus({name})[name]
    for yaw in (0.0, 37.0, 90.0, 211.0):
        r = _role(v, f, _posed(yaw))
        assert (r.role, r.settled) == ("armchair", True), (yaw, r)
    # by hand: 0.62 m seat at 0.44 m between 0.34 m wide arms at 0.85 m, back to 0.92 m
    flat_arms = _seat([(0.0, 0.62, 0.0, 0.80, 0.0, 0.44),          # seat block
                       (-0.34, 0.0, 0.0, 0.80, 0.0, 0.85),         # left arm
                       (0.62, 0.96, 0.0, 0.80, 0.0, 0.85),         # right arm
                       (-0.34, 0.96, 0.80, 0.98, 0.0, 0.92)])      # back
    r = _role(*flat_arms, _posed(20.0))
    assert (r.role, r.settled) == ("armchair", True), r


def test_a_base_whose_footprint_rectangles_tie_reads_the_same_at_every_yaw() -> None:
    """Kenney's bar stool stands on a hexagonal base: three minimum-area rectangles of its
    footprint tie, and which one floating point picked turned with the yaw, so the stool
    read as settled storage at half of the yaws (a wrong role, a member lost). Its role, and
    that of the other pieces on round or polygonal bases, is now one at every yaw."""
    names = {"assets:kenney-cco/stoolBar.glb", "assets:kenney-cco/stoolBarSquare.glb",
             "assets:infinigen/round_table_TableCocktailFactory_s1.glb",
             "assets:infinigen/bar_chair_BarChairFactory_s1.glb"}
    for name, (v, f) in _corpus(names).items():
        seen = {yaw: _role(v, f, _posed(yaw)) for yaw in range(0, 360, 15)}
        roles = {(r.role, r.settled) for r in seen.values()}
        assert len(roles) == 1, (name, {y: (r.role, r.settled) for y, r in seen.items()})
        assert ("storage", True) not in roles, name


def test_the_high_back_office_chair_is_a_chair_facing_its_seat() -> None:
    """Infinigen's 1.29 m high-back office chair (a five-spoke base, arms): a chair, its
    front the seat's within 5 deg at any yaw."""
    from island_tools.scene.members import detect_front

    name = "assets:infinigen/office_chair_OfficeChairFactory_s1.glb"
    (v, f), = _corpus({name}).values()
    (piece,) = [p for p in fc.front_pieces("tuned", sources=("assets",)) if p.name == name]
    assert float(np.ptp(v[:, 2])) > 1.25
    for yaw in (0.0, 77.0, 200.0):
        u = UnitInput("Object_1", _posed(yaw), v, f)
        s = measure_unit(u)
        r = classify(s)
        assert r.role in ("chair", "armchair") and r.settled, (yaw, r)
        front = detect_front(s, r.role, [])
        assert front.world is not None
        a = math.radians(yaw)
        truth = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]]) @ np.asarray(
            piece.front[:2])
        err = math.degrees(math.acos(max(-1.0, min(1.0, float(front.world @ truth)))))
        assert err <= 5.0, (yaw, err)


def test_a_bench_is_no_coffee_table() -> None:
    """A backless seat for several, long and narrow at seat height: a bench, or (as narrow
    as a coffee table can be) not settled, never a settled coffee table; low coffee tables
    of other creators stay coffee tables."""
    for seed in TUNED_SEEDS:
        p = par.generate("bench", seed)
        r = _role(p.vertices, p.faces, _posed(15.0 * seed))
        assert (r.role == "bench" and r.settled) or not r.settled, (seed, r)
        assert not (r.role == "coffee_table" and r.settled), (seed, r)
    names = {"assets:kenney-cco/tableCoffee.glb",
             *(f"assets:infinigen/coffee_table_CoffeeTableFactory_s{i}.glb" for i in (1, 2, 3))}
    for name, (v, f) in _corpus(names).items():
        assert (_role(v, f).role, _role(v, f).settled) == ("coffee_table", True), name


def test_a_closed_round_stool_is_no_settled_nightstand() -> None:
    """A drum stool (closed, round, 0.3-0.45 m across) is as much a small round nightstand:
    stool or not settled, never a settled nightstand; rectangular nightstands stay
    nightstands."""
    for seed in TUNED_SEEDS:
        p = par.generate("stool_round", seed)
        r = _role(p.vertices, p.faces)
        assert r.role == "stool" or not r.settled, (seed, r)
        n = par.generate("nightstand", seed)
        rn = _role(n.vertices, n.faces)
        assert rn.role in ("nightstand", "side_table") and rn.settled, (seed, rn)


# --------------------------------------------------------------------------- the measure
def test_role_accuracy_judges_every_category_and_names_no_untouched_piece() -> None:
    """``scripts/role_accuracy.py``: every corpus category (both parts) has the roles that
    read it right; a settled role outside them is wrong, an unsettled one undetermined; the
    untouched part is reported as totals only."""
    from scripts import role_accuracy as ra

    pieces = fc.front_pieces("both", missing_shared="skip")
    assert {p.category for p in pieces} <= set(ra.CATEGORY_ROLES)
    assert ra.outcome("armchair", True, ra.CATEGORY_ROLES["sofa"]) == "wrong"
    assert ra.outcome("sofa", False, ra.CATEGORY_ROLES["sofa"]) == "undetermined"
    assert ra.outcome(None, True, ra.CATEGORY_ROLES["sofa"]) == "undetermined"
    assert ra.outcome("nightstand", True, ra.CATEGORY_ROLES["cabinet"]) == "right"
    rows = [{"source": "parametric", "outcome": o} for o in ("right", "wrong", "right")]
    assert ra.totals(rows) == {k: {"pieces": 3, "right": 2, "undetermined": 0, "wrong": 1}
                               for k in ("parametric", "all")}
