"""Build real-scene variants the way users' files hold furniture (run in a subprocess).

``python tests/real_scenes/build.py --out DIR VARIANT...`` writes, per variant,
``DIR/<variant>/scene/{inputs/relation_graph.json, blend/stage3-sub-planned.blend}`` and
``DIR/<variant>/truth.json``. Furniture comes from the real CC0 glb files through Blender's own
glTF importer (``bpy.ops.import_scene.gltf``), scaled to life size (factors from
``fixtures.assets.life_scale``, the only project code used here) and placed around its anchor
with deliberate errors (turned 90 deg, facing away, pushed into the table, bunched).

truth.json: ``{"variant", "unit_scale", "groups": {id: {"anchor", "members"}}, "units": {root:
[objects of its unit]}, "members": {member: {"group", "asset", "truth": {"kind": "object",
"object"} | {"kind": "instance", "source"}, "front_local"}}, "hidden", "hide_viewport",
"instances": {member: collection}, "static": [objects that must not move], "refusal":
{"object", "cause"} | null}``. ``front_local`` is the manifest's front (-Y after Blender's
glTF import) in the local frame of the truth object, which is the glb's root as imported
(for a collection-instance member: the instanced source object, placed by its instance).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path

import bpy
import numpy as np
from mathutils import Matrix

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(REPO))

from bpyutil import np_mat, unit_objects, world_triangles  # noqa: E402

from fixtures.assets import life_scale  # noqa: E402  (scale numbers only)
from real_scenes import REFINE_VARIANTS, REFUSAL_VARIANTS  # noqa: E402

ASSETS = REPO / "assets"
TABLE = "kenney-cco/table.glb"
CHAIR = "kenney-cco/chair.glb"
CHAIR_CUSHION = "kenney-cco/chairCushion.glb"
CHAIR_ROUNDED = "kenney-cco/chairRounded.glb"
DESK = "caysonverse/desk.glb"
DESK_CHAIR = "caysonverse/chairDesk.glb"


def manifest_fronts() -> dict[str, list[float] | None]:
    out: dict[str, list[float] | None] = {}
    with (ASSETS / "MANIFEST.tsv").open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            text = row["front_axis"].lower()
            if text.startswith("none"):
                out[row["file"]] = None
                continue
            blender = text.split("/")[-1]
            sign = -1.0 if "-" in blender else 1.0
            axis = {"x": 0, "y": 1}[blender.strip().lstrip("+-")[0]]
            vec = [0.0, 0.0, 0.0]
            vec[axis] = sign
            out[row["file"]] = vec
    return out


FRONTS = manifest_fronts()


def rz(deg: float) -> np.ndarray:
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    m = np.eye(4)
    m[:2, :2] = [[c, -s], [s, c]]
    return m


def tr(x: float, y: float, z: float = 0.0) -> np.ndarray:
    m = np.eye(4)
    m[:3, 3] = (x, y, z)
    return m


class Scene:
    """One variant under construction: the bpy scene plus what truth.json will say."""

    def __init__(self, variant: str, unit_scale: float = 1.0) -> None:
        bpy.ops.wm.read_factory_settings(use_empty=True)
        self.variant = variant
        self.u = 1.0 / unit_scale            # scene units per metre
        bpy.context.scene.unit_settings.system = "METRIC"
        bpy.context.scene.unit_settings.scale_length = unit_scale
        if unit_scale != 1.0:
            bpy.context.scene.unit_settings.length_unit = "CENTIMETERS"
        self.truth: dict = {"variant": variant, "unit_scale": unit_scale, "groups": {},
                            "units": {}, "members": {}, "anchors": {}, "hidden": [],
                            "hide_viewport": [], "instances": {}, "static": [],
                            "refusal": None}
        self.graph: list[dict] = []

    # ------------------------------------------------------------------ objects
    def import_glb(self, rel: str, name: str, collection=None, life: bool = True):
        """Import a glb; rename its root to ``name`` (children ``name.<part>``); life size."""
        before = set(bpy.data.objects)
        bpy.ops.import_scene.gltf(filepath=str(ASSETS / rel))
        new = [o for o in bpy.data.objects if o not in before]
        roots = [o for o in new if o.parent is None]
        assert len(roots) == 1, (rel, [o.name for o in roots])
        root = roots[0]
        for obj in new:
            if obj is not root:
                obj.name = f"{name}.{obj.name.split('.')[0]}"
            if collection is not None:
                for coll in list(obj.users_collection):
                    coll.objects.unlink(obj)
                collection.objects.link(obj)
        root.name = name
        assert root.name == name, (root.name, name)
        root.rotation_mode = "XYZ"
        if life:  # the importer already converts to scene units (1/scale_length)
            root.scale = [s * life_scale(rel) for s in root.scale]
        return root

    def empty(self, name: str, collection=None):
        obj = bpy.data.objects.new(name, None)
        (collection or bpy.context.scene.collection).objects.link(obj)
        return obj

    def box(self, name: str, size: tuple[float, float, float], centre: tuple[float, float, float],
            parent=None):
        mesh = bpy.data.meshes.new(name)
        sx, sy, sz = (v * self.u / 2.0 for v in size)
        verts = [(x, y, z) for x in (-sx, sx) for y in (-sy, sy) for z in (-sz, sz)]
        faces = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4),
                 (1, 5, 7, 3)]
        mesh.from_pydata(verts, [], faces)
        obj = bpy.data.objects.new(name, mesh)
        bpy.context.scene.collection.objects.link(obj)
        if parent is not None:
            obj.parent = parent
        obj.matrix_world = Matrix(tr(*(v * self.u for v in centre)).tolist())
        self.truth["static"].append(name)
        return obj

    # ------------------------------------------------------------------ placement
    def _frame(self, member: str) -> np.ndarray:
        info = self.truth["members"][member]["truth"]
        bpy.context.view_layer.update()
        if info["kind"] == "object":
            return np_mat(bpy.data.objects[info["object"]].matrix_world)
        inst = world_triangles([member])[member]["instances"][info["source"]]
        return np.asarray(inst[0])

    def frame_of(self, anchor: str) -> tuple[np.ndarray, tuple[float, float, float, float]]:
        """The anchor's rigid world frame and its footprint box in that frame (scene units)."""
        bpy.context.view_layer.update()
        m = np_mat(bpy.data.objects[anchor].matrix_world)
        yaw = math.degrees(math.atan2(m[1, 0], m[0, 0]))
        rigid = tr(*m[:3, 3]) @ rz(yaw)
        verts = world_triangles([anchor])[anchor]["verts"]
        local = (np.linalg.inv(rigid) @ np.c_[verts, np.ones(len(verts))].T).T
        box = (local[:, 0].min(), local[:, 0].max(), local[:, 1].min(), local[:, 1].max())
        return rigid, box

    def member_extent(self, member: str) -> tuple[np.ndarray, float, float, float]:
        """At the root's current pose: (p0 world, front yaw deg, depth, width) of the unit."""
        bpy.context.view_layer.update()
        f = self._frame(member)
        front = f[:3, :3] @ np.asarray(self.truth["members"][member]["front_local"])
        yaw0 = math.degrees(math.atan2(front[1], front[0]))
        verts = world_triangles([member])[member]["verts"][:, :2]
        d = np.array([math.cos(math.radians(yaw0)), math.sin(math.radians(yaw0))])
        lat = np.array([-d[1], d[0]])
        a, b = verts @ d, verts @ lat
        p0 = d * (a.max() + a.min()) / 2 + lat * (b.max() + b.min()) / 2
        return p0, yaw0, float(a.max() - a.min()), float(b.max() - b.min())

    def place(self, member: str, anchor: str, edge: str, t: float, clearance_m: float,
              turn_deg: float = 0.0) -> None:
        """Put ``member`` on ``edge`` of ``anchor``'s footprint box at tangent offset ``t`` (m),
        ``clearance_m`` off the box (negative: pushed in), facing the anchor, then yaw it by
        ``turn_deg`` about its footprint centre (the deliberate error)."""
        root = bpy.data.objects[member]
        rigid, (x0, x1, y0, y1) = self.frame_of(anchor)
        p0, yaw0, depth, _ = self.member_extent(member)
        u = self.u
        gap = clearance_m * u + depth / 2
        centre, yaw = {"-y": ((t * u + (x0 + x1) / 2, y0 - gap), 90.0),
                       "+y": ((t * u + (x0 + x1) / 2, y1 + gap), -90.0),
                       "-x": ((x0 - gap, t * u + (y0 + y1) / 2), 0.0),
                       "+x": ((x1 + gap, t * u + (y0 + y1) / 2), 180.0)}[edge]
        c = rigid @ np.array([centre[0], centre[1], 0.0, 1.0])
        anchor_yaw = math.degrees(math.atan2(rigid[1, 0], rigid[0, 0]))
        delta = anchor_yaw + yaw + turn_deg - yaw0
        w0 = np_mat(root.matrix_world)
        w = tr(c[0], c[1]) @ rz(delta) @ tr(-p0[0], -p0[1]) @ w0
        root.matrix_world = Matrix(w.tolist())
        bpy.context.view_layer.update()

    # ------------------------------------------------------------------ truth / graph
    def member(self, group: str, name: str, asset: str, truth_object: str | None = None,
               instance_source: str | None = None) -> None:
        truth = ({"kind": "instance", "source": instance_source} if instance_source
                 else {"kind": "object", "object": truth_object or name})
        self.truth["members"][name] = {"group": group, "asset": asset, "truth": truth,
                                       "front_local": FRONTS[asset]}
        self.truth["groups"][group]["members"].append(name)

    def group(self, gid: str, anchor: str, asset: str, relation: dict | None = None) -> None:
        self.truth["groups"][gid] = {"anchor": anchor, "members": []}
        self.truth["anchors"][anchor] = {"asset": asset}
        self.graph.append({"id": gid, "anchor": anchor, "relation": relation or {}})

    def save(self, out: Path) -> None:
        bpy.context.view_layer.update()
        roots = [*self.truth["anchors"], *self.truth["members"]]
        self.truth["units"] = unit_objects(roots)
        scene = out / "scene"
        (scene / "inputs").mkdir(parents=True, exist_ok=True)
        (scene / "blend").mkdir(parents=True, exist_ok=True)
        groups = []
        for g in self.graph:
            doc = {"id": g["id"], "anchor": g["anchor"],
                   "members": self.truth["groups"][g["id"]]["members"]}
            if g["relation"]:
                doc["relation"] = g["relation"]
            groups.append(doc)
        (scene / "inputs/relation_graph.json").write_text(
            json.dumps({"version": 1, "description": f"real-scene variant {self.variant}",
                        "groups": groups}, indent=1))
        bpy.ops.wm.save_as_mainfile(filepath=str(scene / "blend/stage3-sub-planned.blend"),
                                    compress=False, relative_remap=False)
        (out / "truth.json").write_text(json.dumps(self.truth, indent=1))


