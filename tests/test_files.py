"""Shared finished files: ``atomic.link_or_copy`` and ``iteration.same_bytes`` (pure)."""
from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest

from island_tools.files import atomic
from island_tools.iteration import same_bytes


def test_link_or_copy_links_and_replaces_atomically(tmp_path: Path) -> None:
    src, dst = tmp_path / "a.blend", tmp_path / "out" / "b.blend"
    dst.parent.mkdir()
    src.write_bytes(b"island" * 100)
    dst.write_bytes(b"old")
    assert atomic.link_or_copy(src, dst) == "linked"
    assert os.path.samefile(src, dst) and dst.read_bytes() == src.read_bytes()
    assert sorted(p.name for p in dst.parent.iterdir()) == ["b.blend"]   # no temp left
    # a writer that renames a new file over one name leaves the other name's bytes alone
    atomic.write_bytes(dst, b"moved")
    assert src.read_bytes() == b"island" * 100 and dst.read_bytes() == b"moved"


def test_link_or_copy_copies_where_links_fail(tmp_path: Path, monkeypatch) -> None:
    src, dst = tmp_path / "a", tmp_path / "b"
    src.write_bytes(b"x" * 10)

    def no_links(*_a, **_k):
        raise OSError(errno.EXDEV, "cross-device link")

    monkeypatch.setattr(os, "link", no_links)
    assert atomic.link_or_copy(src, dst) == "copied"
    assert dst.read_bytes() == b"x" * 10 and not os.path.samefile(src, dst)


def test_same_bytes(tmp_path: Path) -> None:
    a = tmp_path / "a"
    a.write_bytes(b"0123456789")
    linked, copied, edited, longer = (tmp_path / n for n in ("l", "c", "e", "g"))
    os.link(a, linked)
    shutil.copyfile(a, copied)
    edited.write_bytes(b"0123456780")
    longer.write_bytes(b"0123456789!")
    assert same_bytes(a, linked) and same_bytes(a, copied)
    assert not same_bytes(a, edited) and not same_bytes(a, longer)
    with pytest.raises(FileNotFoundError):
        same_bytes(a, tmp_path / "missing")


def test_sha256_file_is_remembered_only_for_a_settled_file_version(tmp_path: Path,
                                                                     monkeypatch) -> None:
    """A hash is reused for the same (device, inode, size, mtime) only when the file's mtime
    was already ``STABLE_AFTER_NS`` old when it was hashed; a file rewritten in place in the
    same clock tick (same size, perhaps the same mtime) is hashed again."""
    import hashlib

    def truth(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()

    young = tmp_path / "young.bin"
    young.write_bytes(b"a" * 4096)
    assert atomic.sha256_file(young) == truth(young)
    with open(young, "r+b") as fh:            # in place, same size, at once
        fh.write(b"b")
    assert atomic.sha256_file(young) == truth(young)

    settled = tmp_path / "settled.bin"
    settled.write_bytes(b"c" * 4096)
    past = settled.stat().st_mtime_ns - 10 * atomic.STABLE_AFTER_NS
    os.utime(settled, ns=(past, past))
    first = atomic.sha256_file(settled)
    reads: list[int] = []
    real_open = open

    def counting_open(path, *args, **kwargs):
        fh = real_open(path, *args, **kwargs)
        real_read = fh.read
        fh.read = lambda *a: reads.append(1) or real_read(*a)  # type: ignore[method-assign]
        return fh

    import builtins
    with monkeypatch.context() as m:
        m.setattr(builtins, "open", counting_open)
        assert atomic.sha256_file(settled) == first
    assert first == truth(settled) and reads == []   # remembered: not read again
    linked = tmp_path / "linked.bin"
    atomic.link_or_copy(settled, linked)        # a link changes the ctime, not the mtime
    assert atomic.sha256_file(linked) == first
    with open(settled, "r+b") as fh:            # any later write moves the mtime
        fh.write(b"d")
    assert atomic.sha256_file(settled) == truth(settled) != first
