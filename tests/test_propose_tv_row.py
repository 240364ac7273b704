"""A seat turned away in the row of a TV stand's seats is its member (issue 32, class A).

Before a TV stand, a seat turned more than ``membership.TURNED_AWAY_DEG`` beside one that
faces the stand was always held in doubt ("it may be a seat that only stands in the room"),
so ``run --propose`` left the group as it was: the disorder's turned seat is exactly the
member the tool exists to fix. A seat standing in the row of the seats that face the stand
(side by side at one depth before it, ``membership._in_tv_row``; none facing, the row of
the nearest seat when it holds the seat opposite the screen), or pushed against the stand's
front opposite the screen, is its member whatever its yaw; off the row (further out, before
it, far to the side, none facing off the screen) or of another kind it stays a named doubt.

Real meshes of the TUNED split (the repository's infinigen assets: TV stand, sofa,
armchairs, a dining chair), placed by the test; the depths and gaps are checked here with
shapely hulls of the posed vertices, never through the proposer's geometry. Pure Python
(tier 1).
"""
from __future__ import annotations

import numpy as np
import pytest

from fixtures import rooms
from tests.test_propose_desk_doubt import _physical, asset, named
from tests.test_propose_disorder import by_anchor, footprint, propose

WALL_Y = -5.0     # the room shell's south wall (inner face): the stand stands against it
SOFA_GAP_M = 2.0  # the sofa's footprint this far from the stand's front edge
TV = "infinigen/tv_stand_TVStandFactory_s1.glb"
SOFA = "infinigen/sofa_SofaFactory_s2.glb"
ARMCHAIR = "infinigen/armchair_ArmChairFactory_s2.glb"
ARMCHAIRS = [ARMCHAIR, "infinigen/armchair_ArmChairFactory_s1.glb",
             "infinigen/armchair_ArmChairFactory_s4.glb"]
CHAIR = "infinigen/dining_chair_ChairFactory_s1.glb"


def _bounds(f: rooms.Furniture, pose: np.ndarray) -> tuple[float, float, float, float]:
    v = f.vertices @ pose[:3, :3].T + pose[:3, 3]
    return float(v[:, 0].min()), float(v[:, 0].max()), float(v[:, 1].min()), float(v[:, 1].max())


def _seat(room: rooms.Room, name: str, f: rooms.Furniture, turn: float, near_y: float,
          left_x: float | None, role: str, group: str | None) -> None:
    """``f`` facing the stand (-y) turned ``turn`` deg about its centre, its footprint's
    nearest point to the stand at ``near_y``; its left side at ``left_x`` (None: centred
    on x = 0)."""
    pose = f.pose(np.array([0.0, 0.0]), np.array([0.0, -1.0]), turn)
    x0, x1, y0, _ = _bounds(f, pose)
    dx = -(x0 + x1) / 2 if left_x is None else left_x - x0
    pose = f.pose(np.array([dx, near_y - y0]), np.array([0.0, -1.0]), turn)
    room.placed.append(rooms.Placed(name, f, pose, role, group))


def tv_room(turn: float, behind_m: float = 0.0, apart_m: float = 0.3,
            seat: str = ARMCHAIR, role: str = "armchair", member: bool = True,
            sofa_turn: float = 0.0, sofa_left_x: float | None = None) -> rooms.Room:
    """A TV stand against the south wall facing +y, a sofa 2.0 m before it facing it
    (turned ``sofa_turn``; centred on the stand, or its left side at ``sofa_left_x``), and
    to the sofa's +x side ``apart_m`` from it a second seat (``seat``) whose nearest point
    stands ``behind_m`` further out than the sofa's, turned ``turn`` deg from facing the
    stand. ``member``: the truth holds the second seat (else it is a bystander)."""
    room = rooms.Room((10.0, 10.0))
    tv = asset(TV)
    pose = tv.pose(np.array([0.0, 0.0]), np.array([0.0, 1.0]))
    _, _, y0, y1 = _bounds(tv, pose)
    pose = tv.pose(np.array([0.0, WALL_Y + 0.03 - y0]), np.array([0.0, 1.0]))
    room.placed.append(rooms.Placed("Object_1", tv, pose, "tv_stand", "living", True))
    edge = WALL_Y + 0.03 + (y1 - y0)
    _seat(room, "Object_2", asset(SOFA), sofa_turn, edge + SOFA_GAP_M, sofa_left_x, "sofa",
          "living")
    sofa_right = _bounds(room.placed[-1].furniture, room.placed[-1].pose)[1]
    _seat(room, "Object_3", asset(seat), turn, edge + SOFA_GAP_M + behind_m,
          sofa_right + apart_m, role, "living" if member else None)
    if not member:
        room.reach["living"] = ["Object_3"]
    return room


