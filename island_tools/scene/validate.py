"""Measure every group of the scene in its canonical frame, infer missing target specs and
decide which groups need an island.

Stage 1 of the director (``preflight`` + ``validate``): nothing is written until pre-flight
succeeded; the gate (``validation_gate``) is ``json/island_groups.json`` matching the current
graph structure and scene hash, with every flagged group's ``target_spec.json`` on disk.

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
spacing        round: ``even_around_anchor``; rect: ``even_along_each_edge`` (``propose``
               hints ``as_laid_out`` for a table in order, ``loose`` for TV seats in order)
clearance_m    0.10
free_note      set when pattern is ``free`` or facing ``mixed`` and no hint gives one
=============  ============================================================================
"""
from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import GroupInputError, TargetSpecError, UsageError, refusal_line
from ..files import atomic
from ..files.jsonio import read_object
from ..iteration import sha256_file
from ..measure import frames, meshcache
from ..measure.forward_axis import forward_axes_document
from ..measure.geometry import GeometryContext
from ..measure.layout import convention
from ..measure.obstacles import load as load_context
from ..measure.obstacles import to_frame
from ..schemas import TargetSpec, parse_target_spec
from .context import StageContext
from .doubt import (  # noqa: F401  (re-exported: the run's doubt is validate's to decide)
    HELD_NOTE,
    UNCERTAIN_MODES,
    doubt_line,
    held_in_doubt,
    held_out_clearance,
    hold_doubted_members,
    membership_doubt,
    outsider_doubt_only,
    reported_verdict,
    uncertain_proposals,
    uncertain_refined,
)
from .errors import RelationGraphError, SceneRefusedError
from .ledger import read_outcomes
from .paths import SCENE_BLEND
from .relation_graph import GroupSpec, RelationGraph, load_relation_graph
from .state import Reconciled, SceneState, check_claims, new_state, reconcile
from .verify import findings, geometry_summary, review_group

DEFAULT_CLEARANCE_M = 0.10
CONTEXT_REACH_M = 1.5    # objects this close to a group's units (floor plane) are its context
CONTEXT_ABOVE_M = 0.5    # ... up to this far above its top (not the ceiling, not high lamps)
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
    # why a failing group is not flagged: its members fail only against objects propose
    # named doubtful (they may belong to it); None when the review decides alone
    kept_in_order: str | None = None

    @property
    def needs_island(self) -> bool:
        return self.review["summary"]["fail"] > 0 and self.kept_in_order is None

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
            **({"kept_in_order": self.kept_in_order} if self.kept_in_order else {}),
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


def apply_convention(doc: dict[str, Any], group: GroupSpec) -> dict[str, Any]:
    """The furniture convention of ``anchor_role`` (``island_tools.measure.layout.convention``:
    a bed's nightstands beside its headboard, a desk chair at the kneehole, seats before a TV
    stand)
    where the relation graph gives no pattern, layout or facing of its own."""
    hinted = set(group.relation)
    if "layout" in doc or hinted & {"pattern", "layout"}:
        return doc
    found = convention(str(doc.get("anchor_role", "")), len(group.members))
    if found is None:
        return doc
    layout, facing, note = found
    out = {**doc, "pattern": "free", "layout": layout}
    if "facing" not in hinted:
        out["facing"] = facing
    out.setdefault("free_note", f"convention: {note}")
    return out


