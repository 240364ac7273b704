"""The per-group mesh cache ``<group>/meshes.npz`` (numpy + stdlib; the worker writes it).

Layout: ``names`` (1-D str array of unit roots), ``v{i}`` (n, 3) vertices of the
furniture unit rooted at ``names[i]`` in the root's LOCAL frame (the evaluated geometry of
the root and its subtree, instances and modifiers included, *before* the root's
matrix_world; see ``worker.units``): float32 when every coordinate is a float32 value (the
worker's exports), else float64, loaded as float64 either way; ``f{i}`` int32 (m, 3)
triangles, ``props_json`` (0-d
str: JSON root name -> custom properties the pipeline reads, e.g. ``{"forward_axis": "-Y"}``)
``units_json`` (0-d str: JSON root name -> ``{"root_type", "triangles", "parts":
[{"object", "instance_of", "triangles"}]}``, what each unit is made of) and, when the
worker wrote it, ``source_json`` (0-d str: ``{"blend_sha256", "blender_version"}``, the
file the units were evaluated from). Units with identical arrays (six linked-duplicate
chairs) are stored once: ``aliases_json`` (0-d str: JSON entry index -> the index of the
earlier entry whose ``v``/``f`` it shares); loaded, they share read-only arrays.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import weakref
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")

Meshes = dict[str, tuple[np.ndarray, np.ndarray]]


def dumps(meshes: Meshes, props: dict[str, dict] | None = None,
          units: dict[str, dict] | None = None, source: dict[str, Any] | None = None) -> bytes:
    arrays: dict[str, Any] = {"names": np.array(list(meshes.keys()), dtype=str)}
    seen: dict[str, int] = {}
    aliases: dict[str, int] = {}
    same: dict[tuple[int, int], int] = {}   # the very same array objects: no hashing
    for i, (verts, faces) in enumerate(meshes.values()):
        first = same.setdefault((id(verts), id(faces)), i)
        if first != i:
            aliases[str(i)] = first
            continue
        v = np.ascontiguousarray(verts, dtype=np.float64).reshape(-1, 3)
        f = np.ascontiguousarray(faces, dtype=np.int32).reshape(-1, 3)
        digest = hashlib.sha1(v.tobytes())
        digest.update(f.tobytes())
        digest.update(repr((v.shape, f.shape)).encode())
        first = seen.setdefault(digest.hexdigest(), i)
        if first != i and np.array_equal(np.asarray(arrays[f"v{first}"], np.float64), v) \
                and np.array_equal(arrays[f"f{first}"], f):
            aliases[str(i)] = first   # the same arrays as an earlier unit: stored once
            continue
        v32 = v.astype(np.float32)
        # Blender's coordinates are float32: stored at that width when nothing is lost
        # (half the bytes to write, hash and read back; ``load`` widens them again)
        arrays[f"v{i}"] = v32 if np.array_equal(v32, v) else v
        arrays[f"f{i}"] = f
    if aliases:
        arrays["aliases_json"] = np.array(json.dumps(aliases, sort_keys=True))
    arrays["props_json"] = np.array(json.dumps(props or {}, sort_keys=True))
    arrays["units_json"] = np.array(json.dumps(units or {}, sort_keys=True))
    if source:
        arrays["source_json"] = np.array(json.dumps(source, sort_keys=True))
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def save(path: str | os.PathLike[str], meshes: Meshes, props: dict[str, dict] | None = None,
         units: dict[str, dict] | None = None, source: dict[str, Any] | None = None) -> None:
    from ..files.atomic import write_bytes

    write_bytes(path, dumps(meshes, props, units, source))


def load_source(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What the cache was evaluated from (``{"blend_sha256", "blender_version"}``, written
    by the worker's export), ``{}`` when it does not say or cannot be read."""
    try:
        with np.load(Path(path), allow_pickle=False) as data:
            doc = json.loads(str(data["source_json"])) if "source_json" in data else {}
    except (KeyError, OSError, EOFError, ValueError, zipfile.BadZipFile):
        return {}
    return doc if isinstance(doc, dict) else {}


