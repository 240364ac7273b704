"""Strict JSON reading: duplicate keys, NaN/Infinity, integers too long to be a number and
non-object roots are errors; a UTF-8 byte order mark is accepted.

Every refusal says what to change in the file (the file exists: its content is what is
wrong), never to write it: malformed JSON names the line and column, a duplicate key the key,
an integer of more than ``MAX_INT_DIGITS`` digits the field that holds it. None of these is
Python's own wording (no ``sys.set_int_max_str_digits`` hint).
"""
from __future__ import annotations

import codecs
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import quoted

# An integer longer than this is larger than any float (1.8e308 has 309 digits), so it can be
# no coordinate, count or angle of this tool. Refused while parsing, before Python's own
# limit on int() of long strings (4300 digits by default) can raise its hint.
MAX_INT_DIGITS = 309


class JSONContentError(ValueError):
    """A JSON document this tool refuses, with the field (a path such as
    ``members.chair_1.delta_xyz[0]``, or None) and how to fix the file."""

    def __init__(self, reason: str, fix: str, field: str | None = None) -> None:
        self.reason = reason
        self.fix = fix
        self.field = field
        super().__init__(reason if field is None else f"field '{field}': {reason}")


class _LongInt:
    """Stands in, while parsing, for an integer of more than MAX_INT_DIGITS digits."""

    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits


def _reject_constant(name: str) -> Any:
    raise JSONContentError(f"non-finite number {name} is not allowed",
                           "write a finite number (JSON has no NaN or Infinity)")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise JSONContentError(f"duplicate key {quoted(key)}",
                                   f"keep one {quoted(key)} key")
        out[key] = value
    return out


def _path_of_long_int(doc: Any) -> tuple[str, int] | None:
    """The first (depth first, document order) _LongInt: its path and its digit count."""
    stack: list[tuple[str, Any]] = [("", doc)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, _LongInt):
            return where or "$", value.digits
        if isinstance(value, dict):
            items = [(f"{where}.{k}" if where else str(k), v) for k, v in value.items()]
        elif isinstance(value, list):
            items = [(f"{where}[{i}]", v) for i, v in enumerate(value)]
        else:
            continue
        stack.extend(reversed(items))
    return None


def loads_strict(text: str) -> Any:
    """``json.loads`` with the checks above (a leading byte order mark is skipped); nesting
    deeper than the interpreter's stack is a ValueError (not RecursionError), like every
    other malformed document. Refusals are ``JSONContentError`` (a ValueError) or
    ``json.JSONDecodeError``."""
    long_ints: list[_LongInt] = []

    def parse_int(digits: str) -> Any:
        if len(digits) - digits.startswith("-") > MAX_INT_DIGITS:
            long_ints.append(_LongInt(len(digits) - digits.startswith("-")))
            return long_ints[-1]
        return int(digits)

    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        doc = json.loads(text, parse_constant=_reject_constant, parse_int=parse_int,
                         object_pairs_hook=_no_duplicates)
    except RecursionError:
        raise JSONContentError("nested too deeply to be an input of this tool",
                               "flatten the document (lists and objects a few levels "
                               "deep)") from None
    if long_ints:
        found = _path_of_long_int(doc)
        where, digits = found if found is not None else ("$", long_ints[0].digits)
        raise JSONContentError(f"a {digits}-digit integer is too large to be a number of "
                               f"this tool (at most {MAX_INT_DIGITS} digits)",
                               "write a number in the field's range", where)
    return doc


def read_object(path: Path, error: Callable[..., Exception], what: str, fix: str,
                content_fix: str | None = None) -> dict:
    """Read a JSON object from ``path`` or raise ``error`` with a one-line message.

    ``fix`` is said when the file is missing. When it exists and its content is refused, the
    fix names what to change (line and column, key, field), followed by the caller's other
    remedy: ``content_fix``, or when that is None ``fix`` (a generated file: "rerun the
    step"); ``content_fix=""`` for a file the user writes, where ``fix`` says to write it
    and only the content is wrong. A UTF-8 byte order mark (as some Windows editors write)
    is accepted."""
    if not path.is_file():
        raise error(f"{what} is missing", file=str(path), fix=fix)

    other = fix if content_fix is None else content_fix

    def refuse(reason: str, specific: str, field: str | None = None) -> Exception:
        remedy = f"{specific}, or {other}" if other else specific
        return error(reason, file=str(path), field=field, fix=remedy)

    try:
        text = codecs.decode(path.read_bytes(), "utf-8-sig")
        doc = loads_strict(text)
    except UnicodeDecodeError as exc:
        raise refuse(f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                     f"save {what} as UTF-8") from None
    except json.JSONDecodeError as exc:
        raise refuse(f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
                     f"correct the JSON at line {exc.lineno} column {exc.colno} of "
                     f"{what}") from None
    except JSONContentError as exc:
        reason = exc.reason if exc.field else f"invalid JSON: {exc.reason}"
        raise refuse(reason, exc.fix, exc.field) from None
    except ValueError as exc:
        raise refuse(f"invalid JSON: {exc}", f"correct {what}") from None
    if not isinstance(doc, dict):
        raise refuse(f"top level must be a JSON object, got {type(doc).__name__}",
                     f"make {what} one JSON object {{...}}")
    return doc
