"""Atomic writes: temp file in the same directory, fsync, then rename over the target.

Nothing the project writes is ever rewritten in place (every writer, Blender's saves
included, renames a new file over the old one), so a finished file can be shared by hard
links (``link_or_copy``): an iteration's island.blend with the next quiet iteration, the
group's island with the iteration it was promoted from.

Confinement (``confined``). A caller that serves untrusted clients (the MCP server) installs
a :class:`Confined` guard for the duration of a call. While it is installed, every write of
this module - and the directory operations the library makes through it (``make_dir``,
``rename``, ``replace``, ``remove_tree``, ``open_beneath``) - whose path lies under one of
the guard's roots is done relative to a directory descriptor opened one component at a time
from the root with ``O_NOFOLLOW``: a component that is a symlink (one swapped in since the
call checked the path) refuses the write with :class:`ConfinementError` (exit 2), and so
does a pinned directory (the call's group or scene) replaced by another one. The check and
the write use the same descriptor, so nothing can be swapped between them. Without a guard
the functions take plain paths, as they always did (the CLIs, the add-on, batch)."""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import stat
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..errors import UsageError
from . import portable
from .portable import O_BINARY, O_CLOEXEC, O_NOFOLLOW

_DIR_FLAGS = os.O_RDONLY | portable.O_DIRECTORY | O_CLOEXEC
_NOFOLLOW_DIR = _DIR_FLAGS | O_NOFOLLOW


class ConfinementError(UsageError):
    """A path under a confined root that no longer stays beneath it (exit 2)."""


_FIX = ("put the directory back (no directory under the roots may be replaced while a "
        "call runs) and rerun")


def _absolute(path: str | os.PathLike[str]) -> Path:
    """``path`` made absolute without resolving anything (``..`` is kept, and refused)."""
    raw = os.fspath(path)
    return Path(raw if os.path.isabs(raw) else os.path.join(os.getcwd(), raw))


class Confined:
    """Writes beneath ``roots`` (resolved directories), never through a symlink, with
    ``pin``-ned directories held to the identity they had when pinned."""

    def __init__(self, roots: Sequence[str | os.PathLike[str]]) -> None:
        self.roots = tuple(Path(os.path.realpath(r)) for r in roots)
        self._pins: dict[Path, tuple[int, int]] = {}

    def _split(self, path: Path) -> tuple[Path, tuple[str, ...]] | None:
        for root in self.roots:
            if path == root or path.is_relative_to(root):
                return root, path.parts[len(root.parts):]
        return None

    def covers(self, path: str | os.PathLike[str]) -> bool:
        return self._split(_absolute(path)) is not None

    def pin(self, directory: str | os.PathLike[str]) -> None:
        """Hold ``directory`` to the (device, inode) it has now for the rest of the call."""
        path = _absolute(directory)
        fd = self.open_dir(path)
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        self._pins[path] = (st.st_dev, st.st_ino)

    def pinned(self, path: Path) -> bool:
        return path in self._pins

    def _check_pin(self, path: Path, fd: int) -> None:
        pinned = self._pins.get(path)
        if pinned is not None:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != pinned:
                raise ConfinementError("was replaced by another directory during the call",
                                       file=str(path), fix=_FIX)

    def open_dir(self, directory: str | os.PathLike[str]) -> int:
        """A descriptor of ``directory``, opened from its root one component at a time with
        ``O_NOFOLLOW`` (the caller closes it). A path outside the roots is opened as it is:
        it is the process's own (the daemon's state, caches), never a client's."""
        path = _absolute(directory)
        where = self._split(path)
        if where is None:
            return os.open(path, _DIR_FLAGS)
        root, rel = where
        fd = os.open(root, _DIR_FLAGS)
        here = root
        try:
            self._check_pin(here, fd)
            for part in rel:
                if part in ("", ".", ".."):
                    raise ConfinementError(f"'{part}' in a path under the root", file=str(path),
                                           fix="name the directory without '..'")
                here = here / part
                try:
                    nxt = os.open(part, _NOFOLLOW_DIR, dir_fd=fd)
                except OSError as exc:
                    _refuse_link(part, fd, here)
                    raise OSError(exc.errno, exc.strerror, str(here)) from None
                os.close(fd)
                fd = nxt
                self._check_pin(here, fd)
            return fd
        except BaseException:
            os.close(fd)
            raise

    def identity(self, directories: Iterable[str | os.PathLike[str]]
                 ) -> list[tuple[int, int] | None]:
        """(device, inode) of each directory reached beneath the roots (None: missing);
        ConfinementError if one is reached through a symlink or a pin no longer holds."""
        out: list[tuple[int, int] | None] = []
        for d in directories:
            try:
                fd = self.open_dir(d)
            except FileNotFoundError:
                out.append(None)
                continue
            try:
                st = os.fstat(fd)
                out.append((st.st_dev, st.st_ino))
            finally:
                os.close(fd)
        return out