def rigid_world(obj, x: float, y: float, yaw: float, u: float) -> None:
    """Anchor placement: keep the object's scale, set location (metres) and yaw."""
    s = np.diag([*obj.scale, 1.0])
    obj.matrix_world = Matrix((tr(x * u, y * u) @ rz(yaw) @ s).tolist())
    bpy.context.view_layer.update()


FOUR_ON_LONG = {"pattern": "free", "free_note": "2 chairs on -y, 2 chairs on +y"}


# ----------------------------------------------------------------------------- variants
def build_gltf_hierarchy(out: Path) -> None:
    sc = Scene("gltf_hierarchy")
    table = sc.import_glb(TABLE, "dining.table")
    rigid_world(table, 0.5, 1.0, 20.0, 1.0)
    sc.group("dining", "dining.table", TABLE, FOUR_ON_LONG)
    # (edge, t, clearance, turn): turned 90, facing away, pushed in, bunched + turned
    errors = [("-y", -0.5, 0.10, 90.0), ("-y", 0.45, 0.15, 180.0), ("+y", -0.45, -0.20, 0.0),
              ("+y", 0.30, 0.12, 35.0)]
    for i, (edge, t, clear, turn) in enumerate(errors, 1):
        name = f"dining.chair_{i}"
        sc.import_glb(DESK_CHAIR, name)
        sc.member("dining", name, DESK_CHAIR)
        sc.place(name, "dining.table", edge, t, clear, turn)
    bpy.data.objects["dining.chair_4"].hide_set(True)
    sc.truth["hidden"].append("dining.chair_4")
    desk = sc.import_glb(DESK, "office.desk")
    rigid_world(desk, 4.0, -3.0, 200.0, 1.0)
    sc.group("office", "office.desk", DESK, {"anchor_role": "desk", "pattern": "row"})
    sc.import_glb(DESK_CHAIR, "office.chair")
    sc.member("office", "office.chair", DESK_CHAIR)
    sc.place("office.chair", "office.desk", "-y", 0.2, 0.45, -90.0)
    sc.box("floor", (12.0, 12.0, 0.02), (1.0, 0.0, -0.01))
    sc.save(out)


