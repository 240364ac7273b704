#!/usr/bin/env python3
"""Agent adapter: write one iteration's decision safely, or drive a whole group.

    agent.py write --group-dir DIR --iter N [--file F] [--model NAME] [--generated-by NAME]
    agent.py run   --group-dir DIR [--policy solver | command:<shell command>] [--max-iter 20]
                   [--timeout 120] [--model NAME] [--generated-by NAME]
                   [--samples N] [--resolution PX] [--engine E] [--blender-bin PATH]
                   [--config YAML] [--no-daemon] [--quiet]

``write`` reads a decision ``{"members": {...}, "converged"?: bool, "reason_summary"?: str,
"final"?: bool}`` from --file or stdin, checks the contract's hard constraints and the
magnitude policy of iteration N's phase (pattern 1-3: >= 3 members (all if fewer), 1.0 m;
member 4-10: 1-3 members, 0.3 m; micro 11+: 1 member, 0.05 m; yaw free; one penetrating
member alone: 2.0 m), fills _island_meta (image_sha256 of masked.png, else of
iter_(N-1)/render_bev.png) and writes iter_N/transforms.json atomically. Then step it with
iter_step.py.

``run`` drives the contract's loop in this process (init_iter0, decide, write, iter_step;
MIN_ITER 5; converged / 3 empty iterations / exit 4 / failures stop it), marks the last
iteration final, promotes its island.blend, prints the report (<= 80 words) on stdout and
writes simple_refiner/run.json. Every verdict - each progress line, run.json's ``review``
per iteration and final, the report's "Review: pass|fail|uncertain (...)" sentence - is
``island_tools.review.review_island`` (the scene pipeline's review); ``converged`` is
honoured only on a state whose review does not fail (``write`` says why it was not).
A command agent gets a JSON prompt on stdin (paths of the
renders, geometry.json, target_spec.json, the previous transforms.json, the phase and its
caps) and prints its decision JSON on stdout. See island_tools/adapter.py.

On success the report is stdout and ``[agent] run.json: PATH`` stderr; a failure is one line
on stderr, ``[agent] error (exit N): ...`` (what failed; the iteration kept, if any; run.json).

Exit codes: 0 ok; 2 usage (bad flag, wrong iteration number); 3 decision rejected (nothing
written; the line names the member, the cap and the phase); 4 sanity check failed in
iter_step (the run stopped); 9 agent command failed (timeout, non-zero exit, no JSON);
5/6/7/8 target_spec / geometry / Blender / group inputs; 1 internal error.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts._cli import job_runner, parser, progress_printer, run_main, settings_from  # noqa: E402

DEFAULT_WRITE_MODEL = "unspecified"
DEFAULT_WRITE_GENERATED_BY = "scripts/agent.py write"


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="agent", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="validate a decision and write iter_N/transforms.json")
    w.add_argument("--group-dir", required=True, help="<scene_dir>/relation_groups/<G>")
    w.add_argument("--iter", type=int, required=True, dest="n", help="iteration N >= 1")
    w.add_argument("--file", default=None, help="decision JSON file (default: stdin)")
    w.add_argument("--model", default=DEFAULT_WRITE_MODEL,
                   help="_island_meta.model: who decided")
    w.add_argument("--generated-by", default=DEFAULT_WRITE_GENERATED_BY,
                   help="_island_meta.generated_by: the deciding program")
    base = parser("agent run", "drive a group through the refinement loop")
    r = sub.add_parser("run", parents=[base], add_help=False,
                       help="init_iter0 + the whole loop with a policy")
    r.add_argument("--policy", default="solver",
                   help="'solver' (built in) or 'command:<shell command>' (external agent)")
    r.add_argument("--max-iter", type=int, default=20, help="MAX_ITER (default 20)")
    r.add_argument("--timeout", type=float, default=120.0,
                   help="seconds a command agent may take per iteration (default 120)")
    r.add_argument("--model", default=None,
                   help="_island_meta.model (default: 'solver', or 'external' for a command)")
    r.add_argument("--generated-by", default=None,
                   help="_island_meta.generated_by (default: the solver module or the command)")
    return ap.parse_args(argv)


def _write(args: argparse.Namespace) -> int:
    from island_tools.adapter import read_decision_text, write_decision
    from island_tools.errors import UsageError
    from island_tools.loop_lines import write_lines

    source = args.file or "<stdin>"
    try:
        text = Path(args.file).read_text(encoding="utf-8") if args.file else sys.stdin.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the decision: {exc}", file=source,
                         fix="pass a readable UTF-8 JSON file to --file") from exc
    result = write_decision(args.group_dir, args.n, read_decision_text(text, source),
                            model=args.model, generated_by=args.generated_by)
    out, err = write_lines(result)
    for line in err:
        print(line, file=sys.stderr)
    for line in out:
        print(line)
    return 0


def _run(args: argparse.Namespace) -> int:
    from island_tools.adapter import run_group

    settings = settings_from(args)
    _, run_job = job_runner(settings)
    report = run_group(args.group_dir, args.policy, settings, run_job, max_iter=args.max_iter,
                       progress=progress_printer(args), timeout_s=args.timeout,
                       model=args.model, generated_by=args.generated_by)
    if report.exit_code == 0:
        print(report.report_text)
        print(f"[agent] run.json: {report.run_json}", file=sys.stderr)
        return 0
    # A failure is one line, as every failure of the loop's CLIs: what failed, what was kept.
    kept = (f"; iter_{report.final_iter} is final and promoted to island.blend"
            if report.final_iter else "")
    log = f"; run.json: {report.run_json}" if report.run_json else ""
    what = "; ".join(report.errors) or report.stop_reason
    print(f"[agent] error (exit {report.exit_code}): {what}{kept}{log}", file=sys.stderr)
    return report.exit_code


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    return run_main("agent", lambda: _write(args) if args.command == "write" else _run(args))


if __name__ == "__main__":
    sys.exit(main())
