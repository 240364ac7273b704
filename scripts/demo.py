#!/usr/bin/env python3
"""The bundled example, end to end: build a fixture island from the real CC0 assets and let
the product's own loop refine it - ``scripts/agent.py run --policy solver``: init_iter0, the
built-in solver's decisions checked by the adapter against the contract and the magnitude
policy, every iteration stepped by iter_step, the convergence gate, the final iteration
promoted - then print each iteration's measured geometry and where the renders are.

    .venv/bin/python scripts/demo.py [--fixture long_table_6] [--variant turned_90]
                                     [--max-iter 20] [--out out/demo] [--blender-bin PATH]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))



def _run(script: str, *args: str) -> None:
    cmd = [sys.executable, str(REPO_ROOT / "scripts" / script), *args]
    print("$", " ".join(cmd[1:]), flush=True)
    proc = subprocess.run(cmd, text=True, capture_output=True)
    sys.stdout.write(proc.stdout)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"demo: {script} exited {proc.returncode}")


def _summary(geometry: dict) -> str:
    g = geometry["group"]
    spacing = g["spacing"]
    dev = spacing.get("ring_gap_cv") if spacing.get("ring_gap_cv") is not None \
        else spacing.get("max_deviation_m")
    return (f"facing max {g['facing_error_max_deg'] or 0:6.1f} deg | clearance err max "
            f"{g['clearance_error_max_m']:.3f} m | spacing {dev:.3f} | penetrations "
            f"{g['penetration_pairs']} | pattern match {g['pattern']['match']}")


def _montage(first: Path, last: Path, out: Path) -> Path:
    """iter_0 above the final iteration, perspective and top view side by side."""
    from PIL import Image, ImageDraw

    tiles = [[Image.open(d / f"render_{v}.png").convert("RGB") for v in ("persp", "bev")]
             for d in (first, last)]
    w, h = tiles[0][0].size
    label_h = 28
    sheet = Image.new("RGB", (2 * w, 2 * (h + label_h)), "white")
    draw = ImageDraw.Draw(sheet)
    for row, (d, pair) in enumerate(zip((first, last), tiles)):
        y = row * (h + label_h)
        draw.text((8, y + 8), f"{d.name}: perspective | top view", fill="black")
        for col, img in enumerate(pair):
            sheet.paste(img, (col * w, y + label_h))
    sheet.save(out)
    return out


def main() -> int:
    from scripts._cli import run_main

    return run_main("demo", _main)


def _main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixture", default="long_table_6")
    ap.add_argument("--variant", default="turned_90")
    ap.add_argument("--max-iter", type=int, default=20)
    ap.add_argument("--out", default=str(REPO_ROOT / "out" / "demo"))
    ap.add_argument("--blender-bin", default=None)
    args = ap.parse_args()
    from fixtures.assets import assets_dir
    from fixtures.build import build_fixture
    from worker.launch import resolve_blender

    assets_dir()
    backend = resolve_blender(args.blender_bin, None)
    group = build_fixture(args.fixture, args.variant, args.out, backend=backend)
    print(f"demo: built {group} with {backend.describe()}")
    flags = ["--group-dir", str(group), "--quiet", "--max-iter", str(args.max_iter)]
    if args.blender_bin:
        flags += ["--blender-bin", args.blender_bin]
    _run("agent.py", "run", "--policy", "solver", *flags)
    refiner = group / "simple_refiner"
    run = json.loads((refiner / "run.json").read_text())
    final = int(run["final_iter"])
    for n in range(final + 1):
        geometry = json.loads((refiner / f"iter_{n}" / "geometry.json").read_text())
        print(f"iter {n}: {_summary(geometry)}")
    last = refiner / f"iter_{final}"
    summary = _montage(refiner / "iter_0", last, group / "demo_summary.png")
    print("\ndemo: outputs")
    print(f"  before/after: {summary}")
    print(f"  renders : {last / 'render_persp.png'}")
    print(f"            {last / 'render_bev.png'}")
    print(f"  geometry: {last / 'geometry.json'}")
    print(f"  the run : {refiner / 'run.json'} (stop reason: {run.get('stop_reason')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
