"""``render_bev_annotated.png``: the top-down render with what a vision agent cannot see in it.

A plain top view shows chairs as coloured squares; nothing says which way they face. This
draws over ``render_bev.png`` (pillow only, no bpy):

* the anchor outline from geometry.json (rect: centre +- half extents, with the edge names
  ``+x -x +y -y`` that delta_xyz and geometry.json use; round: a circle of ``radius_m``);
* per member: a black arrow from its footprint centre along ``forward_canonical`` (a
  symmetric member of order 2 or 4: a double-headed or 4-way mark along
  ``facing_reference_canonical``, any of whose arms may point at the target), a green tick
  toward its ``facing_target``, and a label with its name and facing error (red background
  when geometry.json lists a penetration) behind it; labels never overlap each other or the
  legend: one that would (chairs side by side in a row, as in front of a TV) moves further
  behind its member, one box at a time;
* a legend and a 1 m scale bar.

Pixel mapping (the worker's BEV camera, ``worker/render.py``): orthographic, centred on
``bev_center_xy``, ``bev_metres_per_pixel`` per pixel, canonical +X right and +Y up, so a
canonical point (x, y) lies at continuous image coordinates
``u = res/2 + (x - cx)/mpp``, ``v = res/2 - (y - cy)/mpp`` (pixel i covers [i, i+1)).
Renders smaller than ``MIN_SIZE_PX`` are upscaled by an integer factor first so labels stay
legible; the mapping is then multiplied by that factor (``bev_to_pixel``).
"""
from __future__ import annotations

import io
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from .errors import WorkerError
from .files import atomic

if TYPE_CHECKING:
    from PIL import ImageDraw, ImageFont

MIN_SIZE_PX = 512
ARROW_LEN_M = 0.45
TICK_LEN_M = 0.30
SYMMETRIC_ARM_M = 0.32    # each arm of a symmetric member's double-headed / 4-way mark
HEAD_LEN_M = 0.12
HEAD_HALF_WIDTH_M = 0.07
LABEL_BEHIND_M = 0.45     # past the back of a dining chair (~0.5 m deep)
LABEL_GAP_PX = 3          # at least this many pixels between two labels
LABEL_TRIES = 8           # places tried behind a member before a label may overlap
ARROW_COLOR = (0, 0, 0)
TICK_COLOR = (0, 150, 0)
ANCHOR_COLOR = (30, 60, 200)
LABEL_BG = (255, 255, 255)
LABEL_BG_PENETRATING = (255, 170, 170)
RENDER_KEYS = ("resolution", "bev_metres_per_pixel", "bev_center_xy")

ToPixel = Callable[[float, float], tuple[int, int]]


def upscale_factor(resolution: int) -> int:
    return max(1, math.ceil(MIN_SIZE_PX / resolution))


def bev_to_pixel(x: float, y: float, render: Mapping[str, Any]) -> tuple[float, float]:
    """Continuous pixel coordinates of canonical (x, y) in the *annotated* image."""
    res = int(render["resolution"])
    mpp = float(render["bev_metres_per_pixel"])
    cx, cy = (float(v) for v in render["bev_center_xy"])
    f = upscale_factor(res)
    return (res / 2.0 + (x - cx) / mpp) * f, (res / 2.0 - (y - cy) / mpp) * f


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # pillow built without FreeType: the fixed bitmap font
        return ImageFont.load_default()


