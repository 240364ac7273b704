"""The front corpus (fixtures.fronts_corpus), its frozen split and the parametric generator.

Pure tier, plus one bpy-tier test (Blender's own glTF importer against the trimesh loading).
The shared corpus (``<repo>/../shared/corpus`` or ``$ISLAND_REFINER_CORPUS``) is read in
place; tests needing it skip with the reason when it is absent, and FAIL when
``$ISLAND_REFINER_REQUIRE_CORPUS`` or ``CI=true`` is set. No detector accuracy is asserted
here: the truths and the loading are."""
from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from fixtures import fronts_corpus as fc
from fixtures import parametric as pm

SEATING_AND_BEDS = {"bed", "sofa", "armchair", "dining_chair", "office_chair_swivel"}


def _shared_root() -> Path:
    reason = fc.shared_corpus_status()
    if reason:
        if fc.corpus_required():
            pytest.fail(f"{reason} (required: ${fc.REQUIRE_ENV} or CI=true)")
        pytest.skip(reason)
    return fc.shared_corpus_dir()


def _manifest(root: Path) -> list[dict[str, str]]:
    with (root / "MANIFEST.tsv").open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def _rot(deg: float) -> np.ndarray:
    a = np.radians(deg)
    return np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0, 0, 1.0]])


def _maps_onto_itself(v: np.ndarray, deg: float, tol: float = 1e-6) -> bool:
    """Every vertex rotated by ``deg`` about the vertical axis through the origin (the
    footprint centre) lands on a vertex."""
    p = v
    q = p @ _rot(deg).T
    d = np.sqrt(((q[:, None, :] - p[None, :, :]) ** 2).sum(-1)).min(axis=1)
    return bool(d.max() < tol)


# --------------------------------------------------------------------------------------------
# the split file


def test_split_file_rules_are_frozen_and_disjoint():
    spec = json.loads(fc.SPLIT_FILE.read_text(encoding="utf-8"))
    assert spec["frozen_utc"] and "tuned" in spec["note"] and "untouched" in spec["note"]
    parts = spec["parts"]
    assert set(parts) == {"tuned", "untouched"}
    # shared files: explicit, disjoint, prefixes by creator, a SHA-256 each
    tuned, untouched = set(parts["tuned"]["shared_files"]), set(parts["untouched"]["shared_files"])
    assert tuned and untouched and not tuned & untouched
    assert all(n.startswith(("kaykit_", "osrf_")) for n in tuned)
    assert all(n.startswith(("basemesh_", "fuel_")) for n in untouched)
    for part in parts.values():
        for info in part["shared_files"].values():
            assert len(info["sha256"]) == 64 and int(info["sha256"], 16) >= 0
    # parametric seed ranges are disjoint; assets all tuned
    assert list(fc.parametric_seeds("tuned")) == list(range(0, 30))
    assert list(fc.parametric_seeds("untouched")) == list(range(1000, 1030))
    assert tuple(spec["parametric_categories"]) == pm.CATEGORIES
    for creator in ("kenney-cco", "caysonverse", "infinigen"):
        assert fc.split_of("assets", creator) == "tuned"
    # a piece matching no rule is an error
    for source, key in (("parametric", 500), ("parametric", 30), ("assets", "polyhaven"),
                        ("shared", "quaternius_chair.glb")):
        with pytest.raises(fc.FrontsSplitError):
            fc.split_of(source, key)


