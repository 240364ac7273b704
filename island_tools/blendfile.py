"""Read the Blender version a .blend was saved with, from its header, without bpy.

Stdlib only (the worker imports it inside any Blender's Python). Two header layouts:

* legacy, 12 bytes: ``BLENDER`` + pointer size (``_``/``-``) + endianness (``v``/``V``)
  + 3 digits, e.g. ``BLENDER-v304`` = 3.4;
* Blender 5.0+: ``BLENDER`` + 2-digit header size + ``-`` + 2-digit format version +
  ``v``/``V`` + 4 digits, e.g. ``BLENDER17-01v0500`` = 5.0.

Files saved with compression start with a zstd frame. The header is then read through
``zstandard`` when importable, else from the first raw-literal block of the frame (where
encoders put the first bytes verbatim); if neither works the version is unknown (None).
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


def version_str(version: tuple[int, ...] | None) -> str:
    return "unknown" if version is None else ".".join(str(v) for v in version)
