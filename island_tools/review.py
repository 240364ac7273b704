"""One verdict for an island state: ``scene.verify.review_group`` over the group's own files.

Every place that judges an island state calls :func:`review_island` - the island loop's
per-iteration status, its convergence gate and closing report (``adapter``), ``run.json``,
the MCP tools, the add-on's panel line - and the scene pipeline calls ``review_group``
itself with the same inputs. Nobody keeps a threshold list of their own: the verdict is the
review's ``summary.verdict``:

* ``pass``      every item was measured and met;
* ``fail``      at least one item was measured and missed (a member inside a wall, another
                member or the anchor; a facing off by more than the tolerance; a clearance
                miss; a pattern or member-count mismatch; uneven spacing);
* ``uncertain`` nothing failed but something was not measured (``summary.not_measured``:
                a front nobody can tell, a pattern the geometry cannot check).

The inputs are the group's: ``target_spec.json``, ``forward_axes.json`` (the cached
document the loop measured facing with; missing = every front undetermined), the refined
members of ``metadata.json`` (a member absent from geometry.json fails), and the resolved
unknowns the scene pipeline recorded for this group in ``<scene_dir>/state.json`` (a group
outside a scene directory has none). :func:`figures` keeps the numbers agents read next to
the verdict (facing max, clearance error, penetrations incl. obstacle penetrations,
spacing); they never decide it.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import GroupInputError
from .files.jsonio import read_object
from .iteration import FORWARD_AXES, REFINER_DIR, Group, load_group
from .scene.verify import review_group

VERDICTS = ("pass", "fail", "uncertain")
REASON_MAX_WORDS = 18     # one review item in a sentence (a report is at most 80 words)
INFEASIBLE_MAX_WORDS = 40  # the solver's infeasible finding: its whole line


@dataclass(frozen=True)
class ReviewInputs:
    """What ``review_group`` needs besides the geometry, read once per group."""

    group_id: str
    target_spec: dict[str, Any]
    forward_axes: dict[str, Any]
    members: tuple[str, ...]
    resolved: dict[str, dict[str, Any]] = field(default_factory=dict)
    root: Path | None = None      # the group directory: its solver finding is read per review


INFEASIBLE_FILE = "infeasible.json"   # in simple_refiner/: the solver's last finding


def infeasible_of(root: str | os.PathLike[str] | None) -> dict[str, Any] | None:
    """The solver's finding that the spec cannot be met keeping the hard constraints
    (``<group>/simple_refiner/infeasible.json``, written by the solver policy), or None
    when there is none, it is empty or unreadable."""
    if root is None:
        return None
    try:
        doc = json.loads((Path(root) / REFINER_DIR / INFEASIBLE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("reason") else None


def scene_resolutions(root: Path) -> dict[str, dict[str, Any]]:
    """Unknown id -> resolution, from ``<scene_dir>/state.json`` when ``root`` is
    ``<scene_dir>/relation_groups/<G>`` (as ``verify_stage.verify_group`` passes them);
    ``{}`` otherwise, or when the state cannot be read (the pipeline reports that)."""
    if root.parent.name != "relation_groups":
        return {}
    path = root.parent.parent / "state.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        unknowns = doc["groups"][root.name].get("unknowns") or []
        return {str(u["id"]): dict(u["resolution"]) for u in unknowns
                if isinstance(u, dict) and u.get("status") == "resolved"
                and isinstance(u.get("resolution"), dict)}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def review_inputs(group: Group | str | os.PathLike[str]) -> ReviewInputs:
    """The group's target spec, forward axes, refined members and resolutions."""
    g = group if isinstance(group, Group) else load_group(group)
    path = g.root / FORWARD_AXES
    axes = (read_object(path, GroupInputError, "forward_axes.json",
                        "delete forward_axes.json; init_iter0.py recomputes it")
            if path.is_file() else {})
    return ReviewInputs(g.root.name, g.target_spec.to_dict(), axes,
                        tuple(g.metadata.refined_members), scene_resolutions(g.root), g.root)