def _check(room: rooms.Room, behind_m: float, apart_m: float) -> None:
    """The layout is what the test says, measured with shapely hulls."""
    assert _physical(room)
    by = {p.name: footprint(p) for p in room.placed}
    b2, b3 = by["Object_2"].bounds, by["Object_3"].bounds
    assert abs((b3[1] - b2[1]) - behind_m) < 0.01
    assert abs((b3[0] - b2[2]) - apart_m) < 0.01


@pytest.mark.parametrize("seat", ARMCHAIRS)
@pytest.mark.parametrize("turn", [150.0, 165.0, 180.0])
def test_a_seat_turned_away_in_the_row_of_a_tv_stands_seats_is_its_member(
        turn: float, seat: str) -> None:
    """The sofa faces the stand; the armchair beside it (0.3 m apart, its front as far out)
    is turned 150-180 deg: it stands in the sofa's row, so it is the stand's member, not in
    doubt, and the group is confident (the run turns it back). On main it was held in doubt
    ("it may be a seat that only stands in the room") and the group left uncertain."""
    room = tv_room(turn, seat=seat)
    _check(room, 0.0, 0.3)
    g = by_anchor(propose(room))["Object_1"]
    p = g["proposal"]
    assert g["members"] == ["Object_2", "Object_3"], (g["members"], p["reasons"])
    assert "Object_3" not in p["uncertain_members"], p["uncertain_members"]
    assert p["status"] == "confident", p["reasons"]


@pytest.mark.parametrize("turn", [150.0, 180.0])
def test_a_seat_turned_away_pulled_out_of_the_row_is_still_its_member(turn: float) -> None:
    """Pulled 0.4 m further out than the sofa (the disorder pulls up to 0.6 m): the seats'
    depths before the stand still overlap by more than half: in the row, held, confident."""
    room = tv_room(turn, behind_m=0.4)
    _check(room, 0.4, 0.3)
    g = by_anchor(propose(room))["Object_1"]
    assert g["members"] == ["Object_2", "Object_3"], g["proposal"]["reasons"]
    assert g["proposal"]["status"] == "confident", g["proposal"]["reasons"]


@pytest.mark.parametrize("where,behind_m,apart_m", [
    ("behind the row", 1.0, 0.3), ("far beside the row", 0.0, 1.5),
    ("behind and beside", 0.8, 1.0)])
def test_a_seat_turned_away_off_the_row_is_still_a_named_doubt(
        where: str, behind_m: float, apart_m: float) -> None:
    """A seat turned 165 deg away standing off the sofa's row (``where``) may be a seat that
    only stands in the room: its place does not settle it, so it stays a named doubt and the
    group is uncertain (never a confident group with a bystander in it)."""
    room = tv_room(165.0, behind_m=behind_m, apart_m=apart_m, member=False)
    _check(room, behind_m, apart_m)
    g = by_anchor(propose(room))["Object_1"]
    p = g["proposal"]
    assert "Object_2" in g["members"] and "Object_2" not in p["uncertain_members"]
    assert p["status"] == "uncertain", (where, g["members"], p["reasons"])
    assert named(g, "Object_3"), (where, p)


def test_a_seat_of_another_kind_turned_away_in_the_row_is_still_a_named_doubt() -> None:
    """A dining chair turned 165 deg away in the sofa's row is another kind of seat than the
    lounge seats a TV row holds: its place does not make it a member; named, uncertain."""
    room = tv_room(165.0, seat=CHAIR, role="chair", member=False)
    _check(room, 0.0, 0.3)
    g = by_anchor(propose(room))["Object_1"]
    p = g["proposal"]
    assert "Object_2" in g["members"] and "Object_2" not in p["uncertain_members"]
    assert p["status"] == "uncertain", (g["members"], p["reasons"])
    assert named(g, "Object_3"), p