def test_every_piece_is_in_exactly_one_part_and_the_shas_match():
    root = _shared_root()
    spec = fc.split_spec()
    every = fc.front_pieces()
    names = [p.name for p in every]
    assert len(names) == len(set(names))
    tuned = {p.name for p in fc.front_pieces("tuned")}
    untouched = {p.name for p in fc.front_pieces("untouched")}
    assert not tuned & untouched and tuned | untouched == set(names)
    for p in every:
        assert p.split in fc.SPLITS
        if p.source == "assets":
            assert p.split == "tuned"
        if p.source == "parametric":
            assert p.seed in fc.parametric_seeds(p.split)
    # the shared manifest is covered exactly by the two explicit lists, with matching SHAs
    files = {Path(r["file"]).name for r in _manifest(root)}
    listed = {n: (part, info) for part in fc.SPLITS
              for n, info in spec["parts"][part]["shared_files"].items()}
    assert files == set(listed)
    for name, (part, info) in listed.items():
        digest = hashlib.sha256((root / "models" / name).read_bytes()).hexdigest()
        assert digest == info["sha256"], name
        assert f"shared:{Path(name).stem}" in (tuned if part == "tuned" else untouched)
    counts = {(p.source, p.split) for p in every}
    assert counts == {("assets", "tuned"), ("shared", "tuned"), ("shared", "untouched"),
                      ("parametric", "tuned"), ("parametric", "untouched")}


def test_a_changed_or_unlisted_shared_model_is_an_error(tmp_path, monkeypatch):
    root = _shared_root()
    copy = tmp_path / "corpus"
    shutil.copytree(root / "models", copy / "models")
    shutil.copy(root / "MANIFEST.tsv", copy / "MANIFEST.tsv")
    monkeypatch.setenv(fc.CORPUS_ENV, str(copy))
    assert len([p for p in fc.front_pieces(sources=("shared",))]) == len(_manifest(root))
    victim = copy / "models" / "kaykit_chair_A.glb"
    victim.write_bytes(victim.read_bytes() + b"\0")
    with pytest.raises(fc.FrontsSplitError, match="SHA-256"):
        fc.front_pieces(sources=("shared",))
    shutil.copy(root / "models" / "kaykit_chair_A.glb", victim)
    text = (copy / "MANIFEST.tsv").read_text(encoding="utf-8").splitlines()
    extra = text[1].split("\t")
    extra[0] = "models/kaykit_chair_Z.glb"
    shutil.copy(victim, copy / "models" / "kaykit_chair_Z.glb")
    (copy / "MANIFEST.tsv").write_text("\n".join([*text, "\t".join(extra)]) + "\n",
                                       encoding="utf-8")
    with pytest.raises(fc.FrontsSplitError, match="kaykit_chair_Z"):
        fc.front_pieces(sources=("shared",))


def test_missing_shared_corpus_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv(fc.CORPUS_ENV, str(tmp_path / "nowhere"))
    monkeypatch.delenv(fc.REQUIRE_ENV, raising=False)
    monkeypatch.delenv("CI", raising=False)
    reason = fc.shared_corpus_status()
    assert reason and "../shared/corpus not found" in reason and fc.CORPUS_ENV in reason
    with pytest.raises(fc.SharedCorpusMissingError, match="ISLAND_REFINER_CORPUS"):
        fc.front_pieces(sources=("shared",))
    assert fc.front_pieces(sources=("shared",), missing_shared="skip") == []
    monkeypatch.setenv("CI", "true")
    with pytest.raises(fc.SharedCorpusMissingError):
        fc.front_pieces(sources=("shared",), missing_shared="skip")


# --------------------------------------------------------------------------------------------
# the parametric generator

SEEDS = (0, 1, 7, 29, 1000, 1013)


def test_parametric_is_deterministic_per_seed():
    for category in pm.CATEGORIES:
        a, b = pm.generate(category, 3), pm.generate(category, 3)
        assert np.array_equal(a.vertices, b.vertices) and np.array_equal(a.faces, b.faces)
        assert a.params == b.params
        c = pm.generate(category, 4)
        assert a.vertices.shape != c.vertices.shape or not np.allclose(a.vertices, c.vertices)
    with pytest.raises(KeyError):
        pm.generate("wardrobe", 0)


