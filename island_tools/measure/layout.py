"""Where members go around a rect anchor, as data: ``target_spec.layout``, the furniture
conventions, and what ``free_note`` prose says in its regular forms.

A layout (optional field of ``target_spec.json`` and of the relation graph's hints)::

    {"front": 1}                         # a desk chair at the desk's front (kneehole)
    {"sides": 1, "align": "back"}        # a nightstand on each long side, at the headboard
    {"front": 2, "centre_on": "seat"}    # two seats before a TV stand, centred by their seat
    {"long": 2, "short": 1}              # 2 on each long edge, 1 on each short edge
    {"+x": 1, "-y": 2}                   # canonical edges (the anchor's own frame)

Edge keys come from one family: anchor-relative (``front``, ``back``: that edge; ``sides``:
each of the two edges beside the front), by role (``long``, ``short``: each edge of that
role) or canonical (``+x``, ``-x``, ``+y``, ``-y``). ``align`` (``centre`` default, ``back``,
``front``) packs the members of the side edges against the anchor's back or front end
instead of spreading them; ``centre_on`` (``footprint`` default, ``seat``) measures slots by
the seat - the centre of the tall part (backrest), so an L-shaped sofa is centred by its
seats, not by its chaise's bounding box. Anchor-relative layouts need the anchor's front
(``forward_axes.json::anchor``); when it is undetermined they cannot be resolved, and
verify raises an unknown for the anchor's front instead of guessing.

Conventions (``convention``): the layout and facing a group gets by its ``anchor_role``
when nothing more specific is given. See docs/ARCHITECTURE.md, "Conventions".
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

RELATIVE = ("front", "back", "sides")
ROLES = ("long", "short")
CANONICAL = ("+x", "-x", "+y", "-y")
ALIGNS = ("centre", "back", "front")
CENTRES = ("footprint", "seat")
NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
                "six": 6, "seven": 7, "eight": 8}

# anchor_role word -> (layout for k members, facing), in this order of precedence
CONVENTIONS: tuple[tuple[str, str], ...] = (
    ("bed", "bed: one member on each long side beside the headboard end, facing the bed's "
            "front (foot end)"),
    ("desk", "desk: the members at the desk's front (kneehole or drawers), facing it"),
    ("tv", "tv stand: the seats before its front, centred on it by their seats, facing it"),
    ("sofa", "sofa: the members before the sofa's front, centred on its seats"),
)


class LayoutError(ValueError):
    """A layout that is not one of the forms above (the message names the key)."""


def parse_layout(doc: Any, member_count: int | None = None) -> dict[str, Any]:
    """A validated copy of a layout object; LayoutError naming the problem otherwise."""
    if not isinstance(doc, Mapping) or not doc:
        raise LayoutError("must be a non-empty object of edge counts")
    counts = {k: v for k, v in doc.items() if k not in ("align", "centre_on")}
    families = [f for f in (RELATIVE, ROLES, CANONICAL) if any(k in f for k in counts)]
    unknown = sorted(set(counts) - set(RELATIVE) - set(ROLES) - set(CANONICAL))
    if unknown:
        raise LayoutError(f"unknown key {unknown[0]!r} (edges: front/back/sides, long/short "
                          "or +x/-x/+y/-y; options: align, centre_on)")
    if len(families) != 1:
        raise LayoutError("edge counts must come from one family: front/back/sides, "
                          "long/short, or +x/-x/+y/-y")
    for key, value in counts.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise LayoutError(f"'{key}' must be an integer >= 0, got {value!r}")
    align = doc.get("align", "centre")
    if align not in ALIGNS:
        raise LayoutError(f"'align' must be one of {', '.join(ALIGNS)}, got {align!r}")
    centre = doc.get("centre_on", "footprint")
    if centre not in CENTRES:
        raise LayoutError(f"'centre_on' must be one of {', '.join(CENTRES)}, got {centre!r}")
    total = sum(v * (2 if k in ("sides", "long", "short") else 1) for k, v in counts.items())
    if total < 1:
        raise LayoutError("places no member")
    if member_count is not None and total != member_count:
        raise LayoutError(f"places {total} member(s), the spec has {member_count}")
    return {**counts, "align": align, "centre_on": centre}


def needs_front(layout: Mapping[str, Any]) -> bool:
    return any(k in layout for k in RELATIVE)


def resolve(layout: Mapping[str, Any], edges: Mapping[str, Mapping[str, Any]],
            front_edge: str | None) -> dict[str, int] | None:
    """Canonical edge -> member count; None when the layout is anchor-relative and the
    anchor's front edge is unknown."""
    out = {e: 0 for e in CANONICAL}
    if any(k in layout for k in CANONICAL):
        out.update({e: int(layout.get(e, 0)) for e in CANONICAL})
    elif any(k in layout for k in ROLES):
        for e in CANONICAL:
            out[e] = int(layout.get(edges[e]["role"], 0))
    else:
        if front_edge is None:
            return None
        back = opposite(front_edge)
        for e in CANONICAL:
            key = "front" if e == front_edge else "back" if e == back else "sides"
            out[e] = int(layout.get(key, 0))
    return out


