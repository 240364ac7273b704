"""render_bev_annotated.png: arrows land where the canonical poses say they should.

The expected pixels are computed here from the BEV camera's definition (centre, metres per
pixel, +Y up), not with annotate's own helper, and the tier-2 test checks that definition
against a real Blender render: a member's coloured blob sits where the mapping puts it.
"""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from island_tools.annotate import ARROW_LEN_M, annotate_bev, bev_to_pixel, upscale_factor
from island_tools.config import Settings
from island_tools.errors import WorkerError


def expected_px(x: float, y: float, render: dict, factor: int) -> tuple[int, int]:
    """Pixel index (column, row) of canonical (x, y) in an image upscaled by ``factor``."""
    res, mpp = render["resolution"], render["bev_metres_per_pixel"]
    cx, cy = render["bev_center_xy"]
    return (math.floor((res / 2 + (x - cx) / mpp) * factor),
            math.floor((res / 2 - (y - cy) / mpp) * factor))


def dark(img: Image.Image, px: tuple[int, int], radius: int = 1) -> bool:
    arr = np.asarray(img.convert("L"), dtype=float)
    c, r = px
    return float(arr[r - radius:r + radius + 1, c - radius:c + radius + 1].min()) < 60


def test_arrow_of_a_member_at_a_known_pose_lands_on_the_expected_pixels(tmp_path: Path) -> None:
    render = {"resolution": 64, "bev_metres_per_pixel": 5.0 / 64, "bev_center_xy": [0.3, -0.2],
              "bev_ortho_scale_m": 5.0}
    Image.new("RGB", (64, 64), (255, 255, 255)).save(tmp_path / "render_bev.png")
    geometry = {"anchor": {"shape": "rect", "centre": [0.0, 0.0], "half_extents_m": [0.5, 0.3],
                           "edges": {}},
                "members": {"chair_1": {"footprint_centre": [1.0, 0.5],
                                        "forward_canonical": [0.0, -1.0],
                                        "facing_target": [-1.0, 0.0], "facing_error_deg": 90.0,
                                        "penetrations": {}}}}
    annotate_bev(tmp_path / "render_bev.png", tmp_path / "out.png", geometry, render)
    f = upscale_factor(64)
    with Image.open(tmp_path / "out.png") as img:
        assert img.size == (64 * f, 64 * f)
        # The shaft runs from (1.0, 0.5) toward -Y: its midpoint and near the tip are dark,
        # points 0.15 m to either side and 0.1 m beyond the tip are not.
        assert dark(img, expected_px(1.0, 0.5 - ARROW_LEN_M / 2, render, f))
        assert dark(img, expected_px(1.0, 0.5 - ARROW_LEN_M + 0.03, render, f))
        for x, y in ((1.15, 0.5 - ARROW_LEN_M / 2), (0.85, 0.5 - ARROW_LEN_M / 2),
                     (1.0, 0.5 - ARROW_LEN_M - 0.1)):
            assert not dark(img, expected_px(x, y, render, f), radius=0)
        # The facing-target tick points to -X and is green.
        c, r = expected_px(0.85, 0.5, render, f)
        window = np.asarray(img, dtype=int)[r - 1:r + 2, c - 1:c + 2].reshape(-1, 3)
        assert any(g > 100 and red < 80 and b < 80 for red, g, b in window)
    u, v = bev_to_pixel(1.0, 0.5, render)
    assert (int(u), int(v)) == expected_px(1.0, 0.5, render, f)


def test_missing_camera_info_is_a_one_line_worker_error(tmp_path: Path) -> None:
    Image.new("RGB", (64, 64)).save(tmp_path / "render_bev.png")
    with pytest.raises(WorkerError, match="render info lacks 'bev_center_xy'"):
        annotate_bev(tmp_path / "render_bev.png", tmp_path / "out.png", {},
                     {"resolution": 64, "bev_metres_per_pixel": 0.1})
    assert not (tmp_path / "out.png").exists()