def review_island(group: Group | ReviewInputs | str | os.PathLike[str],
                  geometry: Mapping[str, Any],
                  resolved: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """THE review of one island state (``geometry``: its geometry.json document).

    ``group``: a group directory, a loaded :class:`~island_tools.iteration.Group`, or its
    :class:`ReviewInputs` (read once, reused over many states). ``resolved`` overrides the
    resolutions read from the scene's state.json. Returns ``review_group``'s document
    (``review_results``, ``new_unknowns``, ``summary`` with ``verdict`` and
    ``not_measured``, ``violation_score``) plus ``figures`` (:func:`figures`)."""
    inputs = group if isinstance(group, ReviewInputs) else review_inputs(group)
    review = review_group(inputs.group_id, geometry, inputs.target_spec, inputs.forward_axes,
                          inputs.members, inputs.resolved if resolved is None else resolved,
                          infeasible_of(inputs.root))
    review["figures"] = figures(geometry)
    return review


def verdict(review: Mapping[str, Any]) -> str:
    return str(review["summary"]["verdict"])


def figures(geometry: Mapping[str, Any]) -> dict[str, Any]:
    """The measured numbers an agent reads beside the verdict (they do not decide it)."""
    g = geometry.get("group") or {}
    spacing = g.get("spacing") or {}
    ring = spacing.get("mode") == "ring"
    inside = {name: dict(m["obstacle_penetrations"])
              for name, m in sorted((geometry.get("members") or {}).items())
              if m.get("obstacle_penetrations")}
    return {"facing_error_max_deg": g.get("facing_error_max_deg"),
            "clearance_error_max_m": g.get("clearance_error_max_m"),
            "penetration_pairs": g.get("penetration_pairs"),
            "obstacle_penetrations": g.get("obstacle_penetrations", len(inside)),
            "obstacle_penetrations_m": inside,
            "spacing": spacing.get("ring_gap_cv") if ring else spacing.get("max_deviation_m"),
            "spacing_kind": "ring_gap_cv" if ring else "max_dev_m",
            "edge_counts": g.get("edge_counts"),
            "pattern_match": (g.get("pattern") or {}).get("match"),
            "member_count_match": (g.get("member_count") or {}).get("match")}


def compact(review: Mapping[str, Any]) -> dict[str, Any]:
    """The review as ``run.json`` and the MCP tools carry it per state: the summary
    (verdict, counts, not measured), the items that did not pass, the violation score and
    the figures."""
    s = review["summary"]
    return {"verdict": s["verdict"], "pass": s["pass"], "fail": s["fail"],
            "uncertain": s["uncertain"], "total": s["total"],
            "not_measured": list(s.get("not_measured") or []),
            "failing": [{"id": i["id"], "reason": i["reason"],
                         "failure_family": i["failure_family"]}
                        for i in review["review_results"] if i["verdict"] == "fail"],
            "violation_score": review.get("violation_score"),
            "source": "island_tools.scene.verify.review_group",
            "figures": review.get("figures"),
            "infeasible": (review.get("infeasible") or {}).get("reason")}


def _short(reason: str) -> str:
    """An item's reason for a sentence: its first clause, at most REASON_MAX_WORDS words."""
    if reason.startswith("infeasible: "):   # the finding is its whole line
        words = reason.replace("'", "").split()
        limit = INFEASIBLE_MAX_WORDS
    else:
        text = reason.split(": ")[0] if not reason.startswith("blocked") else reason
        words = text.replace("'", "").split()
        limit = REASON_MAX_WORDS
    if len(words) > limit:
        words = words[:limit - 1] + ["..."]
    return " ".join(words)


def _fit(head: str, parts: list[str], max_words: int | None) -> str:
    """``head: p1; p2; ...`` with as many parts as fit in ``max_words`` (``+K more``)."""
    shown: list[str] = []
    for k, part in enumerate(parts):
        rest = len(parts) - k - 1
        candidate = f"{head}: {'; '.join([*shown, part])}" + (f"; +{rest} more" if rest else "")
        if max_words is not None and len(candidate.split()) > max_words and shown:
            break
        shown.append(part)
    rest = len(parts) - len(shown)
    return f"{head}: {'; '.join(shown)}" + (f"; +{rest} more" if rest else "")


def sentence(review: Mapping[str, Any], max_words: int | None = None) -> str:
    """``Review: fail (3/12 items fail: chair_4 penetrates wall_north by up to 0.220 m;
    ...)`` / ``Review: uncertain (2/12 items not measured: ...)`` / ``Review: pass (12/12
    items pass)``: the verdict first, then what decided it, cut to ``max_words``."""
    s = review["summary"]
    items = review["review_results"]
    total = s["total"]
    if s["verdict"] == "pass":
        return f"Review: pass ({s['pass']}/{total} items pass)."
    if s["verdict"] == "fail":
        bad = [_short(i["reason"]) for i in items if i["verdict"] == "fail"]
        body = _fit(f"{s['fail']}/{total} items fail", bad,
                    None if max_words is None else max_words - 3)
        return f"Review: fail ({body})."
    open_ = [f"{_short(i['reason'])}" for i in items
             if i["verdict"] == "uncertain" and not i["blocked_by"]]
    body = _fit(f"{s['uncertain']}/{total} items not measured", open_,
                None if max_words is None else max_words - 3)
    return f"Review: uncertain ({body})."


def status(review: Mapping[str, Any]) -> str:
    """The short form for a progress line: ``review fail (2 fail, 1 not measured)``."""
    s = review["summary"]
    if s["verdict"] == "pass":
        return f"review pass ({s['pass']}/{s['total']})"
    extra = [f"{s['fail']} fail"] if s["fail"] else []
    extra += [f"{s['uncertain']} not measured"] if s["uncertain"] else []
    return f"review {s['verdict']} ({', '.join(extra)})"