def resolve_target_spec(group: GroupSpec, anchor_shape: str, anchor_ratio: float,
                        file: str) -> tuple[TargetSpec, str]:
    if group.target_spec is not None:
        return group.target_spec, "relation_graph.target_spec"
    doc = infer_target_spec(group, anchor_shape, anchor_ratio)
    doc.update(group.relation)
    doc = apply_convention(doc, group)
    source = "inferred" + ("+relation_hints" if group.relation else "") + (
        "+convention" if doc.get("layout") and "layout" not in group.relation else "")
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
                  unit_scale: float = 1.0,
                  context_world: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None
                  ) -> Measured:
    """Canonical poses (metres), target spec, forward axes, geometry and review of one group.

    ``context_world``: the group's fixed context (walls, other groups' units, bystanders) in
    world coordinates; the geometry measures members against it. Units are upright here:
    the worker refuses a tilted unit root before anything is measured (``worker.units``)."""
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
    obstacles = to_frame(context_world, context_world, m_inv) if context_world else None
    context = GeometryContext(group_meshes, group.anchor, axes, obstacles)
    provisional = context.compute(canonical, _provisional_spec(len(group.members)), 0)
    anchor = provisional["anchor"]
    half = anchor.get("half_extents_m") or [1.0, 1.0]
    ratio = max(half) / max(min(half), 1e-9)
    spec, source = resolve_target_spec(group, anchor["shape"], ratio, graph_file)
    geometry = context.compute(canonical, spec.to_dict(), 0)
    review = review_group(group.id, geometry, spec.to_dict(), axes, group.members)
    return Measured(group, m_anchor, m_inv, canonical, spec, source, axes, geometry, review,
                    overrides, unit_scale)


@dataclass
class Prepared:
    """What pre-flight learned without writing anything."""

    graph: RelationGraph
    scene_sha256: str
    state: SceneState
    measured: dict[str, Measured] | None = None
    # group id -> {"reason", "field", "refusals"}: groups refused up front (``graph`` is then
    # the relation graph without them)
    refused: dict[str, dict[str, Any]] = field(default_factory=dict)
    scene_objects: dict[str, Any] | None = None
    temp_dir: Path | None = None
    validate_seconds: float = 0.0
    # terminal outcomes state.json lost and the ledger restored (``state.reconcile``): the
    # run records and reports them once it holds the scene lock
    reconciled: list[Reconciled] = field(default_factory=list)


def preflight(ctx: StageContext) -> Prepared:
    """Parse and check every input; measure the scene if validation must (re)run.

    Writes nothing (the scene is read through the worker into a temporary directory
    outside the scene directory). ``state.json`` and ``ledger.sqlite`` are checked here
    (exit 2 on either), the state's terminal claims against the ledger before the scene is
    measured (``state.check_claims``) and what the state lost reconciled from the ledger
    after (``state.reconcile``: it needs the flagged groups).
    """
    # member counts once the scene has said whether every named object exists (measure)
    graph = load_relation_graph(ctx.paths.relation_graph, check_counts=False)
    if not ctx.paths.scene_blend.is_file():
        raise GroupInputError("input scene is missing", file=str(ctx.paths.scene_blend),
                              fix=f"put the planned scene at <scene_dir>/{SCENE_BLEND}")
    scene_sha = sha256_file(ctx.paths.scene_blend)
    state = load_state(ctx, graph)
    # read after the state: the ledger gets every terminal event first, so it is never behind
    outcomes = read_outcomes(ctx.paths.ledger)
    inputs = state.doc.get("inputs") or {}
    if state.exists and inputs and not ctx.options.restart:
        changed = [name for name, now in (
            ("relation_graph.json (ids/anchors/members)", graph.structure_sha256),
            ("the input scene", scene_sha))
                   if inputs.get("relation_graph_structure_sha256" if "relation" in name
                          else "scene_sha256") != now]
        if changed:
            raise UsageError(f"{' and '.join(changed)} changed since run "
                             f"{state.doc.get('run_id')}", file=str(ctx.paths.state),
                             fix="pass --restart to start over (previous outputs are "
                             "moved to previous/<UTC>/)")
    if not ctx.options.restart:
        check_claims(state, outcomes, ctx.paths.ledger)
    graph = hold_doubted_members(graph, ctx.options.uncertain_mode)
    prep = Prepared(graph, scene_sha, state)
    skipped = uncertain_proposals(graph, mode=ctx.options.uncertain_mode)
    gate = not ctx.options.restart and validation_gate(ctx, graph, scene_sha)
    stored = dict(island_groups(ctx).get("groups_refused") or {}) if gate else {}
    # validated before, with the same uncertain proposals left out (another
    # --include-uncertain / --leave-uncertain than then validates again)
    if not gate or {gid for gid, r in stored.items() if not r.get("refusals")} != set(skipped):
        prep.refused = skipped   # left as they are, like refused groups (not measured)
        prep.graph = graph.without(skipped)
        measure(ctx, prep)
        assert prep.measured is not None
        flagged = [gid for gid, m in prep.measured.items() if m.needs_island]
    else:   # validated before (every name was in the scene): the refusals are the artifact's
        graph.check_member_counts()
        prep.refused = stored
        refused = [r for r in prep.refused.values() if r.get("refusals")]
        if refused and ctx.options.strict:
            raise SceneRefusedError(refused[0]["line"], file=graph.path,
                                    field=refused[0]["field"])
        prep.graph = graph.without(prep.refused)
        flagged = list(island_groups(ctx)["groups_needing_island"])
    if not ctx.options.restart:
        prep.reconciled = reconcile(state, outcomes, flagged, ctx.paths.group,
                                    ctx.paths.ledger)
    return prep


