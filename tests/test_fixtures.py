"""Fixture islands from the real CC0 assets: life-size scales, the arrangement math, and one
build through the worker read back from the saved .blend.

The geometry here is measured independently of ``fixtures.specs``: footprints are shapely
convex hulls of the posed vertices (gap = shapely distance, overlap = intersection area;
island_tools.measure.geometry's polygons if shapely is not installed),
facing comes from the pose's rotation applied to local -Y, spacing from footprint centres
projected on the anchor's edges. ``island_tools.measure.geometry.compute_geometry`` (the pipeline's
geometry.json) is cross-checked on every case as well (``test_island_tools_geometry_agrees``).
"""
from __future__ import annotations

import csv
import math
import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from fixtures import assets as fa
from fixtures import specs
from island_tools.measure import frames

try:  # shapely comes with trimesh's usual extras; island_tools.measure.geometry is the fallback
    from shapely.geometry import MultiPoint
except ImportError:  # pragma: no cover - depends on the environment
    MultiPoint = None

CORRECT = list(specs.FIXTURES)
CASES = specs.all_cases()
CHAIRS = ["kenney-cco/chair.glb", "kenney-cco/chairCushion.glb",
          "kenney-cco/chairModernCushion.glb", "kenney-cco/chairModernFrameCushion.glb",
          "kenney-cco/chairRounded.glb", "caysonverse/chairDesk.glb"]
TABLES = ["kenney-cco/table.glb", "kenney-cco/tableRound.glb", "caysonverse/desk.glb"]


@cache
def arr(name: str, variant: str) -> specs.Arrangement:
    return specs.arrange(name, variant)


# --------------------------------------------------------------------- independent measures
def _posed(a: specs.Arrangement, name: str) -> np.ndarray:
    pose = a.canonical[name]
    v = a.meshes[name][0]
    return v @ pose[:3, :3].T + pose[:3, 3]


class _Hull:
    """Convex footprint: shapely when installed, else island_tools.measure.geometry's polygons."""

    def __init__(self, pts: np.ndarray) -> None:
        if MultiPoint is not None:
            self.shape = MultiPoint(pts.tolist()).convex_hull
            self.hull = None
        else:
            from island_tools.measure.geometry import convex_hull_2d
            self.shape, self.hull = None, convex_hull_2d(pts)

    def distance(self, other: _Hull) -> float:
        """Gap (m); overlaps: -sqrt(intersection area) (shapely) or -penetration depth."""
        if self.shape is not None:
            inter = self.shape.intersection(other.shape)
            if inter.area > 0:
                return -math.sqrt(inter.area)
            return float(self.shape.distance(other.shape))
        from island_tools.measure.geometry import convex_signed_distance
        return convex_signed_distance(self.hull, other.hull)[0]


def _poly(a: specs.Arrangement, name: str) -> _Hull:
    return _Hull(_posed(a, name)[:, :2])


def _clearance(a: specs.Arrangement, name: str) -> float:
    return _poly(a, name).distance(_poly(a, a.anchor))


