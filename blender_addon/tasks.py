"""What the add-on's operators do, as plain functions over ``island_tools``, plus a CLI.

No ``bpy`` here. Every function is one call, or a short sequence of calls, into the same
library the agent-facing CLIs use (``island_tools.iteration.init_iter0`` / ``iter_step``, the
geometry, the solver, the schemas). Blender work comes in as ``run_job(job) -> dict``, the
injection ``island_tools.iteration`` already uses.

A window's long operators run these in a child Python (this Blender's own interpreter with
its ``sys.path``, or the external Python of Blender 3.4 - 4.1) with this file as the command
line, ``REPO`` being the folder that holds ``island_tools/`` and ``worker/`` (the extension's
``lib/`` or a checkout)::

    python tasks.py --repo REPO settings --config DIRECTORYS.yaml
    python tasks.py --repo REPO geometry --group-dir G --iter N
    python tasks.py --repo REPO review --group-dir G --iter N
    python tasks.py --repo REPO solver-decision --group-dir G --iter N
    python tasks.py --repo REPO render --group-dir G --iter N --config C [--blender-bin B]
    python tasks.py --repo REPO infer-specs --scene-dir S --scene-json J --meshes M
    python tasks.py --repo REPO propose --scene-json J

Each prints its result as one JSON line on stdout and its progress on stderr; errors are
one line on stderr and the exit code of ``island_tools.errors``, exactly as
``scripts/iter_step.py`` reports them. ``init_iter0`` and ``iter_step`` themselves go
through ``scripts/init_iter0.py`` and ``scripts/iter_step.py``, never through here.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

REFINER_DIR = "simple_refiner"
RENDER_DIR = "renders"
SAFE_GROUP_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
SETTINGS_KEYS = ("blender_bin", "engine", "resolution", "samples")
# The preferences' IntProperty cannot hold None: -1 there is ``samples:`` empty / null in
# DIRECTORYS.yaml, the engine's default (island_tools.config.DEFAULT_SAMPLES).
PREFS_DEFAULT_SAMPLES = -1

Progress = Callable[[str], None]
RunJob = Callable[[dict[str, Any]], dict[str, Any]]


def ensure_repo(repo: str | os.PathLike[str]) -> None:
    """Make ``island_tools`` and ``worker`` of ``repo`` importable."""
    repo = str(Path(repo).resolve())
    if repo not in sys.path:
        sys.path.insert(0, repo)


# --------------------------------------------------------------------------- status (stdlib)
def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def completed_iters(group_dir: str | os.PathLike[str]) -> list[int]:
    """Iterations whose ``current_state.json`` exists (the mark of a complete iteration)."""
    refiner = Path(group_dir) / REFINER_DIR
    if not refiner.is_dir():
        return []
    return sorted(int(p.name[5:]) for p in refiner.iterdir()
                  if p.name.startswith("iter_") and p.name[5:].isdigit()
                  and (p / "current_state.json").is_file())


def _state_entry(entries: Any, group_id: str) -> tuple[bool, str]:
    """(listed, reason) for ``state.json`` lists of ids or of {"id"/"group", "reason"}."""
    if isinstance(entries, Mapping):
        if group_id in entries:
            value = entries[group_id]
            return True, value if isinstance(value, str) else ""
        return False, ""
    for entry in entries or []:
        if entry == group_id:
            return True, ""
        if isinstance(entry, Mapping) and group_id in (entry.get("id"), entry.get("group")):
            return True, str(entry.get("reason") or "")
    return False, ""


def run_verdict(group_dir: str | os.PathLike[str], n: int) -> str | None:
    """The review verdict ``simple_refiner/run.json`` recorded for iteration ``n`` (the final
    state of the last agent run, or one of its iterations), else None: the stdlib reading
    of the one review (``island_tools.review``) the loop wrote down."""
    run = read_json(Path(group_dir) / REFINER_DIR / "run.json")
    if not isinstance(run, dict):
        return None
    final = run.get("review")
    if isinstance(final, dict) and final.get("iter") == n and final.get("verdict"):
        return str(final["verdict"])
    for entry in run.get("iterations") or []:
        if isinstance(entry, dict) and entry.get("iter") == n:
            rev = entry.get("review")
            if isinstance(rev, dict) and rev.get("verdict"):
                return str(rev["verdict"])
    return None


def group_status(group_dir: str | os.PathLike[str], state: Mapping | None = None) -> dict:
    """What the panel's group list shows for one group directory."""
    root = Path(group_dir)
    iters = completed_iters(root)
    latest = iters[-1] if iters else -1
    final = False
    if iters:
        doc = read_json(root / REFINER_DIR / f"iter_{latest}" / "transforms.json")
        final = bool(isinstance(doc, dict) and doc.get("final") is True)
    if not (root / "island.blend").is_file() or not (root / "metadata.json").is_file():
        status = "no island"
    elif not (root / "target_spec.json").is_file():
        status = "no target_spec"
    elif not iters:
        status = "ready"
    else:
        status = f"{'final ' if final else ''}iter_{latest}"
        verdict = run_verdict(root, latest)
        if verdict:
            status = f"{status}, {verdict}"
    if state:
        failed, reason = _state_entry(state.get("islands_failed"), root.name)
        completed, _ = _state_entry(state.get("islands_completed"), root.name)
        if failed:
            status = f"failed: {reason}" if reason else "failed"
        elif completed:
            status = f"completed ({status})"
    return {"id": root.name, "path": str(root), "status": status, "latest_iter": latest,
            "final": final}