@pytest.mark.parametrize("category", pm.CATEGORIES)
def test_parametric_meshes_are_valid_and_truths_sane(category):
    for seed in SEEDS:
        p = pm.generate(category, seed)
        v, f = p.vertices, p.faces
        assert p.name == f"{category}_s{seed}" and p.source == "parametric" and p.seed == seed
        assert v.ndim == 2 and v.shape[1] == 3 and v.dtype == np.float64
        assert f.ndim == 2 and f.shape[1] == 3 and np.issubdtype(f.dtype, np.integer)
        assert np.isfinite(v).all() and f.min() >= 0 and f.max() < len(v)
        assert v[:, 2].min() == 0.0                       # stands on the floor
        ext = v.max(0) - v.min(0)
        assert (ext > 0.1).all() and (ext < 3.0).all()    # metres, furniture-sized
        centre = (v.max(0) + v.min(0)) / 2
        assert np.abs(centre[:2]).max() < 0.08            # origin at the footprint centre
        tri = v[f]
        area = np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
        assert (area > 1e-12).all()
        if category in pm.FRONTED:
            assert p.front == (0.0, -1.0, 0.0) and p.symmetry_order == 1
            assert abs(np.linalg.norm(p.front) - 1.0) < 1e-12
        else:
            assert p.front is None and p.symmetry_order in (2, 4, "continuous")


@pytest.mark.parametrize("category", ["bench", "table_rect", "stool_square", "table_square",
                                      "table_round", "stool_round"])
def test_parametric_symmetry_orders_are_true(category):
    for seed in SEEDS:
        p = pm.generate(category, seed)
        v = np.asarray(p.vertices)
        if p.symmetry_order == "continuous":       # every part a coaxial n-gon: no direction
            n = p.params["segments"]
            assert n >= 40 and _maps_onto_itself(v, 360.0 / n), (category, seed)
            continue
        assert _maps_onto_itself(v, 180.0), (category, seed)
        if p.symmetry_order == 2:
            assert not _maps_onto_itself(v, 90.0, tol=1e-3), (category, seed)
        else:
            assert _maps_onto_itself(v, 90.0), (category, seed)


@pytest.mark.parametrize("category", ["cabinet", "nightstand", "tv_cabinet"])
def test_parametric_case_hardware_is_on_the_front(category):
    """Knobs and handles protrude at -Y (the true front), below the top, and the back stays
    one flat plane: judged from the vertices alone (the carcass spans -y_back..y_back)."""
    with_hw = 0
    for seed in range(0, 30):
        p = pm.generate(category, seed)
        v = np.asarray(p.vertices)
        y_back = v[:, 1].max()
        at_back = np.isclose(v[:, 1], y_back, atol=1e-9)
        assert at_back.sum() >= 4
        if p.params.get("knobs", 0) > 0:
            with_hw += 1
            body_front = -y_back          # the carcass is centred: its front is at -y_back
            below_top = v[:, 2] < v[:, 2].max() - 0.045
            proud = (v[:, 1] < body_front - 0.012) & below_top
            assert proud.any(), (category, seed)
            assert not ((v[:, 1] > y_back + 1e-9) & below_top).any(), (category, seed)
    assert with_hw >= 5


@pytest.mark.parametrize("category", ["office_chair", "dining_chair", "bed", "sofa"])
def test_parametric_back_is_behind(category):
    """The tallest parts (backrest, headboard) lie at +Y, opposite the true front."""
    for seed in SEEDS:
        p = pm.generate(category, seed)
        v = np.asarray(p.vertices)
        top = v[:, 2] > v[:, 2].max() * 0.9
        centre_y = (v[:, 1].max() + v[:, 1].min()) / 2
        assert (v[top, 1].mean() - centre_y) * p.front[1] < 0, (category, seed)


# The parametric pieces of both parts, vertices rounded to 1e-6 m (same on numpy 1.26 and
# 2.x). A generator change changes the corpus, the tuned AND the untouched part: make it
# deliberately (announce it, re-record the baseline), then update this digest.
PARAMETRIC_DIGEST = "d0cb4ffda6176b08fb6936474a4ec7395178162d6c8eee3096cf62f4134748b3"


