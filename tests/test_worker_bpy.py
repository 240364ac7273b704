"""worker/ on the embedded bpy module (Blender 5.0): build, step, export, render, safety."""
from __future__ import annotations

import hashlib
import math
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from island_tools.errors import BlendVersionError, GroupInputError, UsageError  # noqa: E402
from island_tools.measure import meshcache
from worker import blend_io, jobs, meshes, render  # noqa: E402
from worker.build import build_island  # noqa: E402

pytestmark = pytest.mark.bpy

MEMBERS = ["table", "chair_a", "chair_b"]


def box(sx: float, sy: float, sz: float, z0: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    v = np.array([[x, y, z] for x in (-sx / 2, sx / 2) for y in (-sy / 2, sy / 2)
                  for z in (z0, z0 + sz)], dtype=float)
    f = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                  [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    return v, f


def pose(x: float, y: float, yaw_deg: float = 0.0, z: float = 0.0) -> list[list[float]]:
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    return [[c, -s, 0.0, x], [s, c, 0.0, y], [0.0, 0.0, 1.0, z], [0.0, 0.0, 0.0, 1.0]]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def png_info(path: Path) -> tuple[int, int, int, int]:
    """(width, height, bit depth, colour type) from the IHDR chunk."""
    data = path.read_bytes()[:33]
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    w, h, depth, ctype = struct.unpack(">IIBB", data[16:26])
    return w, h, depth, ctype


MESHES = {"table": box(1.6, 0.8, 0.75), "chair_a": box(0.45, 0.45, 0.9),
          "chair_b": box(0.45, 0.45, 0.9)}
POSES = {"table": pose(0, 0), "chair_a": pose(0.0, -0.8, 0.0),
         "chair_b": pose(0.3, 0.8, 180.0)}


@pytest.fixture(scope="session")
def island(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bpy_island")
    meshcache.save(d / "objects.npz", MESHES)
    out = d / "island.blend"
    res = jobs.run_job({
        "op": "build_island", "out_blend": str(out), "objects_npz": str(d / "objects.npz"),
        "objects": [{"name": "table", "matrix_world": POSES["table"]},
                    {"name": "chair_a", "matrix_world": POSES["chair_a"],
                     "color": [1, 0, 0, 1], "props": {"forward_axis": "-Y"}},
                    {"name": "chair_b", "matrix_world": POSES["chair_b"],
                     "props": {"forward_axis": [0.0, -1.0]}}],
    })
    assert res["objects"] == ["table", "chair_a", "chair_b"]
    assert res["blender_version"] == blend_io.blender_version()
    return out


@pytest.fixture
def staged(island, tmp_path) -> Path:
    dst = tmp_path / "island.blend"
    shutil.copyfile(island, dst)
    return dst


def test_step_applies_poses_and_reads_them_back_from_disk(staged):
    before = sha(staged)
    wanted = {"chair_a": pose(-0.35, -0.9, 17.5), "chair_b": pose(0.5, 0.95, -152.25)}
    res = jobs.run_job({"op": "step", "blend": str(staged), "members": MEMBERS,
                        "anchor_id": "table", "poses": wanted, "render": None,
                        "export_meshes": None})
    assert res["saved"] is True
    assert sha(staged) != before
    for name, m in wanted.items():
        assert np.allclose(res["poses"][name], m, atol=1e-6)
    assert np.allclose(res["poses"]["table"], POSES["table"], atol=1e-6)
    assert set(res["timings_s"]) >= {"open", "apply_save", "reopen", "export", "render"}
    assert res["file_version"] == ".".join(map(str, bpy.app.version[:2]))
    assert not list(staged.parent.glob("*.blend1"))  # no backup files next to the island
    # An independent job reading the same file agrees (the values come from disk).
    again = jobs.run_job({"op": "read_poses", "blend": str(staged), "members": MEMBERS})
    for name in MEMBERS:
        assert np.allclose(again["poses"][name], res["poses"][name], atol=1e-7)


def test_step_without_poses_leaves_the_file_alone(staged):
    before = sha(staged)
    res = jobs.run_job({"op": "step", "blend": str(staged), "members": MEMBERS,
                        "anchor_id": "table", "poses": None, "render": None,
                        "export_meshes": None})
    assert res["saved"] is False and sha(staged) == before
    assert np.allclose(res["poses"]["chair_b"], POSES["chair_b"], atol=1e-6)


def test_export_meshes_round_trip_local_coordinates(staged, tmp_path):
    out = tmp_path / "meshes.npz"
    res = jobs.run_job({"op": "step", "blend": str(staged), "members": MEMBERS,
                        "anchor_id": "table", "poses": None, "render": None,
                        "export_meshes": str(out)})
    assert res["meshes"]["objects"]["chair_b"] == {"vertices": 8, "triangles": 12, "parts": 1}
    got, props = meshcache.load(out)
    assert list(got) == MEMBERS
    for name, (v, f) in MESHES.items():
        gv, gf = got[name]
        assert gf.shape == (12, 3)
        # Local coordinates: chair_b is rotated 180 deg in the world, its cache is not.
        assert np.allclose(np.sort(gv, axis=0), np.sort(v, axis=0), atol=1e-6)
        tri_world_free = {tuple(sorted(map(tuple, np.round(gv[t], 6)))) for t in gf}
        tri_ref = {tuple(sorted(map(tuple, np.round(v[t], 6)))) for t in f}
        assert tri_world_free == tri_ref
    assert props == {"chair_a": {"forward_axis": "-Y"},
                     "chair_b": {"forward_axis": [0.0, -1.0]}}


def test_export_meshes_refuses_a_unit_without_geometry(staged, tmp_path):
    blend_io.open_blend(staged)
    empty = bpy.data.objects.new("lamp_empty", None)
    bpy.context.scene.collection.objects.link(empty)
    with pytest.raises(GroupInputError, match="lamp_empty.*has no geometry"):
        meshes.export_meshes(["table", "lamp_empty"], tmp_path / "m.npz")
    assert not (tmp_path / "m.npz").exists()


@pytest.mark.parametrize("engine,res_px,samples", [("workbench", 64, 16), ("cycles", 32, 1)])
def test_render_views_writes_two_rgb_pngs(staged, engine, res_px, samples):
    res = jobs.run_job({"op": "step", "blend": str(staged), "members": MEMBERS,
                        "anchor_id": "table", "poses": {"chair_a": pose(0.1, -0.7, 10)},
                        "render": {"engine": engine, "resolution": res_px,
                                   "samples": samples},
                        "export_meshes": None})
    r = res["render"]
    assert r["engine"] == engine and r["samples"] == samples
    for key, name in (("persp", "render_persp.png"), ("bev", "render_bev.png")):
        path = Path(r[key])
        assert path == staged.parent / name
        assert png_info(path) == (res_px, res_px, 8, 2)  # 8-bit RGB
    # table 1.6 m + 2 * 1.5 m margin = 4.6 -> 5.0 m
    assert r["bev_ortho_scale_m"] == 5.0
    assert r["bev_metres_per_pixel"] == pytest.approx(5.0 / res_px)
    assert set(r["persp_camera"]) >= {"location", "target", "elevation_deg", "fov_deg"}
    assert r["bev_arrows"] == ["chair_a", "chair_b"]  # from the forward_axis properties
    if engine == "workbench":
        assert r["render_aa"] == "16"
    # Nothing temporary is left in the directory or in the open file.
    assert sorted(p.name for p in staged.parent.iterdir()) == [
        "island.blend", "render_bev.png", "render_persp.png"]
    assert [s.name for s in bpy.data.scenes] == ["Scene"]
    assert sorted(o.name for o in bpy.data.objects) == sorted(MEMBERS)
    assert tuple(bpy.data.objects["chair_a"].color) == pytest.approx((1, 0, 0, 1))


def test_render_bev_scale_is_fixed_and_grows_in_whole_metres(staged):
    blend_io.open_blend(staged)
    out = staged.parent
    near = render.render_views(out, "table", MEMBERS, resolution=16, samples=0)
    blend_io.set_poses({"chair_b": pose(0.0, 1.1, 180)})
    moved = render.render_views(out, "table", MEMBERS, resolution=16, samples=0)
    assert near["bev_ortho_scale_m"] == moved["bev_ortho_scale_m"] == 5.0
    blend_io.set_poses({"chair_b": pose(0.0, 3.0, 180)})  # reaches y = 3.225 -> needs 6.45
    far = render.render_views(out, "table", MEMBERS, resolution=16, samples=0)
    assert far["bev_ortho_scale_m"] == 7.0
    assert far["render_aa"] == "OFF"


def test_render_samples_default_per_engine(staged):
    # No samples (argument omitted / absent from a job): the engine's default.
    blend_io.open_blend(staged)
    wb = render.render_views(staged.parent, "table", MEMBERS, resolution=16)
    assert (wb["samples"], wb["render_aa"]) == (render.DEFAULT_SAMPLES["workbench"], "5")
    res = jobs.run_job({"op": "step", "blend": str(staged), "members": MEMBERS,
                        "anchor_id": "table", "poses": None,
                        "render": {"engine": "cycles", "resolution": 16},
                        "export_meshes": None})
    assert res["render"]["samples"] == render.DEFAULT_SAMPLES["cycles"] == 16


def test_workbench_samples_mapping():
    got = {s: render.workbench_aa(s) for s in (0, 1, 4, 5, 7, 8, 10, 11, 16, 31, 32, 64)}
    assert got == {0: "OFF", 1: "FXAA", 4: "FXAA", 5: "5", 7: "5", 8: "8", 10: "8",
                   11: "11", 16: "16", 31: "16", 32: "32", 64: "32"}


def test_embedded_scripts_never_run(tmp_path):
    marker = tmp_path / "script_ran.txt"
    blend = tmp_path / "evil.blend"
    v, f = box(1, 1, 1)
    build_island(blend, [{"name": "cube", "vertices": v, "faces": f,
                          "matrix_world": pose(0, 0)}],
                 text_blocks=[{"name": "evil.py", "use_module": True,
                               "body": f"open({str(marker)!r}, 'w').write('ran')\n"}])
    info = blend_io.open_blend(blend)
    assert not marker.exists()
    # The script is in the file and registered, so the check above could have failed...
    assert bpy.data.texts["evil.py"].use_module is True
    assert info["autoexec_fail"] is True
    # ... and does run when a file is opened with scripts allowed (positive control).
    bpy.ops.wm.open_mainfile(filepath=str(blend), load_ui=False, use_scripts=True)
    assert marker.read_text() == "ran"
    marker.unlink()
    blend_io.open_blend(blend)  # back to the safe default
    assert not marker.exists()


def test_newer_file_version_is_refused(staged):
    data = bytearray(staged.read_bytes())
    head = bytes(data[:17])
    assert head.startswith(b"BLENDER") and head[12:13] in (b"v", b"V"), head
    data[13:17] = b"0900"
    staged.write_bytes(bytes(data))
    with pytest.raises(BlendVersionError) as err:
        blend_io.open_blend(staged)
    msg = str(err.value)
    assert "saved by Blender 9.0" in msg and blend_io.blender_version() in msg
    assert "--blender-bin" in msg and "\n" not in msg
    assert err.value.exit_code == 7


def test_not_a_blend_and_missing_file(tmp_path):
    junk = tmp_path / "junk.blend"
    junk.write_bytes(b"hello world, not a blend file")
    with pytest.raises(GroupInputError, match="not a .blend"):
        blend_io.open_blend(junk)
    with pytest.raises(GroupInputError, match="not found"):
        blend_io.open_blend(tmp_path / "missing.blend")


def test_missing_member_names_what_exists(staged):
    with pytest.raises(GroupInputError) as err:
        jobs.run_job({"op": "step", "blend": str(staged), "members": MEMBERS + ["ghost"],
                      "anchor_id": "table", "poses": None, "render": None,
                      "export_meshes": None})
    assert "'ghost'" in str(err.value) and "'chair_a'" in str(err.value)
    assert err.value.exit_code == 8


def test_unknown_op_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown worker op 'explode'") as err:
        jobs.run_job({"op": "explode"})
    assert err.value.exit_code == 2


def test_build_refuses_names_blender_would_change(tmp_path):
    v, f = box(1, 1, 1)
    long_name = "x" * 300  # over the limit of every Blender (63 bytes up to 4.x, 255 in 5.0)
    with pytest.raises(GroupInputError, match="became"):
        build_island(tmp_path / "a.blend", [{"name": long_name, "vertices": v, "faces": f}])
    with pytest.raises(GroupInputError, match="duplicate"):
        build_island(tmp_path / "b.blend", [{"name": "same", "vertices": v, "faces": f},
                                           {"name": "same", "vertices": v, "faces": f}])


def test_truncated_file_is_a_group_input_error(tmp_path):
    bad = tmp_path / "truncated.blend"
    bad.write_bytes(b"BLENDER-v304" + b"\0" * 20)
    with pytest.raises(GroupInputError, match="truncated.blend: truncated .blend") as err:
        blend_io.open_blend(bad)
    assert err.value.exit_code == 8


# ------------------------------------------------------------------ units in the add-on path
def _unit_scene() -> None:
    """An open file the way an artist has it: a table, a chair that is an Empty root with a
    child mesh under a rotated Room, and a chair that is a collection instance."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.unit_settings.scale_length = 0.01   # centimetres
    tv, tf = box(160.0, 80.0, 75.0)
    cv, cf = box(45.0, 45.0, 90.0)
    table_mesh, chair_mesh = bpy.data.meshes.new("table"), bpy.data.meshes.new("chair")
    table_mesh.from_pydata(tv.tolist(), [], tf.tolist())
    chair_mesh.from_pydata(cv.tolist(), [], cf.tolist())
    room = bpy.data.objects.new("Room", None)
    room.rotation_euler = (0.0, 0.0, math.radians(25))
    table = bpy.data.objects.new("table", table_mesh)
    root = bpy.data.objects.new("chair_root", None)
    part = bpy.data.objects.new("chair_part", chair_mesh)
    asset = bpy.data.collections.new("ChairAsset")
    asset.objects.link(bpy.data.objects.new("chair_src", chair_mesh))
    inst = bpy.data.objects.new("chair_inst", None)
    inst.instance_type, inst.instance_collection = "COLLECTION", asset
    for obj in (room, table, root, part, inst):
        scene.collection.objects.link(obj)
    table.parent = room
    root.parent = room
    root.location = (0.0, -90.0, 0.0)
    part.parent = root
    part.location = (5.0, 0.0, 0.0)
    inst.location = (0.0, 90.0, 0.0)
    bpy.context.view_layer.update()


def test_addon_island_keeps_units_whole_and_the_open_file_untouched(tmp_path: Path) -> None:
    from worker import addon_ops

    _unit_scene()
    objs = bpy.data.objects
    before = {o.name: (np.array(o.matrix_world), np.array(o.matrix_basis),
                       o.parent.name if o.parent else None) for o in objs}
    out = addon_ops.write_island(tmp_path / "g", "table", ["chair_root", "chair_inst"])
    after = {o.name: (np.array(o.matrix_world), np.array(o.matrix_basis),
                      o.parent.name if o.parent else None) for o in objs}
    for name, (w, b, p) in before.items():   # the artist's file, exactly as it was
        assert np.array_equal(after[name][1], b) and after[name][2] == p, name
        assert np.allclose(after[name][0], w, atol=1e-9), name
    meta = __import__("json").loads((tmp_path / "g" / "metadata.json").read_text())
    assert meta["unit_scale"] == 0.01
    assert meta["units"]["chair_root"] == ["chair_root", "chair_part"]
    # the island: read back from the file, the units whole, the roots in canonical metres
    blend_io.open_blend(out["island"])
    island = bpy.data.objects
    assert island["chair_part"].parent == island["chair_root"]
    assert island["chair_inst"].instance_collection.name == "ChairAsset"
    assert island["chair_root"].parent is None
    t, _, scale = __import__("island_tools.measure.frames", fromlist=["x"]).decompose(
        np.array(island["chair_root"].matrix_world))
    assert np.allclose(t, [0.0, -0.9, 0.0], atol=1e-6) and np.allclose(scale, 0.01)
    found = meshes.export_meshes(["table", "chair_root", "chair_inst"], tmp_path / "m.npz")
    assert found["objects"]["chair_root"]["triangles"] == 12      # the child mesh
    assert found["objects"]["chair_inst"]["triangles"] == 12      # the instanced source
    got, _ = meshcache.load(tmp_path / "m.npz")
    # the child's 5 cm offset is in the root's local frame
    assert np.allclose(got["chair_root"][0][:, 0].mean(), 5.0, atol=1e-5)
