"""Strict JSON reading: duplicate keys, NaN/Infinity and non-object roots are errors."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} is not allowed")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key '{key}'")
        out[key] = value
    return out


def loads_strict(text: str) -> Any:
    """``json.loads`` with the checks above; nesting deeper than the interpreter's stack is a
    ValueError (not RecursionError), like every other malformed document."""
    try:
        return json.loads(text, parse_constant=_reject_constant,
                          object_pairs_hook=_no_duplicates)
    except RecursionError:
        raise ValueError("nested too deeply to be an input of this tool") from None


def read_object(path: Path, error: Callable[..., Exception], what: str, fix: str) -> dict:
    """Read a JSON object from ``path`` or raise ``error`` with a one-line message."""
    if not path.is_file():
        raise error(f"{what} is missing", file=str(path), fix=fix)
    try:
        doc = loads_strict(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise error(f"not UTF-8 text ({exc.reason})", file=str(path), fix=fix) from exc
    except json.JSONDecodeError as exc:
        raise error(f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
                    file=str(path), fix=fix) from exc
    except ValueError as exc:
        raise error(f"invalid JSON: {exc}", file=str(path), fix=fix) from exc
    if not isinstance(doc, dict):
        raise error(f"top level must be a JSON object, got {type(doc).__name__}",
                    file=str(path), fix=fix)
    return doc
