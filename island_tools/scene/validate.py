"""Measure every group of the scene in its canonical frame, infer missing target specs and
decide which groups need an island.

A group *needs an island* when at least one review of ``verify.review_group`` fails on the
scene as it is (same checks and thresholds as the verify stage). A review that is only
``uncertain`` (a missing fact: a symmetric member, an uncheckable pattern) does not flag a
group on its own; the numbers behind every failed check are kept as ``findings``.

Target spec inference (when the relation graph gives no ``target_spec``), then every
``relation`` hint overrides its field:

=============  ============================================================================
anchor shape   the island geometry's rule: ``round`` if the footprint hull is near-circular
               (min-area rectangle aspect < 1.2 and radius CV < 0.08), else ``rect``
anchor_role    round: ``round_table``; rect: ``long_table`` if the footprint's long/short
               ratio >= 1.5, else ``table``
pattern        round: ``ring``; rect by member count k: 1-3 ``row``, 5 ``2+2+1``,
               6 ``2+2+1+1``, any other k ``free`` (no enum pattern fits; verify then raises
               a pattern unknown instead of a fail)
facing         ``toward_anchor``
spacing        round: ``even_around_anchor``; rect: ``even_along_each_edge``
clearance_m    0.10
free_note      set when pattern is ``free`` or facing ``mixed`` and no hint gives one
=============  ============================================================================
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import frames
from ..errors import TargetSpecError
from ..forward_axis import forward_axes_document
from ..geometry import GeometryContext
from ..schemas import TargetSpec, parse_target_spec
from .errors import RelationGraphError
from .relation_graph import GroupSpec
from .verify import findings, geometry_summary, review_group

DEFAULT_CLEARANCE_M = 0.10
LONG_TABLE_MIN_RATIO = 1.5
ROW_MAX_MEMBERS = 3


@dataclass
class Measured:
    """One group measured on the scene as it is."""

    spec: GroupSpec
    m_anchor: np.ndarray
    m_inv: np.ndarray
    canonical: dict[str, np.ndarray]
    target_spec: TargetSpec
    target_spec_source: str
    forward_axes: dict[str, Any]
    geometry: dict[str, Any]
    review: dict[str, Any]
    overrides: dict[str, Any]
    unit_scale: float

    @property
    def needs_island(self) -> bool:
        return self.review["summary"]["fail"] > 0

    def doc(self) -> dict[str, Any]:
        anchor_yaw = frames.yaw_deg(self.m_anchor)
        return {
            "id": self.spec.id, "anchor": self.spec.anchor, "members": list(self.spec.members),
            "relation_label": self.spec.relation_label,
            "needs_island": self.needs_island,
            "target_spec": self.target_spec.to_dict(),
            "target_spec_source": self.target_spec_source,
            "forward_axis_overrides": self.overrides,
            "anchor_world_yaw_deg": round(anchor_yaw, 6) + 0.0,
            "unit_scale": self.unit_scale,
            "violation_score": self.review["violation_score"],
            "summary": geometry_summary(self.geometry),
            "review_counts": {k: self.review["summary"][k]
                              for k in ("pass", "fail", "uncertain", "total")},
            "findings": findings(self.review),
            "open_unknowns": [u["id"] for u in self.review["new_unknowns"]],
        }


def infer_target_spec(group: GroupSpec, anchor_shape: str, anchor_ratio: float) -> dict:
    """The documented inference rules (module docstring), before relation hints."""
    k = len(group.members)
    doc: dict[str, Any]
    if anchor_shape == "round":
        doc = {"anchor_role": "round_table", "pattern": "ring", "spacing": "even_around_anchor"}
    else:
        role = "long_table" if anchor_ratio >= LONG_TABLE_MIN_RATIO else "table"
        pattern = ("row" if k <= ROW_MAX_MEMBERS else
                   {5: "2+2+1", 6: "2+2+1+1"}.get(k, "free"))
        doc = {"anchor_role": role, "pattern": pattern, "spacing": "even_along_each_edge"}
    doc.update(member_count=k, facing="toward_anchor", clearance_m=DEFAULT_CLEARANCE_M)
    return doc


def resolve_target_spec(group: GroupSpec, anchor_shape: str, anchor_ratio: float,
                        file: str) -> tuple[TargetSpec, str]:
    if group.target_spec is not None:
        return group.target_spec, "relation_graph.target_spec"
    doc = infer_target_spec(group, anchor_shape, anchor_ratio)
    doc.update(group.relation)
    source = "inferred" + ("+relation_hints" if group.relation else "")
    if (doc["pattern"] == "free" or doc["facing"] == "mixed") and not doc.get("free_note"):
        doc["free_note"] = (f"inferred: {len(group.members)} members around a {anchor_shape} "
                            f"anchor; pattern '{doc['pattern']}', facing '{doc['facing']}'")
    try:
        return parse_target_spec(doc, file, len(group.members)), source
    except TargetSpecError as exc:  # hints that only clash once combined with the inference
        raise RelationGraphError(f"group '{group.id}': relation hints give an invalid "
                                 f"target_spec: {exc.reason}", file=file,
                                 field=f"groups[{group.index}].relation") from None


def _provisional_spec(k: int) -> dict[str, Any]:
    # 'cluster' never triggers the ring rule, so the anchor shape comes from its footprint.
    return {"anchor_role": "anchor", "member_count": k, "pattern": "cluster",
            "facing": "toward_anchor", "spacing": "even_along_each_edge", "clearance_m": 0.0}


def measure_group(group: GroupSpec, world: Mapping[str, np.ndarray],
                  meshes: Mapping[str, tuple[np.ndarray, np.ndarray]],
                  props: Mapping[str, Mapping[str, Any]], graph_file: str,
                  unit_scale: float = 1.0) -> Measured:
    """Canonical poses (metres), target spec, forward axes, geometry and review of one group.

    Units are upright here: the worker refuses a tilted unit root before anything is
    measured (``worker.units``)."""
    m_anchor, m_inv = frames.canonical_frame(world[group.anchor], unit_scale)
    canonical = {n: m_inv @ world[n] for n in group.objects}
    group_meshes = {n: meshes[n] for n in group.objects}
    overrides = {n: p["forward_axis"] for n, p in props.items()
                 if n in group_meshes and "forward_axis" in p}
    overrides.update(group.forward_axis)
    try:
        axes = forward_axes_document(group_meshes, group.anchor, overrides)
    except ValueError as exc:
        raise RelationGraphError(f"group '{group.id}': bad forward-axis override: {exc}",
                                 file=graph_file,
                                 field=f"groups[{group.index}].forward_axis") from None
    context = GeometryContext(group_meshes, group.anchor, axes)
    provisional = context.compute(canonical, _provisional_spec(len(group.members)), 0)
    anchor = provisional["anchor"]
    half = anchor.get("half_extents_m") or [1.0, 1.0]
    ratio = max(half) / max(min(half), 1e-9)
    spec, source = resolve_target_spec(group, anchor["shape"], ratio, graph_file)
    geometry = context.compute(canonical, spec.to_dict(), 0)
    review = review_group(group.id, geometry, spec.to_dict(), axes, group.members)
    return Measured(group, m_anchor, m_inv, canonical, spec, source, axes, geometry, review,
                    overrides, unit_scale)
