"""Exceptions that carry a documented exit code and a one-line message.

Exit codes (the contract's 0/4/5/6 plus the ones this project documents):

====  ==========================================================================
0     success (iter_step prints ``[iter_step] sanity OK``)
1     unexpected internal error (a bug: the message names the exception)
2     usage: bad CLI flag, malformed DIRECTORYS.yaml, wrong iteration number,
      missing previous iteration, unsafe group directory; a scene's state.json
      unreadable, mistyped or inconsistent with its ledger, a corrupt ledger.sqlite
3     iter_N/transforms.json invalid (schema, anchor in members, unknown member,
      non-finite number, forbidden key, iter mismatch, missing _island_meta field)
4     sanity: positions read back from iter_N/island.blend equal iter_(N-1)'s
      despite non-trivial deltas (or differ from what was applied)
5     target_spec.json missing or schema-invalid
6     geometry computation failed
7     Blender/worker failure (file saved by a newer Blender, render failed,
      Blender binary missing or crashed)
8     group inputs invalid: metadata.json / island.blend missing or malformed (a .blend
      cut short or one Blender cannot read included)
9     the external agent command failed (timeout, non-zero exit, output that is not
      one JSON decision, more than the output cap) - scripts/agent.py run
10    the filesystem refused a write: read-only or immutable directory, no space left,
      a mount inside the group (cross-device rename); nothing was half-written. Also the
      scene pipeline's, in any stage (the run stops; the group is not failed)
20-22 scene pipeline outcomes (island_tools/scene/errors.py)
====  ==========================================================================
"""
from __future__ import annotations

import errno
import unicodedata

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_TRANSFORMS = 3
EXIT_SANITY = 4
EXIT_TARGET_SPEC = 5
EXIT_GEOMETRY = 6
EXIT_WORKER = 7
EXIT_GROUP_INPUT = 8
EXIT_AGENT = 9
EXIT_FILESYSTEM = 10


# Characters that would move the cursor, recolour the terminal, reorder the line (bidi
# controls) or break it: every C0/C1 control and DEL, line and paragraph separators, and the
# bidirectional formatting characters.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                  "\u2066\u2067\u2068\u2069")
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _unsafe(ch: str) -> bool:
    return ch in _BIDI or unicodedata.category(ch) in ("Cc", "Zl", "Zp")


