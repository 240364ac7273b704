#!/usr/bin/env python3
"""iter_0 baseline for one island (contract: stage3-sub-island-refiner/src/init_iter0.py).

Rotates an existing simple_refiner/ to simple_refiner.bak.<UTC YYYYMMDD_HHMMSS>/ (older
backups untouched), then writes a fresh simple_refiner/iter_0/ with island.blend,
render_persp.png, render_bev.png, info.json, transforms.json (empty members),
current_state.json and geometry.json; <group>/forward_axes.json and meshes.npz once.
Exit codes: see island_tools/errors.py (0 ok, 5 target_spec, 7 Blender, 8 group inputs).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts._step_host import run_cli  # noqa: E402


def run(argv: list[str] | None = None) -> int:
    """The call in this process (the step host runs this too)."""
    from scripts._cli import job_runner, parser, progress_printer, run_main, settings_from

    args = parser("init_iter0", __doc__.splitlines()[0]).parse_args(argv)

    def body() -> int:
        from island_tools.iteration import init_iter0
        from island_tools.loop_lines import init_iter0_lines

        settings = settings_from(args)
        backend, run_job = job_runner(settings)
        result = init_iter0(args.group_dir, settings, run_job, progress_printer(args))
        for line in init_iter0_lines(result, backend.describe()):
            print(line)
        return 0

    return run_main("init_iter0", body)


def main(argv: list[str] | None = None) -> int:
    """On the step host when the warm path is on (scripts/_step_host.py), else in-process."""
    argv = list(sys.argv[1:] if argv is None else argv)
    code = run_cli("init_iter0", argv)
    return run(argv) if code is None else code


if __name__ == "__main__":
    sys.exit(main())
