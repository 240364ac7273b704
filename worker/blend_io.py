"""Open / save .blend files and read / write object poses (bpy; Blender 3.4 .. 5.0).

Untrusted files: ``open_blend`` always loads with ``use_scripts=False`` (registered text
blocks and drivers never run) and ``load_ui=False``; ``bpy.app.autoexec_fail`` (True when the
file wanted to run scripts and was not allowed to) is reported to the caller.

Before handing a file to Blender its header version is read with
``island_tools.files.blendfile``: a file saved by a newer Blender than the running one raises
``BlendVersionError`` instead of letting an old Blender misread it.

Poses are ``matrix_world`` values as 4x4 nested lists of floats (row-major, the layout of
``mathutils.Matrix`` rows). ``read_poses`` first brings the depsgraph up to date, so the values
are those that follow from the location/rotation/scale stored in the file.

Parents: ``set_poses`` assigns ``matrix_world`` even for a parented object (Blender then
solves the object's local transform against the parent's current world matrix), so the
object lands where asked *now*; it will follow the parent if the parent moves later. Islands
are built without parents, so this never matters on the normal path.
"""
from __future__ import annotations

import contextlib
import errno
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import bpy
from mathutils import Matrix

from island_tools.errors import (
    BlendVersionError,
    FilesystemError,
    GroupInputError,
    WorkerError,
    from_oserror,
)
from island_tools.files.blendfile import NotABlendFile, read_version, require_whole, version_str

_LIST_MAX = 12


def blender_version() -> str:
    return ".".join(str(v) for v in bpy.app.version)


def _short_list(names: Iterable[str]) -> str:
    names = sorted(names)
    shown = ", ".join(repr(n) for n in names[:_LIST_MAX])
    if len(names) > _LIST_MAX:
        shown += f", ... ({len(names) - _LIST_MAX} more)"
    return shown or "none"


DAMAGED_FIX = "restore the file or save it again from Blender"