def opposite(edge: str) -> str:
    return ("-" if edge[0] == "+" else "+") + edge[1]


def convention(anchor_role: str, member_count: int) -> tuple[dict[str, Any], str, str] | None:
    """(layout, facing, note) of the furniture convention for ``anchor_role``, or None."""
    role = anchor_role.lower()
    for word, note in CONVENTIONS:
        if word not in role:
            continue
        if word == "bed":
            if member_count != 2:
                return None
            return ({"sides": 1, "align": "back", "centre_on": "footprint"},
                    "parallel_to_anchor_long_axis", note)
        if word == "desk":
            return ({"front": member_count, "align": "centre", "centre_on": "footprint"},
                    "toward_anchor", note)
        if word == "tv":
            return ({"front": member_count, "align": "centre", "centre_on": "seat"},
                    "toward_anchor", note)
        return ({"front": member_count, "align": "centre", "centre_on": "seat"},
                "toward_anchor", note)
    return None


_NUM = r"(\d+|" + "|".join(NUMBER_WORDS) + r")"
_CANON = re.compile(_NUM + r"\s+(?:[a-z_]+\s+){0,3}?(?:on|at)\s+(?:the\s+)?([+-][xy])(?!\w)")
_EACH = re.compile(_NUM + r"\s+(?:[a-z_]+\s+){0,5}?(?:on|at)\s+(?:each|both)\s+(?:of\s+the\s+)?"
                   r"(long|short)?\s*(?:sides?|edges?|ends?)")
_FRONT = re.compile(_NUM + r"\s+(?:[a-z_]+\s+){0,3}?(?:in\s+front|at\s+the\s+front|before)")
_BACK = re.compile(_NUM + r"\s+(?:[a-z_]+\s+){0,3}?(?:behind|at\s+the\s+back)")


def _number(word: str) -> int:
    return int(word) if word.isdigit() else NUMBER_WORDS[word]


def parse_note(note: str, member_count: int) -> dict[str, Any] | None:
    """A layout from ``free_note`` prose in its regular forms, if its counts add up:

    * canonical edges: "2 chairs on -y, 1 at the +x end";
    * each side or end: "one nightstand on each side of the bed at the headboard" (sides,
      aligned to the back: "head", "headboard" or "back"; "foot" aligns to the front),
      "2 chairs on each long side", "one on each short end";
    * front or back: "two armchairs in front of the sofa", "1 behind".

    Anything else (or counts that do not add up to ``member_count``) is None: the caller
    treats the pattern as not understood, never as "keep whatever is there".
    """
    text = note.lower()
    layout: dict[str, Any] = {}
    canon = _CANON.findall(text)
    if canon:
        for count, edge in canon:
            if edge in layout:
                return None
            layout[edge] = _number(count)
    for count, role in _EACH.findall(text):
        key = role or "sides"
        if key in layout:
            return None
        layout[key] = _number(count)
    for pattern, key in ((_FRONT, "front"), (_BACK, "back")):
        for count in pattern.findall(text):
            if key in layout:
                return None
            layout[key] = _number(count)
    if not layout:
        return None
    if "sides" in layout:
        if re.search(r"\bhead(board)?\b|\bat the back\b|\bback end\b", text):
            layout["align"] = "back"
        elif re.search(r"\bfoot\b|\bfront end\b", text):
            layout["align"] = "front"
    try:
        return parse_layout(layout, member_count)
    except LayoutError:
        return None


def layout_of(spec: Mapping[str, Any]) -> dict[str, Any] | None:
    """The spec's layout: its ``layout`` field, else (pattern ``free``) what its free_note
    says, else None."""
    if spec.get("layout"):
        return parse_layout(spec["layout"], spec.get("member_count"))
    if spec.get("pattern") == "free":
        return parse_note(str(spec.get("free_note") or ""), int(spec.get("member_count") or 0))
    return None