def load_state(ctx: StageContext, graph: RelationGraph) -> SceneState:
    """``state.json`` validated against its schema and the graph's group ids (exit 2
    otherwise). With ``--restart`` one that does not validate is not an error: the run
    moves it to previous/<UTC>/ unread, so restarting is the fix the refusal names."""
    ids = [g.id for g in graph.groups]
    if not ctx.options.restart:
        return SceneState.load(ctx.paths.state, ids)
    try:
        return SceneState.load(ctx.paths.state, ids)
    except UsageError:
        return SceneState(ctx.paths.state, new_state())


def entangled_refusals(graph: RelationGraph, refused: set[str],
                       objects: Mapping[str, Mapping[str, Any]]) -> dict[str, list[dict]]:
    """Groups not in ``refused`` that hold an object of a refused group in a unit's subtree
    (parented below one of their objects): without its own group's root that object would
    belong to their unit, moved or measured with it, so it could not be left as the input
    holds it. Each such group is refused too, with a line naming the object and the fix."""
    out: dict[str, list[dict]] = {}
    for g in graph.groups:
        if g.id not in refused:
            continue
        for name in g.objects:
            parent = objects.get(name, {}).get("parent")
            while parent is not None:
                owner = graph.group_of(parent)
                if owner is not None and owner not in refused:
                    out.setdefault(owner, []).append({
                        "member": parent, "object": parent,
                        "cause": f"holds '{name}' of refused group '{g.id}' in its subtree, "
                                 "so that refused object would move or be measured with it",
                        "fix": f"unparent '{name}' keeping its transform (Alt-P) or fix the "
                               f"refusal of group '{g.id}'"})
                parent = objects.get(parent, {}).get("parent")
    return out


def refusal_record(graph: RelationGraph, found: list[dict]) -> dict[str, Any]:
    """What is kept of a refused group: the one-line reason (the graph field, then member,
    object, cause and fix, as the whole-scene refusal says it) and the refusals."""
    where = graph.where(found[0]["member"])
    line = refusal_line(found)
    return {"reason": f"field '{where}': {line}", "field": where, "line": line,
            "refusals": found}


def live_graph(ctx: StageContext, graph: RelationGraph) -> RelationGraph:
    """``graph`` without the groups validate refused (``island_groups.json``)."""
    return hold_doubted_members(graph, ctx.options.uncertain_mode).without(
        island_groups(ctx).get("groups_refused") or {})


def validation_gate(ctx: StageContext, graph: RelationGraph, scene_sha: str) -> bool:
    p = ctx.paths
    if not (p.island_groups.is_file() and p.scene_objects.is_file()
            and p.scene_meshes.is_file()):
        return False
    try:
        doc = read_object(p.island_groups, UsageError, "island_groups.json", "")
    except UsageError:
        return False
    if (doc.get("relation_graph_structure_sha256") != graph.structure_sha256
        or doc.get("scene_sha256") != scene_sha):
        return False
    return all(p.group(g).target_spec.is_file() for g in doc["groups_needing_island"])