def build_hide_viewport_root(out: Path) -> None:
    """A member root disabled in viewports (monitor icon, ``hide_viewport``): refined like a
    visible one, and still disabled afterwards."""
    sc = Scene("hide_viewport_root")
    table = sc.import_glb(TABLE, "dining.table")
    rigid_world(table, 0.5, 1.0, 20.0, 1.0)
    sc.group("dining", "dining.table", TABLE, FOUR_ON_LONG)
    errors = [("-y", -0.5, 0.10, 90.0), ("-y", 0.45, 0.15, 180.0), ("+y", -0.45, -0.20, 0.0),
              ("+y", 0.30, 0.12, 35.0)]
    for i, (edge, t, clear, turn) in enumerate(errors, 1):
        name = f"dining.chair_{i}"
        sc.import_glb(CHAIR, name)
        sc.member("dining", name, CHAIR)
        sc.place(name, "dining.table", edge, t, clear, turn)
    bpy.data.objects["dining.chair_2"].hide_viewport = True
    sc.truth["hide_viewport"].append("dining.chair_2")
    sc.save(out)


def build_hide_viewport_anchor(out: Path) -> None:
    """The anchor disabled in viewports (monitor icon): its members must still be arranged
    around where it really is."""
    sc = Scene("hide_viewport_anchor")
    table = sc.import_glb(TABLE, "dining.table")
    rigid_world(table, -1.5, 2.0, 30.0, 1.0)
    sc.group("dining", "dining.table", TABLE)               # 5 members: 2+2+1
    errors = [("-y", -0.45, 0.10, 90.0), ("-y", 0.1, 0.10, 0.0), ("+y", 0.45, -0.12, 0.0),
              ("+y", -0.5, 0.10, 180.0), ("-x", 0.2, 0.40, 0.0)]
    for i, (edge, t, clear, turn) in enumerate(errors, 1):
        name = f"dining.chair_{i}"
        sc.import_glb(CHAIR, name)
        sc.member("dining", name, CHAIR)
        sc.place(name, "dining.table", edge, t, clear, turn)
    table.hide_viewport = True
    sc.truth["hide_viewport"].append("dining.table")
    sc.save(out)