def _centre(a: specs.Arrangement, name: str) -> np.ndarray:
    v = a.meshes[name][0]
    lo, hi = v[:, :2].min(axis=0), v[:, :2].max(axis=0)
    c = np.array([(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, 0.0])
    pose = a.canonical[name]
    return (pose[:3, :3] @ c + pose[:3, 3])[:2]


def _forward(a: specs.Arrangement, name: str) -> np.ndarray:
    f = a.canonical[name][:3, :3] @ np.array([0.0, -1.0, 0.0])
    return f[:2] / np.linalg.norm(f[:2])


def _rect(a: specs.Arrangement):
    pts = _posed(a, a.anchor)[:, :2]
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    mid = (lo + hi) / 2
    edges = {}
    for key, n in {"+x": (1, 0), "-x": (-1, 0), "+y": (0, 1), "-y": (0, -1)}.items():
        n = np.array(n, dtype=float)
        u = np.array([-n[1], n[0]])
        m = mid + n * np.abs(n) * (hi - lo) / 2
        edges[key] = (n, u, m, float(abs(u @ (hi - lo))))
    return edges


def _edge_of(a: specs.Arrangement, name: str) -> str:
    p = _centre(a, name)

    def dist(e):
        n, u, m, length = e
        t = np.clip((p - m) @ u, -length / 2, length / 2)
        return np.linalg.norm(p - (m + t * u))
    edges = _rect(a)
    return min(edges, key=lambda k: dist(edges[k]))


def _anchor_centre(a: specs.Arrangement) -> np.ndarray:
    return _centre(a, a.anchor)


def _facing_error(a: specs.Arrangement, name: str) -> float:
    if a.fixture.layout == "ring":
        target = _anchor_centre(a) - _centre(a, name)
    else:
        target = -_rect(a)[_edge_of(a, name)][0]
    target = target / np.linalg.norm(target)
    f = _forward(a, name)
    return math.degrees(math.atan2(abs(f[0] * target[1] - f[1] * target[0]), f @ target))


def _width_along(a: specs.Arrangement, name: str, u: np.ndarray) -> float:
    proj = _posed(a, name)[:, :2] @ u
    return float(proj.max() - proj.min())


def _spacing_deviation(a: specs.Arrangement) -> float:
    """Rect: max |t - t_ideal| over all edges; ring: coefficient of variation of gaps."""
    if a.fixture.layout == "ring":
        c = _anchor_centre(a)
        ang = sorted(math.atan2(*(_centre(a, m) - c)[::-1]) for m in a.members)
        gaps = np.diff(ang + [ang[0] + 2 * math.pi])
        return float(np.std(gaps) / np.mean(gaps))
    edges = _rect(a)
    by_edge: dict[str, list[str]] = {}
    for m in a.members:
        by_edge.setdefault(_edge_of(a, m), []).append(m)
    worst = 0.0
    for key, group in by_edge.items():
        n, u, mid, length = edges[key]
        k = len(group)
        w_max = max(_width_along(a, m, u) for m in group)
        span = max(length, k * (w_max + 0.10))
        ts = sorted(float((_centre(a, m) - mid) @ u) for m in group)
        ideal = [-span / 2 + span * (i + 0.5) / k for i in range(k)]
        worst = max(worst, max(abs(t - i) for t, i in zip(ts, ideal)))
    return worst


# --------------------------------------------------------------------- assets and scales
def test_assets_dir_env_override_and_clear_error(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(fa.ENV_VAR, str(tmp_path / "nowhere"))
    with pytest.raises(fa.AssetsMissingError, match=fa.ENV_VAR) as info:
        fa.assets_dir()
    assert info.value.exit_code == 8 and "nowhere" in info.value.one_line()
    monkeypatch.setenv(fa.ENV_VAR, str(fa.DEFAULT_ASSETS_DIR))
    assert fa.assets_dir() == fa.DEFAULT_ASSETS_DIR
    with pytest.raises(fa.AssetsMissingError, match="MANIFEST"):
        fa.asset_path("kenney-cco/noSuchChair.glb")


def test_assets_travel_with_the_repository(monkeypatch) -> None:
    """A clone runs alone: the default folder is inside the repository and complete."""
    monkeypatch.delenv(fa.ENV_VAR, raising=False)
    repo = Path(__file__).resolve().parents[1]
    assert fa.assets_dir() == repo / "assets"
    with (repo / "assets" / "MANIFEST.tsv").open(encoding="utf-8") as fh:
        listed = [r["file"] for r in csv.DictReader(fh, delimiter="\t")]
    assert set(fa.SIZING) <= set(listed)
    for folder in {rel.split("/")[0] for rel in listed}:
        assert any((repo / "assets" / folder).glob("LICEN[SC]E*")), folder


def test_incomplete_assets_folder_is_one_line_naming_what_is_missing(monkeypatch,
                                                                      tmp_path) -> None:
    shutil.copytree(fa.DEFAULT_ASSETS_DIR, tmp_path / "assets")
    (tmp_path / "assets" / "kenney-cco" / "chair.glb").unlink()
    monkeypatch.setenv(fa.ENV_VAR, str(tmp_path / "assets"))
    with pytest.raises(fa.AssetsMissingError) as info:
        fa.assets_dir()
    line = info.value.one_line()
    assert "kenney-cco/chair.glb" in line and "incomplete" in line and "fix:" in line
    (tmp_path / "assets" / "MANIFEST.tsv").unlink()
    with pytest.raises(fa.AssetsMissingError, match="no MANIFEST.tsv"):
        fa.assets_dir()


@pytest.mark.parametrize("cli", [["-m", "fixtures.build", "--out", "{tmp}/o"],
                                 ["-m", "fixtures.scenes", "--out", "{tmp}/s"],
                                 ["scripts/demo.py", "--out", "{tmp}/d"],
                                 ["scripts/bench.py", "--section", "step", "--json",
                                  "{tmp}/b.json"]])
def test_every_entry_point_reports_missing_assets_in_one_line(cli, tmp_path) -> None:
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, fa.ENV_VAR: str(tmp_path / "gone")}
    proc = subprocess.run([sys.executable, *[a.format(tmp=tmp_path) for a in cli]], cwd=repo,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 8, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "gone" in lines[0] and "fix:" in lines[0]
    assert not (tmp_path / "o").exists() and not (tmp_path / "s").exists()


def test_loaded_meshes_match_manifest_and_keep_their_origin() -> None:
    rows = {r["file"]: r for r in csv.DictReader(
        (fa.assets_dir() / "MANIFEST.tsv").open(encoding="utf-8"), delimiter="\t")}
    for rel in fa.SIZING:
        v = fa.load_asset(rel).vertices
        ext = v.max(axis=0) - v.min(axis=0)
        want = [float(x) for x in rows[rel]["bbox_extent_blender_xyz"].split(" x ")]
        assert np.allclose(ext, want, atol=2e-3), (rel, ext, want)
        assert abs(v[:, 2].min()) < 1e-6, rel          # floor at z = 0
    desk = fa.load_asset("caysonverse/desk.glb").vertices
    assert np.linalg.norm(desk[:, :2].min(axis=0)) < 0.02       # corner origin kept
    chair = fa.load_asset("caysonverse/chairDesk.glb").vertices
    assert np.all(chair[:, :2].min(axis=0) > -1e-6)             # not recentred


def test_front_is_local_minus_y_for_chairs() -> None:
    """Oracle from MANIFEST.tsv (front -Y): the tall backrest sits on the +Y side."""
    for rel in CHAIRS:
        v = fa.load_asset(rel).vertices
        tall = v[v[:, 2] > 0.85 * v[:, 2].max()]
        centre_y = (v[:, 1].min() + v[:, 1].max()) / 2
        assert tall[:, 1].mean() > centre_y, rel


def test_life_size_scales() -> None:
    for rel in CHAIRS:
        s = fa.life_scale(rel)
        mesh = fa.load_asset(rel)
        seat = fa.seat_height(mesh.vertices, mesh.faces)
        assert 0.3 < seat / mesh.height < 0.6, rel      # the seat, not the backrest or feet
        assert abs(seat * s - 0.45) <= 0.05, rel
        assert 0.75 < mesh.height * s < 1.25, rel        # a chair's overall height
        width = np.ptp(mesh.vertices[:, 0]) * s
        assert 0.35 < width < 0.7, rel
    for rel in TABLES:
        s = fa.life_scale(rel)
        assert abs(fa.load_asset(rel).height * s - 0.75) <= 0.03, rel
    # MANIFEST: kenney table 0.948 tall -> 0.75 m
    assert fa.life_scale("kenney-cco/table.glb") == pytest.approx(0.75 / 0.9475, rel=1e-3)
    sofa = fa.load_asset("kenney-cco/loungeSofa.glb")
    assert fa.seat_height(sofa.vertices, sofa.faces) * fa.life_scale(sofa.rel) == \
        pytest.approx(0.42, abs=0.01)


def test_scale_lives_in_the_pose_not_the_vertices() -> None:
    a = arr("desk_chair", "correct")
    for name in a.names:
        assert a.meshes[name][0] is fa.load_asset(a.assets[name]).vertices
        _, _, scale = frames.decompose(a.canonical[name])
        assert np.allclose(scale, a.scales[name], atol=1e-12)


# --------------------------------------------------------------------- correct variants
@pytest.mark.parametrize("name", CORRECT)
def test_correct_variant_satisfies_target_spec(name: str) -> None:
    a = arr(name, "correct")
    spec = a.target_spec()
    assert spec["member_count"] == len(a.members)
    assert len(set(a.members)) == len(a.members) and a.anchor not in a.members
    # anchor at the canonical origin, identity orientation (scale only)
    anchor = a.canonical[a.anchor]
    assert np.allclose(anchor[:3, 3], 0) and np.allclose(anchor[:3, :3], np.eye(3) * anchor[0, 0])
    for m in a.members:
        assert abs(_clearance(a, m) - spec["clearance_m"]) <= 0.01, (m, _clearance(a, m))
        assert abs(_clearance(a, m) - spec["clearance_m"]) <= 1e-6, m   # exact by construction
        assert _facing_error(a, m) <= 0.5, (m, _facing_error(a, m))
        assert abs(a.canonical[m][2, 3]) < 1e-12                          # on the floor
        if a.fixture.layout == "edges":
            assert _edge_of(a, m) == a.slots[m]["edge"], m
    assert _spacing_deviation(a) <= 0.01
    # members do not collide with each other
    for i, m in enumerate(a.members):
        for o in a.members[i + 1:]:
            assert _poly(a, m).distance(_poly(a, o)) > 0.02, (m, o)
    # varied assets: not every member is the same model (where there are several)
    if len(a.members) > 2:
        assert len({a.assets[m] for m in a.members}) >= 3


def test_correct_patterns() -> None:
    lt5 = arr("long_table_5", "correct")
    counts = {}
    for m in lt5.members:
        counts[_edge_of(lt5, m)] = counts.get(_edge_of(lt5, m), 0) + 1
    assert sorted(counts.values()) == [1, 2, 2] and counts["+y"] == counts["-y"] == 2
    lt6 = arr("long_table_6", "correct")
    counts = {}
    for m in lt6.members:
        counts[_edge_of(lt6, m)] = counts.get(_edge_of(lt6, m), 0) + 1
    assert counts == {"+y": 2, "-y": 2, "+x": 1, "-x": 1}
    ring = arr("round_table_6", "correct")
    c = _anchor_centre(ring)
    radii = [np.linalg.norm(_centre(ring, m) - c) for m in ring.members]
    assert max(radii) - min(radii) < 1e-6
    ang = sorted(math.degrees(math.atan2(*(_centre(ring, m) - c)[::-1])) % 360
                 for m in ring.members)
    assert np.allclose(np.diff(ang), 60.0, atol=1e-6)
    for name in ("tv_row_3", "sofa_coffee", "desk_chair"):
        a = arr(name, "correct")
        assert {_edge_of(a, m) for m in a.members} == {"-y"}     # in front of the anchor


# --------------------------------------------------------------------- perturbed variants
def _worst(a, fn):
    return max(fn(a, m) for m in a.members)


@pytest.mark.parametrize("name,variant", [c for c in CASES if c[1] != "correct"])
def test_perturbed_variant_is_worse_on_its_attribute(name: str, variant: str) -> None:
    good, bad = arr(name, "correct"), arr(name, variant)
    c = good.target_spec()["clearance_m"]
    assert bad.names == good.names
    if variant == "facing_away":
        assert all(_facing_error(bad, m) >= 179.0 for m in bad.members)
    elif variant == "turned_90":
        assert all(abs(_facing_error(bad, m) - 90.0) <= 0.5 for m in bad.members)
    elif variant == "pushed_in":
        assert all(_clearance(bad, m) < 0 for m in bad.members)     # overlaps the anchor
        assert all(abs(specs.hull_signed_distance(bad.hull(m), bad.hull(bad.anchor))
                       - specs.PUSHED_IN_CLEARANCE) < 1e-6 for m in bad.members)
        assert _worst(bad, _facing_error) <= 0.5
    elif variant == "too_far":
        assert all(0.6 - 1e-6 <= _clearance(bad, m) - c <= 1.0 + 1e-6 for m in bad.members)
        assert _worst(bad, _facing_error) <= 0.5
    elif variant == "bunched":
        threshold = 0.2 if bad.fixture.layout == "ring" else 0.1
        assert _spacing_deviation(bad) >= threshold, _spacing_deviation(bad)
        assert all(abs(_clearance(bad, m) - c) <= 1e-6 for m in bad.members)
        assert _worst(bad, _facing_error) <= 0.5
    else:  # pragma: no cover
        pytest.fail(f"untested variant {variant}")


def test_documented_skips_only() -> None:
    skipped = {(n, v) for n, fx in specs.FIXTURES.items() for v in fx.skip}
    assert skipped == {("sofa_coffee", "facing_away")}
    assert "sofa_coffee" in specs.__doc__ and "facing_away" in specs.__doc__
    with pytest.raises(KeyError, match="symmetric"):
        specs.arrange("sofa_coffee", "facing_away")
    assert len(CASES) == len(specs.FIXTURES) * len(specs.VARIANTS) - 1


# --------------------------------------------------------------------- metadata
@pytest.mark.parametrize("name,variant", CASES)
def test_metadata_frames(name: str, variant: str) -> None:
    from island_tools.schemas import parse_target_spec

    a = arr(name, variant)
    meta = a.metadata()
    m_anchor = np.array(meta["M_anchor_4x4"])
    m_inv = np.array(meta["M_inv_4x4"])
    assert meta["anchor_id"] == a.anchor and meta["members"][0] == a.anchor
    assert np.allclose(m_inv @ m_anchor, np.eye(4), atol=1e-9)
    assert np.allclose(m_anchor @ m_inv, np.eye(4), atol=1e-9)
    assert np.allclose(m_anchor[:3, :3] @ m_anchor[:3, :3].T, np.eye(3), atol=1e-12)  # rigid
    tx, ty, yaw = a.fixture.world
    world_anchor = frames.translation((tx, ty, 0)) @ frames.rot_z(yaw) @ \
        specs.scale_matrix(a.scales[a.anchor])
    assert np.allclose(a.world[a.anchor], world_anchor, atol=1e-9)
    assert np.allclose(frames.rigid(world_anchor), m_anchor, atol=1e-9)
    for n in a.names:
        canon = np.array(meta["canonical_poses"][n])
        assert np.allclose(m_anchor @ canon, a.world[n], atol=1e-9), n
        assert np.allclose(m_inv @ a.world[n], canon, atol=1e-9), n
    parse_target_spec(a.target_spec(), "target_spec.json", len(a.members))


# ------------------------------------------------------------- island_tools.measure.geometry
@cache
def geometry_doc(name: str, variant: str) -> dict:
    from island_tools.measure.geometry import compute_geometry

    a = arr(name, variant)
    # MANIFEST.tsv oracle: every member's front is local -Y (the symmetric coffee table
    # carries forward_axis = -Y as a property).
    axes = {"members": {m: {"axis_local": [0.0, -1.0]} for m in a.members}}
    return compute_geometry({n: a.meshes[n] for n in a.names}, a.canonical, a.anchor,
                            a.target_spec(), axes, 0)


@pytest.mark.parametrize("name,variant", CASES)
def test_island_tools_geometry_agrees(name: str, variant: str) -> None:
    a = arr(name, variant)
    g = geometry_doc(name, variant)
    group, members = g["group"], g["members"]
    c = a.target_spec()["clearance_m"]
    assert group["pattern"]["match"] is True
    assert g["anchor"]["shape"] == ("round" if a.fixture.layout == "ring" else "rect")
    for m in a.members:
        assert members[m]["edge"] == a.slots[m].get("edge", "ring"), m
        mine = _clearance(a, m)
        if mine >= 0:                       # gaps: two implementations, same number
            assert members[m]["clearance_m"] == pytest.approx(mine, abs=2e-6), m
    face = [members[m]["facing_error_deg"] for m in a.members]
    clr = [members[m]["clearance_m"] for m in a.members]
    tv = a.target_spec()["anchor_role"] == "tv_stand"
    dev = (group["spacing"]["ring_gap_cv"] if a.fixture.layout == "ring"
           else group["spacing"]["max_deviation_m"])
    if variant == "correct":
        _square(a, face, tv)
        assert group["clearance_error_max_m"] <= 0.01
        assert dev <= 0.01
        assert group["penetration_pairs"] == 0
    elif variant == "facing_away":
        if tv:
            # a seat watching a TV may face anywhere from square to the screen to its
            # centre (geometry.watch_facing): turned round, an off-axis seat's error is
            # 180 deg less the angle between those two directions
            assert max(face) >= 179.0 and min(face) >= 150.0
        else:
            assert min(face) >= 179.0
    elif variant == "turned_90":
        if tv:   # off-axis seats: 90 deg give or take the watching range (above)
            assert min(abs(f - 90.0) for f in face) <= 0.5
            assert all(abs(f - 90.0) <= 20.0 for f in face)
        else:
            assert all(abs(f - 90.0) <= 0.5 for f in face)
    elif variant == "pushed_in":
        assert max(clr) < 0 and group["clearance_violations"] == len(a.members)
    elif variant == "too_far":
        assert min(clr) >= c + 0.6 - 1e-5
        _square(a, face, tv)
    elif variant == "bunched":
        assert dev >= (0.2 if a.fixture.layout == "ring" else 0.1)
        assert group["clearance_error_max_m"] <= 1e-5
        _square(a, face, tv)


def _square(a: specs.Arrangement, face: list[float], tv: bool) -> None:
    """Members set square to their edge: facing error 0; a seat watching a TV whose
    screen's centre is more than 15 deg aside is off by the rest (geometry.watch_arc)."""
    for m, err in zip(a.members, face):
        if not tv:
            assert err <= 0.5, m
            continue
        to_screen = _centre(a, a.anchor) - _centre(a, m)
        aside = math.degrees(math.acos(float(np.clip(
            _forward(a, m) @ to_screen / np.linalg.norm(to_screen), -1.0, 1.0))))
        assert err == pytest.approx(max(0.0, aside - 15.0), abs=0.5), m


# --------------------------------------------------------------------- build through bpy
@pytest.mark.bpy
def test_build_fixture_reads_back_from_saved_blend(tmp_path) -> None:
    import bpy

    from fixtures.build import build_fixture
    from island_tools.schemas import load_metadata, load_target_spec
    from worker.launch import resolve_blender

    backend = resolve_blender("bpy", None)
    group = build_fixture("round_table_6", "correct", tmp_path, backend=backend)
    assert group == tmp_path / "round_table_6__correct"
    assert sorted(p.name for p in group.iterdir()) == [
        "fixture.json", "island.blend", "metadata.json", "target_spec.json"]
    meta = load_metadata(group / "metadata.json")
    load_target_spec(group / "target_spec.json", len(meta.refined_members))
    a = arr("round_table_6", "correct")

    bpy.ops.wm.read_factory_settings(use_empty=True)          # forget the built scene
    bpy.ops.wm.open_mainfile(filepath=str(group / "island.blend"), load_ui=False,
                             use_scripts=False)
    names = {o.name for o in bpy.data.objects}
    assert names == set(a.names)
    for n in a.names:
        obj = bpy.data.objects[n]
        got = np.array([list(row) for row in obj.matrix_world])
        assert np.allclose(got, meta.canonical_poses[n], atol=1e-6), n
        verts = np.empty(len(obj.data.vertices) * 3)
        obj.data.vertices.foreach_get("co", verts)
        want = a.meshes[n][0]
        assert verts.reshape(-1, 3).shape == want.shape, n
        assert np.allclose(verts.reshape(-1, 3), want, atol=1e-5), n