def measure(ctx: StageContext, prep: Prepared) -> None:
    t0 = time.perf_counter()
    graph = prep.graph
    tmp = Path(tempfile.mkdtemp(prefix="island_refine_validate_"))
    prep.temp_dir = tmp
    ctx.say(f"validate: reading {ctx.paths.scene_blend.name} "
            f"({len(graph.groups)} groups in the relation graph)")

    def read(live: RelationGraph) -> dict[str, Any]:
        return ctx.run_job({"op": "scene_read", "blend": str(ctx.paths.scene_blend),
                            "names": live.object_names,
                            "export_meshes": str(tmp / "scene_meshes.npz"),
                            "context": {"groups": {g.id: list(g.objects)
                                                   for g in live.groups},
                                        "reach_m": CONTEXT_REACH_M,
                                        "above_m": CONTEXT_ABOVE_M,
                                        "export": str(tmp / "scene_context.npz")}})

    result = read(graph)
    objects = result["objects"]
    graph.check_against_scene({n: o["type"] for n, o in objects.items()})
    # A refused unit costs its own group: the scene is read again without the refused
    # groups (whose objects are then fixed context, like bystanders) until nothing is
    # refused; a unit without geometry is only found once every other refusal is gone.
    # --strict keeps the whole-scene refusal (exit 23, nothing written).
    found_by_group: dict[str, list[dict]] = {}
    while result.get("refusals"):
        found = result["refusals"]
        if ctx.options.strict:
            raise SceneRefusedError(refusal_line(found), file=graph.path,
                                    field=graph.where(found[0]["member"]))
        for r in found:
            found_by_group.setdefault(graph.group_of(r["member"]) or "", []).append(r)
        while entangled := entangled_refusals(prep.graph, set(found_by_group), objects):
            for gid, more in entangled.items():
                found_by_group.setdefault(gid, []).extend(more)
        graph = prep.graph.without(found_by_group)
        result = read(graph)
    prep.refused = {**prep.refused, **{gid: refusal_record(prep.graph, found)
                                       for gid, found in found_by_group.items()}}
    prep.graph = graph
    if not graph.groups:   # every group refused: nothing was evaluated, an empty cache
        meshcache.save(tmp / "scene_meshes.npz", {}, {}, {})
    unit_scale = float(result.get("unit_scale") or 1.0)
    meshes, _ = meshcache.load(tmp / "scene_meshes.npz")
    world = {n: frames.as_matrix(objects[n]["matrix_world"]) for n in graph.object_names}
    props = {n: objects[n]["props"] for n in graph.object_names}
    owners = result.get("context_owners") or {}
    context_world = load_context(tmp / "scene_context.npz") or {}
    measured = {}
    for g in graph.groups:
        near = {n: context_world[n] for n in owners.get(g.id, []) if n in context_world}
        measured[g.id] = measure_group(g, world, meshes, props, graph.path, unit_scale, near)
        seen = (held_out_clearance(measured[g.id].target_spec.anchor_role,
                                   [measured[g.id].geometry["members"][n] for n in g.members])
                if held_in_doubt(g) else None)
        if seen is not None and seen != g.relation.get("clearance_m"):
            # refined around a held member in doubt: the clearance of the members in order
            g = replace(g, relation={**g.relation, "clearance_m": seen})
            measured[g.id] = measure_group(g, world, meshes, props, graph.path, unit_scale,
                                           near)
        doubt = membership_doubt(g)
        if doubt and measured[g.id].needs_island and set(doubt["doubtful"]) & set(near):
            # A room in order stays in order: a group whose members fail only against an
            # object that may be its member (touching, overlapping it) is not moved for it.
            # Refined for another reason, the doubtful objects are hard obstacles again.
            alone = measure_group(g, world, meshes, props, graph.path, unit_scale,
                                  {n: v for n, v in near.items() if n not in doubt["doubtful"]})
            if not alone.needs_island:
                touched = sorted(set(doubt["doubtful"]) & set(near))
                measured[g.id].kept_in_order = (
                    "its members fail only against "
                    f"{', '.join(repr(n) for n in touched)}, which propose named doubtful "
                    "(it may be a member): left in order, not refined for it")
    prep.measured = measured
    prep.scene_objects = {"blend": str(ctx.paths.scene_blend),
                          "scene_sha256": prep.scene_sha256,
                          "blender_version": result.get("blender_version"),
                          "file_version": result.get("file_version"),
                          "autoexec_fail": result.get("autoexec_fail"),
                          "unit_scale": unit_scale,
                          "scene": result.get("scene"),
                          "view_layer": result.get("view_layer"),
                          "units": result.get("units") or {},
                          "context_owners": owners,
                          "riders": result.get("riders") or {},
                          "objects": objects}
    prep.validate_seconds = time.perf_counter() - t0


