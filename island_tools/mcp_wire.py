"""Every request to ``island-refine mcp`` gets an answer, whatever layer fails to read it.

The SDK's stdio transport parses each line with pydantic's JSON parser. A line it cannot
parse - nested deeper than its recursion limit (200), a lone UTF-16 surrogate escape, an
integer longer than 4300 digits - reaches the session as a bare exception, which it drops:
the client waits forever for a reply. :func:`unreadable_reply` turns such a line into a
JSON-RPC error for the request's own id (found by :func:`request_id`, a scan of the line
that neither recurses nor converts numbers), so the client's pending call ends;
:class:`Replies` makes sure a reply that cannot be encoded (a path that is not UTF-8)
still goes out as an error for its id, instead of ending the writer. A tool call whose
arguments do not match the tool's input schema is answered with the CLI's one line and exit
code (:func:`argument_error`), not pydantic's multi-line text.
"""
from __future__ import annotations

import json
import re
import sys
from typing import Any

from mcp.shared.message import SessionMessage
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    TextContent,
)

from .errors import EXIT_USAGE, UsageError, clip

PROG = "mcp"
MAX_ID_DIGITS = 4300          # Python's int() limit: a longer id is answered with id null

_SPECIAL = re.compile(r'["{}\[\],:]')
_STRING_BODY = re.compile(r'(?:[^"\\]|\\.)*"', re.DOTALL)
_NUMBER = re.compile(r"-?\d+(?![.eE\d])")
_BLANK = re.compile(r"[ \t\r\n]*")

# what the parser said -> what the client can do about it
_FIXES = (("recursion limit", "nest the arguments at most 200 levels deep"),
          ("surrogate", "send text as valid Unicode: no lone \\ud800-\\udfff escape"),
          ("number out of range", "send integers of at most 4300 digits"),
          ("EOF", "send one whole JSON-RPC message per line"))


def _string_end(text: str, start: int) -> int:
    """Index after the JSON string opening at ``start`` (its end of text if unterminated)."""
    m = _STRING_BODY.match(text, start + 1)
    return m.end() if m else len(text)


def _skip_blank(text: str, at: int) -> int:
    m = _BLANK.match(text, at)
    return m.end() if m else at


def _string_value(token: str) -> str | None:
    try:
        value = json.loads(token)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def request_id(text: str) -> tuple[int | str | None, bool]:
    """(the top-level ``id`` of a JSON-RPC line, whether the line is a notification: a
    ``method`` and no ``id``), read without parsing the rest: any depth, any number."""
    found_id: int | str | None = None
    has_id = has_method = False
    depth, expect_key, i, n = 0, False, 0, len(text)
    while True:
        m = _SPECIAL.search(text, i)
        if m is None:
            break
        c, i = m.group(), m.start()
        if c == '"':
            end = _string_end(text, i)
            if depth == 1 and expect_key:
                key = _string_value(text[i:end])
                colon = _skip_blank(text, end)
                if colon < n and text[colon] == ":":
                    value_at = _skip_blank(text, colon + 1)
                    if key == "id":
                        has_id, found_id = True, _id_value(text, value_at)
                    elif key == "method":
                        has_method = True
            i = end
            continue
        if c in "{[":
            depth += 1
            expect_key = c == "{" and depth == 1
        elif c in "}]":
            depth -= 1
        elif depth == 1:
            expect_key = c == ","
        i += 1
    return found_id, has_method and not has_id


def _id_value(text: str, at: int) -> int | str | None:
    if text.startswith('"', at):
        value = _string_value(text[at:_string_end(text, at)])
        if value is None:
            return None
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return None
        return value
    m = _NUMBER.match(text, at)
    if m is None or len(m.group().lstrip("-")) > MAX_ID_DIGITS:
        return None
    return int(m.group())