def build_empty_roots(out: Path) -> None:
    sc = Scene("empty_roots")
    table = sc.import_glb(TABLE, "dining.table")
    rigid_world(table, -1.0, 0.5, -35.0, 1.0)
    sc.group("dining", "dining.table", TABLE)            # 6 members: 2+2+1+1 inferred
    errors = [("-y", -0.45, 0.10, 90.0), ("-y", 0.55, 0.10, -90.0), ("+y", -0.2, 0.10, 180.0),
              ("+y", 0.15, -0.12, 0.0), ("-x", 0.0, 0.25, 20.0), ("+x", 0.3, 0.10, 0.0)]
    for i, (edge, t, clear, turn) in enumerate(errors, 1):
        name = f"dining.chair_{i}"
        root = sc.empty(name)
        root.empty_display_type = "ARROWS"
        mesh = sc.import_glb(CHAIR_CUSHION if i % 2 else CHAIR, f"{name}.mesh")
        mesh.parent = root
        # the mesh sits 30 deg (alternating sign) and a little off-centre in its Empty, so the
        # front lies on no local axis of the named member
        local = tr(0.05, -0.03) @ rz(30.0 if i % 2 else -30.0) @ np.diag([*mesh.scale, 1.0])
        mesh.matrix_parent_inverse = Matrix.Identity(4)
        mesh.matrix_basis = Matrix(local.tolist())
        sc.member("dining", name, CHAIR_CUSHION if i % 2 else CHAIR, truth_object=mesh.name)
        sc.place(name, "dining.table", edge, t, clear, turn)
    bpy.data.objects["dining.chair_2.mesh"].hide_viewport = True      # monitor icon
    sc.truth["hide_viewport"].append("dining.chair_2.mesh")
    sc.box("floor", (8.0, 8.0, 0.02), (-1.0, 0.5, -0.01))
    sc.save(out)


