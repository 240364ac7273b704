"""Validated views of the contract's JSON files: target_spec, metadata, transforms.

Each loader raises the error class whose exit code the contract assigns (target_spec -> 5,
transforms -> 3, metadata -> 8), with a one-line message naming the file, the field and
the fix. Dataclasses are the in-memory form; plain dicts only on the wire.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from .errors import GroupInputError, TargetSpecError, TransformsError, quoted
from .files.jsonio import read_object
from .measure import frames

PATTERNS = ("ring", "row", "2+2+1", "2+2+1+1", "L", "T", "cluster", "free")
FACINGS = ("toward_anchor", "away_from_anchor", "parallel_to_anchor_long_axis", "mixed")
# as_laid_out: members in order stand along the edges where they were laid out (issue 32:
# a designer's uneven or off-centre row is order); the clearance still bounds them
SPACINGS = ("even_along_each_edge", "even_around_anchor", "tight", "loose", "as_laid_out")
FORBIDDEN_TRANSFORM_KEYS = ("groups", "objects", "deletes")
ISLAND_META_FIELDS = ("model", "image_sha256", "generated_by", "mode", "iter", "timestamp_utc")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_finite(value: Any) -> bool:
    """``math.isfinite`` that says False (not OverflowError) for a 400-digit integer."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


# --------------------------------------------------------------------------- target_spec
# Range bounds of target_spec's numbers: a clearance is a gap between pieces of furniture,
# not a distance across a site (the solver places members by bracketing offsets up to 10 km,
# and a member moves at most MAX_DELTA_M per iteration), and a group is one anchor with the
# furniture around it. Larger values are refused when the spec is read (exit 5, or 20 in
# the relation graph), not found out later by the solver.
MAX_CLEARANCE_M = 100.0
# Clearance is the signed floor-plane distance of the footprints (DESIGN: geometry.json): a
# member pushed in under its anchor (a chair tucked under its desk) stands at a negative
# one, and a room in order keeps it. Down to this much overlap.
MIN_CLEARANCE_M = -1.0
MAX_MEMBER_COUNT = 1000


@dataclass(frozen=True)
class TargetSpec:
    anchor_role: str
    member_count: int
    pattern: str
    facing: str
    spacing: str
    clearance_m: float
    free_note: str | None = None
    layout: dict[str, Any] | None = None   # island_tools.measure.layout (optional extension)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "anchor_role": self.anchor_role, "member_count": self.member_count,
            "pattern": self.pattern, "facing": self.facing, "spacing": self.spacing,
            "clearance_m": self.clearance_m,
        }
        if self.free_note is not None:
            out["free_note"] = self.free_note
        if self.layout is not None:
            out["layout"] = dict(self.layout)
        return out