def check_version(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """Header (major, minor) of ``path``; BlendVersionError if newer than this Blender,
    GroupInputError (exit 8) if it is no .blend or was cut short."""
    path = Path(path)
    if not path.is_file():
        raise GroupInputError("file not found", file=str(path))
    try:
        version = read_version(path)
    except NotABlendFile:
        raise GroupInputError("not a .blend file (no BLENDER header)", file=str(path)) from None
    except OSError as exc:
        raise GroupInputError(f"cannot read: {exc}", file=str(path)) from None
    require_whole(path, DAMAGED_FIX)
    running = tuple(bpy.app.version[:2])
    if version is not None and tuple(version) > running:
        raise BlendVersionError(
            f"saved by Blender {version_str(version)}, this Blender is {blender_version()}; "
            "it cannot read newer files",
            file=str(path),
            fix=f"run with a Blender >= {version_str(version)} via --blender-bin, "
                "or rebuild the island with this Blender")
    return version


# Objects and collections disabled in viewports (the monitor icon) are left out of the
# depsgraph: their matrix_world is never evaluated (identity after loading a Blender 5 file)
# and their geometry is absent. A job enables them right after opening a file, so a hidden
# member is measured and moved like a visible one, and ``save_blend`` writes the flags as
# they were (the file keeps its hidden objects hidden).
_DISABLED: dict[str, list[str]] = {"objects": [], "collections": []}


def _enable_disabled() -> None:
    _DISABLED["objects"] = [o.name for o in bpy.data.objects if o.hide_viewport]
    _DISABLED["collections"] = [c.name for c in bpy.data.collections if c.hide_viewport]
    for name in _DISABLED["objects"]:
        bpy.data.objects[name].hide_viewport = False
    for name in _DISABLED["collections"]:
        bpy.data.collections[name].hide_viewport = False
    if _DISABLED["objects"] or _DISABLED["collections"]:
        _update_depsgraph()


def _set_disabled(value: bool) -> None:
    for name in _DISABLED["objects"]:
        obj = bpy.data.objects.get(name)
        if obj is not None:
            obj.hide_viewport = value
    for name in _DISABLED["collections"]:
        coll = bpy.data.collections.get(name)
        if coll is not None:
            coll.hide_viewport = value


_OPENED: list[tuple] = []   # identity of the file the last open_blend read


def _identity(path: Path) -> tuple:
    st = os.stat(path)
    return (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def opened_file_unchanged() -> str | None:
    """The path of the open file when it is the one the last ``open_blend`` read and is on
    disk unchanged since (same inode, size and mtime), else None."""
    if not bpy.data.filepath or not _OPENED:
        return None
    path = Path(bpy.data.filepath).resolve()
    try:
        return str(path) if _identity(path) == _OPENED[0] else None
    except OSError:
        return None


def open_blend(path: str | os.PathLike[str]) -> dict:
    """Open ``path`` with scripts disabled and every viewport-disabled object and collection
    enabled for the job (see ``_DISABLED``). Returns versions and ``autoexec_fail``."""
    path = Path(path).resolve()
    version = check_version(path)
    try:
        bpy.ops.wm.open_mainfile(filepath=str(path), load_ui=False, use_scripts=False)
    except RuntimeError as exc:   # a whole file of a version it reads: its content is bad
        msg = " ".join(str(exc).split())
        raise GroupInputError(f"Blender {blender_version()} could not read the file "
                              f"(damaged?): {msg}", file=str(path), fix=DAMAGED_FIX) from None
    _enable_disabled()
    _OPENED[:] = [_identity(path)]
    return {
        "blend": str(path),
        "blender_version": blender_version(),
        "file_version": version_str(version),
        "autoexec_fail": bool(bpy.app.autoexec_fail),
    }


def require_parent(path: Path) -> None:
    """Refuse to write into a directory that is gone: Blender's writers create missing
    parents, which would re-create the staging directory of a caller that was killed (and
    has cleaned up) while its job was still running here."""
    if not path.parent.is_dir():
        raise WorkerError("the output directory is gone (the caller stopped?); nothing written",
                          file=str(path.parent))


PROBE_BYTES = 1 << 20
_NO_SPACE = from_oserror(OSError(errno.ENOSPC, "no space"))


def _no_space(folder: Path, detail: str = "") -> FilesystemError:
    assert _NO_SPACE is not None
    return FilesystemError(_NO_SPACE.reason + detail, file=str(folder), fix=_NO_SPACE.fix)


def probe_write(folder: Path, need_bytes: int = 0) -> None:
    """After Blender failed to write into ``folder`` (its message names no cause: "Error:
    Success" or "Error: No such file or directory" for a full disk): surface the cause as
    the FilesystemError it is (exit 10, naming the folder), else return.

    A 1 MiB probe is written and removed (read-only, permission, quota, a disk with less
    than that left: a short write is a full disk too), then the free space is compared with
    ``need_bytes``, the size of what failed to be written as far as it is known."""
    probe = folder / f".write-probe.{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            block = memoryview(b"\0" * PROBE_BYTES)
            while block:
                written = os.write(fd, block)
                if written <= 0:
                    raise OSError(errno.ENOSPC, "short write", str(folder))
                block = block[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        known = from_oserror(exc)
        if known is not None:
            raise type(known)(known.reason, file=str(folder), fix=known.fix) from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(probe)
    try:
        stat = os.statvfs(folder)
    except OSError:
        return
    free = stat.f_bavail * stat.f_frsize
    if need_bytes and free < need_bytes:
        raise _no_space(folder, f" ({free >> 10} KiB free, about {need_bytes >> 10} KiB "
                                "needed)")


def _open_file_bytes() -> int:
    """Size on disk of the file Blender has open: about what saving it writes."""
    try:
        return os.stat(bpy.data.filepath).st_size if bpy.data.filepath else 0
    except OSError:
        return 0


def save_blend(path: str | os.PathLike[str]) -> None:
    """Save the open file to ``path`` uncompressed (readable by ``read_version`` and diffable).

    Blender writes ``<path>@`` and renames it over ``path`` (atomic). No ``.blend1`` backup is
    left behind (``save_version`` is 0 for the duration of the save).
    """
    path = Path(path).resolve()
    require_parent(path)
    need_bytes = _open_file_bytes()
    prefs = bpy.context.preferences.filepaths
    old_versions = prefs.save_version
    prefs.save_version = 0  # no island.blend1 backup next to the file
    _set_disabled(True)  # the file keeps the flags it was opened with
    try:
        bpy.ops.wm.save_as_mainfile(filepath=str(path), compress=False, copy=False)
    except RuntimeError as exc:
        probe_write(path.parent, need_bytes)   # a full disk or read-only directory, said as such
        msg = " ".join(str(exc).split())
        raise WorkerError(f"Blender could not save the file: {msg}", file=str(path)) from None
    finally:
        prefs.save_version = old_versions
        _set_disabled(False)
        _update_depsgraph()
    if not path.is_file() or path.stat().st_size == 0:
        raise WorkerError("save reported success but the file is missing or empty",
                          file=str(path))


def _update_depsgraph() -> None:
    layer = bpy.context.view_layer
    if layer is None and bpy.context.scene is not None:
        layer = bpy.context.scene.view_layers[0]
    if layer is not None:
        layer.update()


def get_objects(names: Sequence[str], *, what: str = "object") -> list:
    """Objects by exact name; GroupInputError naming every missing one and what exists."""
    objs = bpy.data.objects
    missing = [n for n in names if objs.get(n) is None]
    if missing:
        where = bpy.data.filepath or "the open file"
        raise GroupInputError(
            f"{what}(s) missing: {_short_list(missing)}; the file has: "
            f"{_short_list(o.name for o in objs)}", file=where)
    return [objs[n] for n in names]


def scene_unit_scale() -> float:
    """Metres per Blender unit of the open file's scene (``unit_settings.scale_length``),
    rounded to float32's 7 significant digits: 0.01 stays 0.01, not 0.009999999776."""
    scene = bpy.context.scene
    value = float(scene.unit_settings.scale_length) if scene is not None else 1.0
    return float(f"{value:.7g}")


def matrix_to_list(m: Matrix) -> list[list[float]]:
    return [[float(v) for v in row] for row in m]


def read_poses(names: Sequence[str]) -> dict[str, list[list[float]]]:
    """{name: matrix_world as 4x4 nested list} for every name (GroupInputError if missing)."""
    objs = get_objects(names)
    _update_depsgraph()
    out = {o.name: matrix_to_list(o.matrix_world) for o in objs}
    for name, rows in out.items():
        if not all(math.isfinite(v) for row in rows for v in row):
            raise GroupInputError(f"'{name}' has a non-finite transform (NaN or infinity) in "
                                  "the .blend", file=bpy.data.filepath or None, field=name,
                                  fix="fix its location, rotation and scale in Blender")
    return out


def set_poses(poses: Mapping[str, Sequence[Sequence[float]]]) -> None:
    """Assign ``matrix_world`` for each name (see the module docstring about parents)."""
    objs = get_objects(list(poses))
    for obj in objs:
        m = poses[obj.name]
        try:
            rows = [[float(v) for v in row] for row in m]
        except (TypeError, ValueError):
            rows = []
        if (len(rows) != 4 or any(len(r) != 4 for r in rows)
                or not all(math.isfinite(v) for r in rows for v in r)):
            raise GroupInputError(f"pose for '{obj.name}' is not a finite 4x4 matrix")
        obj.matrix_world = Matrix(rows)
    _update_depsgraph()