def list_groups(scene_dir: str | os.PathLike[str]) -> list[dict]:
    """Every ``relation_groups/<G>`` of a scene directory (or the directory itself if it is
    a group), with its status; ``state.json`` decides completed / failed when present."""
    root = Path(scene_dir)
    if (root / "metadata.json").is_file():
        return [group_status(root)]
    groups = root / "relation_groups"
    if not groups.is_dir():
        return []
    state = read_json(root / "state.json")
    state = state if isinstance(state, dict) else None
    return [group_status(p, state) for p in sorted(groups.iterdir())
            if p.is_dir() and not p.name.startswith(".")]


# --------------------------------------------------------------------------- settings
def load_settings(config: str | os.PathLike[str]) -> dict[str, Any]:
    """``DIRECTORYS.yaml`` as the CLIs read it (validated; defaults for absent keys)."""
    from dataclasses import asdict

    from island_tools.config import load_settings as _load

    return asdict(_load(config))


def prefs_from_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """The four keys as the preferences hold them: None -> "" (blender_bin), -1 (samples)."""
    out: dict[str, Any] = {}
    for key in SETTINGS_KEYS:
        value = values[key]
        if value is None:
            value = PREFS_DEFAULT_SAMPLES if key == "samples" else ""
        out[key] = value
    return out