def build_collection_instances(out: Path) -> None:
    sc = Scene("collection_instances")
    scene = bpy.context.scene
    assets = bpy.data.collections.new("ChairAsset")
    nested = bpy.data.collections.new("ChairNested")
    scene.collection.children.link(assets)
    scene.collection.children.link(nested)
    assets.instance_offset = (0.15, -0.1, 0.0)      # "Set Offset from Cursor", as assets have
    src = sc.import_glb(CHAIR_CUSHION, "asset.chair", collection=assets)
    src.location = (0.0, 0.0, 0.0)
    inner = sc.empty("asset.inner", collection=nested)
    inner.instance_type = "COLLECTION"
    inner.instance_collection = assets
    inner.location = (0.1, 0.2, 0.0)
    inner.rotation_euler = (0.0, 0.0, math.radians(-40.0))
    for lc in bpy.context.view_layer.layer_collection.children:
        lc.exclude = True
    sc.truth["static"] += ["asset.chair", "asset.inner"]
    table = sc.import_glb(TABLE, "dining.table")
    rigid_world(table, 2.0, -1.0, 60.0, 1.0)
    sc.group("dining", "dining.table", TABLE)              # 5 members: 2+2+1
    errors = [("-y", -0.5, 0.10, 90.0), ("-y", -0.2, 0.10, 0.0), ("+y", 0.4, 0.10, 180.0),
              ("+y", -0.45, -0.10, 0.0), ("+x", 0.0, 0.10, -60.0)]
    for i, (edge, t, clear, turn) in enumerate(errors, 1):
        name = f"dining.chair_{i}"
        root = sc.empty(name)
        root.instance_type = "COLLECTION"
        root.instance_collection = nested if i == 3 else assets
        sc.truth["instances"][name] = root.instance_collection.name
        sc.member("dining", name, CHAIR_CUSHION, instance_source="asset.chair")
        sc.place(name, "dining.table", edge, t, clear, turn)
    sc.box("floor", (8.0, 8.0, 0.02), (2.0, -1.0, -0.01))
    sc.save(out)


def build_modifier_anchor(out: Path) -> None:
    sc = Scene("modifier_anchor")
    table = sc.import_glb(TABLE, "dining.table")
    arr = table.modifiers.new("Array", "ARRAY")
    arr.count = 2
    arr.use_relative_offset = True
    arr.relative_offset_displace = (1.0, 0.0, 0.0)
    rigid_world(table, 0.0, 0.0, 110.0, 1.0)
    sc.group("dining", "dining.table", TABLE)               # 6 members: 2+2+1+1
    errors = [("-y", -0.9, 0.10, 90.0), ("-y", 0.95, 0.10, 0.0), ("+y", -0.9, -0.15, 0.0),
              ("+y", 0.0, 0.10, 180.0), ("-x", 0.0, 0.10, 0.0), ("+x", 0.0, 0.30, -90.0)]
    for i, (edge, t, clear, turn) in enumerate(errors, 1):
        name = f"dining.chair_{i}"
        chair = sc.import_glb(CHAIR_ROUNDED, name)
        if i == 5:
            mirror = chair.modifiers.new("Mirror", "MIRROR")
            mirror.use_axis = (True, False, False)
            mirror.use_bisect_axis = (True, False, False)
        sc.member("dining", name, CHAIR_ROUNDED)
        sc.place(name, "dining.table", edge, t, clear, turn)
    sc.save(out)


def build_centimetres(out: Path) -> None:
    sc = Scene("centimetres", unit_scale=0.01)
    table = sc.import_glb(TABLE, "dining.table")
    rigid_world(table, 1.5, 2.0, -20.0, sc.u)
    sc.group("dining", "dining.table", TABLE)               # 5 members: 2+2+1
    errors = [("-y", -0.45, 0.10, 90.0), ("-y", 0.1, 0.10, 0.0), ("+y", 0.45, -0.12, 0.0),
              ("+y", -0.5, 0.10, 180.0), ("-x", 0.2, 0.40, 0.0)]
    for i, (edge, t, clear, turn) in enumerate(errors, 1):
        name = f"dining.chair_{i}"
        sc.import_glb(CHAIR, name)
        sc.member("dining", name, CHAIR)
        sc.place(name, "dining.table", edge, t, clear, turn)
    sc.box("floor", (8.0, 8.0, 0.02), (1.5, 2.0, -0.01))
    sc.save(out)


