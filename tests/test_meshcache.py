"""What is derived from a mesh is derived once per distinct mesh in a process.

``meshcache.mesh_digest`` keys a mesh at float32 (Blender's precision): the same chair
exported through two different parent matrices differs by float64 noise and must share one
key, while a real edit of a vertex (a millimetre) must not. ``units.render_arrays`` (bpy
tier: the worker module imports bpy) clusters a high-poly unit once per distinct mesh.
"""
from __future__ import annotations

import numpy as np
import pytest

from island_tools.measure import meshcache


def _mesh(n: int = 400, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    v = rng.uniform(-0.4, 0.4, (n, 3))
    f = rng.integers(0, n, (2 * n, 3)).astype(np.int32)
    return v, f


def test_digest_ignores_float64_noise_but_not_real_edits() -> None:
    v, f = _mesh()
    v32 = v.astype(np.float32).astype(float)          # what Blender holds
    yaw = np.radians(37.0)
    rot = np.array([[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]])
    through_parent = (v32 @ rot.T + [1.3, -2.1, 0.0] - [1.3, -2.1, 0.0]) @ rot  # round trip
    assert not np.array_equal(through_parent, v32)    # float64 noise is really there
    assert np.abs(through_parent - v32).max() < 1e-12
    assert meshcache.mesh_digest(through_parent, f) == meshcache.mesh_digest(v32, f)
    edited = v32.copy()
    edited[7, 0] += 1e-3
    assert meshcache.mesh_digest(edited, f) != meshcache.mesh_digest(v32, f)
    assert meshcache.mesh_digest(v32, f[::-1]) != meshcache.mesh_digest(v32, f)


def test_remembered_computes_once_per_key() -> None:
    calls: list[int] = []
    key = meshcache.mesh_digest(*_mesh(seed=11))
    for _ in range(3):
        out = meshcache.remembered("test.kind", key, lambda: calls.append(1) or len(calls))
    assert calls == [1] and out == 1


@pytest.mark.bpy
def test_render_proxy_clustered_once_per_distinct_mesh(monkeypatch) -> None:
    pytest.importorskip("bpy")
    from worker import units

    v, f = _mesh(n=3000, seed=5)
    clustered: list[int] = []
    real = units._clustered

    def counting(*args):
        clustered.append(1)
        return real(*args)

    monkeypatch.setattr(units, "_clustered", counting)
    a = units.render_arrays(v, f, max_triangles=500)
    noisy = v * (1.0 + 1e-15)                                   # a sibling with float noise
    assert not np.array_equal(noisy, v)
    b = units.render_arrays(noisy, f, max_triangles=500)
    assert clustered == [1] and a is b
    assert len(a[1]) <= 500 and len(a[0]) < len(v)
    units.render_arrays(v * 1.01, f, max_triangles=500)          # a different mesh
    assert clustered == [1, 1]
    small_v, small_f = _mesh(n=50, seed=2)
    sv, sf = units.render_arrays(small_v, small_f, max_triangles=500)   # drawn as is
    assert np.array_equal(sv, small_v) and np.array_equal(sf, small_f)


def test_load_shared_reads_a_file_version_once_and_shares_it_read_only(tmp_path) -> None:
    path = tmp_path / "meshes.npz"
    v, f = _mesh(seed=21)
    meshcache.save(path, {"chair": (v, f)}, {"chair": {"forward_axis": "-Y"}})
    a, props_a = meshcache.load_shared(path)
    b, props_b = meshcache.load_shared(path)
    assert a["chair"][0] is b["chair"][0]                     # read once
    assert np.array_equal(a["chair"][0], v) and np.array_equal(a["chair"][1], f)
    with pytest.raises(ValueError):                           # shared, so nobody may edit it
        a["chair"][0][0, 0] = 1.0
    props_a["chair"]["forward_axis"] = "+X"                   # the caller's own copy
    assert props_b == {"chair": {"forward_axis": "-Y"}}
    digest = meshcache.mesh_digest(*a["chair"])
    assert meshcache.mesh_digest(*b["chair"]) == digest == meshcache.mesh_digest(v, f)
    # A rebuilt iter_0 writes a new file: read again, never the stale arrays.
    moved = v + [0.5, 0.0, 0.0]
    meshcache.save(path, {"chair": (moved, f)})
    c, _ = meshcache.load_shared(path)
    assert np.array_equal(c["chair"][0], moved)
    assert meshcache.mesh_digest(*c["chair"]) != digest


def test_what_is_derived_does_not_depend_on_which_variant_came_first(monkeypatch) -> None:
    """Two float-noise variants of one mesh share a key; the hull, pivots and BVH vertices a
    process keeps for it must be the same whichever it met first (seen: the add-on in a
    long-lived process wrote a geometry.json differing in the 6th decimal from the CLI's)."""
    from island_tools.measure.geometry import GeometryContext

    raw, f = _mesh(n=300, seed=8)
    raw = raw + [0.0, 0.0, 0.5]                          # float64 values, not float32 ones
    blender = raw.astype(np.float32).astype(float)       # the same mesh as Blender holds it
    assert not np.array_equal(raw, blender)
    assert meshcache.mesh_digest(raw, f) == meshcache.mesh_digest(blender, f)
    anchor = (np.array([[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0], [-1, -1, 0.7],
                        [1, -1, 0.7], [1, 1, 0.7], [-1, 1, 0.7]], dtype=float),
              np.array([[0, 1, 2], [0, 2, 3], [4, 5, 6], [4, 6, 7]]))
    axes = {"anchor": {"axis_local": None, "status": "symmetric"},
            "members": {"chair": {"axis_local": [0.0, -1.0], "status": "front"}}}

    def kept(first: np.ndarray, then: np.ndarray):
        monkeypatch.setattr(meshcache, "_REMEMBERED", {})
        GeometryContext({"table": anchor, "chair": (first, f)}, "table", axes)
        data = GeometryContext({"table": anchor, "chair": (then, f)}, "table", axes)._data
        chair = data["chair"]
        return chair.vertices, chair.local_hull, chair.pivot_local, chair.seat_local

    for got, want in zip(kept(raw, blender), kept(blender, blender)):
        assert np.array_equal(got, want)


def test_identical_units_are_stored_once_and_share_read_only_arrays(tmp_path) -> None:
    rng = np.random.default_rng(3)
    chair = (rng.normal(size=(5000, 3)), rng.integers(0, 5000, size=(9000, 3)))
    table = (rng.normal(size=(40, 3)), rng.integers(0, 40, size=(60, 3)))
    near = (chair[0] + 1e-12, chair[1])          # not the same arrays: stored on its own
    one, six = tmp_path / "one.npz", tmp_path / "six.npz"
    meshcache.save(one, {"table": table, "chair_1": chair})
    meshcache.save(six, {"table": table, **{f"chair_{i}": chair for i in range(1, 6)},
                         "chair_6": near})
    # five identical chairs cost one chair (+ the near copy), not five
    assert six.stat().st_size < 2.2 * one.stat().st_size
    meshes, _ = meshcache.load(six)
    assert list(meshes) == ["table", *(f"chair_{i}" for i in range(1, 7))]
    for i in range(1, 6):
        v, f = meshes[f"chair_{i}"]
        assert np.array_equal(v, chair[0]) and np.array_equal(f, chair[1])
        assert v is meshes["chair_1"][0] and not v.flags.writeable
    assert np.array_equal(meshes["chair_6"][0], near[0])
    assert meshes["chair_6"][0] is not meshes["chair_1"][0]


def test_an_alias_to_a_later_or_missing_entry_is_malformed(tmp_path) -> None:
    import io
    import json

    path = tmp_path / "m.npz"
    buf = io.BytesIO()
    np.savez(buf, names=np.array(["a", "b"]), v1=np.zeros((3, 3)),
             f1=np.zeros((1, 3), dtype=np.int32), aliases_json=np.array(json.dumps({"0": 1})))
    path.write_bytes(buf.getvalue())
    with pytest.raises(ValueError, match="alias"):
        meshcache.load(path)


def test_float32_coordinates_are_stored_at_that_width_and_load_back_exactly(tmp_path) -> None:
    """Blender's coordinates are float32 values: the cache stores them in half the bytes,
    and anything float32 cannot hold exactly stays float64; both load as the same float64."""
    rng = np.random.default_rng(5)
    blender = rng.normal(size=(2000, 3)).astype(np.float32).astype(np.float64)
    noisy = blender + 1e-12                     # a unit composed through float64 matrices
    faces = rng.integers(0, 2000, size=(3000, 3))
    path = tmp_path / "m.npz"
    meshcache.save(path, {"a": (blender, faces), "b": (noisy, faces)})
    with np.load(path) as raw:
        stored = {str(n): raw[f"v{i}"].dtype for i, n in enumerate(raw["names"])}
    assert stored == {"a": np.float32, "b": np.float64}
    meshes, _ = meshcache.load(path)
    for name, want in (("a", blender), ("b", noisy)):
        v, f = meshes[name]
        assert v.dtype == np.float64 and np.array_equal(v, want) and np.array_equal(f, faces)
    wide = tmp_path / "wide.npz"
    np.savez(wide, names=np.array(["a"]), v0=blender, f0=faces.astype(np.int32),
             props_json=np.array("{}"))              # a cache written before: float64
    assert np.array_equal(meshcache.load(wide)[0]["a"][0], blender)


def test_a_shared_file_version_is_hashed_once_at_load(tmp_path, monkeypatch) -> None:
    path = tmp_path / "s.npz"
    chair = _mesh(3000, seed=21)
    meshcache.save(path, {"chair_1": chair, "chair_2": chair, "table": _mesh(50, seed=22)})
    meshes, _ = meshcache.load_shared(path)
    calls: list[int] = []
    real = meshcache._mesh_digest
    monkeypatch.setattr(meshcache, "_mesh_digest",
                        lambda v, f: calls.append(1) or real(v, f))
    keys = {n: meshcache.mesh_digest(*meshes[n]) for n in meshes}
    assert calls == [] and keys["chair_1"] == keys["chair_2"] == real(*chair)
    fresh = (meshes["table"][0].copy(), meshes["table"][1].copy())   # writable: hashed
    assert meshcache.mesh_digest(*fresh) == keys["table"] and calls == [1]


def test_an_equal_mesh_in_another_cache_file_is_held_once(tmp_path) -> None:
    """The same chair in two groups' caches: ``load_shared`` hands out one array pair for
    both (a 16-group scene holds each distinct mesh once); a chair differing by float64
    noise only (one float32 digest) keeps its own exact arrays."""
    chair, table = _mesh(3000, seed=31), _mesh(40, seed=32)
    noisy = (chair[0] + 1e-13, chair[1])
    for name, mesh in (("a", chair), ("b", chair), ("c", noisy)):
        meshcache.save(tmp_path / f"{name}.npz", {"table": table, "chair_1": mesh})
    a, _ = meshcache.load_shared(tmp_path / "a.npz")
    b, _ = meshcache.load_shared(tmp_path / "b.npz")
    c, _ = meshcache.load_shared(tmp_path / "c.npz")
    assert a["chair_1"][0] is b["chair_1"][0] and a["chair_1"][1] is b["chair_1"][1]
    assert a["table"][0] is b["table"][0]
    assert c["chair_1"][0] is not a["chair_1"][0]
    assert np.array_equal(c["chair_1"][0], noisy[0]) and np.array_equal(b["chair_1"][0], chair[0])
    assert not b["chair_1"][0].flags.writeable
