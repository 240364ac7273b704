#!/usr/bin/env python3
"""Benchmarks: speed, memory and quality targets live here, never in timed unit tests.

Each section is a module ``scripts/benchmarks/<name>.py`` exposing ``TITLE`` and
``run(args) -> dict`` returning ``{"columns": [...], "rows": [[...], ...], "notes": [...],
"data": {...}}``. This driver runs the chosen sections, prints one table per section and
writes everything to JSON.

    .venv/bin/python scripts/bench.py                       # every section
    .venv/bin/python scripts/bench.py --section step --repeat 7 --json out/bench.json
    .venv/bin/python scripts/bench.py --section warm --smoke  # does it still run? (CI)

``--smoke`` (implies ``--quick``) is the least work that goes through a section's code:
one repetition, 64 px, the fewest cases, no Blender-binary rows unless ``--blender-bin``
names one. Its figures mean nothing; ``tests/test_bench_sections.py`` runs every section so
in CI, so a moved module cannot break one silently (issue 33).
"""
from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

# A section is a module of scripts/benchmarks/ named here; adding one is one more name.
SECTIONS = ("step", "quality", "warm", "batch", "fronts", "units", "scene", "propose",
            "crowded")


def available() -> list[str]:
    return [s for s in SECTIONS
            if (REPO_ROOT / "scripts" / "benchmarks" / f"{s}.py").is_file()]


def print_table(title: str, columns: list[str], rows: list[list]) -> None:
    cells = [[_fmt(v) for v in row] for row in rows]
    widths = [max(len(str(c)), *(len(r[i]) for r in cells)) if cells else len(str(c))
              for i, c in enumerate(columns)]
    print(f"\n## {title}")
    print("  ".join(str(c).ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)))


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"
    return "-" if value is None else str(value)


def main(argv: list[str] | None = None) -> int:
    from scripts._cli import run_main

    return run_main("bench", lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--section", action="append", choices=SECTIONS,
                    help="run only these sections (repeatable); default: all available")
    ap.add_argument("--repeat", type=int, default=5, help="timed repetitions (median of N)")
    ap.add_argument("--resolution", type=int, default=512)
    ap.add_argument("--scene-repeat", type=int, default=3,
                    help="scene section: runs per scene and mode (median; 1 with --quick)")
    ap.add_argument("--blender-bin", default=None, help="Blender binary for binary-path rows")
    ap.add_argument("--work", default=str(REPO_ROOT / "out" / "bench"), help="scratch dir")
    ap.add_argument("--json", default=str(REPO_ROOT / "out" / "bench.json"))
    ap.add_argument("--quick", action="store_true", help="small sizes, for smoke-testing")
    ap.add_argument("--smoke", action="store_true",
                    help="implies --quick: the least work through each section's code (CI); "
                         "the figures mean nothing")
    ap.add_argument("--split", choices=("tuned", "untouched", "both"), default="both",
                    help="fronts and propose sections: which part of the frozen "
                         "front-corpus split (fixtures/fronts_split.json) to report; both = "
                         "both parts")
    args = ap.parse_args(argv)
    if args.smoke:
        args.quick, args.repeat, args.scene_repeat = True, 1, 1
        args.resolution = min(args.resolution, 64)
    from fixtures.assets import assets_dir

    assets_dir()  # every section builds from the assets: a missing folder is one line, up front
    sections = args.section or available()
    missing = [s for s in sections if s not in available()]
    if missing:
        print(f"bench: section(s) not present: {', '.join(missing)}", file=sys.stderr)
        return 2
    report = {"started_utc": datetime.now(UTC).isoformat(timespec="seconds"),
              "machine": {"python": platform.python_version(), "platform": platform.platform(),
                          "cpus": __import__("os").cpu_count()},
              "args": vars(args), "sections": {}}
    for name in sections:
        module = importlib.import_module(f"scripts.benchmarks.{name}")
        t0 = time.perf_counter()
        result = module.run(args)
        result["seconds"] = round(time.perf_counter() - t0, 2)
        report["sections"][name] = result
        if result.get("tables"):   # a section reporting several tables (fronts: per split)
            for table in result["tables"]:
                print_table(f"{module.TITLE}: {table['title']}", table["columns"],
                            table["rows"])
        else:
            print_table(module.TITLE, result["columns"], result["rows"])
        for note in result.get("notes", []):
            print(f"  note: {note}")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(f"\nbench: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