def build_room_parent(out: Path) -> None:
    sc = Scene("room_parent")
    room = sc.empty("Room")
    room.matrix_world = Matrix((tr(3.0, -2.0) @ rz(25.0) @ np.diag([2.0, 2.0, 2.0, 1.0])).tolist())
    sc.truth["static"].append("Room")
    bpy.context.view_layer.update()
    # walls and floor under the room (world sizes; the room's scale is compensated)
    for name, size, centre in (("room.floor", (7.0, 6.0, 0.02), (0.0, 0.0, -0.01)),
                               ("room.wall_n", (7.0, 0.15, 2.5), (0.0, 3.0, 1.25)),
                               ("room.wall_s", (7.0, 0.15, 2.5), (0.0, -3.0, 1.25)),
                               ("room.wall_e", (0.15, 6.0, 2.5), (3.5, 0.0, 1.25))):
        box = sc.box(name, size, (0.0, 0.0, 0.0))
        box.parent = room
        box.matrix_parent_inverse = Matrix.Identity(4)
        box.matrix_basis = Matrix((tr(*(c / 2.0 for c in centre))
                                   @ np.diag([0.5, 0.5, 0.5, 1.0])).tolist())
    table = sc.import_glb(TABLE, "dining.table")
    table.parent = room
    table.matrix_parent_inverse = Matrix.Identity(4)
    table.matrix_basis = Matrix((tr(0.3, 0.2) @ rz(10.0)
                                 @ np.diag([v / 2.0 for v in table.scale] + [1.0])).tolist())
    sc.group("dining", "dining.table", TABLE)               # 5 members: 2+2+1
    errors = [("-y", -0.45, 0.10, 180.0), ("-y", 0.0, 0.10, 0.0), ("+y", 0.45, -0.15, 0.0),
              ("+y", -0.45, 0.10, 90.0), ("+x", 0.1, 0.10, -45.0)]
    for i, (edge, t, clear, turn) in enumerate(errors, 1):
        name = f"dining.chair_{i}"
        chair = sc.import_glb(CHAIR, name)
        chair.parent = room
        chair.matrix_parent_inverse = Matrix.Identity(4)
        chair.matrix_basis = Matrix(np.diag([v / 2.0 for v in chair.scale] + [1.0]).tolist())
        sc.member("dining", name, CHAIR)
        sc.place(name, "dining.table", edge, t, clear, turn)
    sc.save(out)


# ----------------------------------------------------------------------------- refusals
def _refusal_base(variant: str, obj: str, cause: str, chair_asset: str = CHAIR) -> Scene:
    sc = Scene(variant)
    table = sc.import_glb(TABLE, "dining.table")
    rigid_world(table, 0.0, 0.0, 0.0, 1.0)
    sc.group("dining", "dining.table", TABLE)
    sc.truth["refusal"] = {"object": obj, "cause": cause}
    return sc


def _chair(sc: Scene, name: str = "dining.chair_1", asset: str = CHAIR, t: float = 0.0,
           turn: float = 90.0):
    chair = sc.import_glb(asset, name)
    sc.member("dining", name, asset)
    sc.place(name, "dining.table", "-y", t, 0.1, turn)
    return chair


def _parented_chair(sc: Scene, parent, name: str = "dining.chair_1", keep_inverse: bool = True):
    """Parent the chair keeping its world pose: with Blender's parent inverse (Ctrl-P), or
    without one (``keep_inverse=False``, as importers do): then the parent's own frame (its
    scale, its shear) is the frame the chair's local transform lives in."""
    chair = _chair(sc, name)
    world = chair.matrix_world.copy()
    chair.parent = parent
    bpy.context.view_layer.update()
    if keep_inverse:
        chair.matrix_parent_inverse = parent.matrix_world.inverted()
        bpy.context.view_layer.update()
        chair.matrix_world = world
    else:
        chair.matrix_parent_inverse = Matrix.Identity(4)
        chair.matrix_basis = Matrix((tr(0.1, -0.2) @ np.diag([*chair.scale, 1.0])).tolist())
    bpy.context.view_layer.update()
    return chair