def _raw_line(exc: Exception) -> str | None:
    """The line a transport-level ValidationError was raised for (pydantic keeps it as the
    input of a ``json_invalid`` error)."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return None
    try:
        for err in errors():
            if err.get("type") == "json_invalid" and isinstance(err.get("input"), str):
                return str(err["input"])
    except Exception:  # noqa: BLE001 - not a pydantic error after all
        return None
    return None


def _id_from_errors(exc: Exception) -> tuple[int | str | None, bool]:
    """For valid JSON that is no JSON-RPC message: the id among the inputs pydantic kept."""
    errors = getattr(exc, "errors", None)
    try:
        for err in errors() if callable(errors) else ():
            doc = err.get("input")
            if isinstance(doc, dict):
                rid = doc.get("id")
                if isinstance(rid, (int, str)) and not isinstance(rid, bool):
                    return rid, False
                return None, "method" in doc and "id" not in doc
    except Exception:  # noqa: BLE001
        pass
    return None, False


def _reason(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    try:
        first = errors()[0] if callable(errors) else None
    except Exception:  # noqa: BLE001
        first = None
    if first is None:
        return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    where = clip(".".join(str(p) for p in first.get("loc", ())))
    return " ".join(f"{first.get('msg', 'invalid')}{' at ' + where if where else ''}".split())


def unreadable_reply(exc: Exception) -> JSONRPCError | None:
    """The JSON-RPC error for a line the transport could not read (None for a notification:
    JSON-RPC answers those never)."""
    raw = _raw_line(exc)
    if raw is not None:
        rid, notification = request_id(raw)
        code = PARSE_ERROR
    else:
        rid, notification = _id_from_errors(exc)
        code = INVALID_REQUEST
    reason = _reason(exc)
    if notification:
        print(f"[{PROG}] ignored a notification that could not be read: {reason}",
              file=sys.stderr, flush=True)
        return None
    fix = next((f for key, f in _FIXES if key in reason),
               "send one JSON-RPC 2.0 message per line")
    err = UsageError(f"the request could not be read ({reason})", fix=fix)
    line = f"[{PROG}] error (exit {err.exit_code}): {err.one_line()}"
    return JSONRPCError(jsonrpc="2.0", id=rid, error=ErrorData(
        code=code, message=line, data={"exit_code": err.exit_code, "line": line}))


def argument_error(tool: str, exc: Any, schema: dict[str, Any] | None) -> CallToolResult:
    """A tool error in the CLI's form for arguments that fail the tool's input schema:
    ``[mcp] error (exit 2): field 'group_dir': ...`` with ``exit_code`` beside it."""
    errors = exc.errors()
    first = errors[0]
    field = clip(".".join(str(p) for p in first.get("loc", ())) or "arguments")
    top = field.split(".")[0]
    kinds = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
             list: "an array", dict: "an object", type(None): "null"}
    got = ("nothing" if first.get("type") == "missing"
           else kinds.get(type(first.get("input")), type(first.get("input")).__name__))
    prop = ((schema or {}).get("properties") or {}).get(top) or {}
    wanted = _schema_kind(prop)
    more = f"; {len(errors) - 1} more problem(s) in the arguments" if len(errors) > 1 else ""
    err = UsageError(f"{clip(first.get('msg', 'invalid'))}, got {got} (tool {clip(tool)}){more}",
                     field=field, fix=f"send '{top}' as {wanted}" if wanted else
                     "send the arguments the tool's inputSchema names")
    line = f"[{PROG}] error (exit {EXIT_USAGE}): {err.one_line()}"
    return CallToolResult(content=[TextContent(type="text", text=line)], is_error=True,
                          structured_content={"exit_code": EXIT_USAGE, "line": line,
                                              "lines": [line]})


def _schema_kind(prop: dict[str, Any]) -> str:
    names = {"string": "a string", "integer": "an integer", "number": "a number",
             "boolean": "a boolean", "object": "an object", "array": "an array",
             "null": "null"}
    options = [p.get("type") for p in prop.get("anyOf", [])] or [prop.get("type")]
    kinds = [names[t] for t in options if isinstance(t, str) and t in names]
    return " or ".join(dict.fromkeys(kinds))


class Replies:
    """The transport's write stream, with a reply that cannot be encoded as JSON replaced
    by a JSON-RPC error for its id (a notification that cannot be encoded is dropped)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def send(self, item: SessionMessage) -> None:
        try:
            item.message.model_dump_json(by_alias=True, exclude_unset=True)
        except Exception as exc:  # noqa: BLE001 - whatever fails to encode
            message = item.message
            if not isinstance(message, (JSONRPCResponse, JSONRPCError, JSONRPCRequest)):
                print(f"[{PROG}] dropped a notification that could not be encoded: "
                      f"{type(exc).__name__}", file=sys.stderr, flush=True)
                return
            if isinstance(message, JSONRPCRequest):   # a request to the client
                return
            # Text that cannot be encoded comes from bytes the OS handed over undecoded:
            # a file name under the roots that is not UTF-8.
            line = (f"[{PROG}] error (exit {EXIT_USAGE}): the reply could not be encoded as "
                    f"JSON ({' '.join(str(exc).split())[:200]}) (fix: give the files and "
                    "directories under the roots UTF-8 names)")
            item = SessionMessage(JSONRPCError(jsonrpc="2.0", id=message.id, error=ErrorData(
                code=INTERNAL_ERROR, message=line,
                data={"exit_code": EXIT_USAGE, "line": line})))
        await self._inner.send(item)

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Replies:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