def parse_target_spec(doc: dict[str, Any], file: str, n_members: int | None) -> TargetSpec:
    fix = "edit target_spec.json to the contract's schema"

    def bad(fld: str, msg: str, fix_: str = fix) -> TargetSpecError:
        return TargetSpecError(msg, file=file, field=fld, fix=fix_)

    for key in ("anchor_role", "member_count", "pattern", "facing", "spacing", "clearance_m"):
        if key not in doc:
            raise bad(key, "required field is missing")
    role = doc["anchor_role"]
    if not isinstance(role, str) or not role.strip():
        raise bad("anchor_role", "must be a non-empty string")
    count = doc["member_count"]
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise bad("member_count", f"must be an integer >= 1, got {count!r}")
    if count > MAX_MEMBER_COUNT:
        raise bad("member_count", f"is {count}, more than {MAX_MEMBER_COUNT} members in one "
                                  "group")
    for key, allowed in (("pattern", PATTERNS), ("facing", FACINGS), ("spacing", SPACINGS)):
        if doc[key] not in allowed:
            raise bad(key, f"{doc[key]!r} is not one of {', '.join(allowed)}")
    clearance = doc["clearance_m"]
    if not _is_number(clearance) or not is_finite(clearance):
        raise bad("clearance_m", f"must be a finite number >= {MIN_CLEARANCE_M:g}, got "
                                 f"{clearance!r}")
    if clearance < MIN_CLEARANCE_M:
        raise bad("clearance_m", f"is {clearance!r} m: a member {-clearance:g} m in under the "
                                 f"anchor (at most {-MIN_CLEARANCE_M:g} m)",
                  "give the clearance in metres, from "
                  f"{MIN_CLEARANCE_M:g} (pushed in) to {MAX_CLEARANCE_M:g}")
    if clearance > MAX_CLEARANCE_M:
        raise bad("clearance_m", f"is {clearance!r} m, more than {MAX_CLEARANCE_M:g} m between "
                                 "the anchor and a member", "give the clearance in metres, "
                                 f"from {MIN_CLEARANCE_M:g} (pushed in) to {MAX_CLEARANCE_M:g}")
    note = doc.get("free_note")
    if note is not None and not isinstance(note, str):
        raise bad("free_note", "must be a string")
    if doc["pattern"] == "free" or doc["facing"] == "mixed":
        if not note or not note.strip():
            raise bad("free_note", "is required when pattern is 'free' or facing is 'mixed'")
    if n_members is not None and count != n_members:
        raise bad("member_count", f"is {count} but metadata.json lists {n_members} members "
                                  "besides the anchor")
    layout = None
    if doc.get("layout") is not None:
        from .measure.layout import LayoutError, parse_layout

        raw = doc["layout"]
        for key, value in (raw.items() if isinstance(raw, dict) else ()):
            if _is_number(value) and value > MAX_MEMBER_COUNT:
                raise bad(f"layout.{key}", f"places {value!r} members, more than "
                                           f"{MAX_MEMBER_COUNT}")
        try:
            layout = parse_layout(doc["layout"], count)
        except LayoutError as exc:
            raise bad("layout", str(exc)) from None
    return TargetSpec(role, count, doc["pattern"], doc["facing"], doc["spacing"],
                      float(clearance), note, layout)


def load_target_spec(path: Path, n_members: int | None) -> TargetSpec:
    doc = read_object(path, TargetSpecError, "target_spec.json",
                      "produce target_spec.json (validation step or by hand) before refining",
                      content_fix="")
    return parse_target_spec(doc, str(path), n_members)


# --------------------------------------------------------------------------- metadata
@dataclass(frozen=True)
class Metadata:
    anchor_id: str
    members: tuple[str, ...]
    m_anchor: np.ndarray
    m_inv: np.ndarray
    canonical_poses: dict[str, np.ndarray]
    forward_axis_overrides: dict[str, Any] = field(default_factory=dict)
    unit_scale: float = 1.0   # the source scene's metres per Blender unit (M_inv carries it)

    @property
    def refined_members(self) -> tuple[str, ...]:
        return tuple(m for m in self.members if m != self.anchor_id)


def _matrix(value: Any, file: str, fld: str) -> np.ndarray:
    """4 rows of 4 JSON numbers (a string such as "1.0" is not a number here)."""
    rows_ok = (isinstance(value, list) and len(value) == 4
               and all(isinstance(r, list) and len(r) == 4 and all(_is_number(v) for v in r)
                       for r in value))
    try:
        arr = np.asarray(value, dtype=float) if rows_ok else np.zeros(0)
    except (TypeError, ValueError, OverflowError):
        arr = np.zeros(0)
    if arr.shape != (4, 4) or not np.all(np.isfinite(arr)):
        raise GroupInputError("must be a finite 4x4 matrix (list of 4 rows of 4 numbers)",
                              file=file, field=fld, fix="rebuild the island")
    return arr