def build_refusal(variant: str, out: Path) -> None:
    if variant == "refuse_keyframed":
        sc = _refusal_base(variant, "dining.chair_1", "keyframed")
        chair = _chair(sc)
        chair.keyframe_insert("location", frame=1)
        chair.location.x += 0.3
        chair.keyframe_insert("location", frame=20)
    elif variant == "refuse_driven_parent":
        sc = _refusal_base(variant, "rig", "driven")
        rig = sc.empty("rig")
        rig.location = (0.0, -0.5, 0.0)
        _parented_chair(sc, rig)
        drv = rig.driver_add("rotation_euler", 2).driver
        drv.type = "SCRIPTED"
        var = drv.variables.new()
        var.name = "f"
        var.targets[0].id_type = "SCENE"
        var.targets[0].id = bpy.context.scene
        var.targets[0].data_path = "frame_current"
        drv.expression = "f * 0.0"
    elif variant == "refuse_constraint":
        sc = _refusal_base(variant, "dining.chair_1", "constraint")
        chair = _chair(sc)
        con = chair.constraints.new("LIMIT_LOCATION")
        con.use_min_z = True
    elif variant == "refuse_constraint_parent":
        sc = _refusal_base(variant, "rig", "constraint")
        target = sc.empty("target")
        target.location = (0.0, -0.6, 0.0)
        rig = sc.empty("rig")
        rig.location = (0.0, -0.6, 0.0)
        _parented_chair(sc, rig)
        con = rig.constraints.new("COPY_LOCATION")
        con.target = target
    elif variant == "refuse_nonuniform_parent":
        sc = _refusal_base(variant, "dining.chair_1", "non-uniform")
        rig = sc.empty("rig")
        rig.location = (0.0, -0.7, 0.0)
        rig.scale = (1.0, 1.6, 1.0)
        bpy.context.view_layer.update()
        _parented_chair(sc, rig, keep_inverse=False)
    elif variant == "refuse_shear_parent":
        sc = _refusal_base(variant, "dining.chair_1", "shear")
        grand = sc.empty("grand")
        grand.scale = (1.8, 1.0, 1.0)
        rig = sc.empty("rig")
        rig.parent = grand
        rig.rotation_euler = (0.0, 0.0, math.radians(35.0))
        rig.location = (0.0, -0.4, 0.0)
        bpy.context.view_layer.update()
        _parented_chair(sc, rig, keep_inverse=False)
    elif variant == "refuse_library":
        lib = out / "lib" / "chair_lib.blend"
        lib.parent.mkdir(parents=True, exist_ok=True)
        sc = _refusal_base(variant, "dining.chair_1", "library")
        _chair(sc)
        bpy.data.objects.remove(bpy.data.objects["dining.table"])
        bpy.ops.wm.save_as_mainfile(filepath=str(lib), compress=False)
        sc = _refusal_base(variant, "dining.chair_1", "library")
        with bpy.data.libraries.load(str(lib), link=True) as (_src, dst):
            dst.objects = ["dining.chair_1"]
        bpy.context.scene.collection.objects.link(dst.objects[0])
        sc.member("dining", "dining.chair_1", CHAIR)
    elif variant == "refuse_excluded":
        sc = _refusal_base(variant, "dining.chair_1.chair", "view layer")
        _chair(sc, asset=DESK_CHAIR)
        parts = bpy.data.collections.new("chair parts")
        bpy.context.scene.collection.children.link(parts)
        child = bpy.data.objects["dining.chair_1.chair"]
        for coll in list(child.users_collection):
            coll.objects.unlink(child)
        parts.objects.link(child)
        bpy.context.view_layer.layer_collection.children["chair parts"].exclude = True
    elif variant == "refuse_tilted":
        sc = _refusal_base(variant, "dining.chair_1", "tilted")
        chair = _chair(sc)
        chair.rotation_euler.x = math.radians(12.0)
    elif variant == "refuse_no_geometry":
        sc = _refusal_base(variant, "dining.marker", "no geometry")
        _chair(sc)
        marker = sc.empty("dining.marker")
        marker.location = (0.0, 1.0, 0.0)
        sc.member("dining", "dining.marker", CHAIR)
    elif variant == "refuse_modifier_outside":
        sc = _refusal_base(variant, "dining.chair_1", "outside the unit")
        chair = _chair(sc)
        cutter = sc.box("cutter", (0.05, 0.05, 0.05), (5.0, 5.0, 0.0))
        boolean = chair.modifiers.new("Cut", "BOOLEAN")
        boolean.operation = "DIFFERENCE"
        boolean.object = cutter
    else:
        raise SystemExit(f"unknown variant {variant!r}")
    sc.save(out)


