"""What the loop's tools say: the lines ``init_iter0.py``, ``iter_step.py`` and
``agent.py write`` print on success, built here so the CLIs and the MCP server
(``island_tools/mcp_server.py``) give the same text. Pure functions over the library's
results; stdlib only."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .adapter import WriteResult
    from .iteration import StepResult


def geometry_summary(geometry: dict[str, Any]) -> str:
    """One line of a geometry.json's group measures (``[iter_step] geometry: ...``)."""
    g = geometry.get("group", {})
    parts = []
    for key, label, unit in (("facing_error_max_deg", "facing max", "deg"),
                             ("clearance_error_max_m", "clearance err max", "m"),
                             ("penetration_pairs", "penetrations", ""),
                             ("clearance_violations", "clearance violations", "")):
        if g.get(key) is not None:
            value = g[key]
            parts.append(f"{label} {value:.3f}{unit}" if isinstance(value, float)
                         else f"{label} {value}")
    spacing = g.get("spacing", {})
    if spacing.get("max_deviation_m") is not None:
        parts.append(f"spacing dev {spacing['max_deviation_m']:.3f}m")
    if spacing.get("ring_gap_cv") is not None:
        parts.append(f"ring gap CV {spacing['ring_gap_cv']:.3f}")
    match = g.get("pattern", {}).get("match")
    if match is not None:
        parts.append(f"pattern {'match' if match else 'MISMATCH'}")
    return ", ".join(parts)


def init_iter0_lines(result: StepResult, backend: str) -> list[str]:
    """stdout of a successful ``init_iter0.py``."""
    d = result.iter_dir
    return [f"[init_iter0] iter_0 ready: {d}",
            f"[init_iter0] renders: {d / 'render_persp.png'} {d / 'render_bev.png'}",
            f"[init_iter0] geometry: {d / 'geometry.json'} (backend: {backend})"]


def iter_step_lines(result: StepResult) -> tuple[list[str], list[str]]:
    """(stdout, stderr) of a successful ``iter_step.py``; stdout holds
    ``[iter_step] sanity OK``."""
    err = [f"[iter_step] warning: {w}" for w in result.warnings]
    out = ["[iter_step] trivial transforms: sanity check skipped"] if result.trivial else []
    out += ["[iter_step] sanity OK", f"[iter_step] iter_{result.iter}: {result.iter_dir}",
            f"[iter_step] geometry: {geometry_summary(result.geometry)}"]
    return out, err


def write_lines(result: WriteResult) -> tuple[list[str], list[str]]:
    """(stdout, stderr) of a successful ``agent.py write``."""
    verdict = result.verdict
    how = "penetration exception" if verdict.exception else verdict.phase.label
    return ([f"[agent] wrote {result.path} ({how}: {len(verdict.moved)} member(s) moved)"],
            [f"[agent] warning: {w}" for w in result.warnings])