def load_metadata(path: Path) -> Metadata:
    fix = "rebuild the island (metadata.json comes from rebuild_islands)"
    doc = read_object(path, GroupInputError, "metadata.json", fix)
    file = str(path)
    for key in ("anchor_id", "M_anchor_4x4", "M_inv_4x4", "members", "canonical_poses"):
        if key not in doc:
            raise GroupInputError("required field is missing", file=file, field=key, fix=fix)
    anchor = doc["anchor_id"]
    members = doc["members"]
    if not isinstance(anchor, str) or not anchor:
        raise GroupInputError("must be a non-empty string", file=file, field="anchor_id", fix=fix)
    if (not isinstance(members, list) or not members
            or not all(isinstance(m, str) and m for m in members)):
        raise GroupInputError("must be a non-empty list of object names", file=file,
                              field="members", fix=fix)
    if len(set(members)) != len(members):
        raise GroupInputError("lists an object twice", file=file, field="members", fix=fix)
    if anchor not in members:
        raise GroupInputError(f"anchor '{anchor}' is not in members", file=file,
                              field="members", fix=fix)
    m_anchor = _matrix(doc["M_anchor_4x4"], file, "M_anchor_4x4")
    m_inv = _matrix(doc["M_inv_4x4"], file, "M_inv_4x4")
    if not np.allclose(m_anchor @ m_inv, np.eye(4), atol=1e-6):
        raise GroupInputError("is not the inverse of M_anchor_4x4", file=file,
                              field="M_inv_4x4", fix=fix)
    poses_doc = doc["canonical_poses"]
    if not isinstance(poses_doc, dict):
        raise GroupInputError("must be an object name -> 4x4", file=file,
                              field="canonical_poses", fix=fix)
    poses = {}
    for name in members:
        if name not in poses_doc:
            raise GroupInputError(f"has no pose for member '{name}'", file=file,
                                  field="canonical_poses", fix=fix)
        poses[name] = _matrix(poses_doc[name], file, f"canonical_poses.{name}")
    overrides = doc.get("forward_axis_overrides", {})
    if not isinstance(overrides, dict):
        raise GroupInputError("must be an object name -> axis", file=file,
                              field="forward_axis_overrides", fix=fix)
    unit_scale = doc.get("unit_scale", 1.0)
    if not _is_number(unit_scale) or not is_finite(unit_scale) or not unit_scale > 0:
        raise GroupInputError("must be a finite number > 0 (metres per Blender unit)",
                              file=file, field="unit_scale", fix=fix)
    return Metadata(anchor, tuple(members), m_anchor, m_inv, poses, overrides,
                    float(unit_scale))


# --------------------------------------------------------------------------- transforms
@dataclass(frozen=True)
class MemberDelta:
    delta_xyz: tuple[float, float, float]
    delta_yaw_deg: float

    @property
    def trivial(self) -> bool:
        """Moves nothing beyond ``frames.MOVE_TOL_M`` / ``MOVE_TOL_DEG`` (a whole-turn yaw
        included): it is not applied, and the step is quiet when every delta is trivial."""
        return frames.delta_is_trivial(self.delta_xyz, self.delta_yaw_deg)


@dataclass(frozen=True)
class Transforms:
    iter: int
    members: dict[str, MemberDelta]
    converged: bool
    final: bool
    reason_summary: str | None
    island_meta: dict[str, Any]
    warnings: tuple[str, ...] = ()

    @property
    def trivial(self) -> bool:
        return all(d.trivial for d in self.members.values())


# Parse-time sanity bounds: anything larger is not a furniture nudge, and would overflow the
# render framing or the worker's reply long before it is judged.
MAX_DELTA_M = 1000.0
MAX_YAW_DEG = 36000.0


