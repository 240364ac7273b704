"""``inputs/relation_graph.json``: which objects form which relation group.

Schema (documented in ``docs/SCENE_PIPELINE.md``)::

    {"version": 1,
     "groups": [
       {"id": "dining",                      # safe directory name, unique
        "anchor": "dining_table",            # object name in the scene
        "members": ["dining_chair_1", ...],  # >= 1 object names, anchor excluded
        "relation": {"pattern": "2+2+1+1", "clearance_m": 0.1},   # optional hints, or a
                                             # plain label ("seated_around"), kept as a note
        "target_spec": {...},                # optional, the contract's full target_spec
        "forward_axis": {"dining_chair_1": "-Y"}}   # optional per-object overrides
     ]}

``anchor`` and ``members`` name furniture *unit roots* (``worker.units``): the object plus its
whole subtree, so an importer's root, an Empty root or a collection instance is named, not
its child meshes. Every check that needs only the document runs in
:func:`parse_relation_graph`; unknown names in :meth:`RelationGraph.check_against_scene`;
what a unit is made of, and whether it can be refined, the worker decides when it reads the
scene (refusals, exit 23). Each failure is one :class:`RelationGraphError` (exit 20) whose
message names the file, the field and the group.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import TargetSpecError, quoted
from ..files.jsonio import read_object
from ..measure.layout import LayoutError, parse_layout
from ..schemas import (
    FACINGS,
    MAX_CLEARANCE_M,
    MIN_CLEARANCE_M,
    PATTERNS,
    SPACINGS,
    TargetSpec,
    parse_target_spec,
)
from .errors import RelationGraphError

GRAPH_VERSION = 1
MAX_ID_LEN = 64
_SAFE_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
_TOP_KEYS = {"version", "groups", "description", "proposed"}
_GROUP_KEYS = {"id", "anchor", "members", "relation", "target_spec", "forward_axis", "proposal"}
PROPOSAL_STATUSES = ("confident", "uncertain")
_PROPOSAL_KEYS = {"status", "confidence", "reasons", "evidence", "member_confidence",
                  "uncertain_members", "doubtful"}
_PROPOSED_KEYS = {"by", "scene_sha256", "unassigned"}
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
HINT_KEYS = ("anchor_role", "pattern", "facing", "spacing", "clearance_m", "free_note",
             "layout")
_AXIS_WORDS = {"+x", "-x", "+y", "-y", "symmetric", "none"}
FIX = "edit inputs/relation_graph.json (schema: docs/SCENE_PIPELINE.md)"


@dataclass(frozen=True)
class GroupSpec:
    id: str
    anchor: str
    members: tuple[str, ...]
    relation: dict[str, Any] = field(default_factory=dict)
    target_spec: TargetSpec | None = None
    forward_axis: dict[str, Any] = field(default_factory=dict)
    index: int = 0
    relation_label: str | None = None
    # ``island-refine propose``'s verdict on the group (None: a person wrote it)
    proposal: dict[str, Any] | None = None

    @property
    def objects(self) -> tuple[str, ...]:
        """Anchor first, then the members in graph order."""
        return (self.anchor, *self.members)

    @property
    def proposal_status(self) -> str | None:
        """"confident" / "uncertain" for a proposed group, None for one a person wrote."""
        return None if self.proposal is None else str(self.proposal["status"])


@dataclass(frozen=True)
class RelationGraph:
    path: str
    groups: tuple[GroupSpec, ...]
    structure_sha256: str
    proposed: dict[str, Any] | None = None   # top-level ``proposed`` (by, scene, unassigned)

    def group(self, gid: str) -> GroupSpec:
        for g in self.groups:
            if g.id == gid:
                return g
        raise KeyError(gid)

    @property
    def object_names(self) -> list[str]:
        return [name for g in self.groups for name in g.objects]

    def without(self, group_ids: Iterable[str]) -> RelationGraph:
        """The graph without the groups ``group_ids`` (refused ones): same file and
        structure hash, so the run's bookkeeping still matches the whole graph."""
        drop = set(group_ids)
        return replace(self, groups=tuple(g for g in self.groups if g.id not in drop))

    def group_of(self, name: str) -> str | None:
        """The id of the group that names object ``name`` (anchor or member)."""
        for g in self.groups:
            if name in g.objects:
                return g.id
        return None

    def check_against_scene(self, objects: Mapping[str, str]) -> None:
        """``objects``: every object in the scene, name -> Blender type ("MESH", ...).

        Then each explicit ``target_spec.member_count`` against its group's members: a
        member that is not in the scene is named as such, not counted as a mismatch."""
        for g in self.groups:
            for name in g.objects:
                if name not in objects:
                    raise _err(self.where(name), f"group '{g.id}': object {quoted(name)} is "
                                                 "not in the scene", self.path,
                               "use an object name from the scene (exact spelling)")
        self.check_member_counts()

    def check_member_counts(self) -> None:
        """Each group's explicit ``target_spec.member_count`` equals its members' count."""
        for g in self.groups:
            if g.target_spec is not None and g.target_spec.member_count != len(g.members):
                raise _err(f"groups[{g.index}].target_spec.member_count",
                           f"group '{g.id}': member_count is {g.target_spec.member_count} but "
                           f"the group lists {len(g.members)} "
                           f"member{'' if len(g.members) == 1 else 's'} besides the anchor",
                           self.path, "make member_count the number of names in members")

    def where(self, name: str) -> str:
        """The relation-graph field that names object ``name``."""
        for g in self.groups:
            if name == g.anchor:
                return f"groups[{g.index}].anchor"
            if name in g.members:
                return f"groups[{g.index}].members[{g.members.index(name)}]"
        return "groups"


