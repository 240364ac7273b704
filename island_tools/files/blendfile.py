"""Read the Blender version a .blend was saved with, from its header, without bpy.

Stdlib only (the worker imports it inside any Blender's Python). Two header layouts:

* legacy, 12 bytes: ``BLENDER`` + pointer size (``_``/``-``) + endianness (``v``/``V``)
  + 3 digits, e.g. ``BLENDER-v304`` = 3.4;
* Blender 5.0+: ``BLENDER`` + 2-digit header size + ``-`` + 2-digit format version +
  ``v``/``V`` + 4 digits, e.g. ``BLENDER17-01v0500`` = 5.0.

Files saved with compression start with a zstd frame. The header is then read through
``zstandard`` when importable, else from the first raw-literal block of the frame (where
encoders put the first bytes verbatim); if neither works the version is unknown (None).

``truncation`` tells a file that was cut short (exit 8 where it is read, naming the file)
from a whole one by its last bytes, before Blender reads it (Blender opens a file missing
only its last bytes without a word, and says "Missing DNA block" for most other cuts).
"""
from __future__ import annotations

import re
from pathlib import Path

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP_MAGIC = b"\x1f\x8b"
_LEGACY = re.compile(rb"^BLENDER[_-][vV](\d)(\d\d)")
_V5 = re.compile(rb"^BLENDER\d\d-\d\d[vV](\d\d)(\d\d)")


class NotABlendFile(ValueError):
    pass


def parse_header(head: bytes) -> tuple[int, int]:
    """(major, minor) from the first bytes of an uncompressed .blend."""
    m = _V5.match(head)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = _LEGACY.match(head)
    if m:
        return int(m.group(1)), int(m.group(2))
    raise NotABlendFile("no BLENDER header")


def _zstd_head(raw: bytes, path: Path) -> bytes | None:
    try:
        import zstandard  # type: ignore[import-not-found]
    except ImportError:
        idx = raw.find(b"BLENDER")
        return raw[idx:idx + 32] if 0 <= idx < 64 else None
    with open(path, "rb") as fh:
        return zstandard.ZstdDecompressor().stream_reader(fh).read(32)


def read_version(path: str | Path) -> tuple[int, int] | None:
    """(major, minor) of the Blender that saved ``path``; None if compressed and unreadable.

    Raises FileNotFoundError, or NotABlendFile when the bytes are no .blend at all.
    """
    path = Path(path)
    with open(path, "rb") as fh:
        raw = fh.read(96)
    if raw.startswith(ZSTD_MAGIC):
        head = _zstd_head(raw, path)
        if head is None:
            return None
    elif raw.startswith(GZIP_MAGIC):
        import gzip
        with gzip.open(path, "rb") as fh:
            head = fh.read(32)
    else:
        head = raw
    return parse_header(head)


# Blender writes an ENDB block header last; its size follows the file header's layout.
_ENDB = b"ENDB"
# Blender's zstd files end with a seek table (the zstd "seekable format" footer magic).
_ZSTD_SEEKABLE_MAGIC = b"\xb1\xea\x92\x8f"
_TAIL = 64


def _block_header_size(head: bytes) -> int:
    if _V5.match(head):
        return 32                                   # code, sdna, old pointer, length, count
    return 24 if head[7:8] == b"-" else 20          # legacy: 8- or 4-byte pointers


def _ends_with_endb(head: bytes, tail: bytes) -> bool:
    size = _block_header_size(head)
    return len(tail) >= size and tail[-size:-size + 4] == _ENDB


def _zstd_tail_of_stream(path: Path) -> tuple[bytes, bytes] | None:
    """(first, last bytes) of the decompressed stream; None if ``zstandard`` is missing.
    Raises ValueError when the stream ends early (a cut zstd frame)."""
    try:
        import zstandard
    except ImportError:
        return None
    first, last = b"", b""
    with open(path, "rb") as fh:
        try:
            reader = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True)
        except TypeError:   # zstandard < 0.18: one frame, as Blender writes when unseekable
            reader = zstandard.ZstdDecompressor().stream_reader(fh)
        try:
            while chunk := reader.read(1 << 20):
                first = first or chunk[:32]
                last = (last + chunk)[-_TAIL:]
        except zstandard.ZstdError as exc:
            raise ValueError(str(exc)) from None
    return first, last


def truncation(path: str | Path) -> str | None:
    """Why ``path`` is not a whole .blend (it was cut short: a copy interrupted, a disk that
    filled up), or None when it is whole or this cannot tell without Blender.

    An uncompressed file must end with Blender's end block (``ENDB``); a zstd file as Blender
    writes it with its seek table, else (a plain zstd stream) its decompressed bytes must end
    so; a gzip file (Blender < 3.0) is left to Blender. Reads the file's last bytes only,
    except for a zstd file without its seek table. Raises OSError, or NotABlendFile."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(96)
        fh.seek(max(0, size - _TAIL))
        tail = fh.read(_TAIL)
    if head.startswith(GZIP_MAGIC):
        return None
    if head.startswith(ZSTD_MAGIC):
        if tail.endswith(_ZSTD_SEEKABLE_MAGIC):
            return None
        try:
            stream = _zstd_tail_of_stream(path)
        except ValueError as exc:
            return f"its compressed data is cut short ({exc}) after {size} bytes"
        if stream is None:
            return None
        head, tail = stream
        parse_header(head)
        return None if _ends_with_endb(head, tail) else (
            f"its compressed data ends after {size} bytes without Blender's end block")
    parse_header(head)
    if _ends_with_endb(head, tail):
        return None
    return f"it ends after {size} bytes without Blender's end block (ENDB)"


def require_whole(path: str | Path, fix: str) -> None:
    """GroupInputError (exit 8) naming ``path`` when it was cut short (``truncation``); a
    file that cannot be read or is no .blend at all is left to the reader to report."""
    from ..errors import GroupInputError

    try:
        cut = truncation(path)
    except (OSError, NotABlendFile):
        return
    if cut is not None:
        raise GroupInputError(f"truncated .blend: {cut}", file=str(path), fix=fix)


def version_str(version: tuple[int, ...] | None) -> str:
    return "unknown" if version is None else ".".join(str(v) for v in version)