def build_walls_and_neighbours(out: Path) -> None:
    """A dining table 0.75 m from a wall, a second wall 0.3 m beyond one short end (too close
    for a chair: the pattern's single end chair must take the other end), one chair starting
    half inside the long wall, and a lounge group (a sofa with its back 0.8 m from the other
    short end, a chair before the sofa): every one of them is fixed context for the other
    group."""
    sc = Scene("walls_and_neighbours")
    table = sc.import_glb(TABLE, "dining.table")
    rigid_world(table, 0.0, 0.0, 0.0, 1.0)
    sc.group("dining", "dining.table", TABLE)            # 5 members: 2+2+1 inferred
    rigid, (x0, x1, y0, y1) = sc.frame_of("dining.table")
    errors = [("-y", -0.45, 0.10, 90.0), ("-y", 0.45, 0.10, 0.0), ("+y", -0.45, 0.10, 180.0),
              ("+y", 0.45, 0.62, 0.0), ("-x", 0.0, 0.12, 30.0)]
    for i, (edge, t, clear, turn) in enumerate(errors, 1):
        name = f"dining.chair_{i}"
        sc.import_glb(CHAIR, name)
        sc.member("dining", name, CHAIR)
        sc.place(name, "dining.table", edge, t, clear, turn)
    # chair 4 (+y, 0.62 m out) reaches into this wall; chair 5 sits at the blocked end
    sc.box("wall_north", (6.0, 0.12, 2.6), (0.0, y1 + 0.75 + 0.06, 1.3))
    sc.box("wall_west", (0.12, 4.0, 2.6), (x0 - 0.30 - 0.06, 0.0, 1.3))
    sofa = sc.import_glb("kenney-cco/loungeSofa.glb", "lounge.sofa")
    rigid_world(sofa, x1 + 1.9, -0.2, 90.0, 1.0)
    sc.group("lounge", "lounge.sofa", "kenney-cco/loungeSofa.glb",
             {"anchor_role": "sofa"})
    sc.import_glb(CHAIR_ROUNDED, "lounge.chair")
    sc.member("lounge", "lounge.chair", CHAIR_ROUNDED)
    sc.place("lounge.chair", "lounge.sofa", "-y", 0.3, 0.35, 60.0)
    sc.box("floor", (12.0, 12.0, 0.02), (0.0, 0.0, -0.01))
    sc.save(out)


def build_infeasible_wall(out: Path) -> None:
    """Issue 25: a dining table with six chairs as 2+2+1+1 at 0.10 m clearance, its west end
    0.35 m from a wall (no chair fits there at any clearance): the end chair starts where
    the spec puts it, inside the wall. Not in REFINE_VARIANTS (tests/
    test_hard_constraints_scene.py builds and judges it alone)."""
    sc = Scene("infeasible_wall")
    table = sc.import_glb(TABLE, "dining.table")
    rigid_world(table, 0.0, 0.0, 0.0, 1.0)
    sc.group("dining", "dining.table", TABLE, {"pattern": "2+2+1+1", "clearance_m": 0.1})
    _, (x0, x1, y0, y1) = sc.frame_of("dining.table")
    seats = [("-y", -0.45), ("-y", 0.45), ("+y", -0.45), ("+y", 0.45), ("+x", 0.0),
             ("-x", 0.0)]
    for i, (edge, t) in enumerate(seats, 1):
        name = f"dining.chair_{i}"
        sc.import_glb(CHAIR, name)
        sc.member("dining", name, CHAIR)
        sc.place(name, "dining.table", edge, t, 0.10, 0.0)
    sc.box("wall_west", (0.12, 5.0, 2.6), (x0 - 0.35 - 0.06, 0.0, 1.3))
    sc.box("floor", (12.0, 12.0, 0.02), (0.0, 0.0, -0.01))
    sc.save(out)


BUILDERS = {"gltf_hierarchy": build_gltf_hierarchy, "empty_roots": build_empty_roots,
            "hide_viewport_root": build_hide_viewport_root,
            "hide_viewport_anchor": build_hide_viewport_anchor,
            "collection_instances": build_collection_instances,
            "modifier_anchor": build_modifier_anchor, "centimetres": build_centimetres,
            "room_parent": build_room_parent,
            "walls_and_neighbours": build_walls_and_neighbours,
            "infeasible_wall": build_infeasible_wall}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("variants", nargs="*")
    args = ap.parse_args(argv)
    for variant in args.variants or [*REFINE_VARIANTS, *REFUSAL_VARIANTS]:
        out = args.out / variant
        out.mkdir(parents=True, exist_ok=True)
        if variant in BUILDERS:
            BUILDERS[variant](out)
        else:
            build_refusal(variant, out)
        print(f"built {variant}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