def _refuse_link(name: str, dir_fd: int, full: Path) -> None:
    """ConfinementError when ``name`` in ``dir_fd`` is a symlink."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise ConfinementError("is a symlink; nothing beneath the server's roots is "
                               "written or served through one (was it swapped in during "
                               "the call?)", file=str(full), fix=_FIX)


_GUARD: Confined | None = None
_GUARD_LOCK = threading.Lock()


@contextlib.contextmanager
def confined(guard: Confined) -> Iterator[Confined]:
    """Install ``guard`` for every thread of the process until the block ends (the MCP
    server runs one writing call at a time; the scene pipeline's threads write under it)."""
    global _GUARD
    if not portable.DIR_FD:   # each write opens its directory one component at a time
        raise UsageError(portable.refuse("confined writes (the MCP server's)",
                                         "they need os.open with dir_fd (POSIX)"),
                         fix="run the MCP server on Linux or macOS")
    with _GUARD_LOCK:
        previous, _GUARD = _GUARD, guard
    try:
        yield guard
    finally:
        with _GUARD_LOCK:
            _GUARD = previous


def current_guard() -> Confined | None:
    return _GUARD


def check_resolved(raw: str | os.PathLike[str], resolved: Path) -> Path:
    """``resolved`` (``raw`` with its symlinks followed), checked under a guard: nothing
    may resolve to a place outside the roots, and a pinned directory (the call's group or
    scene, handed over resolved) must resolve to itself - a difference is a symlink swapped
    in since the call began. The library's resolution points (``iteration.
    resolve_group_dir``, ``scene.paths.ScenePaths``) call it: a path resolved outside the
    roots would no longer lie beneath one, where the descriptors above confine writes."""
    guard = _GUARD
    if guard is None:
        return resolved
    given = _absolute(os.path.expanduser(os.fspath(raw)))
    outside = not guard.covers(resolved)
    if outside or (guard.pinned(given) and given != resolved):
        raise ConfinementError(f"now resolves to {resolved}"
                               + (", outside the server's roots" if outside else "")
                               + " (a symlink swapped in during the call?)", file=str(given),
                               fix=_FIX)
    return resolved


@contextlib.contextmanager
def _parent(path: Path) -> Iterator[tuple[int | None, str]]:
    """(directory descriptor, name) to reach ``path`` by: under a guard, the parent opened
    beneath its root; else (None, the plain path)."""
    guard = _GUARD
    if guard is None or not guard.covers(path.parent):
        yield None, os.fspath(path)
        return
    fd = guard.open_dir(path.parent)
    try:
        yield fd, path.name
    finally:
        os.close(fd)


@contextlib.contextmanager
def _source(path: Path) -> Iterator[tuple[int | None, str]]:
    """As ``_parent`` for a file that is read: under a guard a final symlink is followed
    only to a file beneath the roots (itself reached without symlinks)."""
    with _parent(path) as (fd, name):
        if fd is None:
            yield fd, name
            return
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if not stat.S_ISLNK(st.st_mode):
            yield fd, name
            return
    target = Path(os.path.realpath(path))
    guard = _GUARD
    if guard is None or not guard.covers(target):
        raise ConfinementError("is a symlink leading outside the server's roots",
                               file=str(path), fix=_FIX)
    with _parent(target) as (fd, name):
        if fd is not None:
            _refuse_link(name, fd, target)
        yield fd, name


def _named(exc: BaseException, path: Path, fd: int | None) -> None:
    """An OSError raised through a directory descriptor names the full path."""
    if isinstance(exc, OSError) and (fd is not None or exc.filename is None):
        exc.filename = str(path)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _tmp_name(name: str) -> str:
    return f".{name}.{os.urandom(6).hex()}.tmp"


def _tmp_in(fd: int | None, target: str) -> tuple[int, str]:
    """A temp file beside ``target`` (a name in ``fd``, or a plain path), with the
    permissions a plain open() would give: (open descriptor, its name or path)."""
    head, name = os.path.split(target) if fd is None else ("", target)
    while True:
        tmp = os.path.join(head, _tmp_name(name))
        try:
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW
                          | O_CLOEXEC | O_BINARY, 0o600, dir_fd=fd)
        except FileExistsError:
            continue
        portable.fchmod(out, tmp if fd is None else None, 0o666 & ~_umask())
        return out, tmp


@contextlib.contextmanager
def _into(fd: int | None, tmp: str, path: Path) -> Iterator[None]:
    """Whatever fails while ``tmp`` becomes ``path`` names ``path`` and leaves no ``tmp``."""
    try:
        yield
    except BaseException as exc:
        _named(exc, path, fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=fd)
        raise


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    path = Path(path)
    with _parent(path) as (dfd, name):
        fd, tmp = _tmp_in(dfd, name)
        with _into(dfd, tmp, path):
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)


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


