"""Reading DIRECTORYS.yaml: where it is, its keys, their checks - without dataclasses or PyYAML.

``island_tools.config`` builds ``Settings`` from ``read_config``. This module is kept light
(stdlib ``os`` and ``re``) because the thin ``iter_step.py`` client (scripts/_step_host.py)
reads the ``daemon*`` keys on every call before handing the call to the step host: a flat
file of ``key: scalar`` lines is parsed here directly (``flat_yaml``), anything else by
PyYAML, imported only then.
"""
from __future__ import annotations

import os
import re

from ..errors import UsageError

TYPE_CHECKING = False  # not typing's: a thin client imports this module (~4 ms saved)
if TYPE_CHECKING:
    from typing import Any

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_CONFIG = os.path.join(REPO_ROOT, "DIRECTORYS.yaml")
ENGINES = ("workbench", "cycles")
# Per-engine default of ``samples``; worker/render.py keeps an identical copy (the worker
# must not import this module), tests/test_schemas.py checks that the two agree.
DEFAULT_SAMPLES = {"workbench": 5, "cycles": 16}
KEYS = ("blender_bin", "engine", "resolution", "samples", "reuse_renders", "daemon",
        "daemon_idle_s", "daemon_max_jobs", "daemon_max_rss_mb", "decision_budget_s")


DEFAULTS: dict[str, Any] = {
    "blender_bin": None, "engine": "workbench", "resolution": 512,
    "samples": None,  # None = DEFAULT_SAMPLES[engine]
    # A step that moves nothing links the previous iteration's renders (byte-identical).
    "reuse_renders": True,
    # The warm worker and step host (worker/daemon.py, scripts/_step_host.py): use them,
    # and the limits a newly started one gets.
    "daemon": True, "daemon_idle_s": 300.0, "daemon_max_jobs": 200, "daemon_max_rss_mb": 2048,
    # The built-in solver's wall seconds per decision (island_tools.solver, issue 36).
    "decision_budget_s": 2.0}


def config_file(path: str | os.PathLike[str] | None = None) -> tuple[str, bool]:
    """(the config file to read, whether it was asked for explicitly)."""
    explicit = path is not None or "ISLAND_REFINER_CONFIG" in os.environ
    return os.fspath(path or os.environ.get("ISLAND_REFINER_CONFIG") or DEFAULT_CONFIG), explicit