@pytest.mark.parametrize("seat", ARMCHAIRS)
def test_a_row_in_order_facing_straight_ahead_is_confident(seat: str) -> None:
    """The row in order, both seats facing straight ahead (-y, as a designer sets a sofa and
    an armchair side by side): one confident group of both seats. On main the armchair, 32
    deg off the direction to the stand's centre, was held in doubt beside the sofa: a room
    in order left uncertain."""
    room = tv_room(0.0, seat=seat)
    g = by_anchor(propose(room))["Object_1"]
    assert g["members"] == ["Object_2", "Object_3"], g["proposal"]["reasons"]
    assert g["proposal"]["status"] == "confident", g["proposal"]["reasons"]


@pytest.mark.parametrize("sofa_turn", [100.0, 180.0])
def test_none_facing_a_row_opposite_the_screen_is_the_stands(sofa_turn: float) -> None:
    """No seat faces the stand: the sofa opposite the screen is turned ``sofa_turn``, the
    armchair beside it in its row 165 deg: the row before the screen is the stand's, both
    held, confident."""
    room = tv_room(165.0, sofa_turn=sofa_turn)
    assert _physical(room)
    g = by_anchor(propose(room))["Object_1"]
    assert g["members"] == ["Object_2", "Object_3"], g["proposal"]["reasons"]
    assert g["proposal"]["status"] == "confident", g["proposal"]["reasons"]


def test_none_facing_a_row_off_the_screen_is_still_a_named_doubt() -> None:
    """No seat faces the stand and the row stands to its side (the sofa's left side 0.1 m
    past the stand's centre line: no seat opposite the screen): which of the two is its
    member the place does not settle; the turned armchair stays a named doubt."""
    room = tv_room(165.0, sofa_turn=120.0, sofa_left_x=0.1, member=False)
    assert _physical(room)
    g = by_anchor(propose(room))["Object_1"]
    p = g["proposal"]
    assert "Object_2" in g["members"], p["reasons"]
    assert p["status"] == "uncertain", (g["members"], p["reasons"])
    assert named(g, "Object_3"), p


def _before_stand(gap_m: float, turn: float, member: bool) -> rooms.Room:
    """The sofa 2.0 m before the stand facing it, and an armchair opposite the screen
    ``gap_m`` from the stand's front (between it and the sofa), turned ``turn`` deg."""
    room = tv_room(0.0, behind_m=-(SOFA_GAP_M - gap_m), apart_m=0.3, member=member)
    arm = room.placed.pop()
    _seat(room, "Object_3", arm.furniture, turn, _bounds(*_stand(room))[3] + gap_m, -0.3,
          "armchair", "living" if member else None)
    return room


def _stand(room: rooms.Room) -> tuple[rooms.Furniture, np.ndarray]:
    p = room.placed[0]
    return p.furniture, p.pose


@pytest.mark.parametrize("turn", [150.0, 180.0])
def test_a_seat_pushed_against_the_screen_turned_away_is_its_member(turn: float) -> None:
    """The armchair pushed 0.1 m from the stand's front, opposite the screen, turned away:
    no seat stands there in order and no other anchor claims it: the stand's member pushed
    there, held, the group confident."""
    room = _before_stand(0.1, turn, member=True)
    assert _physical(room)
    by = {p.name: footprint(p) for p in room.placed}
    assert abs(by["Object_3"].distance(by["Object_1"]) - 0.1) < 0.01
    g = by_anchor(propose(room))["Object_1"]
    assert g["members"] == ["Object_2", "Object_3"], g["proposal"]["reasons"]
    assert g["proposal"]["status"] == "confident", g["proposal"]["reasons"]


def test_a_seat_turned_away_before_the_row_not_at_the_stand_is_still_a_named_doubt() -> None:
    """The armchair 0.7 m from the stand's front (before the sofa's row, not pushed against
    the stand), turned 165 deg: its place does not settle it; a named doubt."""
    room = _before_stand(0.7, 165.0, member=False)
    assert _physical(room)
    g = by_anchor(propose(room))["Object_1"]
    p = g["proposal"]
    assert "Object_2" in g["members"] and "Object_2" not in p["uncertain_members"]
    assert p["status"] == "uncertain", (g["members"], p["reasons"])
    assert named(g, "Object_3"), p
