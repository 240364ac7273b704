"""Contact sheets for checking the front of every glb in assets/infinigen/ by eye.

Run with any Python that has bpy (4.2 in the Infinigen venv, or the project's .venv with
bpy 5.0) and Pillow:

    /work/infinigen_venv/bin/python tools/infinigen_corpus/render_checks.py
    /work/infinigen_venv/bin/python tools/infinigen_corpus/render_checks.py --files bed_*

Each glb is re-imported with Blender's glTF importer (so what is drawn is the Blender frame
after import, the frame the manifest's front_axis is given in) and drawn twice with
Workbench, from above at an angle: once from the +X/-Y diagonal, once from the -X/+Y
diagonal, so every side is seen in one of the two views. A red arrow starts above the
bounding-box centre and points along the claimed front (fronts.tsv, or ``--claim``);
"+X -X +Y -Y" (blue) mark the floor beyond each side. Symmetric pieces (front ``none``) get no
arrow. Two assets per 512 x 512 sheet, written to assets/infinigen/checks/sheet_NN.png,
and checks/sheet_index.tsv says which file is on which sheet.
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
ASSETS = REPO / "assets" / "infinigen"
FRONTS_TSV = HERE / "fronts.tsv"
TILE = 256
View = tuple[Path, dict[str, tuple[int, int]]]
AXES = {"+X": (1, 0), "-X": (-1, 0), "+Y": (0, 1), "-Y": (0, -1)}


def _arrow(start: tuple[float, float, float], direction: tuple[int, int],
           length: float) -> None:
    import bpy

    dx, dy = direction
    yaw = math.atan2(dy, dx)
    shaft = length * 0.72
    radius = max(0.012, length * 0.045)
    red = (0.95, 0.05, 0.05, 1.0)
    bpy.ops.mesh.primitive_cylinder_add(
        radius=radius, depth=shaft, vertices=16,
        location=(start[0] + dx * shaft / 2, start[1] + dy * shaft / 2, start[2]),
        rotation=(0, math.pi / 2, yaw))
    bpy.context.active_object.color = red
    bpy.ops.mesh.primitive_cone_add(
        radius1=radius * 2.6, depth=length - shaft, vertices=16,
        location=(start[0] + dx * (shaft + (length - shaft) / 2),
                  start[1] + dy * (shaft + (length - shaft) / 2), start[2]),
        rotation=(0, math.pi / 2, yaw))
    bpy.context.active_object.color = red
    bpy.ops.mesh.primitive_uv_sphere_add(radius=radius * 1.6, location=start)
    bpy.context.active_object.color = red


def render_asset(glb: Path, claim: str, out_prefix: Path) -> list[View]:
    """Two views of one glb with the claimed front arrow; the PNGs and where (in pixels)
    each axis label goes."""
    import bpy
    import numpy as np
    from bpy_extras.object_utils import world_to_camera_view
    from mathutils import Vector

    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.import_scene.gltf(filepath=str(glb))
    meshes = [o for o in bpy.context.scene.objects if o.type == "MESH"]
    co = np.concatenate([
        np.array([o.matrix_world @ v.co for v in o.data.vertices]) for o in meshes])
    for o in meshes:
        o.color = (0.78, 0.74, 0.66, 1.0)
    lo, hi = co.min(0), co.max(0)
    ext = hi - lo
    c = (lo + hi) / 2
    span = float(max(ext[0], ext[1]))
    size = max(0.1, 0.2 * span)
    anchors = {axis: Vector((c[0] + dx * (ext[0] / 2 + 2.0 * size),
                             c[1] + dy * (ext[1] / 2 + 2.0 * size), lo[2]))
               for axis, (dx, dy) in AXES.items()}
    # faint axis lines on the floor through the centre
    for dx, dy, length in ((1, 0, ext[0]), (0, 1, ext[1])):
        bpy.ops.mesh.primitive_cube_add(size=1, location=(c[0], c[1], lo[2]))
        line = bpy.context.active_object
        line.scale = (dx * (length + 2 * size) + 0.005 * span + 0.002,
                      dy * (length + 2 * size) + 0.005 * span + 0.002, 0.002)
        line.color = (0.45, 0.45, 0.45, 1.0)
    if claim in AXES:
        along = ext[0] if claim.endswith("X") else ext[1]
        _arrow((float(c[0]), float(c[1]), float(hi[2]) + 0.03 * span + 0.02), AXES[claim],
               0.5 * along + 0.22 * span + 0.05)

    scene = bpy.context.scene
    scene.render.engine = "BLENDER_WORKBENCH"
    scene.render.resolution_x = scene.render.resolution_y = TILE
    scene.render.film_transparent = False
    shading = scene.display.shading
    shading.light = "STUDIO"
    shading.color_type = "OBJECT"
    shading.show_object_outline = True
    shading.show_cavity = True
    if scene.world is None:
        scene.world = bpy.data.worlds.new("world")
    scene.world.color = (0.8, 0.82, 0.86)
    cam = bpy.data.objects.new("cam", bpy.data.cameras.new("cam"))
    scene.collection.objects.link(cam)
    scene.camera = cam
    cam.data.lens = 40
    radius = 0.5 * float(np.linalg.norm(ext + np.array([2 * size, 2 * size, 0])))
    dist = radius / math.sin(math.radians(34) / 2) * 0.72
    paths = []
    for k, (ax, ay) in enumerate(((1, -1), (-1, 1))):
        elev = math.radians(38)
        d = np.array([ax * math.cos(elev) / math.sqrt(2), ay * math.cos(elev) / math.sqrt(2),
                      math.sin(elev)])
        cam.location = tuple(c + d * dist)
        direction = -d
        cam.rotation_euler = (math.atan2(math.hypot(direction[0], direction[1]),
                                         -direction[2]), 0.0,
                              math.atan2(direction[1], direction[0]) - math.pi / 2)
        path = out_prefix.with_name(f"{out_prefix.name}_{k}.png")
        scene.render.filepath = str(path)
        bpy.ops.render.render(write_still=True)
        bpy.context.view_layer.update()
        labels = {}
        for axis, p in anchors.items():
            u, v, _ = world_to_camera_view(scene, cam, p)
            labels[axis] = (min(max(int(u * TILE), 14), TILE - 14),
                            min(max(int((1 - v) * TILE), 22), TILE - 22))
        paths.append((path, labels))
    return paths


def _font(size: int) -> Any:
    from PIL import ImageFont

    for name in ("DejaVuSans-Bold.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"):
        try:
            return ImageFont.truetype(name, size)
        except OSError:
            continue
    return ImageFont.load_default()


def compose(rows: list[tuple[str, str, list[View]]], out: Path) -> None:
    """Rows of (file name, claim, two views) into one sheet with captions and labels."""
    from PIL import Image, ImageDraw

    big, small = _font(15), _font(11)

    sheet = Image.new("RGB", (2 * TILE, TILE * len(rows)), "white")
    draw = ImageDraw.Draw(sheet)
    for r, (name, claim, views) in enumerate(rows):
        for k, (p, labels) in enumerate(views):
            sheet.paste(Image.open(p).convert("RGB"), (k * TILE, r * TILE))
            for axis, (u, v) in labels.items():
                draw.text((k * TILE + u, r * TILE + v), axis, fill=(0, 0, 160), font=big,
                          anchor="mm", stroke_width=2, stroke_fill="white")
        text = f"{name}  front={claim}"
        draw.rectangle([0, r * TILE, draw.textlength(text, font=small) + 6, r * TILE + 14],
                       fill="white")
        draw.text((3, r * TILE + 1), text, fill="black", font=small)
        draw.text((3, r * TILE + TILE - 14), "view from +X-Y", fill="black", font=small)
        draw.text((TILE + 3, r * TILE + TILE - 14), "view from -X+Y", fill="black",
                  font=small)
        draw.line([0, r * TILE, 2 * TILE, r * TILE], fill="black")
    draw.line([TILE, 0, TILE, TILE * len(rows)], fill=(150, 150, 150))
    sheet.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)


def main(argv: list[str] | None = None) -> int:
    global TILE
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--assets", type=Path, default=ASSETS)
    ap.add_argument("--out", type=Path, default=None, help="default <assets>/checks")
    ap.add_argument("--files", nargs="*", default=["*.glb"], help="glob patterns")
    ap.add_argument("--claim", default=None,
                    help="draw this front for every file instead of fronts.tsv's")
    ap.add_argument("--per-sheet", type=int, default=2)
    ap.add_argument("--prefix", default="sheet")
    ap.add_argument("--tile", type=int, default=TILE, help="pixels per view (sheet = 2 tiles)")
    args = ap.parse_args(argv)
    TILE = args.tile
    out = args.out or args.assets / "checks"
    out.mkdir(parents=True, exist_ok=True)
    fronts: dict[str, str] = {}
    if FRONTS_TSV.exists():
        with FRONTS_TSV.open(encoding="utf-8") as fh:
            fronts = {Path(r["file"]).name: r["front_axis"]
                      for r in csv.DictReader(fh, delimiter="\t")}
    files = sorted(p for p in args.assets.glob("*.glb")
                   if any(fnmatch.fnmatch(p.name, pat) for pat in args.files))
    index = []
    with tempfile.TemporaryDirectory() as tmp:
        rows: list[tuple[str, str, list[View]]] = []
        n_sheet = 0
        for i, glb in enumerate(files):
            claim = args.claim or fronts.get(glb.name, "+X")
            rows.append((glb.name, claim, render_asset(glb, claim, Path(tmp) / glb.stem)))
            if len(rows) == args.per_sheet or i == len(files) - 1:
                n_sheet += 1
                sheet = out / f"{args.prefix}_{n_sheet:02d}.png"
                compose(rows, sheet)
                index += [(name, c, sheet.name) for name, c, _ in rows]
                print(sheet, [r[0] for r in rows], flush=True)
                rows = []
    with (out / f"{args.prefix}_index.tsv").open("w", encoding="utf-8") as fh:
        fh.write("file\tclaimed_front\tsheet\n")
        fh.writelines(f"{n}\t{c}\t{s}\n" for n, c, s in index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
