"""Fronts of members the mesh does not settle, from what is in order (``island-refine
propose``, issue 32).

A member whose front the detector leaves ``undetermined`` (``forward_axis``) blocks its
group's repair: facing is not measured, so nothing turns it back. Members of ONE model in
one group (the same mesh, or local boxes equal within ``SIBLING_SIZE_M``) share their
front. Each of them that stands *in order* votes for the local axis it turns toward its
anchor's convention (a seat toward the table's edge, a nightstand along the bed's front, a
seat before a TV stand toward its screen) within the review's facing tolerance; the axes it may vote
for are the two ways of the line its mirror plane settles (``front_line_local``) or, with no
such line, the four axes of its footprint. The front is settled when at least
``SIBLING_SHARE`` of the voters agree, and:

* with a line from the mesh, one voter is enough (the convention settles the way: a lone
  nightstand whose front line lies along the bed's front);
* without one, at least two voters must agree (one square piece at its place could as well
  be turned a quarter: the footprint alone settles nothing);
* the detector's own weaker guess (the side its cues preferred by less than a front's
  margin) must not point the other way: a piece in order and one turned half round put the
  same line along the convention, and that cue is what tells them apart.

Otherwise the front stays undetermined and the group's review stays uncertain: never a
guess. Each answer is said in the graph's evidence (``evidence.target_spec_inferred``, key
``forward_axis.<member>``; ``doubt.inferred_fronts`` reads it for the run).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..errors import GeometryError
from ..measure.forward_axis import ForwardAxis, detect_forward_axis, front_line_local
from ..measure.meshcache import keyed_vertices, mesh_digest, remembered
from .doubt import front_evidence
from .furniture import Shape
from .members import Front, edge_normal
from .verify import FACING_TOL_DEG as TIDY_FACING_DEG  # in order: the review's facing


class Piece(Protocol):
    """What is read of a proposed piece (``propose_spec.Piece``)."""

    shape: Shape
    front: Front

SIBLING_SIZE_M = 0.01        # local boxes this close: one model
SIBLING_SHARE = 2.0 / 3.0    # this share of the members in order must agree
AXIS_SAME_DEG = 5.0          # two local axes this close are one
OPPOSED_DEG = 135.0          # the detector's weak guess this far from the agreed axis opposes it
WHAT_FACES = {"table": "the table's edge", "desk": "the desk's edge",
              "bed": "the bed's front direction", "tv_stand": "the TV stand's screen"}


@dataclass(frozen=True)
class _Member:
    piece: Piece
    found: ForwardAxis | None
    key: str
    box: np.ndarray


def _detected(p: Piece) -> ForwardAxis | None:
    """The detector's result for the piece's mesh (the cache ``members.detect_front``
    filled: one detection per distinct mesh)."""
    v, f = p.shape.local
    try:
        return remembered("forward_axis", mesh_digest(v, f),
                          lambda: detect_forward_axis(keyed_vertices(v), f))
    except GeometryError:
        return None


def convention(role: str, a: Piece, m: Piece) -> np.ndarray | None:
    """Where a member in order turns its front (world xy), or None: no convention here."""
    if role in ("table", "desk"):
        return -edge_normal(a.shape, m.shape)
    if role == "bed" and a.front.world is not None:
        return np.asarray(a.front.world, dtype=float)
    if role == "tv_stand" and a.front.world is not None:
        return -np.asarray(a.front.world, dtype=float)
    return None


def _candidates(m: _Member) -> tuple[list[np.ndarray], bool]:
    """(the local axes its front may be, whether its mesh settles the line)."""
    assert m.found is not None
    line = front_line_local(m.found)
    if line is not None:
        c = np.array(line, dtype=float)
        return [c, -c], True
    angle = m.found.detail.get("rect_angle_deg")
    if angle is None:
        return [], False
    t = math.radians(float(angle))
    u, v = np.array([math.cos(t), math.sin(t)]), np.array([-math.sin(t), math.cos(t)])
    return [u, -u, v, -v], False


def _angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    c = float(a @ b) / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12)
    return math.degrees(math.acos(max(-1.0, min(1.0, c))))


def _world(p: Piece, local: np.ndarray) -> np.ndarray:
    w = p.shape.rot2 @ local
    return w / max(float(np.linalg.norm(w)), 1e-12)


def _models(members: Sequence[_Member]) -> list[list[_Member]]:
    """Members of one model together: the same mesh, or local boxes within
    ``SIBLING_SIZE_M``."""
    out: list[list[_Member]] = []
    for m in members:
        for model in out:
            first = model[0]
            if first.key == m.key or bool(np.all(np.abs(first.box - m.box) <= SIBLING_SIZE_M)):
                model.append(m)
                break
        else:
            out.append([m])
    return out


def settled_fronts(role: str, a: Piece, members: Sequence[Piece]
                   ) -> dict[str, tuple[np.ndarray | None, str]]:
    """Member -> (its front in world xy or None, the evidence line about it), for every
    member whose front the detector left undetermined: ``"[x, y]: how"``
    (``doubt.front_evidence``, the local axis) when what is in order settles it (see the
    module docstring), ``"undetermined: why"`` otherwise."""
    out: dict[str, tuple[np.ndarray | None, str]] = {}
    undetermined = []
    for p in members:
        found = _detected(p)
        if found is None or found.status != "undetermined":
            continue
        v, f = p.shape.local
        box = np.ptp(np.asarray(v, dtype=float).reshape(-1, 3)[np.unique(f)], axis=0)
        undetermined.append(_Member(p, found, mesh_digest(v, f), box))
    what = WHAT_FACES.get(role, "")
    for model in _models(undetermined):
        votes: dict[str, np.ndarray] = {}
        line_known = True
        for m in model:
            toward = convention(role, a, m.piece)
            cands, line = _candidates(m)
            line_known = line_known and line
            if toward is None:
                continue
            near = [c for c in cands if _angle_deg(_world(m.piece, c), toward) <= TIDY_FACING_DEG]
            if near:
                votes[m.piece.shape.name] = near[0]
        why = _settle(votes, line_known, len(model), what)
        if not isinstance(why, str):
            why = _unopposed(why, model)
        if isinstance(why, str):
            for m in model:
                out[m.piece.shape.name] = (None, f"undetermined: {why}")
            continue
        axis, how = why
        for m in model:
            out[m.piece.shape.name] = (_world(m.piece, axis),
                                      front_evidence([float(c) for c in axis], how))
    return out


def _unopposed(settled: tuple[np.ndarray, str], model: Sequence[_Member]
               ) -> tuple[np.ndarray, str] | str:
    """``settled``, unless the detector's own weaker guess for the model's mesh (the side
    its cues preferred by too little to call it a front) points the other way
    (``OPPOSED_DEG``): a piece in order and one turned half round put the same line along
    the convention, and the mesh's cue is what tells them apart."""
    axis, how = settled
    for m in model:
        assert m.found is not None
        guess = m.found.detail.get("best_guess_local")
        if guess is not None and _angle_deg(np.asarray(guess, dtype=float), axis) > OPPOSED_DEG:
            return ("what is in order turns one local axis toward the convention, but the "
                    "mesh's own weaker cue puts the front on the opposite side: one of them "
                    "is turned half round, and which is not settled")
    return axis, how + "; the mesh's weaker cue does not oppose it"