def annotate_bev(bev_png: Path, out_png: Path, geometry: Mapping[str, Any],
                 render: Mapping[str, Any]) -> None:
    """Write ``out_png`` (atomically): ``bev_png`` annotated from ``geometry`` (module doc)."""
    # pillow is imported here, not at module level: iteration.py imports this module and
    # must stay importable where only numpy is (e.g. a Blender's own Python).
    from PIL import Image, ImageDraw

    missing = [k for k in RENDER_KEYS if k not in render]
    if missing:
        raise WorkerError(f"render info lacks '{missing[0]}', so the BEV cannot be annotated",
                          file=str(bev_png), fix="use a worker that reports the BEV camera")
    with Image.open(bev_png) as raw:
        img = raw.convert("RGB")
    f = upscale_factor(int(render["resolution"]))
    if f > 1:
        img = img.resize((img.width * f, img.height * f), Image.Resampling.BICUBIC)
    draw = ImageDraw.Draw(img)
    px_per_m = f / float(render["bev_metres_per_pixel"])
    font = _font(max(11, img.width // 40))
    line = max(2, img.width // 256)

    def at(x: float, y: float) -> tuple[int, int]:
        # PIL draws pixel i at integer coordinate i and truncates floats: pass the index of
        # the pixel that contains the point.
        u, v = bev_to_pixel(x, y, render)
        return math.floor(u), math.floor(v)

    _anchor(draw, geometry.get("anchor") or {}, at, px_per_m, font, line)
    labels = [label for name, m in sorted((geometry.get("members") or {}).items())
              if (label := _member(draw, name, m, at, font, line)) is not None]
    taken = [_legend(draw, px_per_m, font, line)]
    for label in labels:   # last, so no arrow is drawn over a label
        taken.append(_place_label(draw, label, font, taken, img.size))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    atomic.write_bytes(out_png, buf.getvalue())


def _anchor(draw: ImageDraw.ImageDraw, anchor: Mapping[str, Any], at: ToPixel,
            px_per_m: float, font: Any, line: int) -> None:
    if not anchor.get("centre"):
        return
    cx, cy = anchor["centre"]
    if anchor.get("shape") == "round" and anchor.get("radius_m"):
        r = float(anchor["radius_m"]) * px_per_m
        u, v = at(cx, cy)
        draw.ellipse([u - r, v - r, u + r, v + r], outline=ANCHOR_COLOR, width=line)
    else:
        hx, hy = anchor["half_extents_m"]
        corners = [at(cx + sx * hx, cy + sy * hy) for sx, sy in ((-1, -1), (1, -1), (1, 1),
                                                                  (-1, 1))]
        draw.polygon(corners, outline=ANCHOR_COLOR, width=line)
        for edge, info in (anchor.get("edges") or {}).items():
            mx, my = info["midpoint"]
            nx, ny = info["normal"]
            draw.text(at(mx - 0.12 * nx, my - 0.12 * ny), edge, fill=ANCHOR_COLOR, font=font,
                      anchor="mm")


def _segment(draw: ImageDraw.ImageDraw, start: tuple[float, float], direction: list[float],
             length_m: float, at: ToPixel, color: tuple[int, int, int], width: int,
             head: bool) -> None:
    x, y = start
    dx, dy = direction
    tip = at(x + dx * length_m, y + dy * length_m)
    draw.line([at(x, y), tip], fill=color, width=width)
    if head:
        bx, by = x + dx * (length_m - HEAD_LEN_M), y + dy * (length_m - HEAD_LEN_M)
        w = HEAD_HALF_WIDTH_M
        draw.polygon([tip, at(bx - dy * w, by + dx * w), at(bx + dy * w, by - dx * w)],
                     fill=color)


def _member(draw: ImageDraw.ImageDraw, name: str, m: Mapping[str, Any], at: ToPixel,
            font: Any, line: int) -> Label | None:
    """Draw the member's marks; return its label (drawn last, by ``_place_label``)."""
    centre = m.get("footprint_centre")
    if not centre:
        return None
    forward = m.get("forward_canonical")
    target = m.get("facing_target")
    if target:
        _segment(draw, centre, target, TICK_LEN_M, at, TICK_COLOR, line, head=False)
    if forward:
        _segment(draw, centre, forward, ARROW_LEN_M, at, ARROW_COLOR, line + 1, head=True)
    reference = m.get("facing_reference_canonical")
    order = m.get("facing_symmetry_order")
    if reference and not forward and order in (2, 4):
        # symmetric: one arm per aligned direction (a double-headed or 4-way mark)
        for k in range(int(order)):
            a = 2.0 * math.pi * k / int(order)
            c, s = math.cos(a), math.sin(a)
            arm = [c * reference[0] - s * reference[1], s * reference[0] + c * reference[1]]
            _segment(draw, centre, arm, SYMMETRIC_ARM_M, at, ARROW_COLOR, line, head=True)
    error = m.get("facing_error_deg")
    text = name if error is None else f"{name} {error:.0f}°"
    # Behind the member (opposite its arrow), where the label hides nothing it points at.
    back = forward or [0.0, 1.0]
    lx, ly = centre[0] - back[0] * LABEL_BEHIND_M, centre[1] - back[1] * LABEL_BEHIND_M
    bg = LABEL_BG_PENETRATING if m.get("penetrations") else LABEL_BG
    norm = math.hypot(back[0], back[1]) or 1.0
    # image rows grow downward: canonical +Y is -v
    return Label(text, at(lx, ly), (-back[0] / norm, back[1] / norm), bg)


class Label(NamedTuple):
    text: str
    at: tuple[int, int]               # pixel of the label's centre, behind its member
    away: tuple[float, float]         # unit pixel direction further behind the member
    background: tuple[int, int, int]


Box = tuple[int, int, int, int]


def _label_box(draw: ImageDraw.ImageDraw, text: str, at: tuple[int, int], font: Any) -> Box:
    x0, y0, x1, y1 = draw.textbbox(at, text, font=font, anchor="mm")
    return (int(x0) - 2, int(y0) - 1, int(x1) + 2, int(y1) + 1)


def _overlap(a: Box, b: Box) -> bool:
    """Closer than ``LABEL_GAP_PX`` (boxes are inclusive pixel ranges, as PIL draws them)."""
    gap = LABEL_GAP_PX
    return (a[0] <= b[2] + gap and b[0] <= a[2] + gap
            and a[1] <= b[3] + gap and b[1] <= a[3] + gap)


def _place_label(draw: ImageDraw.ImageDraw, label: Label, font: Any, taken: list[Box],
                 size: tuple[int, int]) -> Box:
    """Draw ``label`` at its place behind its member or, when that box would touch one
    already drawn (members side by side in a row, the legend) or leave the image, one box
    further behind at a time; the first free place wins (else the first place)."""
    first = _label_box(draw, label.text, label.at, font)
    du, dv = label.away
    step = (abs(du) * (first[2] - first[0]) + abs(dv) * (first[3] - first[1])
            + LABEL_GAP_PX + 1)
    chosen, where = first, label.at
    for k in range(LABEL_TRIES):
        at = (round(label.at[0] + du * step * k), round(label.at[1] + dv * step * k))
        box = _label_box(draw, label.text, at, font)
        inside = box[0] >= 0 and box[1] >= 0 and box[2] < size[0] and box[3] < size[1]
        if inside and not any(_overlap(box, other) for other in taken):
            chosen, where = box, at
            break
    draw.rectangle(list(chosen), fill=label.background)
    draw.text(where, label.text, fill=(0, 0, 0), font=font, anchor="mm")
    return chosen


def _legend(draw: ImageDraw.ImageDraw, px_per_m: float, font: Any, line: int) -> Box:
    pad = 8
    text = ("canonical BEV: +X right, +Y up; bar: 1 m\n"
            "black arrow: forward, green: facing target, blue: anchor\n"
            "double / 4-way arrow: symmetric, any arm may face")
    box = draw.multiline_textbbox((pad, pad), text, font=font)
    draw.rectangle([box[0] - 3, box[1] - 2, box[2] + 3, box[3] + 2], fill=LABEL_BG)
    draw.multiline_text((pad, pad), text, fill=(0, 0, 0), font=font)
    y = box[3] + 3 * line + 4
    draw.line([(pad, y), (pad + px_per_m, y)], fill=(0, 0, 0), width=line)
    return (int(box[0]) - 3, int(box[1]) - 2, int(max(box[2] + 3, pad + px_per_m)),
            int(y + line))
