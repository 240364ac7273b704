"""Issue 32, "a room in order is left in order": on a tidy room ``run --propose`` moves no
member more than 2 cm or 2 deg, and a disordered version of it is still repaired.

Rooms: the TUNED split only (generator seeds 0-39 and the bench's tuned seeds 200+; issue
32's split discipline). What kept a tidy generator room from staying in place:

* the fixture itself: the armchair beside the sofa was placed 1.3 m off the TV stand's
  centre whatever the sofa's width, so the two shared surfaces (a tidy room that was not
  in order; the review rightly failed the penetration);
* the review's facing of a seat before a TV stand: square to its front only, while the
  generator, the proposer and the judge turn a seat beside the sofa toward the TV's centre
  (``geometry.watch_facing``: either is in order);
* the TV convention's spacing (the seats centred as a pair at one viewing distance) against
  seats in order at the distances they were laid out (the proposer: ``loose``, the
  nearest seat's distance as the clearance);
* a table's chairs all in order but spread 0.06-0.21 m from it (tuned seed 4) or slid along
  their edges off the even slots (a designer's row, :func:`designer_room`): the convention's
  0.10 m failed the nearest and the even slots failed the row (the proposer: ``spacing``
  ``as_laid_out``, the nearest chair's gap as the clearance when the farthest is within the
  review's too-far tolerance of it).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from fixtures import rooms
from island_tools.measure import frames
from island_tools.measure.geometry import watch_facing
from tests.test_propose_rooms import run_propose

REPO = Path(__file__).resolve().parents[1]


def _dir(deg: float) -> np.ndarray:
    return np.array([math.cos(math.radians(deg)), math.sin(math.radians(deg))])


# ------------------------------------------------------------------ the facing criterion
def test_a_seat_watching_a_tv_faces_it_square_or_toward_its_centre() -> None:
    square, to_centre = _dir(180.0), _dir(192.0)   # the TV's centre 12 deg off the normal
    for deg in (180.0, 186.0, 192.0):              # square, between, straight at the centre
        _, err = watch_facing(_dir(deg), square, to_centre)
        assert err == pytest.approx(0.0, abs=1e-6), deg
    target, err = watch_facing(_dir(160.0), square, to_centre)   # turned away from the TV
    assert err == pytest.approx(20.0, abs=1e-6) and np.allclose(target, square)
    target, err = watch_facing(_dir(230.0), square, to_centre)   # turned past its centre
    assert err == pytest.approx(38.0, abs=1e-6) and np.allclose(target, to_centre)
    _, err = watch_facing(_dir(0.0), square, to_centre)          # its back to the TV
    assert err == pytest.approx(168.0, abs=1e-6)


def test_a_seat_far_beside_a_tv_faces_within_15_deg_of_its_centre() -> None:
    square, to_centre = _dir(180.0), _dir(205.0)   # the TV's centre 25 deg off the normal
    for deg in (190.0, 205.0):                     # 15 deg off the centre, straight at it
        _, err = watch_facing(_dir(deg), square, to_centre)
        assert err == pytest.approx(0.0, abs=1e-6), deg
    target, err = watch_facing(square, square, to_centre)        # square: the screen 25 off
    assert err == pytest.approx(10.0, abs=1e-6) and np.allclose(target, _dir(190.0))
    target, err = watch_facing(_dir(230.0), square, to_centre)   # turned past its centre
    assert err == pytest.approx(25.0, abs=1e-6) and np.allclose(target, to_centre)


# ------------------------------------------------------------------ the fixture
@pytest.mark.parametrize("seed,crowded", [(4, False), (5, False), (7, False), (200, True),
                                          (201, True)])
def test_tidy_living_room_seats_share_no_surfaces(seed: int, crowded: bool) -> None:
    room = rooms.random_room("tuned", seed, crowded=crowded)
    living = [p for p in room.placed if p.group == "living"]
    assert len(living) >= 3, "these seeds put a sofa and an armchair before the TV stand"
    for i, p in enumerate(living):
        assert not rooms.in_wall(room, p), p.name
        for o in living[i + 1:]:
            assert not rooms.collides(p, o), f"{p.name} ({p.role}) inside {o.name} ({o.role})"


# ------------------------------------------------------------------ the spec
def _tv_group(room: rooms.Room) -> dict:
    from island_tools.scene.propose import propose_units

    doc = propose_units(rooms.room_units(room))
    tv = next(p.name for p in room.placed if p.anchor and p.role == "tv_stand")
    return next(g for g in doc["groups"] if g["anchor"] == tv)


def test_tv_seats_in_order_are_kept_as_laid_out_and_turned_ones_are_not() -> None:
    room = rooms.random_room("tuned", 200, crowded=True)
    gaps = room.truth["groups"]["living"]["spec"]["gaps"]
    g = _tv_group(room)
    assert g["relation"]["spacing"] == "loose", g["relation"]
    assert min(gaps) - 0.02 < g["relation"]["clearance_m"] <= min(gaps), (gaps, g)
    assert g["proposal"]["status"] == "confident"
    # the sofa turned 30 deg away: no longer in order, the convention's spec again
    sofa = next(p for p in room.placed if p.group == "living" and p.role == "sofa")
    c = rooms._footprint(sofa).mean(axis=0)
    turned = (frames.translation((float(c[0]), float(c[1]), 0.0)) @ frames.rot_z(30.0)
              @ frames.translation((float(-c[0]), float(-c[1]), 0.0)) @ sofa.pose)
    room.placed[room.placed.index(sofa)] = rooms.Placed(
        sofa.name, sofa.furniture, turned, sofa.role, sofa.group, sofa.anchor, sofa.holding)
    g = _tv_group(room)
    how = g["proposal"]["evidence"]["target_spec_inferred"]
    # not kept as laid out: the convention's layout, each seat watching from its own
    # distance (loose), none nearer than the nearest seat's (the turned sofa's footprint
    # now reaches 0.2 m nearer), floored to 5 cm within the viewing range
    assert "as seen" not in how["clearance_m"] and "nearest seat" in how["clearance_m"], how
    assert g["relation"]["spacing"] == "loose", g["relation"]
    assert 1.2 <= g["relation"]["clearance_m"] <= min(gaps) - 0.2, (gaps, g)


def designer_room(shift: float = 0.18) -> rooms.Room:
    """Tuned seed 4 as a designer might lay it out: its long table's two rows of three
    chairs (facing it within 8 deg, 0.06-0.21 m from it) slid ``shift`` m along the table,
    off the even slots."""
    room = rooms.random_room("tuned", 4)
    table = next(p for p in room.placed if p.group == "dining" and p.anchor)
    foot = rooms._footprint(table)
    axis = np.linalg.svd(foot - foot.mean(axis=0), full_matrices=False)[2][0]
    d = axis * shift
    move = frames.translation((float(d[0]), float(d[1]), 0.0))
    room.placed = [rooms.Placed(p.name, p.furniture, move @ p.pose, p.role, p.group, p.anchor,
                                p.holding, p.ambiguous)
                   if p.group == "dining" and not p.anchor else p for p in room.placed]
    return room


def _table_group(room: rooms.Room) -> dict:
    from island_tools.scene.propose import propose_units

    doc = propose_units(rooms.room_units(room))
    table = next(p.name for p in room.placed if p.anchor and p.group == "dining")
    return next(g for g in doc["groups"] if g["anchor"] == table)


def test_a_designers_table_in_order_is_kept_as_laid_out() -> None:
    room = designer_room()
    for i, p in enumerate(room.placed):   # the fixture is physically possible
        assert not rooms.in_wall(room, p), p.name
        assert not any(rooms.collides(p, o) for o in room.placed[i + 1:]), p.name
    gaps = room.truth["groups"]["dining"]["spec"]["gaps"]
    assert max(gaps) - min(gaps) > 0.1, gaps   # no 3 cm agreement: a designer's spread
    g = _table_group(room)
    rel, how = g["relation"], g["proposal"]["evidence"]["target_spec_inferred"]
    assert rel["spacing"] == "as_laid_out", (rel, how)
    # the nearest chair's gap floored to the cm (the truth's gaps are the generator's own
    # measure, within a millimetre of the proposer's)
    assert min(gaps) - 0.02 < rel["clearance_m"] <= min(gaps), (rel, gaps, how)
    assert "as laid out" in how["clearance_m"] and "as laid out" in how["spacing"], how
    # one chair turned 40 deg: the group is not in order - even slots, the convention's 0.10
    chair = next(p for p in room.placed if p.group == "dining" and not p.anchor)
    c = rooms._footprint(chair).mean(axis=0)
    turned = (frames.translation((float(c[0]), float(c[1]), 0.0)) @ frames.rot_z(40.0)
              @ frames.translation((float(-c[0]), float(-c[1]), 0.0)) @ chair.pose)
    room.placed[room.placed.index(chair)] = rooms.Placed(
        chair.name, chair.furniture, turned, chair.role, chair.group, chair.anchor,
        chair.holding)
    rel = _table_group(room)["relation"]
    assert "spacing" not in rel and rel["clearance_m"] == 0.10, rel


def _move_chairs(room: rooms.Room, values: list[float], move) -> list[str]:
    """Pre-multiply the dining chairs' poses (in order) by ``move(chair, value)``; their
    names."""
    chairs = [p for p in room.placed if p.group == "dining" and not p.anchor]
    for chair, v in zip(chairs, values, strict=False):
        room.placed[room.placed.index(chair)] = rooms.Placed(
            chair.name, chair.furniture, move(chair, v) @ chair.pose, chair.role, chair.group,
            chair.anchor, chair.holding)
    return [c.name for c in chairs[:len(values)]]


def _turn_chairs(room: rooms.Room, degs: list[float]) -> list[str]:
    """Turn the dining chairs about their centres by ``degs`` (in order); their names."""
    def turn(chair: rooms.Placed, deg: float) -> np.ndarray:
        c = rooms._footprint(chair).mean(axis=0)
        return (frames.translation((float(c[0]), float(c[1]), 0.0)) @ frames.rot_z(deg)
                @ frames.translation((float(-c[0]), float(-c[1]), 0.0)))
    return _move_chairs(room, degs, turn)


def test_chairs_turned_a_little_at_their_places_are_left_as_laid_out_and_uncertain() -> None:
    # a designer's meeting table (OSRF's: chairs turned up to 23 deg) and a small disorder
    # look alike: every chair at its place, some (not all) turned 19-21 deg (11-29 off)
    # -> kept as laid out (nothing to move for the clearance or the places) and uncertain
    # (facing not settled)
    room = designer_room()
    gaps = room.truth["groups"]["dining"]["spec"]["gaps"]
    turned = _turn_chairs(room, [19.0, -20.0, 0.0, 21.0])
    g = _table_group(room)
    rel, prop = g["relation"], g["proposal"]
    assert rel["spacing"] == "as_laid_out", rel
    assert min(gaps) - 0.03 < rel["clearance_m"] <= min(gaps), (rel, gaps)
    assert prop["status"] == "uncertain", prop
    why = [r for r in prop["reasons"] if r.startswith("facing not settled")]
    assert len(why) == 1 and all(f"'{n}'" in why[0] for n in turned[:2] + turned[3:]), why
    assert f"'{turned[2]}'" not in why[0], why   # the chair turned 0 deg is in order
    # every chair turned (none in order to show the layout): not a layout to keep
    room = designer_room()
    _turn_chairs(room, [19.0, -20.0, 21.0, -19.0, 20.0, -21.0])
    g = _table_group(room)
    assert "spacing" not in g["relation"], g["relation"]
    # one turned 40 deg (more than a chair facing its table): not a layout to keep
    room = designer_room()
    _turn_chairs(room, [15.0, 40.0])
    g = _table_group(room)
    assert "spacing" not in g["relation"], g["relation"]
    assert not any(r.startswith("facing not settled") for r in g["proposal"]["reasons"])


def _pull_chairs(room: rooms.Room, metres: list[float]) -> list[str]:
    """Move the dining chairs straight out from (negative: under) the table by ``metres``."""
    table = next(p for p in room.placed if p.group == "dining" and p.anchor)
    foot = rooms._footprint(table)
    centre = foot.mean(axis=0)
    minor = np.linalg.svd(foot - centre, full_matrices=False)[2][1]

    def pull(chair: rooms.Placed, m: float) -> np.ndarray:
        out = float(np.dot(rooms._footprint(chair).mean(axis=0) - centre, minor))
        d = minor * (1.0 if out > 0 else -1.0) * m
        return frames.translation((float(d[0]), float(d[1]), 0.0))
    return _move_chairs(room, metres, pull)


def test_chairs_facing_their_table_at_distances_nothing_agrees_on_are_left_uncertain() -> None:
    from island_tools.scene.relation_graph import parse_relation_graph
    from island_tools.scene.validate import uncertain_proposals

    # a meeting room's chairs, every one facing the table, some tucked under and some pulled
    # out (OSRF's conference table: -0.40 to 0.44 m): no two-thirds agree on a distance and
    # the spread is wider than the review takes as laid out. The convention's 0.10 m would
    # move every chair of a room that may be in order: the clearance is not earned, so the
    # group is uncertain and left as it stands (never reported pass)
    room = designer_room()
    _pull_chairs(room, [0.0, 0.30, -0.10, 0.22, 0.12, 0.0])
    g = _table_group(room)
    prop = g["proposal"]
    assert prop["status"] == "uncertain", prop
    assert any(r.startswith("clearance not settled") for r in prop["reasons"]), prop
    from island_tools.scene.propose import propose_units
    doc = propose_units(rooms.room_units(room))
    assert g["id"] in uncertain_proposals(parse_relation_graph(doc, "relation_graph.json"))
    # the same chairs, one of them turned 40 deg (not facing its table): out of order, the
    # convention is earned and the group is refined
    _turn_chairs(room, [40.0])
    g = _table_group(room)
    assert not any(r.startswith("clearance not settled") for r in g["proposal"]["reasons"])
    assert g["relation"]["clearance_m"] == 0.10, g["relation"]
    # the designer's spread as it was (0.06-0.21 m, within the too-far tolerance): as laid out
    g = _table_group(designer_room())
    assert g["relation"].get("spacing") == "as_laid_out", g["relation"]
    assert not any(r.startswith("clearance not settled") for r in g["proposal"]["reasons"])


def test_designed_meeting_room_tables_in_order_are_not_refined_for_their_turns() -> None:
    from fixtures import designed
    from island_tools.scene.propose import propose_units
    from island_tools.scene.relation_graph import parse_relation_graph
    from island_tools.scene.validate import uncertain_proposals

    if (missing := designed.status()) is not None:
        pytest.skip(f"designed scenes missing: {missing}")
    room = designed.designed_room("servicesim_meeting")   # the TUNED designed scene
    doc = propose_units(rooms.room_units(room))
    graph = parse_relation_graph(doc, "relation_graph.json")
    left = uncertain_proposals(graph)
    turned = [g for g in doc["groups"]
              if any(r.startswith("facing not settled") for r in g["proposal"]["reasons"])]
    assert turned, [g["proposal"]["reasons"] for g in doc["groups"]]
    for g in turned:   # left as the designer laid them out, never reported pass
        assert g["relation"]["spacing"] == "as_laid_out" and g["id"] in left, g


@pytest.mark.parametrize("seed", [3, 5])
def test_three_chairs_at_90_deg_round_a_round_top_are_kept_as_laid_out(seed: int) -> None:
    from island_tools.scene.propose import propose_units

    room = rooms.random_room("tuned", seed)
    doc = propose_units(rooms.room_units(room))
    ring = [g for g in doc["groups"] if g["relation"].get("pattern") == "ring"]
    assert len(ring) == 1 and len(ring[0]["members"]) == 3, doc["groups"]
    # the generator's three chairs stand on three sides (90, 90, 180 deg apart): order, not
    # an uneven ring to respace
    assert ring[0]["relation"]["spacing"] == "as_laid_out", ring[0]["relation"]


# ------------------------------------------------------------------ bpy end to end
@pytest.mark.bpy
@pytest.mark.parametrize("which", ["generator 200", "designer"])
def test_run_propose_leaves_a_tidy_room_in_place_and_repairs_it_disordered(
        tmp_path: Path, which: str) -> None:
    from tests.room_judge import dump, judge_scene, scene_names

    if which == "designer":
        tidy, seed = designer_room(), 4
    else:
        tidy, seed = rooms.random_room("tuned", 200, crowded=True), 200
    for state, room in (("tidy", tidy), ("disordered", rooms.disorder(tidy, seed))):
        scene = rooms.build_room(room, tmp_path / state)
        truth = json.loads((scene / rooms.TRUTH_FILE).read_text())
        run_propose(scene)
        names = scene_names(truth)
        before = dump(scene / "blend" / "stage3-sub-planned.blend", names)
        after = dump(scene / "blend" / "stage3-scene.blend", names)
        judged = judge_scene(truth, after, before)
        assert judged["in_wall"] == [] and judged["penetrations"] == [], judged
        if state == "tidy":
            # read back from the merged .blend: no member moved more than 2 cm or 2 deg
            assert judged["moved"] == [], judged["moved"]
            assert all(g["pass"] for g in judged["groups"].values()), judged["groups"]
        else:
            # every group the judge faults on the input (a member turned 25-140 deg, pulled
            # 0.5-0.6 m out) that run --propose refined (proposed confident) is repaired
            assert truth["disorder"], "nothing was disordered"
            faults_in = judge_scene(truth, before)["groups"]
            graph = json.loads((scene / "inputs" / "relation_graph.json").read_text())
            refined = {g["anchor"] for g in graph["groups"]
                       if g["proposal"]["status"] == "confident"}
            faulty = [g for g, r in faults_in.items()
                      if not r["pass"] and truth["groups"][g]["anchor"] in refined]
            assert faulty, (faults_in, refined)
            assert all(judged["groups"][g]["pass"] for g in faulty), (faults_in,
                                                                       judged["groups"])


# ------------------------------------------------------------------ the contract value
def test_as_laid_out_is_a_validated_spacing_that_keeps_the_clearance_both_ways() -> None:
    from island_tools.errors import TargetSpecError
    from island_tools.scene.verify import TOO_FAR_DEFAULT_M, _spacing_item, too_far_tolerance
    from island_tools.schemas import parse_target_spec

    doc = {"anchor_role": "long_table", "member_count": 6, "pattern": "free",
           "facing": "toward_anchor", "spacing": "as_laid_out", "clearance_m": 0.06,
           "free_note": "pairs as laid out"}
    assert parse_target_spec(doc, "target_spec.json", 6).spacing == "as_laid_out"
    with pytest.raises(TargetSpecError, match="spacing"):
        parse_target_spec({**doc, "spacing": "as_seen"}, "target_spec.json", 6)
    # the places along the edges are not judged; a chair pulled out still is
    group = {"spacing": {"mode": "edges", "max_deviation_m": 0.2,
                         "per_edge_max_deviation_m": {"+y": 0.2}}}
    item = _spacing_item("g", group, {}, "as_laid_out")
    assert item["verdict"] == "pass" and item["evidence"]["applicable"] is False
    assert _spacing_item("g", group, {}, "even_along_each_edge")["verdict"] == "fail"
    assert too_far_tolerance("as_laid_out") == TOO_FAR_DEFAULT_M