def load_units(path: str | os.PathLike[str]) -> dict[str, dict]:
    """What each unit is made of (``{}`` for caches written before units were recorded)."""
    try:
        with np.load(Path(path), allow_pickle=False) as data:
            return json.loads(str(data["units_json"])) if "units_json" in data else {}
    except (KeyError, OSError, EOFError, ValueError, zipfile.BadZipFile) as exc:
        raise ValueError(f"malformed mesh cache: {exc}") from exc


def load(path: str | os.PathLike[str]) -> tuple[Meshes, dict[str, dict]]:
    """(meshes, props). Raises ValueError naming the problem if the file is malformed."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            names = [str(n) for n in data["names"]]
            aliases = json.loads(str(data["aliases_json"])) if "aliases_json" in data else {}
            meshes: Meshes = {}
            for i, name in enumerate(names):
                first = aliases.get(str(i))
                if first is not None:
                    if not isinstance(first, int) or not 0 <= first < i:
                        raise ValueError(f"mesh '{name}' is an alias of entry {first!r}")
                    verts, faces = meshes[names[first]]
                    verts.setflags(write=False)   # shared by both names: nobody edits it
                    faces.setflags(write=False)
                    meshes[name] = (verts, faces)
                    continue
                verts = np.asarray(data[f"v{i}"], dtype=np.float64)
                faces = np.asarray(data[f"f{i}"], dtype=np.int64)
                if verts.ndim != 2 or verts.shape[1] != 3 or faces.ndim != 2 or faces.shape[1] != 3:
                    raise ValueError(f"mesh '{name}' arrays have the wrong shape")
                if len(faces) and (faces.min() < 0 or faces.max() >= len(verts)):
                    raise ValueError(f"mesh '{name}' has face indices out of range")
                if not np.all(np.isfinite(verts)):
                    raise ValueError(f"mesh '{name}' has non-finite vertices")
                meshes[name] = (verts, faces)
            props = json.loads(str(data["props_json"])) if "props_json" in data else {}
    except (KeyError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"malformed mesh cache: {exc}") from exc
    return meshes, props


_DIGESTS: dict[tuple[int, int], tuple[Any, Any, str]] = {}


def keyed_vertices(vertices: np.ndarray) -> np.ndarray:
    """The vertices as ``mesh_digest`` keys them (float32 values, as float64). What is derived
    from a mesh under that key (``remembered``) is derived from these, so it is the same
    whichever float-noise variant of the mesh a process met first: a fresh CLI and a
    long-lived add-on, step host or scene run write the same geometry.json. The worker
    exports meshes at float32 already (``units.unit_geometry``), so there it changes nothing."""
    return np.asarray(vertices, dtype=np.float32).astype(np.float64)


def mesh_digest(vertices: np.ndarray, faces: np.ndarray) -> str:
    """``_mesh_digest``; for read-only arrays (``load_shared``'s) computed once per array
    pair while they live (hashing a 200k-triangle unit costs milliseconds, per member per
    iteration)."""
    if isinstance(vertices, np.ndarray) and isinstance(faces, np.ndarray):
        hit = _DIGESTS.get((id(vertices), id(faces)))
        if hit is not None and hit[0]() is vertices and hit[1]() is faces:
            return str(hit[2])   # a sealed pair (``_seal``): read-only since it was hashed
        if (not vertices.flags.writeable and not faces.flags.writeable
                and vertices.base is None and faces.base is None):   # immutable, not views
            return _seal(vertices, faces)
    return _mesh_digest(vertices, faces)


def _seal(vertices: np.ndarray, faces: np.ndarray) -> str:
    """Make the pair read-only and remember its digest while both arrays live. Only for
    arrays nobody else can write: owned arrays, or ``load``'s, whose memory is the bytes
    read from the file."""
    vertices.setflags(write=False)
    faces.setflags(write=False)
    digest = _mesh_digest(vertices, faces)
    if len(_DIGESTS) > 4096:
        _DIGESTS.clear()
    _DIGESTS[(id(vertices), id(faces))] = (weakref.ref(vertices), weakref.ref(faces), digest)
    return digest


def _mesh_digest(vertices: np.ndarray, faces: np.ndarray) -> str:
    """A content key for a mesh: identical meshes - the six chairs of one asset, the same unit
    exported again by a later stage or iteration - share what is derived from them
    (``remembered``).

    Vertices are keyed at float32, Blender's own precision: a unit exported through its
    parts' matrices comes out with float64 noise (1e-16 m) that differs from chair to chair
    and from stage to stage although the mesh is the same; derived values (a hull, a BVH, a
    front) differ by that noise at most."""
    v = np.ascontiguousarray(vertices, dtype=np.float32)
    f = np.ascontiguousarray(faces, dtype=np.int32)
    digest = hashlib.sha1(v.tobytes())
    digest.update(f.tobytes())
    digest.update(repr((v.shape, f.shape)).encode())
    return digest.hexdigest()


_SHARED: dict[tuple[str, int, int, int, int], tuple[Meshes, dict[str, dict]]] = {}
SHARED_FILES = 8


def load_shared(path: str | os.PathLike[str]) -> tuple[Meshes, dict[str, dict]]:
    """``load``, once per file version in this process: a scene run or a step host reads a
    group's ``meshes.npz`` (tens of MB for high-poly units) at every iteration, although it
    only changes when iter_0 is rebuilt. Keyed by path, device, inode, size and mtime; the
    arrays are read-only (shared by every caller, and by every file holding an equal mesh:
    ``_interned``), ``props`` is the caller's own copy. The last ``SHARED_FILES`` files are
    kept."""
    st = os.stat(path)
    key = (os.fspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    hit = _SHARED.get(key)
    if hit is None:
        meshes, props = load(path)
        kept: dict[int, tuple[np.ndarray, np.ndarray]] = {}   # aliases: one pair, many names
        for name, (verts, faces) in list(meshes.items()):
            if id(verts) not in kept:
                kept[id(verts)] = _interned(verts, faces)
            meshes[name] = kept[id(verts)]
        hit = (meshes, props)
        while len(_SHARED) >= SHARED_FILES:
            _SHARED.pop(next(iter(_SHARED)))
        _SHARED[key] = hit
    return dict(hit[0]), json.loads(json.dumps(hit[1]))


_INTERNED: dict[str, tuple[Any, Any]] = {}


def _interned(vertices: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pair, sealed; or an equal pair already alive in this process (the same chair in
    sixteen groups' caches is held once: a scene run's memory grows with its distinct
    meshes, not its groups). Equal means equal arrays, not only an equal digest (float64
    noise under one float32 key stays apart)."""
    digest = _seal(vertices, faces)
    hit = _INTERNED.get(digest)
    if hit is not None:
        v, f = hit[0](), hit[1]()
        if (v is not None and f is not None and v.dtype == vertices.dtype
                and f.dtype == faces.dtype and np.array_equal(v, vertices)
                and np.array_equal(f, faces)):
            return v, f
    if len(_INTERNED) > 4096:
        _INTERNED.clear()
    _INTERNED[digest] = (weakref.ref(vertices), weakref.ref(faces))
    return vertices, faces


_REMEMBERED: dict[tuple[str, str], Any] = {}
REMEMBERED_ENTRIES = 512


def remembered(kind: str, key: str, compute: Callable[[], T]) -> T:
    """``compute()`` once per (kind, key) in this process (a long-lived step host or scene
    run derives each unit's hull, pivots and front once, not once per iteration); the oldest
    entries go beyond ``REMEMBERED_ENTRIES``. Only for pure functions of the key."""
    slot = (kind, key)
    if slot in _REMEMBERED:
        return _REMEMBERED[slot]  # type: ignore[no-any-return]
    value = compute()
    while len(_REMEMBERED) >= REMEMBERED_ENTRIES:
        _REMEMBERED.pop(next(iter(_REMEMBERED)))
    _REMEMBERED[slot] = value
    return value