def read_config(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The file's keys, checked (``--config`` / $ISLAND_REFINER_CONFIG / the repo's file);
    {} for a missing default file. UsageError names the file and key."""
    cfg, explicit = config_file(path)
    if not os.path.isfile(cfg):
        if explicit:
            raise UsageError("config file not found", file=cfg,
                             fix="pass an existing DIRECTORYS.yaml to --config")
        return {}
    with open(cfg, encoding="utf-8") as fh:
        text = fh.read()
    doc = flat_yaml(text)
    if doc is None:
        doc = _yaml_load(text, cfg)
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise UsageError("top level must be a mapping of key: value", file=cfg,
                         fix="write key: value lines")
    return {str(k): check(str(k), v, cfg) for k, v in doc.items()}


# keys that are wall seconds in (0, max]
SECONDS_MAX = {"daemon_idle_s": 86400.0, "decision_budget_s": 600.0}


def _seconds(value: Any, hi: float, file: Any, key: str, fix: str) -> float:
    if (not isinstance(value, (int, float)) or isinstance(value, bool)
            or not 0.0 < value <= hi):
        raise UsageError(f"must be a number of seconds in (0, {hi:g}], got {value!r}",
                         file=file, field=key, fix=fix)
    return float(value)


def check(key: str, value: Any, file: str) -> Any:
    fix = "edit DIRECTORYS.yaml (see the comments in the bundled file)"
    if key == "blender_bin":
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise UsageError(f"must be a path string, got {value!r}", file=file, field=key,
                             fix=fix)
        return value
    if key == "engine":
        if value not in ENGINES:
            raise UsageError(f"{value!r} is not one of {', '.join(ENGINES)}", file=file,
                             field=key, fix=fix)
        return value
    if key == "resolution":
        if not isinstance(value, int) or isinstance(value, bool) or not 16 <= value <= 8192:
            raise UsageError(f"must be an integer in 16..8192, got {value!r}", file=file,
                             field=key, fix=fix)
        return value
    if key == "samples":
        if value is None:  # empty: the engine's default
            return None
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 65536:
            raise UsageError(f"must be an integer in 0..65536 (empty = the engine's default), "
                             f"got {value!r}", file=file, field=key, fix=fix)
        return value
    if key in ("daemon", "reuse_renders"):
        if not isinstance(value, bool):
            raise UsageError(f"must be true or false, got {value!r}", file=file, field=key,
                             fix=fix)
        return value
    if key in SECONDS_MAX:
        return _seconds(value, SECONDS_MAX[key], file, key, fix)
    if key == "daemon_max_jobs":
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise UsageError(f"must be an integer >= 1, got {value!r}", file=file, field=key,
                             fix=fix)
        return value
    if key == "daemon_max_rss_mb":
        if not isinstance(value, int) or isinstance(value, bool) or value < 64:
            raise UsageError(f"must be an integer >= 64 (MiB), got {value!r}", file=file,
                             field=key, fix=fix)
        return value
    raise UsageError("unknown key", file=file, field=key,
                     fix="allowed keys: " + ", ".join(KEYS))


# A DIRECTORYS.yaml is flat ``key: scalar`` lines. Those are read without PyYAML (whose
# import alone is ~25 ms of every warm ``iter_step.py`` call's ~0.1 s client side); the
# moment a file holds anything else - nesting, flow style, anchors, a trailing comment, a
# scalar whose YAML 1.1 type is not obvious (yes/on, 012, 1e5, .inf, dates) - it goes to
# PyYAML. tests/test_schemas.py checks ``flat_yaml`` against ``yaml.safe_load``.
_FLAT_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):(?: +(.*?))? *")
_FLAT_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_FLAT_FLOAT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)\.[0-9]+")
_FLAT_PLAIN = re.compile(r"[A-Za-z/~][A-Za-z0-9_./~-]*")
_FLAT_CONSTANTS = {"null": None, "Null": None, "NULL": None, "~": None, "true": True,
                   "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_YAML11_WORDS = {"yes", "no", "on", "off", "y", "n"}


def _flat_scalar(text: str) -> tuple[bool, Any]:
    if text in _FLAT_CONSTANTS:
        return True, _FLAT_CONSTANTS[text]
    if _FLAT_INT.fullmatch(text):
        return True, int(text)
    if _FLAT_FLOAT.fullmatch(text):
        return True, float(text)
    if len(text) >= 2 and text[0] == text[-1] == '"' and not any(c in text[1:-1] for c in '"\\'):
        return True, text[1:-1]
    if len(text) >= 2 and text[0] == text[-1] == "'" and "'" not in text[1:-1]:
        return True, text[1:-1]
    if _FLAT_PLAIN.fullmatch(text) and text.lower() not in _YAML11_WORDS:
        return True, text
    return False, None


def flat_yaml(text: str) -> dict[str, Any] | None:
    """``text`` as a flat mapping of simple scalars, or None if PyYAML must decide (an empty
    document included)."""
    doc: dict[str, Any] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = _FLAT_KEY.fullmatch(line)
        if match is None or "#" in line or "\t" in line or match.group(1) in doc:
            return None
        if match.group(1) in _FLAT_CONSTANTS or match.group(1).lower() in _YAML11_WORDS:
            return None  # YAML makes such a key a bool or null, not a string
        ok, value = _flat_scalar(match.group(2) or "~")
        if not ok:
            return None
        doc[match.group(1)] = value
    return doc or None


def _yaml_load(text: str, cfg: str) -> Any:
    """PyYAML's safe loader, except that a key given twice is an error (YAML itself keeps
    the last one silently; the JSON readers refuse duplicates, and so does this)."""
    import yaml

    class StrictLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: dict[Any, int] = {}
            for key_node, _value in node.value:
                key = self.construct_object(key_node, deep=deep)
                line = key_node.start_mark.line + 1
                if isinstance(key, (str, int, float, bool)) and key in seen:
                    raise UsageError(f"key '{key}' appears twice (lines {seen[key]} and "
                                     f"{line})", file=cfg, field=str(key),
                                     fix="keep one of them")
                if isinstance(key, (str, int, float, bool)):
                    seen[key] = line
            return super().construct_mapping(node, deep=deep)

    try:
        return yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise UsageError(f"malformed YAML{where}: {problem}", file=cfg,
                         fix="fix the YAML syntax") from exc