def test_parametric_corpus_is_frozen():
    h = hashlib.sha256()
    for category in pm.CATEGORIES:
        for seed in [*fc.parametric_seeds("tuned"), *fc.parametric_seeds("untouched")]:
            p = pm.generate(category, seed)
            h.update(np.round(p.vertices, 6).astype("<f8").tobytes())
            h.update(p.faces.astype("<i8").tobytes())
    assert h.hexdigest() == PARAMETRIC_DIGEST


def test_office_chair_star_turns_against_the_seat():
    angles = [pm.generate("office_chair", s).params["star_angle_deg"] for s in range(10)]
    assert np.ptp(angles) > 20.0


# --------------------------------------------------------------------------------------------
# the shared corpus, loaded in Blender's frame


def test_shared_loader_is_in_blenders_frame():
    root = _shared_root()
    pieces = {p.name: p for p in fc.front_pieces(sources=("shared",))}
    for row in _manifest(root):
        name = f"shared:{Path(row['file']).stem}"
        piece = pieces[name]
        v, f = piece.load()
        assert np.isfinite(v).all() and f.max() < len(v)
        ext = v.max(0) - v.min(0)
        want_ext = np.array([float(x) for x in row["extent_blender_xyz_m"].split("x")])
        want_min = np.array([float(x) for x in row["bbox_min_blender"].split(",")])
        assert np.allclose(ext, want_ext, atol=2e-3), name
        assert np.allclose(v.min(0), want_min, atol=2e-3), name
        assert abs(v[:, 2].min()) < 1e-3, name
        assert len(f) == int(row["triangles"]), name
        if piece.front is not None:
            assert abs(np.linalg.norm(piece.front) - 1.0) < 1e-9 and piece.front[2] == 0.0
            assert piece.symmetry_order == 1
        if row["category"] in SEATING_AND_BEDS:
            # the headboard / backrest (the top quarter of the height) is behind: opposite
            # the true front, relative to the bbox centre
            top = v[:, 2] > v[:, 2].max() * 0.75
            centre = (v.max(0) + v.min(0)) / 2
            offset = (v[top, :2].mean(0) - centre[:2]) @ np.asarray(piece.front[:2])
            assert offset < 0, name


def test_shared_orders_only_where_evident():
    _shared_root()
    orders = {p.name: p.symmetry_order for p in fc.front_pieces(sources=("shared",))
              if p.front is None}
    assert orders["shared:basemesh_square_table"] == 4
    assert orders["shared:osrf_table"] == 2 and orders["shared:kaykit_table_medium_long"] == 2
    assert orders["shared:basemesh_office_desk"] is None
    assert orders["shared:fuel_coffeetable"] is None      # round top, X-crossed legs


# --------------------------------------------------------------------------------------------
# bpy tier: Blender's own glTF importer agrees with the trimesh loading

BPY_MODELS = ("basemesh_office_chair", "osrf_bookshelf", "kaykit_bed_double_A")  # 7, 7, 1 objects


@pytest.mark.bpy
def test_blender_gltf_import_matches_the_trimesh_loading():
    import bpy

    root = _shared_root()
    pieces = {p.name: p for p in fc.front_pieces(sources=("shared",))}
    for stem in BPY_MODELS:
        bpy.ops.wm.read_factory_settings(use_empty=True)
        bpy.ops.import_scene.gltf(filepath=str(root / "models" / f"{stem}.glb"))
        depsgraph = bpy.context.evaluated_depsgraph_get()
        world = []
        for obj in bpy.context.scene.objects:
            if obj.type != "MESH":
                continue
            ev = obj.evaluated_get(depsgraph)
            mesh = ev.to_mesh()
            co = np.empty(len(mesh.vertices) * 3)
            mesh.vertices.foreach_get("co", co)
            m = np.array([list(r) for r in ev.matrix_world])
            co = co.reshape(-1, 3)
            world.append(co @ m[:3, :3].T + m[:3, 3])
            ev.to_mesh_clear()
        assert world, stem
        got = np.concatenate(world)
        v, _ = pieces[f"shared:{stem}"].load()
        assert np.allclose(got.min(0), v.min(0), atol=1e-4), stem
        assert np.allclose(got.max(0), v.max(0), atol=1e-4), stem
    bpy.ops.wm.read_factory_settings(use_empty=True)