def _escape(ch: str) -> str:
    if ch in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character written as its Python escape (``\\n``,
    ``\\x1b``, ``\\u202e``), so a name echoed in an error line can neither break the line
    nor drive the terminal; other characters (backslashes too) are kept as they are."""
    if all(ch.isprintable() or ch == " " for ch in text):
        return text
    return "".join(_escape(ch) if _unsafe(ch) else ch for ch in text)


def quoted(name: object) -> str:
    """A name (object, member, group) in single quotes for a message, control characters
    escaped: a newline in a name is shown as ``\\n``, not folded into the line."""
    return f"'{printable(str(name))}'"


ECHO_LIMIT = 300   # characters of a client's value an error line repeats (issue 33)


def clip(text: object, limit: int = ECHO_LIMIT) -> str:
    """``text`` as it is up to ``limit`` characters; a longer one is cut, its length said,
    so an error never echoes a 16 MiB argument whole."""
    text = str(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters in all)"


def _prose(text: str) -> str:
    return printable(" ".join(str(text).split()))


class IslandError(Exception):
    """An error with an exit code and a one-line, actionable message."""

    exit_code = EXIT_INTERNAL

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None,
                 fix: str | None = None) -> None:
        self.file = file
        self.field = field
        self.fix = fix
        self.reason = message
        super().__init__(self.one_line())

    def one_line(self) -> str:
        """``file, field 'F': reason (fix: ...)`` on one line, safe to echo to a terminal:
        the file and the field keep every character, control characters escaped
        (``printable``); in the reason and the fix, whitespace runs (a newline included)
        become one space and any other control character is escaped."""
        parts = []
        if self.file:
            parts.append(printable(str(self.file)))
        if self.field:
            parts.append(f"field '{printable(str(self.field))}'")
        head = _prose(self.reason)
        if parts:
            head = f"{', '.join(parts)}: {head}"
        if self.fix:
            head += f" (fix: {_prose(self.fix)})"
        return head


class UsageError(IslandError):
    exit_code = EXIT_USAGE


class TransformsError(IslandError):
    exit_code = EXIT_TRANSFORMS


class SanityError(IslandError):
    exit_code = EXIT_SANITY


class TargetSpecError(IslandError):
    exit_code = EXIT_TARGET_SPEC


class GeometryError(IslandError):
    exit_code = EXIT_GEOMETRY


class WorkerError(IslandError):
    exit_code = EXIT_WORKER


class BlendVersionError(WorkerError):
    """A .blend saved by a newer Blender than the one asked to open it."""


class GroupInputError(IslandError):
    exit_code = EXIT_GROUP_INPUT


class AgentError(IslandError):
    """The external agent command failed: timeout, non-zero exit or unusable output."""

    exit_code = EXIT_AGENT


class FilesystemError(IslandError):
    """A write the filesystem refused (read-only, full, cross-device): see ``from_oserror``."""

    exit_code = EXIT_FILESYSTEM


_ERRNO_FIX = {
    errno.ENOSPC: ("no space left on the device", "free space there and rerun"),
    errno.EDQUOT: ("disk quota exceeded", "free space there and rerun"),
    errno.EROFS: ("the filesystem is read-only", "use a writable copy of the directory"),
    errno.EXDEV: ("a rename crossed filesystems (a mount or link inside the group?)",
                  "keep the group directory on one filesystem"),
    errno.EBUSY: ("the directory is busy (a mount point inside the group?)",
                  "keep the group directory on one filesystem"),
    errno.EACCES: ("permission denied", "make the directory writable by you"),
    errno.EPERM: ("operation not permitted (an immutable file? see lsattr)",
                  "make the directory writable (chattr -i) and rerun"),
}


def from_oserror(exc: OSError) -> IslandError | None:
    """The one-line error for an OSError the user can act on (full disk, read-only or
    immutable directory, cross-device rename, missing parent), else None (a bug)."""
    known = _ERRNO_FIX.get(exc.errno or 0)
    if known is None:
        return None
    where = exc.filename if exc.filename is not None else None
    return FilesystemError(known[0], file=None if where is None else str(where), fix=known[1])


def error_dict(exc: BaseException) -> dict[str, object]:
    """How a worker reports a failed job across the process boundary (``worker/entry.py``,
    ``worker/daemon.py``): an IslandError as itself, an actionable OSError as a
    FilesystemError, anything else as an InternalError naming the exception."""
    if isinstance(exc, OSError) and not isinstance(exc, IslandError):
        exc = from_oserror(exc) or exc
    if isinstance(exc, IslandError):
        return {"type": type(exc).__name__, "message": " ".join(str(exc).split()),
                "exit_code": int(exc.exit_code)}
    return {"type": "InternalError",
            "message": _prose(f"{type(exc).__name__}: {exc}"),
            "exit_code": EXIT_INTERNAL}


def unsendable_reply(exc: Exception) -> dict[str, object]:
    """The error a worker sends instead of a result it cannot encode (a non-finite number
    from an input that slipped past the parsers): what it is, not "the worker died"."""
    return {"type": "WorkerError",
            "message": " ".join(f"the worker's result could not be sent ({exc}); the job's "
                                "inputs hold numbers out of range".split()),
            "exit_code": EXIT_WORKER}


def refusal_line(found: list[dict]) -> str:
    """One line for the worker's unit refusals (``worker.units``): the first in full (member,
    object, cause, fix), the next few by object and cause."""
    first = found[0]
    line = (f"member {quoted(first['member'])}: {quoted(first['object'])} {first['cause']} "
            f"(fix: {first['fix']})")
    if len(found) > 1:
        line += "; also: " + "; ".join(f"{quoted(r['object'])} {r['cause']}"
                                      for r in found[1:4])
        if len(found) > 4:
            line += f"; and {len(found) - 4} more"
    return line


ERROR_CLASSES = {cls.__name__: cls for cls in (
    IslandError, UsageError, TransformsError, SanityError, TargetSpecError, GeometryError,
    WorkerError, BlendVersionError, GroupInputError, AgentError, FilesystemError)}
