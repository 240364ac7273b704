#!/usr/bin/env python3
"""One refinement iteration (contract: stage3-sub-island-refiner/src/iter_step.py).

Reads iter_N/transforms.json, applies its per-member deltas to iter_(N-1)'s poses in the
canonical frame, saves iter_N/island.blend, reads the poses BACK from the saved file,
renders render_persp.png + render_bev.png, checks sanity, computes geometry.json and writes
info.json + current_state.json. Prints "[iter_step] sanity OK" on success.

Exit codes: 0 ok; 2 usage / wrong iteration number; 3 invalid transforms.json; 4 positions
read back from iter_N/island.blend identical to iter_(N-1) despite non-trivial deltas (STOP
the loop); 5 target_spec.json missing/invalid; 6 geometry failed; 7 Blender failed;
8 group inputs invalid; 1 internal error. A failed step leaves earlier iterations untouched.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts._step_host import run_cli  # noqa: E402


def run(argv: list[str] | None = None) -> int:
    """The call in this process (the step host runs this too)."""
    from scripts._cli import job_runner, parser, progress_printer, run_main, settings_from

    p = parser("iter_step", __doc__.splitlines()[0])
    p.add_argument("--iter", type=int, required=True, dest="n", help="iteration N >= 1")
    args = p.parse_args(argv)

    def body() -> int:
        from island_tools.iteration import iter_step
        from island_tools.loop_lines import iter_step_lines

        settings = settings_from(args)
        _, run_job = job_runner(settings)
        result = iter_step(args.group_dir, args.n, settings, run_job, progress_printer(args))
        out, err = iter_step_lines(result)
        for line in err:
            print(line, file=sys.stderr)
        for line in out:
            print(line)
        return 0

    return run_main("iter_step", body)


def main(argv: list[str] | None = None) -> int:
    """On the step host when the warm path is on (scripts/_step_host.py), else in-process."""
    argv = list(sys.argv[1:] if argv is None else argv)
    code = run_cli("iter_step", argv)
    return run(argv) if code is None else code


if __name__ == "__main__":
    sys.exit(main())