def parse_transforms(doc: dict[str, Any], file: str, expected_iter: int, metadata: Metadata
                     ) -> Transforms:
    fix = "rewrite transforms.json to the contract's schema"

    def bad(fld: str, msg: str, fix_: str = fix) -> TransformsError:
        return TransformsError(msg, file=file, field=fld, fix=fix_)

    for key in FORBIDDEN_TRANSFORM_KEYS:
        if key in doc:
            raise bad(key, "is forbidden in island-level transforms (scene-level variant only)",
                      "put per-member deltas under 'members' only")
    if "iter" not in doc:
        raise bad("iter", "required field is missing")
    it = doc["iter"]
    if not isinstance(it, int) or isinstance(it, bool):
        raise bad("iter", f"must be an integer, got {it!r}")
    if it != expected_iter:
        raise bad("iter", f"is {it} but the directory is iter_{expected_iter}",
                  f"set \"iter\": {expected_iter}")
    if "members" not in doc:
        raise bad("members", "required field is missing")
    raw = doc["members"]
    if not isinstance(raw, dict):
        raise bad("members", "must be an object mapping object name -> delta")
    if expected_iter == 1 and not raw:
        raise bad("members", "iter_1 must not be empty (contract: commit at least one "
                             "per-member delta, e.g. two +-0.01 m verification moves)")
    allowed = set(metadata.refined_members)
    members: dict[str, MemberDelta] = {}
    for name, delta in raw.items():
        where = f"members.{name}"
        if name == metadata.anchor_id:
            raise bad(where, "is the anchor; the anchor must not move",
                      f"remove {quoted(name)} from members")
        if name not in allowed:
            known = ", ".join(sorted(allowed)[:12])
            raise bad(where, f"unknown member {quoted(name)} (members: {known})",
                      "use an object name from metadata.json::members")
        if not isinstance(delta, dict):
            raise bad(where, "must be an object with delta_xyz and delta_yaw_deg")
        extra = set(delta) - {"delta_xyz", "delta_yaw_deg"}
        if extra:
            raise bad(f"{where}.{sorted(extra)[0]}", "unknown key in a member delta",
                      "only delta_xyz and delta_yaw_deg are allowed")
        # The contract requires both keys; a newcomer's pure turn leaves delta_xyz out.
        if "delta_xyz" not in delta:
            raise bad(f"{where}.delta_xyz", "delta_xyz is required in every member entry, "
                                            "[0,0,0] for a pure turn",
                      'add "delta_xyz": [0.0, 0.0, 0.0]')
        if "delta_yaw_deg" not in delta:
            raise bad(f"{where}.delta_yaw_deg", "delta_yaw_deg is required in every member "
                                                "entry, 0 for a pure move",
                      'add "delta_yaw_deg": 0.0')
        xyz = delta.get("delta_xyz")
        if (not isinstance(xyz, list) or len(xyz) != 3
                or not all(_is_number(v) for v in xyz)):
            raise bad(f"{where}.delta_xyz", f"must be a list of three numbers, got {xyz!r}")
        if not all(is_finite(v) for v in xyz):
            raise bad(f"{where}.delta_xyz", "contains a non-finite number")
        if max(abs(float(v)) for v in xyz) > MAX_DELTA_M:
            raise bad(f"{where}.delta_xyz", f"moves more than {MAX_DELTA_M:g} m on an axis, "
                                            f"got {xyz!r}", "give a delta in metres")
        yaw = delta.get("delta_yaw_deg")
        if not isinstance(yaw, (int, float)) or isinstance(yaw, bool):
            raise bad(f"{where}.delta_yaw_deg", f"must be a number, got {yaw!r}")
        if not is_finite(yaw):
            raise bad(f"{where}.delta_yaw_deg", "is not a finite number")
        if abs(float(yaw)) > MAX_YAW_DEG:
            raise bad(f"{where}.delta_yaw_deg", f"turns more than {MAX_YAW_DEG:g} degrees, "
                                                f"got {yaw!r}", "give a yaw in degrees")
        members[name] = MemberDelta((float(xyz[0]), float(xyz[1]), float(xyz[2])), float(yaw))
    for key in ("converged", "final"):
        if key in doc and not isinstance(doc[key], bool):
            raise bad(key, f"must be true or false, got {doc[key]!r}")
    reason = doc.get("reason_summary")
    if reason is not None and not isinstance(reason, str):
        raise bad("reason_summary", "must be a string")
    meta = doc.get("_island_meta")
    filled = ("agent.py write fills it: " + ", ".join(ISLAND_META_FIELDS))
    meta_fix = ("write the decision with scripts/agent.py write, or add the block by hand "
                "(docs/examples/transforms.json)")
    if not isinstance(meta, dict):
        raise bad("_island_meta", f"_island_meta is required ({filled})", meta_fix)
    for key in ISLAND_META_FIELDS:
        if key not in meta:
            raise bad(f"_island_meta.{key}", f"required field is missing (_island_meta "
                                             f"needs all six fields; {filled})", meta_fix)
    for key in ("model", "generated_by"):
        if not isinstance(meta[key], str) or not meta[key].strip():
            raise bad(f"_island_meta.{key}", "must be a non-empty string")
    if meta["mode"] != "island_iter":
        raise bad("_island_meta.mode", f"must be \"island_iter\", got {meta['mode']!r}")
    if meta["iter"] != expected_iter or isinstance(meta["iter"], bool):
        raise bad("_island_meta.iter", f"is {meta['iter']!r} but must equal iter "
                                       f"({expected_iter})")
    if not isinstance(meta["image_sha256"], str) or not _SHA256.match(meta["image_sha256"]):
        raise bad("_island_meta.image_sha256", "must be 64 lowercase hex digits (sha256sum)")
    stamp = meta["timestamp_utc"]
    if not isinstance(stamp, str) or not _parse_utc(stamp):
        raise bad("_island_meta.timestamp_utc", f"must be UTC ISO 8601 like "
                                                f"2026-01-31T12:00:00Z, got {stamp!r}",
                  "use: date -u +%Y-%m-%dT%H:%M:%SZ")
    warnings = []
    if "phase" in doc:
        warnings.append("'phase' is obsolete and ignored")
    known_keys = {"iter", "members", "converged", "final", "reason_summary", "_island_meta",
                  "phase"}
    for key in sorted(set(doc) - known_keys):
        warnings.append(f"unknown top-level key '{key}' ignored")
    return Transforms(it, members, bool(doc.get("converged", False)),
                      bool(doc.get("final", False)), reason, dict(meta), tuple(warnings))