# --------------------------------------------------------------------------------------------
# the bench's verdicts (a stub detector: no accuracy is measured here)


def _stub(status, axis=None, order=None, attribute=False):
    from types import SimpleNamespace

    def detect(vertices, faces):
        detail = {} if order is None or attribute else {"symmetry": {"order": order}}
        found = SimpleNamespace(status=status, axis_local=axis, confidence=0.5, detail=detail,
                                method="stub")
        if attribute:
            found.symmetry_order = order
        return found
    return detect


def test_bench_verdicts_and_columns(monkeypatch):
    import argparse

    from scripts.benchmarks import fronts as bf

    cab = next(p for p in fc.front_pieces("tuned", sources=("parametric",))
               if p.name == "parametric:cabinet_s0")
    table = next(p for p in fc.front_pieces("tuned", sources=("parametric",))
                 if p.name == "parametric:table_square_s0")
    shared_like = fc.FrontPiece(name="x:cab", category="cabinet", source="shared",
                                creator="x", split="tuned", front=cab.front, symmetry_order=1,
                                loader=cab.loader)
    rows = bf.evaluate(shared_like, 4, _stub("front", np.array([1.0, 0.0, 0.0])))
    assert [r["yaw"] for r in rows] == [0.0, 90.0, 180.0, 270.0]
    assert [r["verdict"] for r in rows] == ["wrong", "ok", "wrong", "wrong"]
    assert [round(r["error_deg"]) for r in rows] == [90, 0, 90, 180]
    assert {r["verdict"] for r in bf.evaluate(cab, 3, _stub("symmetric"))} == {"wrong"}
    assert {r["verdict"] for r in bf.evaluate(cab, 3, _stub("undetermined"))} == {"undetermined"}
    assert {r["verdict"] for r in bf.evaluate(table, 3, _stub("symmetric"))} == {"ok"}
    assert {r["verdict"] for r in bf.evaluate(table, 3, _stub("front", (0, 1, 0)))} == {"wrong"}
    # the order column: from detail["symmetry"]["order"] or an attribute, n/a when absent
    monkeypatch.setattr(fc, "shared_corpus_status", lambda: None)   # not this test's subject
    n = bf.PARAMETRIC_POSES
    for stub, cell in ((_stub("symmetric", order=4), f"{n}/{n}"),
                       (_stub("symmetric", order=2, attribute=True), f"0/{n}"),
                       (_stub("symmetric"), f"n/a ({n} known)")):
        monkeypatch.setattr(fc, "front_pieces", lambda part, missing_shared="skip":
                            [table] if part == "tuned" else [])
        out = bf.run(argparse.Namespace(quick=False, split="tuned"), detect=stub)
        (tab,) = out["tables"]
        assert tab["title"] == "TUNED split" and tab["columns"] == bf.COLUMNS
        row = next(r for r in tab["rows"] if r[0] == "parametric:table_square")
        assert row[1:6] == [1, n, n, 0, 0]
        assert row[bf.COLUMNS.index("order ok / known")] == cell
    monkeypatch.setattr(fc, "front_pieces", lambda part, missing_shared="skip": [table])
    out = bf.run(argparse.Namespace(quick=True, split="both"), detect=_stub("symmetric"))
    assert [t["title"] for t in out["tables"]] == [
        "TUNED split", "UNTOUCHED split (never used for tuning)"]
    assert "per_piece" in out["data"]["untouched"]      # untouched: totals only
    assert out["columns"][0] == "split" and {r[0] for r in out["rows"]} == set(fc.SPLITS)