def _err(field_: str, message: str, file: str, fix: str = FIX) -> RelationGraphError:
    return RelationGraphError(message, file=file, field=field_, fix=fix)


def unsafe_id_reason(gid: Any) -> str | None:
    """Why ``gid`` cannot be a directory name under relation_groups/, or None if it can."""
    if not isinstance(gid, str):
        return f"must be a string, got {type(gid).__name__}"
    if not gid:
        return "is empty"
    if len(gid) > MAX_ID_LEN:
        return f"is {len(gid)} characters long (at most {MAX_ID_LEN})"
    if any(unicodedata.category(ch).startswith("C") for ch in gid):
        return "contains a control character"
    if "/" in gid or "\\" in gid:
        return "contains a path separator"
    if gid.startswith("."):
        return "starts with '.' (hidden or relative path)"
    if ".." in gid:
        return "contains '..'"
    if not _SAFE_ID.match(gid):
        return "may contain only letters, digits, '_', '-' and '.'"
    return None


def _check_axis(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in _AXIS_WORDS
    if (isinstance(value, (list, tuple)) and len(value) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
        return all(math.isfinite(v) for v in value) and math.hypot(*value) > 1e-9
    return False


def _check_hints(hints: Any, where: str, gid: str, file: str) -> dict[str, Any]:
    if not isinstance(hints, dict):
        raise _err(where, f"group '{gid}': must be an object of target_spec hints or a "
                          "label string", file)
    for key, value in hints.items():
        f = f"{where}.{key}"
        if key not in HINT_KEYS:
            raise _err(f, f"group '{gid}': unknown hint (allowed: {', '.join(HINT_KEYS)})", file)
        for name, allowed in (("pattern", PATTERNS), ("facing", FACINGS), ("spacing", SPACINGS)):
            if key == name and value not in allowed:
                raise _err(f, f"group '{gid}': {value!r} is not one of {', '.join(allowed)}",
                           file)
        if key == "clearance_m" and (not isinstance(value, (int, float))
                                     or isinstance(value, bool) or not math.isfinite(value)
                                     or value < MIN_CLEARANCE_M):
            raise _err(f, f"group '{gid}': must be a finite number >= {MIN_CLEARANCE_M:g} "
                          f"(negative: pushed in under the anchor), got {value!r}", file)
        if key == "clearance_m" and value > MAX_CLEARANCE_M:
            raise _err(f, f"group '{gid}': is {value!r} m, more than {MAX_CLEARANCE_M:g} m "
                          "between the anchor and a member", file,
                       f"give the clearance in metres, from {MIN_CLEARANCE_M:g} to "
                       f"{MAX_CLEARANCE_M:g}")
        if key in ("anchor_role", "free_note") and (not isinstance(value, str)
                                                    or not value.strip()):
            raise _err(f, f"group '{gid}': must be a non-empty string", file)
        if key == "layout":
            try:
                parse_layout(value)
            except LayoutError as exc:
                raise _err(f, f"group '{gid}': {exc}", file,
                           "see island_tools/measure/layout.py for the layout forms") from None
    return dict(hints)


def _parse_group(doc: Any, i: int, file: str) -> GroupSpec:
    where = f"groups[{i}]"
    if not isinstance(doc, dict):
        raise _err(where, "must be an object with id, anchor, members", file)
    label = doc.get("id") if isinstance(doc.get("id"), str) else f"#{i}"
    if "id" not in doc:
        raise _err(f"{where}.id", f"group {label}: required field is missing", file)
    reason = unsafe_id_reason(doc["id"])
    if reason:
        shown = doc["id"] if isinstance(doc["id"], str) else label
        raise _err(f"{where}.id", f"group id {shown!r} is not a safe directory name: {reason}",
                   file, "use letters, digits, '_', '-', '.' (no leading '.', no '..', "
                         f"at most {MAX_ID_LEN} characters)")
    gid = doc["id"]
    extra = sorted(set(doc) - _GROUP_KEYS)
    if extra:
        raise _err(f"{where}.{extra[0]}", f"group '{gid}': unknown field (allowed: "
                                          f"{', '.join(sorted(_GROUP_KEYS))})", file)
    anchor = doc.get("anchor")
    if not isinstance(anchor, str) or not anchor:
        raise _err(f"{where}.anchor", f"group '{gid}': must be a non-empty object name", file)
    members = doc.get("members")
    if not isinstance(members, list):
        raise _err(f"{where}.members", f"group '{gid}': must be a list of object names", file)
    if not members:
        raise _err(f"{where}.members", f"group '{gid}' is empty: it has no members besides "
                                       f"the anchor {quoted(anchor)}", file,
                   "list at least one member, or remove the group")
    seen: set[str] = set()
    for j, m in enumerate(members):
        if not isinstance(m, str) or not m:
            raise _err(f"{where}.members[{j}]", f"group '{gid}': must be a non-empty object "
                                                "name", file)
        if m == anchor:
            raise _err(f"{where}.members[{j}]", f"group '{gid}': the anchor {quoted(anchor)} "
                                                "is also listed as a member", file,
                       "remove the anchor from members")
        if m in seen:
            raise _err(f"{where}.members[{j}]", f"group '{gid}': member {quoted(m)} is listed "
                                                "twice", file)
        seen.add(m)
    raw_relation = doc.get("relation", {})
    label = None
    if isinstance(raw_relation, str):  # upstream graphs write a plain label: kept as a note
        if not raw_relation.strip():
            raise _err(f"{where}.relation", f"group '{gid}': an empty relation label", file,
                       "give a label such as \"seated_around\", an object of hints, or omit it")
        label, raw_relation = raw_relation.strip(), {}
    relation = _check_hints(raw_relation, f"{where}.relation", gid, file)
    spec = None
    if "target_spec" in doc:
        raw = doc["target_spec"]
        if not isinstance(raw, dict):
            raise _err(f"{where}.target_spec", f"group '{gid}': must be an object", file)
        try:   # member_count is compared once the names are known to be in the scene
            spec = parse_target_spec(raw, file, None)
        except TargetSpecError as exc:
            raise _err(f"{where}.target_spec.{exc.field}",
                       f"group '{gid}': {exc.reason}", file) from None
    axes = doc.get("forward_axis", {})
    if not isinstance(axes, dict):
        raise _err(f"{where}.forward_axis", f"group '{gid}': must be an object name -> axis",
                   file)
    for name, value in axes.items():
        if name not in seen and name != anchor:
            raise _err(f"{where}.forward_axis.{name}", f"group '{gid}': override for "
                                                       f"{quoted(name)}, which is not in the "
                                                       "group",
                       file)
        if not _check_axis(value):
            raise _err(f"{where}.forward_axis.{name}", f"group '{gid}': {value!r} is not an "
                                                       "axis", file,
                       "use +X, -X, +Y, -Y, [x, y] or 'symmetric'")
    proposal = None
    if "proposal" in doc:
        proposal = _check_proposal(doc["proposal"], f"{where}.proposal", gid, anchor,
                                   tuple(members), file)
    return GroupSpec(gid, anchor, tuple(members), relation, spec, dict(axes), i, label,
                     proposal)


def _is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _check_names(value: Any, f: str, gid: str, known: tuple[str, ...], file: str,
                 what: str) -> None:
    """``value`` must be an object keyed by names of ``known``; ``what`` checks the values."""
    if not isinstance(value, dict):
        raise _err(f, f"group '{gid}': must be an object name -> {what}", file)
    for name, item in value.items():
        if name not in known:
            raise _err(f"{f}.{name}", f"group '{gid}': {quoted(name)} is not in the group", file,
                       "name a member of the group, or remove the entry")
        if what == "confidence" and not (_is_number(item) and 0.0 <= item <= 1.0):
            raise _err(f"{f}.{name}", f"group '{gid}': must be a number in [0, 1], got "
                                      f"{item!r}", file)
        if what == "text" and (not isinstance(item, str) or not item.strip()):
            raise _err(f"{f}.{name}", f"group '{gid}': must be a non-empty string", file)


def _check_proposal(doc: Any, where: str, gid: str, anchor: str, members: tuple[str, ...],
                    file: str) -> dict[str, Any]:
    """The ``proposal`` block ``island-refine propose`` writes (docs/SCENE_PIPELINE.md)."""
    if not isinstance(doc, dict):
        raise _err(where, f"group '{gid}': must be an object (status, confidence, ...)", file)
    extra = sorted(set(doc) - _PROPOSAL_KEYS)
    if extra:
        raise _err(f"{where}.{extra[0]}", f"group '{gid}': unknown field (allowed: "
                                          f"{', '.join(sorted(_PROPOSAL_KEYS))})", file)
    status = doc.get("status")
    if status not in PROPOSAL_STATUSES:
        raise _err(f"{where}.status", f"group '{gid}': {status!r} is not one of "
                                      f"{', '.join(PROPOSAL_STATUSES)}", file)
    confidence: Any = doc.get("confidence")
    if not (_is_number(confidence) and 0.0 <= confidence <= 1.0):
        raise _err(f"{where}.confidence", f"group '{gid}': must be a number in [0, 1], got "
                                          f"{confidence!r}", file)
    reasons = doc.get("reasons", [])
    if not isinstance(reasons, list) or not all(isinstance(r, str) and r.strip()
                                                for r in reasons):
        raise _err(f"{where}.reasons", f"group '{gid}': must be a list of non-empty strings",
                   file)
    if status == "uncertain" and not reasons:
        raise _err(f"{where}.reasons", f"group '{gid}': an uncertain proposal must say why",
                   file, "give the reasons, or set status to \"confident\" if you checked it")
    if status == "confident" and reasons:
        raise _err(f"{where}.reasons", f"group '{gid}': a confident proposal has no reasons "
                                       "for doubt", file,
                   "empty the reasons once you settled them, or keep status \"uncertain\"")
    evidence = doc.get("evidence", {})
    if not isinstance(evidence, dict):
        raise _err(f"{where}.evidence", f"group '{gid}': must be an object", file)
    for key, value in evidence.items():
        if key == "members":
            _check_names(value, f"{where}.evidence.members", gid, members, file, "text")
        elif key == "target_spec_inferred":
            _check_texts(value, f"{where}.evidence.target_spec_inferred", gid, file,
                         "field name")
        elif not isinstance(value, str):
            raise _err(f"{where}.evidence.{key}", f"group '{gid}': must be a string", file)
    _check_names(doc.get("member_confidence", {}), f"{where}.member_confidence", gid, members,
                 file, "confidence")
    _check_names(doc.get("uncertain_members", {}), f"{where}.uncertain_members", gid,
                 members, file, "text")
    doubtful = doc.get("doubtful", {})
    _check_texts(doubtful, f"{where}.doubtful", gid, file, "object name")
    for name in doubtful:
        if name == anchor or name in members:
            raise _err(f"{where}.doubtful.{name}", f"group '{gid}': {quoted(name)} is in the "
                                                   "group, so it is not a doubtful outsider",
                       file, "remove the entry, or the object from the group")
    if status == "confident" and doubtful:
        raise _err(f"{where}.doubtful", f"group '{gid}': a confident proposal names no "
                                        "doubtful objects", file,
                   "settle them (add each to the group or leave it out) and empty doubtful, "
                   "or keep status \"uncertain\"")
    return {"status": status, "confidence": float(confidence), "reasons": list(reasons),
            "evidence": dict(evidence),
            "member_confidence": dict(doc.get("member_confidence", {})),
            "uncertain_members": dict(doc.get("uncertain_members", {})),
            "doubtful": dict(doubtful)}


def _check_texts(value: Any, f: str, gid: str, file: str, key: str) -> None:
    """``value`` must be an object of non-empty strings keyed by non-empty strings."""
    if not isinstance(value, dict):
        raise _err(f, f"group '{gid}': must be an object ({key} -> text)", file)
    for name, item in value.items():
        if not isinstance(name, str) or not name:
            raise _err(f, f"group '{gid}': a key must be a non-empty {key}", file)
        if not isinstance(item, str) or not item.strip():
            raise _err(f"{f}.{name}", f"group '{gid}': must be a non-empty string", file)


def _check_proposed(doc: Any, file: str, owner: Mapping[str, str]) -> dict[str, Any]:
    """The top-level ``proposed`` block: who proposed, from which scene, what was left out."""
    if not isinstance(doc, dict):
        raise _err("proposed", "must be an object (by, scene_sha256, unassigned)", file)
    extra = sorted(set(doc) - _PROPOSED_KEYS)
    if extra:
        raise _err(f"proposed.{extra[0]}", f"unknown field (allowed: "
                                           f"{', '.join(sorted(_PROPOSED_KEYS))})", file)
    by = doc.get("by")
    if not isinstance(by, str) or not by.strip():
        raise _err("proposed.by", "must be a non-empty string", file)
    sha = doc.get("scene_sha256")
    if sha is not None and (not isinstance(sha, str) or not _SHA256.match(sha)):
        raise _err("proposed.scene_sha256", f"must be null or 64 lower-case hex digits, got "
                                            f"{sha!r}", file)
    unassigned = doc.get("unassigned", [])
    if not isinstance(unassigned, list):
        raise _err("proposed.unassigned", "must be a list of {name, role, reason}", file)
    for j, u in enumerate(unassigned):
        f = f"proposed.unassigned[{j}]"
        if not isinstance(u, dict) or set(u) - {"name", "role", "reason"}:
            raise _err(f, "must be an object with name, role, reason", file)
        name, role, reason = u.get("name"), u.get("role"), u.get("reason")
        if not isinstance(name, str) or not name:
            raise _err(f"{f}.name", "must be a non-empty object name", file)
        if role is not None and not isinstance(role, str):
            raise _err(f"{f}.role", "must be a string or null", file)
        if not isinstance(reason, str) or not reason.strip():
            raise _err(f"{f}.reason", "must be a non-empty string", file)
        if name in owner:
            raise _err(f"{f}.name", f"object {quoted(name)} is listed as unassigned but is in "
                                    f"group '{owner[name]}'", file,
                       "remove it from proposed.unassigned, or from the group")
    return {"by": by, "scene_sha256": sha, "unassigned": [dict(u) for u in unassigned]}


def structure_hash(groups: tuple[GroupSpec, ...]) -> str:
    """Hash of what decides the islands (ids, anchors, members): a resumed run must match it.

    Hints, target specs and overrides are left out on purpose: a person answers a
    verification unknown by adding an override, and the next run must pick it up.
    """
    doc = [[g.id, g.anchor, list(g.members)] for g in groups]
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode("utf-8")).hexdigest()


def parse_relation_graph(doc: Any, file: str, *, check_counts: bool = True) -> RelationGraph:
    """The graph of ``doc``; every check that needs only the document. ``check_counts``
    False leaves the target_spec member counts to ``check_against_scene`` (validation, which
    first names a member missing from the scene)."""
    if not isinstance(doc, dict):
        raise _err("$", "top level must be a JSON object with 'groups'", file)
    extra = sorted(set(doc) - _TOP_KEYS)
    if extra:
        raise _err(extra[0], f"unknown top-level field (allowed: {', '.join(sorted(_TOP_KEYS))})",
                   file)
    version = doc.get("version", GRAPH_VERSION)
    if version != GRAPH_VERSION:
        raise _err("version", f"unsupported version {version!r} (this reads {GRAPH_VERSION})",
                   file)
    raw = doc.get("groups")
    if not isinstance(raw, list) or not raw:
        raise _err("groups", "must be a non-empty list of groups", file)
    groups: list[GroupSpec] = []
    ids: dict[str, int] = {}
    owner: dict[str, str] = {}
    for i, gdoc in enumerate(raw):
        g = _parse_group(gdoc, i, file)
        folded = g.id.casefold()
        if folded in ids:
            raise _err(f"groups[{i}].id", f"group id '{g.id}' is used twice (also "
                                          f"groups[{ids[folded]}]; ids are compared "
                                          "case-insensitively)", file)
        ids[folded] = i
        for role, name in (("anchor", g.anchor), *(("members", m) for m in g.members)):
            if name in owner:
                raise _err(f"groups[{i}].{role}", f"object {quoted(name)} is in two groups: "
                                                  f"'{owner[name]}' and '{g.id}'", file,
                           "an object belongs to at most one group")
            owner[name] = g.id
        groups.append(g)
    gs = tuple(groups)
    proposed = _check_proposed(doc["proposed"], file, owner) if "proposed" in doc else None
    graph = RelationGraph(file, gs, structure_hash(gs), proposed)
    if check_counts:
        graph.check_member_counts()
    return graph


def load_relation_graph(path: Path, *, check_counts: bool = True) -> RelationGraph:
    doc = read_object(path, RelationGraphError, "relation_graph.json",
                      "write inputs/relation_graph.json (schema: docs/SCENE_PIPELINE.md)",
                      content_fix="")
    return parse_relation_graph(doc, str(path), check_counts=check_counts)