def _parse_utc(stamp: str) -> bool:
    if not stamp.endswith("Z"):
        return False
    try:
        datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        try:
            datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ")
        except ValueError:
            return False
    return True


def load_transforms(path: Path, expected_iter: int, metadata: Metadata) -> Transforms:
    doc = read_object(path, TransformsError, "transforms.json",
                      f"write iter_{expected_iter}/transforms.json before stepping",
                      content_fix="")
    return parse_transforms(doc, str(path), expected_iter, metadata)


def island_meta(n: int, image_sha256: str, model: str, generated_by: str) -> dict[str, Any]:
    """``_island_meta`` of iteration n's transforms.json (see the module docstring)."""
    return {"model": model, "image_sha256": image_sha256, "generated_by": generated_by,
            "mode": "island_iter", "iter": n,
            "timestamp_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}


def transforms_doc(decision: Mapping[str, Any], n: int, image_sha256: str, *, model: str,
                   generated_by: str) -> dict[str, Any]:
    """The transforms.json document of a decision that already has ``members``,
    ``converged`` and ``reason_summary`` (``final`` false), for writers that validate it
    with ``schemas.parse_transforms`` themselves and are not agents under the magnitude
    policy: the add-on's viewport edit (an artist's hand), and the tests and benches that
    drive ``iter_step`` directly. An agent's decision goes through
    ``adapter.write_decision``. Here, beside the schema, so the add-on's in-process edit
    imports no fcl (Blender 3.4's Python has only numpy)."""
    return {"iter": n, "members": decision["members"], "converged": decision["converged"],
            "final": False, "reason_summary": decision["reason_summary"],
            "_island_meta": island_meta(n, image_sha256, model, generated_by)}
