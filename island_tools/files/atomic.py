"""Atomic writes: temp file in the same directory, fsync, then rename over the target.

Nothing the project writes is ever rewritten in place (every writer, Blender's saves
included, renames a new file over the old one), so a finished file can be shared by hard
links (``link_or_copy``): an iteration's island.blend with the next quiet iteration, the
group's island with the iteration it was promoted from."""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _tmp_in(directory: Path, name: str) -> tuple[int, str]:
    """A temp file beside the target, with the permissions a plain open() would give."""
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    os.fchmod(fd, 0o666 & ~_umask())
    return fd, tmp


def _name(exc: BaseException, path: Path) -> None:
    """A write error without a file name (ENOSPC from write(), EIO from fsync) names the
    target, so the one-line message says where."""
    if isinstance(exc, OSError) and exc.filename is None:
        exc.filename = str(path)


@contextlib.contextmanager
def _into(tmp: str, path: Path) -> Iterator[None]:
    """Whatever fails while ``tmp`` becomes ``path`` names ``path`` and leaves no ``tmp``."""
    try:
        yield
    except BaseException as exc:
        _name(exc, path)
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    path = Path(path)
    fd, tmp = _tmp_in(path.parent, path.name)
    with _into(tmp, path):
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)


def _finite_check(obj: Any, where: str = "$") -> None:
    if isinstance(obj, float) and not math.isfinite(obj):
        raise ValueError(f"non-finite number at {where}")
    if isinstance(obj, dict):
        for k, v in obj.items():
            _finite_check(v, f"{where}.{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _finite_check(v, f"{where}[{i}]")


def dumps_json(obj: Any) -> str:
    try:
        return json.dumps(obj, indent=2, sort_keys=False, allow_nan=False) + "\n"
    except ValueError:   # NaN or infinity: say where
        _finite_check(obj)
        raise


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    write_bytes(path, dumps_json(obj).encode("utf-8"))


def copy_file(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    dst = Path(dst)
    fd, tmp = _tmp_in(dst.parent, dst.name)
    os.close(fd)
    with _into(tmp, dst):
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)


def link_or_copy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> str:
    """``dst`` becomes ``src``'s file: a hard link renamed over ``dst`` (atomic, no bytes
    copied), or ``copy_file`` where the filesystem has no links (another device, FAT, a
    refusing mount). Returns ``"linked"`` or ``"copied"``."""
    dst = Path(dst)
    fd, tmp = _tmp_in(dst.parent, dst.name)
    os.close(fd)
    os.unlink(tmp)
    try:
        os.link(src, tmp)
    except OSError:
        copy_file(src, dst)
        return "copied"
    with _into(tmp, dst):
        os.replace(tmp, dst)
    return "linked"


# Every write moves a file's mtime, and the kernel sets it from a clock with a few
# milliseconds' granularity. A hash taken when the mtime was already this old cannot belong
# to a later version of the file with the same (device, inode, size, mtime): a later write
# carries a later mtime. Younger files are hashed every time (git's "racy" entries, the
# same rule). Only a deliberate reset of the mtime (``touch -d``) could defeat it, the same
# quick check rsync and ``meshcache.load_shared`` make. Hard links (``link_or_copy``)
# change the ctime, not the mtime, so a linked island keeps its entry.
STABLE_AFTER_NS = 100_000_000
_SHA256: dict[tuple[int, int, int, int], str] = {}
_SHA256_KEPT = 4096


def sha256_file(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes, once per version of the file in this process (a scene run
    fingerprints each island at several stages; a high-poly island is 40 MB)."""
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        hit = _SHA256.get(key)
        if hit is not None:
            return hit
        stable = time.time_ns() - st.st_mtime_ns >= STABLE_AFTER_NS
        digest = hashlib.sha256()
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    value = digest.hexdigest()
    if stable:
        if len(_SHA256) >= _SHA256_KEPT:
            _SHA256.clear()
        _SHA256[key] = value
    return value