def copy_file(src: str | os.PathLike[str], dst: str | os.PathLike[str],
              keep_times: bool = False) -> None:
    """``dst`` becomes a copy of ``src`` (atomically); ``keep_times`` keeps its mtime."""
    dst = Path(dst)
    with _source(Path(src)) as (sfd, sname), _parent(dst) as (dfd, name):
        fd, tmp = _tmp_in(dfd, name)
        with _into(dfd, tmp, dst):
            with os.fdopen(fd, "wb") as out:
                rfd = os.open(sname, os.O_RDONLY | O_CLOEXEC | O_BINARY
                              | (O_NOFOLLOW if sfd is not None else 0), dir_fd=sfd)
                with os.fdopen(rfd, "rb") as fh:
                    shutil.copyfileobj(fh, out, 1 << 20)
                    if keep_times:
                        st = os.fstat(fh.fileno())
                        out.flush()
                        os.utime(out.fileno(), ns=(st.st_atime_ns, st.st_mtime_ns))
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)


def link_or_copy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> str:
    """``dst`` becomes ``src``'s file: a hard link renamed over ``dst`` (atomic, no bytes
    copied), or ``copy_file`` where the filesystem has no links (another device, FAT, a
    refusing mount). Returns ``"linked"`` or ``"copied"``."""
    dst = Path(dst)
    with _source(Path(src)) as (sfd, sname), _parent(dst) as (dfd, name):
        fd, tmp = _tmp_in(dfd, name)
        os.close(fd)
        os.unlink(tmp, dir_fd=dfd)
        try:
            os.link(sname, tmp, src_dir_fd=sfd, dst_dir_fd=dfd,
                    follow_symlinks=sfd is None)
        except OSError:
            copy_file(src, dst)
            return "copied"
        with _into(dfd, tmp, dst):
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    return "linked"


# --------------------------------------------------------------------------- directories
# The library's directory operations, confined like the writes above under a guard.
def make_dir(path: str | os.PathLike[str], parents: bool = False,
             exist_ok: bool = False) -> None:
    path = Path(path)
    guard = _GUARD
    if guard is not None and not os.path.isdir(path) and (
            _absolute(path) in guard.roots or guard.pinned(_absolute(path))):
        # A root (or the call's pinned directory) that is gone was moved away or deleted
        # while the call ran: a write beneath it must not bring back an empty one.
        raise ConfinementError("is gone (moved or deleted during the call) and is never "
                               "re-created", file=str(path), fix=_FIX)
    if parents and not os.path.isdir(path.parent) and path.parent != path:
        make_dir(path.parent, parents=True, exist_ok=True)
    with _parent(path) as (fd, name):
        try:
            os.mkdir(name, 0o777, dir_fd=fd)
        except FileExistsError:
            if not exist_ok or not os.path.isdir(path):
                raise
        except BaseException as exc:
            _named(exc, path, fd)
            raise


def _move(op: Any, src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    src, dst = Path(src), Path(dst)
    with _parent(src) as (sfd, sname), _parent(dst) as (dfd, dname):
        try:
            op(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)
        except BaseException as exc:
            _named(exc, dst, dfd)
            raise


def rename(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """``os.rename(src, dst)``, both ends confined under a guard."""
    _move(os.rename, src, dst)


def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """``os.replace(src, dst)``, both ends confined under a guard."""
    _move(os.replace, src, dst)


def remove_tree(path: str | os.PathLike[str], ignore_errors: bool = True) -> None:
    """``shutil.rmtree(path, ignore_errors)``; under a guard a path that no longer stays
    beneath its root is left alone (nothing outside is removed), silently when errors are
    ignored."""
    path = Path(path)
    try:
        with _parent(path) as (fd, name):
            shutil.rmtree(name, ignore_errors=ignore_errors, dir_fd=fd)
    except (OSError, ConfinementError) as exc:
        if not ignore_errors:
            _named(exc, path, None)
            raise


def remove_file(path: str | os.PathLike[str], missing_ok: bool = False) -> None:
    """``Path(path).unlink(missing_ok)``, confined under a guard."""
    path = Path(path)
    with _parent(path) as (fd, name):
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError as exc:
            if not missing_ok:
                _named(exc, path, fd)
                raise
        except BaseException as exc:
            _named(exc, path, fd)
            raise


def open_beneath(path: str | os.PathLike[str], flags: int, mode: int = 0o666) -> int:
    """``os.open(path, flags, mode)``; under a guard beneath the root, with O_NOFOLLOW."""
    path = Path(path)
    with _parent(path) as (fd, name):
        try:
            return os.open(name, flags | O_CLOEXEC | O_BINARY | (O_NOFOLLOW if fd is not None
                                                                  else 0), mode, dir_fd=fd)
        except BaseException as exc:
            _named(exc, path, fd)
            raise


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
