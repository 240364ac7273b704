"""The membership doubt ``island-refine propose`` leaves open (``proposal.status``
"uncertain"), as the run reads it: which uncertain groups it leaves as they stand
(:func:`uncertain_proposals`), which it refines around a held member in doubt kept where it
stands (:func:`hold_doubted_members`), and how a verdict with the doubt open is reported
(:func:`reported_verdict`: never ``pass``), and the fronts ``propose`` inferred from what is
in order (:func:`inferred_fronts`, applied by :func:`hold_doubted_members`). Pure;
``validate`` re-exports it."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..errors import UsageError
from .relation_graph import GroupSpec, RelationGraph
from .verify import TOO_FAR_DEFAULT_M

UNCERTAIN_MODES = ("held", "leave", "include")
# evidence.target_spec_inferred key of a member's front inferred by ``propose``
# (``sibling_fronts``): "forward_axis.<member>" -> "[x, y]: how" or "undetermined: why"
FRONT_EVIDENCE = "forward_axis."


def front_evidence(axis_local: Sequence[float], how: str) -> str:
    """The evidence line of a front ``propose`` inferred: its local axis, then how."""
    x, y = (round(float(c), 6) + 0.0 for c in axis_local)
    return f"[{x}, {y}]: {how}"


def inferred_fronts(group: GroupSpec) -> dict[str, list[float]]:
    """Member -> the local front ``propose`` inferred from what is in order
    (``evidence.target_spec_inferred['forward_axis.<member>']`` starting with the axis);
    a line that does not start with a finite, non-zero ``[x, y]`` (undetermined, or edited
    into something else) infers nothing."""
    evidence = ((group.proposal or {}).get("evidence") or {}).get("target_spec_inferred")
    out: dict[str, list[float]] = {}
    for key, line in (evidence or {}).items():
        name = key[len(FRONT_EVIDENCE):]
        if not key.startswith(FRONT_EVIDENCE) or name not in group.members:
            continue
        head, sep, _ = str(line).partition("]:")
        try:
            axis = [float(c) for c in head.lstrip("[").split(",")] if sep else []
        except ValueError:
            continue
        if len(axis) == 2 and all(map(math.isfinite, axis)) and math.hypot(*axis) > 0.5:
            out[name] = axis
    return out


def _with_inferred_fronts(graph: RelationGraph) -> RelationGraph:
    """Each group with the fronts ``propose`` inferred as its ``forward_axis`` (a front
    a person declared there wins)."""
    out = []
    for g in graph.groups:
        fronts = inferred_fronts(g)
        if fronts:
            g = replace(g, forward_axis={**fronts, **g.forward_axis})
        out.append(g)
    return replace(graph, groups=tuple(out))


def membership_doubt(group: GroupSpec) -> dict[str, Any] | None:
    """What ``propose`` left open about a group's membership (``proposal.status``
    "uncertain"): ``{"reasons", "doubtful", "uncertain_members"}``; None for a confident or
    hand-written group. A group refined with it open never reports ``pass``
    (:func:`reported_verdict`)."""
    if group.proposal_status != "uncertain":
        return None
    assert group.proposal is not None
    p = group.proposal
    return {"reasons": list(p["reasons"]), "doubtful": dict(p.get("doubtful") or {}),
            "uncertain_members": dict(p.get("uncertain_members") or {})}


def outsider_doubt_only(group: GroupSpec) -> bool:
    """True when every reason an uncertain group gives is about an object it does NOT hold
    (``proposal.doubtful``: each such reason starts with the object's quoted name), so its
    held members, anchor and target spec are not in doubt."""
    doubt = membership_doubt(group)
    if doubt is None or not doubt["doubtful"] or doubt["uncertain_members"]:
        return False
    heads = tuple(f"'{n}'" for n in doubt["doubtful"])
    return all(r.startswith(heads) for r in doubt["reasons"])


HELD_NOTE = "refined around its held members in doubt, which stay where they stand"
HELD_WHY = "held, in doubt: kept where it stands: "
TABLE_ROLES = ("table", "long_table", "round_table")
# where the members refined around a held member in doubt, all in order (facing within
# the review's tolerance), set the clearance: the role's range of a seen clearance
# (propose_spec.SEEN_CLEARANCE_M)
HELD_SEEN_M = {**dict.fromkeys((*TABLE_ROLES, "desk"), (-0.6, 0.35)), "bed": (-0.05, 0.30)}
HELD_FACING_DEG = 10.0


def _held_out_relation(relation: Mapping[str, Any]) -> dict[str, Any]:
    """The hints of a group refined around its held members in doubt: role, facing and
    clearance kept; places not judged (``as_laid_out`` at a table, ``loose`` else); a ring
    or a row of fewer members is still one, any other pattern or layout of the whole group
    does not hold: a table's is ``free`` (not checkable: :data:`HELD_NOTE`), another
    anchor's the convention of its role for the members refined."""
    role = str(relation.get("anchor_role", ""))
    out = {k: v for k, v in relation.items() if k in ("anchor_role", "facing", "clearance_m")}
    out["spacing"] = "as_laid_out" if role in TABLE_ROLES else "loose"
    if relation.get("pattern") in ("ring", "row"):
        out["pattern"] = relation["pattern"]
    elif role in TABLE_ROLES:
        out.update(pattern="free", free_note=HELD_NOTE)
    return out


def hold_doubted_members(graph: RelationGraph, mode: str = "held") -> RelationGraph:
    """``mode`` ``held``: every uncertain group whose doubt is only about members it holds
    (``uncertain_members``: a seat also near another anchor, a role not settled) and objects
    it does not hold, with at least one member not in doubt, is refined for the others: the
    doubted members are taken out of its members into ``proposal.doubtful`` (the group's
    fixed context: hard obstacles where they stand, never moved), its reasons say so; its
    hints are :func:`_held_out_relation`'s. The verdict stays
    ``uncertain`` (the proposal is). Groups with a ``target_spec`` a person wrote are kept.
    Other modes: only that. In every mode the fronts ``propose`` inferred are the groups'
    ``forward_axis`` (:func:`inferred_fronts`): the run measures facing against them."""
    graph = _with_inferred_fronts(graph)
    if mode != "held":
        return graph
    out = []
    for g in graph.groups:
        doubt = membership_doubt(g)
        held = dict(doubt["uncertain_members"]) if doubt else {}
        rest = tuple(m for m in g.members if m not in held)
        if doubt is None or not held or not rest or g.target_spec is not None:
            out.append(g)
            continue
        outsiders = tuple(f"'{n}'" for n in doubt["doubtful"])
        heads = {f"member '{m}': ": m for m in held}
        reasons = []
        for r in doubt["reasons"]:
            head = next((h for h in heads if r.startswith(h)), None)
            if head is None and not (outsiders and r.startswith(outsiders)):
                break   # a doubt about the anchor, the spec or the pattern: left as it is
            reasons.append(r if head is None else
                           f"'{heads[head]}' (held, in doubt) kept where it stands: "
                           f"{r[len(head):]}")
        else:
            relation = _held_out_relation(g.relation)
            axes = {n: a for n, a in g.forward_axis.items() if n not in held}
            proposal = {**(g.proposal or {}), "reasons": reasons, "uncertain_members": {},
                        "doubtful": {**doubt["doubtful"],
                                     **{m: f"{HELD_WHY}{why}" for m, why in held.items()}}}
            out.append(replace(g, members=rest, relation=relation, proposal=proposal,
                               forward_axis=axes))
            continue
        out.append(g)
    return replace(graph, groups=tuple(out))


def held_in_doubt(group: GroupSpec) -> list[str]:
    """The held members in doubt :func:`hold_doubted_members` took out of ``group``."""
    doubt = membership_doubt(group)
    return sorted(n for n, why in (doubt or {}).get("doubtful", {}).items()
                  if str(why).startswith(HELD_WHY))


def held_out_clearance(anchor_role: str, members: Sequence[Mapping[str, Any]]
                       ) -> float | None:
    """The clearance of a group refined around held members in doubt (``anchor_role`` of its
    target spec; ``members``: the geometry's entries of the members it refines), from them
    when they are all in order (each faces the anchor within
    :data:`HELD_FACING_DEG`, their gaps in the role's :data:`HELD_SEEN_M` and within the
    review's too-far tolerance of the nearest): the nearest gap floored to the cm. The hint
    ``propose`` inferred counted the doubted members too. None otherwise."""
    role = anchor_role
    if role not in HELD_SEEN_M or not members or any(
            e is not None and e > HELD_FACING_DEG
            for e in (x["facing_error_deg"] for x in members)):
        return None
    gaps = [float(x["clearance_m"]) for x in members]
    lo, hi = HELD_SEEN_M[role]
    near = math.floor(min(gaps) * 100 + 1e-6) / 100 + 0.0
    if lo <= near and max(gaps) <= hi and max(gaps) - near <= TOO_FAR_DEFAULT_M:
        return near
    return None


def reported_verdict(verdict: str, doubt: Mapping[str, Any] | None) -> str:
    """A group's verdict as reported: a measured ``fail`` stays ``fail``; with membership
    doubt open, ``pass`` becomes ``uncertain`` (the tool did not earn it)."""
    return "uncertain" if doubt is not None and verdict == "pass" else verdict


def doubt_line(doubt: Mapping[str, Any]) -> str:
    """One line naming the open membership doubt (``not_measured`` entries, reports)."""
    return f"membership not settled by propose: {'; '.join(doubt['reasons'])}"


def uncertain_proposals(graph: RelationGraph, include_uncertain: bool = False, *,
                        mode: str = "held") -> dict[str, dict[str, Any]]:
    """The uncertain groups of ``island-refine propose`` (``proposal.status`` "uncertain") the
    run leaves as the input holds them, as refused-group records ("uncertain proposal: ...").

    ``mode`` (``RunOptions.uncertain_mode``): ``held`` (default) leaves only the groups whose doubt
    is not limited to objects they do not hold (:func:`outsider_doubt_only`; the run first
    takes doubted held members out as fixed context, :func:`hold_doubted_members`): a held
    member in doubt that is all the group holds, an unsettled anchor role or front, a spec
    without evidence; the others are
    refined for the members they hold, the doubtful objects staying where they stand as
    fixed context. ``leave`` leaves every uncertain group (the behaviour before issue 32);
    ``include`` leaves none (``--include-uncertain``). A group a person wrote has no proposal
    and is always refined. ``include_uncertain`` is ``mode="include"``."""
    mode = "include" if include_uncertain else mode
    if mode not in UNCERTAIN_MODES:
        raise UsageError(f"unknown uncertain-group mode {mode!r}",
                         fix=f"use one of {', '.join(UNCERTAIN_MODES)}")
    if mode == "include":
        return {}
    owner = {n: g.id for g in graph.groups for n in g.objects}
    left = {g.id: ("; its doubt is about what it holds, so it is not refined around it"
                   if mode == "held" else "")
            for g in graph.groups if membership_doubt(g) is not None
            and (mode == "leave" or not outsider_doubt_only(g))}
    # A doubtful object stays where it stands: a group whose doubtful object another
    # refined group holds (and may move) is left too (until nothing changes: leaving a
    # group never makes another one's refining unsafe)
    changed = True
    while changed:
        changed = False
        for g in graph.groups:
            doubt = membership_doubt(g)
            if doubt is None or g.id in left:
                continue
            moving = sorted(n for n in doubt["doubtful"]
                            if owner.get(n) not in (None, g.id, *left))
            if moving:
                left[g.id] = (f"; its doubtful {', '.join(repr(n) for n in moving)} "
                              "belongs to a group that is refined, so it could not be kept "
                              "where it stands")
                changed = True
    out: dict[str, dict[str, Any]] = {}
    for g in graph.groups:
        if g.id not in left:
            continue
        doubt = membership_doubt(g)
        assert doubt is not None
        where = f"groups[{g.index}].proposal"
        held = left[g.id]
        line = (f"uncertain proposal: {'; '.join(doubt['reasons'])}{held} (check the group, "
                "then set proposal.status to \"confident\" and empty its reasons, or pass "
                "--include-uncertain)")
        out[g.id] = {"reason": f"field '{where}': {line}", "field": where, "line": line,
                     "refusals": []}
    return out


def uncertain_refined(graph: RelationGraph) -> dict[str, dict[str, Any]]:
    """The groups of ``graph`` (refused ones already left out) refined with their membership
    doubt open: ``[{"id", "reason"}]`` records for ``state.json::islands_uncertain``."""
    return {g.id: {"reason": doubt_line(doubt)} for g in graph.groups
            if (doubt := membership_doubt(g)) is not None}