def settings_from_prefs(values: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of ``prefs_from_settings`` for ``save_settings``: samples -1 -> None."""
    return {k: (None if k == "samples" and v == PREFS_DEFAULT_SAMPLES else v)
            for k, v in values.items() if k in SETTINGS_KEYS}


def save_settings(config: str | os.PathLike[str], values: Mapping[str, Any]) -> None:
    """Write the four keys back into ``config``, keeping its comments and line order.

    Values are validated exactly as command-line flags are (``island_tools.config``);
    ``samples`` None is written as ``samples: null`` (the engine's default).
    """
    from island_tools.config import Settings, with_overrides
    from island_tools.files import atomic

    clean = {k: values[k] for k in SETTINGS_KEYS if k in values}
    with_overrides(Settings(), **{k: (v if v != "" else None) for k, v in clean.items()})
    path = Path(config)
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    done = set()
    for i, line in enumerate(lines):
        key = line.split(":", 1)[0].strip()
        if ":" in line and not line.lstrip().startswith("#") and key in clean:
            lines[i] = f"{key}: {json.dumps(clean[key])}"
            done.add(key)
    lines += [f"{k}: {json.dumps(clean[k])}" for k in SETTINGS_KEYS if k in clean
              and k not in done]
    atomic.write_bytes(path, ("\n".join(lines) + "\n").encode("utf-8"))


def settings_object(values: Mapping[str, Any]):
    from dataclasses import fields

    from island_tools.config import Settings

    known = {f.name for f in fields(Settings)}
    return Settings(**{k: v for k, v in values.items() if k in known})


# --------------------------------------------------------------------------- target spec
def read_target_spec(group_dir: str | os.PathLike[str]) -> dict | None:
    """The raw document for display (None when missing or unreadable)."""
    doc = read_json(Path(group_dir) / "target_spec.json")
    return doc if isinstance(doc, dict) else None


def write_target_spec(group_dir: str | os.PathLike[str], doc: Mapping[str, Any]) -> dict:
    """Validate against the contract (and metadata's member count), then write atomically."""
    from island_tools.files import atomic
    from island_tools.schemas import load_metadata, parse_target_spec

    root = Path(group_dir)
    metadata = load_metadata(root / "metadata.json")
    path = root / "target_spec.json"
    spec = parse_target_spec(dict(doc), str(path), len(metadata.refined_members))
    out = spec.to_dict()
    atomic.write_json(path, out)
    return out


# --------------------------------------------------------------------------- relation graph
def relation_graph(scene_dir: str | os.PathLike[str]):
    """``<scene_dir>/inputs/relation_graph.json`` read by the scene pipeline's own parser
    (``island_tools.scene.relation_graph``: ids, anchors, members, hints, target specs,
    forward-axis overrides, each failure one line naming the field)."""
    from island_tools.scene.relation_graph import load_relation_graph

    return load_relation_graph(Path(scene_dir) / "inputs" / "relation_graph.json")


def relation_graph_groups(scene_dir: str | os.PathLike[str]) -> list[dict]:
    """Groups of the relation graph, every one checked before any island is written:
    ``[{"id", "anchor", "members", "target_spec" | None, "forward_axis", "relation_label"}]``."""
    graph = relation_graph(scene_dir)
    return [{"id": g.id, "anchor": g.anchor, "members": list(g.members),
             "target_spec": g.target_spec.to_dict() if g.target_spec is not None else None,
             "forward_axis": dict(g.forward_axis), "relation_label": g.relation_label}
            for g in graph.groups]


def infer_target_specs(scene_dir: str | os.PathLike[str], world: Mapping[str, Any],
                       meshes: Mapping[str, Any], props: Mapping[str, Mapping[str, Any]],
                       unit_scale: float, graph_doc: Mapping[str, Any] | None = None
                       ) -> dict[str, dict]:
    """Every group's target spec as the scene pipeline's validate stage resolves it (the
    graph's own ``target_spec``, else the inference from the anchor's measured footprint,
    the relation hints and the role conventions: ``validate.measure_group``), measured on
    the units of the open file. ``{gid: {"target_spec", "source"}}``. ``graph_doc``: a
    graph not yet written (the accepted proposals) instead of the scene's file."""
    from island_tools.measure import frames
    from island_tools.scene.relation_graph import parse_relation_graph
    from island_tools.scene.validate import measure_group

    graph = relation_graph(scene_dir) if graph_doc is None else parse_relation_graph(
        dict(graph_doc), str(Path(scene_dir) / "inputs" / "relation_graph.json"))
    worlds = {n: frames.as_matrix(m) for n, m in world.items()}
    out = {}
    for g in graph.groups:
        measured = measure_group(g, worlds, meshes, props, graph.path, float(unit_scale))
        out[g.id] = {"target_spec": measured.target_spec.to_dict(),
                     "source": measured.target_spec_source}
    return out


def infer_from_files(scene_dir: str, scene_json: str, meshes_npz: str) -> dict[str, dict]:
    """``infer_target_specs`` from what the add-on wrote (``scene_json``: ``{"world",
    "unit_scale"}``, ``meshes_npz``: the units' mesh cache), for a delegated call."""
    from island_tools.measure import meshcache

    doc = json.loads(Path(scene_json).read_text(encoding="utf-8"))
    meshes, props = meshcache.load(meshes_npz)
    return infer_target_specs(scene_dir, doc["world"], meshes, props, doc["unit_scale"],
                              doc.get("graph"))


class MeasureNeeded(Exception):
    """``propose_open_scene`` in a child Python asks the add-on to measure these names."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(names)
        self.names = names


def propose_open_scene(objects: Mapping[str, Any], unit_scale: float,
                       measure: Callable[[list[str]], tuple[dict, list[dict]]]) -> dict:
    """*Find Groups*: the proposed relation graph of the OPEN file, exactly as
    ``island-refine propose`` proposes a saved one: ``scene_units.units_of`` (which objects
    are units, ``unit_roots``) over ``objects`` (``worker.scene.scene_objects``) with
    ``measure(names) -> (meshes, refusals)`` (``worker.meshes.measured_units``), then
    ``propose.propose_units``; the units left out join ``proposed.unassigned``."""
    from island_tools.scene.propose import propose_units
    from island_tools.scene.scene_units import units_of

    units, left_out = units_of(objects, unit_scale, measure)
    doc = propose_units(units, unit_scale)
    doc["proposed"]["unassigned"] = sorted(doc["proposed"]["unassigned"] + left_out,
                                           key=lambda u: u["name"])
    return doc


def propose_from_files(scene_json: str) -> dict:
    """``propose_open_scene`` from what the add-on wrote (``scene_json``: ``{"objects",
    "unit_scale", "measured": [{"names", "meshes" (npz), "refusals"}]}``), for a delegated
    call: ``{"graph": doc}``, or ``{"measure": names}`` when a measurement is still missing
    (the add-on measures those names and asks again)."""
    from island_tools.measure import meshcache

    doc = json.loads(Path(scene_json).read_text(encoding="utf-8"))
    done = {json.dumps(m["names"]): m for m in doc.get("measured") or []}

    def measure(names: list[str]) -> tuple[dict, list[dict]]:
        m = done.get(json.dumps(list(names)))
        if m is None:
            raise MeasureNeeded(list(names))
        meshes = meshcache.load(m["meshes"])[0] if names else {}
        return meshes, list(m.get("refusals") or [])

    try:
        return {"graph": propose_open_scene(doc["objects"], doc["unit_scale"], measure)}
    except MeasureNeeded as need:
        return {"measure": need.names}


def proposal_groups(doc: Mapping[str, Any], accepted: list[Mapping[str, Any]],
                    by_artist: str) -> dict:
    """The relation graph *Build From Proposals* writes: the accepted proposals (``{"id",
    "anchor", "members", "relation", "proposal", "edited"}``) with their ``proposal``
    blocks, ``proposed`` from the proposer's document (the units of dropped groups join
    ``unassigned``). Validated by ``parse_relation_graph`` before it is returned.

    Every group in it was decided by the artist, so none is left ``uncertain`` (which the
    scene pipeline leaves out as undecided): an uncertain or edited proposal the artist
    accepted becomes ``confident`` with no reasons, as the schema asks of a person who
    checked it, and its ``evidence.artist`` says so (``by_artist``), with the proposer's
    doubts (its ``doubtful`` objects the artist left out among them) and, for an edited one,
    what the proposer had proposed. The proposer's numbers
    (``confidence``, the remaining members' ``member_confidence`` / ``uncertain_members``)
    are kept as they were."""
    import copy

    from island_tools.scene.relation_graph import parse_relation_graph

    groups, owned = [], set()
    for a in accepted:
        p = copy.deepcopy(dict(a["proposal"]))
        members = list(a["members"])
        for key in ("member_confidence", "uncertain_members"):
            p[key] = {m: v for m, v in (p.get(key) or {}).items() if m in members}
        # doubtful names objects the group does not hold: one the artist added is held now
        doubtful = {n: v for n, v in (p.get("doubtful") or {}).items()
                    if n not in members and n != a["anchor"]}
        ev = dict(p.get("evidence") or {})
        if "members" in ev:
            ev["members"] = {m: v for m, v in ev["members"].items() if m in members}
        relation = dict(a.get("relation") or {})
        notes = []
        if a.get("edited"):   # the proposer's pattern was for its members, not these
            was = next((g for g in doc.get("groups") or [] if g["id"] == a["id"]), {})
            relation = {k: v for k, v in relation.items() if k in ("anchor_role", "clearance_m")
                        and was.get("anchor") == a["anchor"]}
            notes.append(f"edited: anchor {a['anchor']}, members {', '.join(members)} (the "
                         f"proposer had anchor {was.get('anchor')}, members "
                         f"{', '.join(was.get('members') or [])})")
        if p.get("status") == "uncertain":
            notes.append(f"the proposer was uncertain: {'; '.join(p.get('reasons') or [])}")
        if notes:
            if doubtful:
                notes.append("left out: " + "; ".join(f"'{n}': {v}"
                                                      for n, v in doubtful.items()))
            ev["artist"] = f"{by_artist}; {'; '.join(notes)}"
            p["status"], p["reasons"], doubtful = "confident", [], {}
        if "doubtful" in p or doubtful:
            p["doubtful"] = doubtful
        p["evidence"] = ev
        groups.append({"id": a["id"], "anchor": a["anchor"], "members": members,
                       "relation": relation, "proposal": p})
        owned.update([a["anchor"], *members])
    proposed = copy.deepcopy(dict(doc.get("proposed") or {"by": "island-refine propose"}))
    left = [u for u in proposed.get("unassigned") or [] if u["name"] not in owned]
    names = {u["name"] for u in left}
    for g in doc.get("groups") or []:
        for n in (g["anchor"], *g["members"]):
            if n not in owned and n not in names:
                left.append({"name": n, "role": None,
                             "reason": f"in proposal '{g['id']}', which the artist dropped "
                                       "or did not accept"})
                names.add(n)
    proposed["unassigned"] = sorted(left, key=lambda u: u["name"])
    out = {"version": doc.get("version", 1),
           "description": "proposed by island-refine propose, decided by the artist in the "
                          "Blender add-on (Find Groups)",
           "groups": groups, "proposed": proposed}
    parse_relation_graph(out, "relation_graph.json")
    return out


def annotate_metadata(group_dir: str | os.PathLike[str], group: Mapping[str, Any]) -> None:
    """What the scene pipeline's rebuild records beside the island (group id, the graph's
    forward-axis overrides, its relation label), so the loop's forward axes honour them."""
    from island_tools.files import atomic

    path = Path(group_dir) / "metadata.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["group_id"] = group["id"]
    if group.get("forward_axis"):
        doc["forward_axis_overrides"] = dict(group["forward_axis"])
    if group.get("relation_label"):
        doc["relation_label"] = group["relation_label"]
    atomic.write_json(path, doc)


# --------------------------------------------------------------------------- the loop
def next_iter(group_dir: str | os.PathLike[str]) -> int:
    from island_tools.errors import UsageError

    done = completed_iters(group_dir)
    if 0 not in done:
        raise UsageError(f"{REFINER_DIR}/iter_0 is missing or incomplete",
                         file=str(Path(group_dir) / REFINER_DIR), fix="run Init iter_0 first")
    return done[-1] + 1


def init_iter0(group_dir: str, settings, run_job: RunJob, progress: Progress | None = None
               ) -> int:
    from island_tools.iteration import init_iter0 as _init

    _init(group_dir, settings, run_job, progress)
    return 0


def iter_step(group_dir: str, n: int, settings, run_job: RunJob,
              progress: Progress | None = None) -> int:
    from island_tools.iteration import iter_step as _step

    _step(group_dir, n, settings, run_job, progress)
    return n


def place_transforms(group_dir: str | os.PathLike[str], source: str | os.PathLike[str]) -> int:
    """Put an agent's or artist's ``transforms.json`` where ``iter_step`` reads it.

    The iteration is the file's ``iter`` field; it must be the next one. The file is checked
    against the contract first; a file outside the group is copied to ``iter_N/``.
    """
    from island_tools.errors import TransformsError, UsageError
    from island_tools.files import atomic
    from island_tools.files.jsonio import read_object
    from island_tools.schemas import load_metadata, load_transforms

    root = Path(group_dir)
    src = Path(source).resolve()
    doc = read_object(src, TransformsError, "transforms.json",
                      "write the decision as the contract's transforms.json")
    n = doc.get("iter")
    if not isinstance(n, int) or isinstance(n, bool):
        raise TransformsError("must be the iteration number", file=str(src), field="iter")
    expected = next_iter(root)
    if n != expected:
        raise UsageError(f"transforms.json is for iter {n}, but the next iteration is "
                         f"{expected}", file=str(src), field="iter")
    load_transforms(src, n, load_metadata(root / "metadata.json"))
    dest = (root / REFINER_DIR / f"iter_{n}" / "transforms.json").resolve()
    if dest != src:
        dest.parent.mkdir(parents=True, exist_ok=True)
        atomic.copy_file(src, dest)
    return n


def solver_decision(group_dir: str | os.PathLike[str], n: int) -> dict:
    """The built-in solver's ``iter_N/transforms.json`` from ``iter_(N-1)``, written through the
    agent adapter (contract and magnitude-policy checks, truthful ``_island_meta``)."""
    from island_tools.adapter import SolverPolicy, phase_for, write_decision
    from island_tools.iteration import load_group

    group = load_group(group_dir)
    policy = SolverPolicy(model=None, generated_by="blender_addon solver step")
    phase = phase_for(n, len(group.metadata.refined_members))
    decision = policy.decide(group, n, phase, max_iter=n)
    write_decision(group_dir, n, decision, model=policy.model,
                   generated_by=policy.generated_by)
    return json.loads((group.iter_dir(n) / "transforms.json").read_text(encoding="utf-8"))


def deltas_from_poses(group_dir: str | os.PathLike[str], n: int,
                      poses: Mapping[str, Any]) -> dict[str, dict]:
    """The ``members`` deltas that take ``iter_(n-1)``'s poses to ``poses`` (canonical).

    The inverse of ``frames.apply_member_delta``: the yaw about canonical Z through the
    member's footprint centre, then the translation. Unmoved members (a trivial delta:
    within ``frames.MOVE_TOL_M`` / ``MOVE_TOL_DEG``, float32 storage 50 m out included) are
    left out. A moved anchor, a tilt or a scale change cannot be a delta and is refused,
    naming the object.
    """
    import math

    import numpy as np

    from island_tools.errors import TransformsError
    from island_tools.iteration import load_current_poses, load_group, load_meshes
    from island_tools.measure import frames

    group = load_group(group_dir)
    prev = load_current_poses(group, n - 1)
    meshes, _ = load_meshes(group)
    fix = "only move members along the floor and turn them about Z"
    members: dict[str, dict] = {}
    for name in group.metadata.members:
        if name not in poses:
            raise TransformsError(f"no pose for '{name}' in the scene", fix="load the iteration")
        new = frames.as_matrix(poses[name])
        old = prev[name]
        if name == group.metadata.anchor_id:
            if frames.pose_moved(old, new):
                raise TransformsError(f"the anchor '{name}' moved; it stays at the origin",
                                      fix="move the members instead")
            continue
        _, rot_old, scale_old = frames.decompose(old)
        _, rot_new, scale_new = frames.decompose(new)
        turn = rot_new @ rot_old.T
        if not np.allclose(scale_new, scale_old, rtol=1e-4, atol=1e-6):
            raise TransformsError(f"'{name}' was scaled", fix=fix)
        if abs(turn[2, 2] - 1.0) > 1e-5 or np.abs(turn[:2, 2]).max() > 1e-4:
            raise TransformsError(f"'{name}' was tilted", fix=fix)
        yaw = math.degrees(math.atan2(turn[1, 0], turn[0, 0]))
        pivot = frames.footprint_centre_local(meshes[name][0])
        turned = frames.apply_member_delta(old, (0.0, 0.0, 0.0), yaw, pivot)
        move = new[:3, 3] - turned[:3, 3]
        if frames.delta_is_trivial(move, yaw):   # within 0.1 mm / 0.01 deg: not a move
            continue
        members[name] = {"delta_xyz": [round(float(v), 6) for v in move],
                         "delta_yaw_deg": round(yaw, 6)}
    return members


def write_viewport_transforms(group_dir: str | os.PathLike[str], poses: Mapping[str, Any]
                              ) -> int:
    """An artist's decision: ``iter_N/transforms.json`` (N = the next iteration) holding the
    deltas from ``iter_(N-1)`` to the poses of the loaded objects. Validated as any
    transforms.json; ``_island_meta.model`` is ``artist``."""
    from island_tools.files import atomic
    from island_tools.iteration import sha256_file
    from island_tools.schemas import (
        load_metadata,
        parse_transforms,
        transforms_doc,  # no fcl: Blender 3.4 runs this
    )

    root = Path(group_dir)
    n = next_iter(root)
    members = deltas_from_poses(root, n, poses)
    refiner = root / REFINER_DIR
    masked = root / "masked.png"
    image = masked if masked.is_file() else refiner / f"iter_{n - 1}" / "render_bev.png"
    decision = {"members": members, "converged": False,
                "reason_summary": f"artist: {len(members)} member(s) moved in the viewport"}
    doc = transforms_doc(decision, n, sha256_file(image), model="artist",
                         generated_by="blender_addon viewport edit")
    path = refiner / f"iter_{n}" / "transforms.json"
    parse_transforms(doc, str(path), n, load_metadata(root / "metadata.json"))
    path.parent.mkdir(exist_ok=True)
    atomic.write_json(path, doc)
    return n


def review_summary(group_dir: str | os.PathLike[str], n: int) -> dict:
    """The one verdict on ``iter_N`` (``island_tools.review.review_island`` of its
    geometry.json, the scene pipeline's ``verify.review_group``): ``verdict`` pass / fail /
    uncertain, ``line`` (the sentence the panel shows), ``status`` (its short form), the
    ``not_measured`` lines and the ``failing`` items."""
    from island_tools import review
    from island_tools.errors import UsageError
    from island_tools.files.jsonio import read_object

    root = Path(group_dir)
    geometry = read_object(root / REFINER_DIR / f"iter_{n}" / "geometry.json", UsageError,
                           "geometry.json", f"step iteration {n} (or press Geometry)")
    rev = review.review_island(root, geometry)
    compact = review.compact(rev)
    return {"iter": n, "verdict": compact["verdict"], "line": review.sentence(rev, 40),
            "status": review.status(rev), "not_measured": compact["not_measured"],
            "failing": compact["failing"]}


def member_geometry(group_dir: str | os.PathLike[str], n: int) -> dict:
    """Recompute ``iter_N/geometry.json`` from that iteration's read-back poses."""
    from island_tools.iteration import recompute_geometry

    return recompute_geometry(group_dir, n)


def render_iteration(group_dir: str | os.PathLike[str], n: int, settings, run_job: RunJob,
                     out_dir: str | os.PathLike[str] | None = None,
                     progress: Progress | None = None) -> dict:
    """Render ``iter_N/island.blend`` again (persp + BEV) with ``settings``.

    The iteration's own renders are never replaced: output goes to ``out_dir`` (default
    ``<group>/renders/iter_N/``), with the worker's render record in ``render.json``. The
    directory is staged beside it and swapped in whole (``iteration._install_iteration``),
    so a stopped render leaves the previous one or the new one, never a mix.
    """
    from island_tools.iteration import group_lock, load_group

    group = load_group(group_dir)
    with group_lock(group.root):
        return _render_locked(group, n, settings, run_job, out_dir, progress)


def _render_locked(group, n: int, settings, run_job: RunJob, out_dir, progress) -> dict:
    from island_tools.errors import UsageError
    from island_tools.files import atomic
    from island_tools.iteration import _install_iteration, is_complete

    src = group.iter_dir(n)
    if not is_complete(src):
        raise UsageError(f"iter_{n} is not complete", file=str(src), fix="step it first")
    out = Path(out_dir) if out_dir else group.root / RENDER_DIR / f"iter_{n}"
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = out.parent / f".staging.{out.name}.{os.getpid()}"
    stage.mkdir()
    try:
        if progress:
            progress(f"[render] iter_{n}: rendering persp + top view")
        blend = stage / "island.blend"
        atomic.copy_file(src / "island.blend", blend)
        result = run_job({"op": "step", "blend": str(blend),
                          "members": list(group.metadata.members),
                          "anchor_id": group.metadata.anchor_id, "poses": None,
                          "render": settings.render_job(), "export_meshes": None})
        blend.unlink()
        record = {"iter": n, "source": str(src / "island.blend"),
                  "settings": settings.render_job(), "render": result.get("render"),
                  "blender_version": result.get("blender_version")}
        atomic.write_json(stage / "render.json", record)
        _install_iteration(stage, out)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return {"out_dir": str(out), **{v: str(out / f"render_{v}.png") for v in ("persp", "bev")}}


def file_mark(path: str | os.PathLike[str]) -> list[int] | None:
    """Identity of a file's current version (inode, size, mtime): an operator compares it
    before and after to tell whether its output was written."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def settle(group_dir: str | os.PathLike[str], marker: str | os.PathLike[str],
           before: list[int] | None, created: list[str] = ()) -> dict:
    """After a stopped operator: put the group back in a state the CLIs could have left.

    Under the group lock: an iteration swapped aside by a kill is put back
    (``iteration.recover_asides``), staging left by the stopped process is removed, then
    ``marker`` (the file whose new version means "done") decides: written -> ``{"done":
    True}``; not written -> the inputs this operator created (``created``: a solver's or an
    artist's ``transforms.json``) are removed with the directory they were alone in, and
    ``{"done": False, "removed": [...]}``.
    """
    from island_tools.iteration import group_lock, recover_asides

    root = Path(group_dir)
    removed: list[str] = []
    with group_lock(root):
        for parent in (root / REFINER_DIR, root / RENDER_DIR):
            recover_asides(parent)
        for parent in (root, root / REFINER_DIR, root / RENDER_DIR):
            for stale in parent.glob(".staging.*") if parent.is_dir() else ():
                shutil.rmtree(stale, ignore_errors=True)
        now = file_mark(marker)
        done = now is not None and now != before
        if not done:
            for name in created:
                path = Path(name)
                if path.is_file():
                    path.unlink()
                    removed.append(str(path))
                    try:
                        path.parent.rmdir()  # only when it held nothing else
                    except OSError:
                        pass
    return {"done": done, "removed": removed}


def iteration_view(group_dir: str | os.PathLike[str], n: int) -> dict:
    """What the iteration browser loads: the blend, the members, their local forward axes
    (``forward_axes.json``) and the iteration's renders."""
    from island_tools.errors import UsageError
    from island_tools.schemas import load_metadata

    root = Path(group_dir)
    metadata = load_metadata(root / "metadata.json")
    it = root / REFINER_DIR / f"iter_{n}"
    if not (it / "current_state.json").is_file():
        raise UsageError(f"iter_{n} is not complete", file=str(it),
                         fix=f"pick one of {completed_iters(root) or 'none (run Init iter_0)'}")
    axes_doc = read_json(root / "forward_axes.json")
    axes = (axes_doc or {}).get("members", {}) if isinstance(axes_doc, dict) else {}
    forward = {m: (axes.get(m) or {}).get("axis_local") for m in metadata.members}
    renders = {v: str(it / f"render_{v}.png") for v in ("persp", "bev")
               if (it / f"render_{v}.png").is_file()}
    return {"blend": str(it / "island.blend"), "members": list(metadata.members),
            "anchor_id": metadata.anchor_id, "forward_local": forward, "renders": renders,
            "footprint_local": _footprint_centres(root / "meshes.npz", metadata.members)}


def _footprint_centres(path: Path, members) -> dict:
    """Each unit's local footprint centre (the yaw pivot), for the viewport arrows: an Empty
    root's own bounding box says nothing about where its furniture is."""
    from island_tools.measure import frames, meshcache

    try:
        meshes, _ = meshcache.load(path)
    except (FileNotFoundError, ValueError):
        return {}
    return {m: [float(c) for c in frames.footprint_centre_local(meshes[m][0])[:2]]
            for m in members if m in meshes and len(meshes[m][0])}


def world_poses(group_dir: str | os.PathLike[str], n: int) -> dict[str, list[list[float]]]:
    """Merge back: ``M_anchor @ canonical`` for every object of the group, with the
    canonical poses read back from ``iter_N`` (``current_state.json``)."""
    from island_tools.errors import GroupInputError
    from island_tools.files.jsonio import read_object
    from island_tools.measure import frames
    from island_tools.schemas import load_metadata

    root = Path(group_dir)
    metadata = load_metadata(root / "metadata.json")
    path = root / REFINER_DIR / f"iter_{n}" / "current_state.json"
    doc = read_object(path, GroupInputError, "current_state.json", f"step iteration {n}")
    poses = doc.get("poses")
    out = {}
    for name in metadata.members:
        entry = poses.get(name) if isinstance(poses, dict) else None
        if not isinstance(entry, dict) or "matrix_4x4" not in entry:
            raise GroupInputError(f"no pose for '{name}'", file=str(path), field="poses")
        canonical = frames.as_matrix(entry["matrix_4x4"])
        out[name] = frames.to_list(frames.world_from_canonical(metadata.m_anchor, canonical))
    return out


def latest_iter(group_dir: str | os.PathLike[str]) -> int:
    from island_tools.errors import UsageError

    done = completed_iters(group_dir)
    if not done:
        raise UsageError("no complete iteration", file=str(Path(group_dir) / REFINER_DIR),
                         fix="run Init iter_0 first")
    return done[-1]


# --------------------------------------------------------------------------- CLI
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tasks.py", description=__doc__.splitlines()[0])
    p.add_argument("--repo", required=True,
                   help="the folder holding island_tools/ and worker/ (a checkout, or the "
                        "extension's lib/)")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("settings", help="print DIRECTORYS.yaml as JSON")
    s.add_argument("--config", required=True)
    for name in ("geometry", "review", "solver-decision", "render"):
        s = sub.add_parser(name)
        s.add_argument("--group-dir", required=True)
        s.add_argument("--iter", type=int, required=True, dest="n")
        if name == "render":
            s.add_argument("--config", required=True)
            s.add_argument("--blender-bin", default=None)
            s.add_argument("--no-daemon", action="store_true", help="(always: no warm worker)")
    s = sub.add_parser("infer-specs", help="target specs as the scene pipeline infers them")
    s.add_argument("--scene-dir", required=True)
    s.add_argument("--scene-json", required=True)
    s.add_argument("--meshes", required=True)
    s = sub.add_parser("propose", help="Find Groups: relation groups proposed on the open "
                                       "file's measured units")
    s.add_argument("--scene-json", required=True)
    return p


def _render_cli(args) -> dict:
    from island_tools.config import load_settings as _load
    from island_tools.config import with_overrides
    from worker.launch import resolve_blender
    from worker.launch import run_job as launch

    settings = with_overrides(_load(args.config), blender_bin=args.blender_bin)
    backend = resolve_blender(settings.blender_bin, None)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    return render_iteration(args.group_dir, args.n, settings,
                            lambda job: launch(job, backend), progress=progress)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    ensure_repo(args.repo)
    from island_tools.clirun import run_main

    def body() -> int:
        if args.command == "settings":
            result: Any = load_settings(args.config)
        elif args.command == "geometry":
            print(f"[tasks geometry] iter_{args.n}: measuring", file=sys.stderr, flush=True)
            result = member_geometry(args.group_dir, args.n)["group"]
        elif args.command == "review":
            result = review_summary(args.group_dir, args.n)
        elif args.command == "render":
            result = _render_cli(args)
        elif args.command == "infer-specs":
            result = infer_from_files(args.scene_dir, args.scene_json, args.meshes)
        elif args.command == "propose":
            result = propose_from_files(args.scene_json)
        else:
            print(f"[tasks solver] iter_{args.n}: deciding", file=sys.stderr, flush=True)
            result = solver_decision(args.group_dir, args.n)
        print(json.dumps(result, allow_nan=False))
        return 0

    return run_main(f"tasks {args.command}", body)


if __name__ == "__main__":
    sys.exit(main())