def validate(ctx: StageContext, prep: Prepared) -> list[str]:
    state = ctx.scene_state
    if prep.measured is None:
        # The artifact, not state.json, says which groups are flagged (state may be lost).
        flagged = list(island_groups(ctx)["groups_needing_island"])
        state.doc["groups_needing_island"] = flagged
        for gid in flagged:
            state.group(gid)
        state.set_refused(prep.refused)
        state.set_uncertain(uncertain_refined(prep.graph))
        state.trace("validate:skipped:complete")
        return flagged
    t0 = time.perf_counter()
    p = ctx.paths
    atomic.make_dir(p.json_dir, exist_ok=True)
    flagged = [gid for gid, m in prep.measured.items() if m.needs_island]
    for gid in flagged:
        gp = p.group(gid)
        if gp.round_done(0):
            continue  # already rebuilt: its target_spec.json may carry resolutions
        atomic.make_dir(gp.root, parents=True, exist_ok=True)
        atomic.write_json(gp.target_spec, prep.measured[gid].target_spec.to_dict())
    assert prep.temp_dir is not None and prep.scene_objects is not None
    atomic.copy_file(prep.temp_dir / "scene_meshes.npz", p.scene_meshes)
    if (prep.temp_dir / "scene_context.npz").is_file():
        atomic.copy_file(prep.temp_dir / "scene_context.npz", p.scene_context)
    atomic.write_json(p.scene_objects, prep.scene_objects)
    doc = {"groups_needing_island": flagged,
           "relation_graph_structure_sha256": prep.graph.structure_sha256,
           "scene_sha256": prep.scene_sha256,
           "rules": "a group needs an island when any review fails on the scene as it is "
           "(docs/SCENE_PIPELINE.md, 'validate')",
           "groups": {gid: m.doc() for gid, m in prep.measured.items()},
           "groups_refused": prep.refused}
    atomic.write_json(p.island_groups, doc)  # written last: the stage's completion gate
    state.doc["groups_needing_island"] = flagged
    for gid in flagged:
        state.group(gid)
    state.set_refused(prep.refused)
    uncertain = uncertain_refined(prep.graph)
    state.set_uncertain(uncertain)
    for gid, m in prep.measured.items():
        if m.kept_in_order:
            ctx.say(f"validate: group '{gid}' {m.kept_in_order}")
    for gid, doubt in uncertain.items():
        state.trace(f"validate:uncertain:{gid}")
        ctx.say(f"validate: group '{gid}' keeps the objects it does not hold where they "
                f"stand; its verdict stays uncertain: {doubt['reason']}")
    for gid, refused in prep.refused.items():
        ctx.run_ledger.group_event(ctx.run_id, gid, "refused", "refused", refused["reason"])
        state.trace(f"validate:refused:{gid}")
        ctx.say(f"validate: group '{gid}' refused (left as the input holds it): "
                f"{refused['reason']}")
    ctx.time("validate", prep.validate_seconds + time.perf_counter() - t0)
    state.stage_finished("validate", 0.0)
    state.trace("validate")
    ctx.say(f"validate: {len(flagged)} of {len(prep.measured)} groups need an island: "
            f"{', '.join(flagged) or 'none'}")
    return flagged


def island_groups(ctx: StageContext) -> dict[str, Any]:
    return read_object(ctx.paths.island_groups, UsageError, "island_groups.json",
                       "rerun validate")