def _settle(votes: Mapping[str, np.ndarray], line_known: bool, count: int, what: str
            ) -> tuple[np.ndarray, str] | str:
    """(the agreed local axis, how) or why nothing is settled."""
    if not what:
        return "no convention of this anchor says where its members face"
    if not votes:
        return (f"none of the {count} member(s) of its model faces {what} within "
                f"{TIDY_FACING_DEG:g} deg on an axis its mesh allows")
    best: np.ndarray | None = None
    agree: list[str] = []
    for axis in votes.values():
        same = [n for n, x in votes.items() if _angle_deg(x, axis) <= AXIS_SAME_DEG]
        if len(same) > len(agree):
            best, agree = axis, same
    assert best is not None
    k, n = len(agree), len(votes)
    if k < SIBLING_SHARE * n - 1e-9:
        return (f"the members of its model in order disagree: {k} of {n} turn one local "
                f"axis toward {what} (fewer than {SIBLING_SHARE:.0%})")
    if not line_known and k < 2:
        return (f"its mesh settles no front line (no single mirror plane), and only {k} "
                f"member of its model faces {what}: at its place it could as well be "
                "turned a quarter")
    source = ("front from siblings in order" if count > 1 else
              "front from the anchor's convention")
    line = "its mirror plane's line" if line_known else "its footprint's axes"
    return best, (f"{source}: {k} of {n} member(s) of one model in order ({', '.join(agree)}; "
                  f"{count} in the group) turn this local axis of {line} toward {what} "
                  f"within {TIDY_FACING_DEG:g} deg")