@pytest.mark.bpy
def test_real_render_mapping_and_arrow(tmp_path_factory: pytest.TempPathFactory) -> None:
    from fixtures.build import build_fixture
    from island_tools.iteration import init_iter0
    from worker.launch import resolve_blender, run_job

    backend = resolve_blender("bpy", None)
    group = build_fixture("long_table_5", "correct", tmp_path_factory.mktemp("annotate"),
                          backend=backend)
    settings = Settings(blender_bin="bpy", engine="workbench", resolution=128, samples=1)
    init_iter0(group, settings, lambda job: run_job(job, backend))
    it0 = group / "simple_refiner" / "iter_0"
    render = json.loads((it0 / "info.json").read_text())["render"]
    members = json.loads((it0 / "geometry.json").read_text())["members"]
    raw = np.asarray(Image.open(it0 / "render_bev.png").convert("RGB"), dtype=int)
    saturated = (raw.max(axis=2) - raw.min(axis=2)) > 80   # members; anchor and floor are grey
    rows, cols = np.nonzero(saturated)
    mpp = render["bev_metres_per_pixel"]
    for name, m in members.items():
        x, y = m["footprint_centre"]
        c, r = expected_px(x, y, render, 1)
        near = (np.hypot(cols - c, rows - r) * mpp) < 0.35
        blob_c = (cols[near].min() + cols[near].max() + 1) / 2
        blob_r = (rows[near].min() + rows[near].max() + 1) / 2
        u = render["resolution"] / 2 + (x - render["bev_center_xy"][0]) / mpp
        v = render["resolution"] / 2 - (y - render["bev_center_xy"][1]) / mpp
        assert abs(blob_c - u) <= 1.5 and abs(blob_r - v) <= 1.5, name
    f = upscale_factor(render["resolution"])
    with Image.open(it0 / "render_bev_annotated.png") as img:
        for name, m in members.items():
            (x, y), (fx, fy) = m["footprint_centre"], m["forward_canonical"]
            mid = expected_px(x + fx * ARROW_LEN_M * 0.6, y + fy * ARROW_LEN_M * 0.6, render, f)
            assert dark(img, mid), name
    shutil.rmtree(group)


def white_boxes(path: Path) -> list[tuple[int, int, int, int]]:
    """Bounding boxes (x0, y0, x1, y1) of the connected areas of pure white: the label
    backgrounds and the legend's (the render itself holds no pure white)."""
    with Image.open(path) as img:
        white = np.all(np.asarray(img.convert("RGB")) == 255, axis=2)
    seen = np.zeros_like(white)
    boxes = []
    for r0, c0 in zip(*np.nonzero(white)):
        if seen[r0, c0]:
            continue
        seen[r0, c0] = True
        stack, rows, cols = [(r0, c0)], [], []
        while stack:
            r, c = stack.pop()
            rows.append(r)
            cols.append(c)
            for rr, cc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
                if (0 <= rr < white.shape[0] and 0 <= cc < white.shape[1]
                        and white[rr, cc] and not seen[rr, cc]):
                    seen[rr, cc] = True
                    stack.append((rr, cc))
        if len(rows) > 20:
            boxes.append((min(cols), min(rows), max(cols), max(rows)))
    return boxes


def test_labels_of_a_row_of_chairs_do_not_overlap(tmp_path: Path) -> None:
    """The scene fixture's TV group (tv_row_3, facing away; iter_0 as rendered at 64 px):
    three chairs 0.51 m apart whose labels, each wider than that, used to sit on top of
    each other. Measured from the picture: one white box per label, none touching another,
    each over its own chair's column."""
    render = {"resolution": 64, "bev_metres_per_pixel": 0.0703125,
              "bev_center_xy": [0.0, 0.0605], "bev_ortho_scale_m": 4.5}
    Image.new("RGB", (64, 64), (243, 243, 243)).save(tmp_path / "render_bev.png")
    centres = {"tv.chair_1": [-0.509, -1.549], "tv.chair_2": [0.0, -1.566],
               "tv.chair_3": [0.509, -1.549]}
    geometry = {"anchor": {"shape": "rect", "centre": [0.0, 0.0605],
                           "half_extents_m": [0.71, 0.22], "edges": {}},
                "members": {name: {"footprint_centre": c, "forward_canonical": [0.0, -1.0],
                                   "facing_target": [0.0, 1.0], "facing_error_deg": 180.0,
                                   "penetrations": {}} for name, c in centres.items()}}
    annotate_bev(tmp_path / "render_bev.png", tmp_path / "out.png", geometry, render)
    f = upscale_factor(64)
    boxes = white_boxes(tmp_path / "out.png")
    legend = [b for b in boxes if b[0] < 20 and b[1] < 20]
    labels = [b for b in boxes if b not in legend]
    assert len(legend) == 1 and len(labels) == 3, boxes
    for name, (x, y) in centres.items():
        column = expected_px(x, y, render, f)[0]
        over = [b for b in labels if b[0] <= column <= b[2]]
        assert len(over) == 1, (name, column, labels)
        assert over[0][3] < expected_px(x, y, render, f)[1]   # behind it: +Y, above
