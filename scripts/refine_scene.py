#!/usr/bin/env python3
"""Refine every relation group of a scene (contract: stage3-scene-refinement).

    island-refine [run] --scene-dir DIR [--policy solver|command:<cmd>] [--max-iter 20]
                  [--max-rounds 3] [--min-delta 0.01] [--timeout-s 120] [--restart]
                  [--strict] [--blender-bin PATH] [--engine E] [--resolution PX] [--samples N]
                  [--config YAML] [--quiet]
                  [--propose [--force] [--include-uncertain | --leave-uncertain]]
    island-refine propose --scene-dir DIR [--force] [--blender-bin PATH] [--config YAML]
    island-refine report DIR
    island-refine mcp --root DIR [--root DIR ...] [--blender-bin PATH] [--engine E]
                  [--resolution PX] [--samples N] [--config YAML] [--no-daemon]
    island-refine batch SCENE_DIR... [--cluster local|tcp://HOST:PORT|slurm|pbs]
                  [--workers N] [--retries K] [--print-job-script] [run flags above]

``propose`` reads only ``blend/stage3-sub-planned.blend`` and writes
``inputs/relation_graph.json``: the furniture groups its geometry shows, each confident or
uncertain with the reasons (island_tools/scene/propose.py); it never overwrites a graph
without ``--force`` (exit 2) and writes nothing when it finds no group (exit 20). ``run
--propose`` proposes first (a graph proposed from this very scene is reused, so a re-run
resumes), then refines the confident groups, and the uncertain groups whose only doubt is an
object they do not hold (``proposal.doubtful``) for the members they hold, the doubtful
objects kept where they stand; those report ``uncertain``, never ``pass`` (exit 24). Any
other uncertain group is left as the scene has it and reported like a refused group (exit
24). ``--include-uncertain`` refines every uncertain group with all its members (still
reported uncertain); ``--leave-uncertain`` leaves every uncertain group (before issue 32).

Stages: validate -> rebuild_islands -> refine (+ verify, unknowns, repair rounds, score gate)
-> merge_back -> finalize -> eval (docs/SCENE_PIPELINE.md). Resumable: re-run the same
command after a crash; completed groups are skipped, unfinished ones redone. ``batch`` runs
many scenes on Dask, one task per island (docs/BATCH.md); its exit code is 0 when every
scene finished with every island completed, 21 when any island or scene failed, 24 when
none failed but a scene is partial (groups refused up front; ``--strict`` fails it instead). ``mcp``
serves the island loop and these scene commands as Model Context Protocol tools over stdio,
confined to the --root directories (island_tools/mcp_server.py).

Exit codes: 0 every flagged group completed; 2 usage (bad flag, another run active, inputs
changed since the last run without --restart, state.json unreadable or mistyped or claiming
what ledger.sqlite does not record, ledger.sqlite corrupt; nothing written); 6 geometry; 7
Blender/worker; 8 the input scene is missing or unreadable; 20 relation_graph.json invalid
(unknown object, object in two groups, anchor as member, empty group, unsafe group id, bad
target_spec; nothing is written); 21 finished but some groups failed; 22 integrity (input
scene changed, merged scene read back wrong); 23 refused up front with --strict (a unit
cannot be refined as the scene holds it; nothing written); 24 partial: finished, every
other group refined and merged, but some groups were refused (left as the input holds them;
metrics.json names them); 1 internal; 130/143 interrupted/terminated (the run is marked
failed in the ledger). Details: docs/SCENE_PIPELINE.md.
"""
from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts._cli import (  # noqa: E402
    job_runner,
    job_slots,
    progress_printer,
    run_main,
    say,
    settings_from,
)

PROG = "refine_scene"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        self.print_usage(sys.stderr)
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _add_run_flags(run: argparse.ArgumentParser) -> None:
    run.add_argument("--policy", default="solver",
                     help="'solver' (default) or 'command:<shell command>' (external agent)")
    run.add_argument("--max-iter", type=int, default=20, help="iterations per round (20)")
    run.add_argument("--max-rounds", type=int, default=3,
                     help="refine + repair/unknown rounds per group (3)")
    run.add_argument("--min-delta", type=float, default=0.01,
                     help="a round replaces the previous one only if the violation score "
                          "drops by at least this much (0.01)")
    run.add_argument("--timeout-s", type=float, default=120.0,
                     help="per agent-command call (policy command:...) (120)")
    run.add_argument("--restart", action="store_true",
                     help="start over: move earlier outputs to previous/<UTC>/")
    run.add_argument("--strict", action="store_true",
                     help="a unit that must be refused refuses the whole scene (exit 23, "
                          "nothing written); default: it costs its own group only (exit 24, "
                          "partial)")
    run.add_argument("--blender-bin", default=None,
                     help="Blender binary ('bpy' = embedded); default: DIRECTORYS.yaml, "
                          "$BLENDER, embedded bpy, blender on PATH")
    run.add_argument("--engine", choices=("workbench", "cycles"), default=None)
    run.add_argument("--resolution", type=int, default=None, help="render size in px")
    run.add_argument("--samples", type=int, default=None)
    run.add_argument("--config", default=None, help="DIRECTORYS.yaml to use")
    run.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    doubt = run.add_mutually_exclusive_group()
    doubt.add_argument("--include-uncertain", action="store_true",
                       help="refine every group propose marked uncertain, all its members "
                            "(default: only those whose doubt is an object they do not "
                            "hold, for the members they hold); reported uncertain")
    doubt.add_argument("--leave-uncertain", action="store_true",
                       help="leave every group propose marked uncertain as the scene has "
                            "it, reported like a refused group (the behaviour before "
                            "issue 32)")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="island-refine", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command")
    run = sub.add_parser("run", help="run (or resume) the pipeline on a scene directory")
    run.add_argument("--scene-dir", required=True, help="holds inputs/ and blend/")
    run.add_argument("--workers", type=int, default=None, dest="group_workers",
                     help="groups refined side by side, each on its own warm worker "
                          "(default: one per core; 1 = one after another). Needs the warm "
                          "worker or a Blender binary; the bpy module in-process is one")
    run.add_argument("--propose", action="store_true",
                     help="propose inputs/relation_graph.json from the scene's geometry "
                          "first (island-refine propose), then refine")
    run.add_argument("--force", action="store_true",
                     help="with --propose: replace a relation graph that is there")
    _add_run_flags(run)
    pro = sub.add_parser("propose", help="propose inputs/relation_graph.json from the scene's "
                                         "furniture geometry")
    pro.add_argument("--scene-dir", required=True, help="holds blend/stage3-sub-planned.blend")
    pro.add_argument("--force", action="store_true", help="replace a relation graph that is "
                                                         "there")
    pro.add_argument("--blender-bin", default=None,
                     help="Blender binary ('bpy' = embedded); default: DIRECTORYS.yaml, "
                          "$BLENDER, embedded bpy, blender on PATH")
    pro.add_argument("--config", default=None, help="DIRECTORYS.yaml to use")
    rep = sub.add_parser("report", help="print the ledger and metrics as tables")
    rep.add_argument("scene_dir")
    bat = sub.add_parser("batch", help="refine many scenes on Dask, one task per island")
    bat.add_argument("scene_dirs", nargs="*", metavar="SCENE_DIR")
    bat.add_argument("--cluster", default="local",
                     help="'local' (default: a LocalCluster, one single-threaded worker per "
                          "core), 'tcp://HOST:PORT' (a farm scheduler), 'slurm' or 'pbs' "
                          "(dask-jobqueue)")
    bat.add_argument("--workers", type=int, default=None,
                     help="local: worker processes (default: one per core); slurm/pbs: jobs")
    bat.add_argument("--retries", type=int, default=2,
                     help="extra tries of a failing task, and worker deaths a task may cause "
                          "(allowed-failures) before it is recorded failed (2)")
    bat.add_argument("--print-job-script", action="store_true",
                     help="slurm/pbs: print the generated job script and exit")
    bat.add_argument("--queue", default=None, help="slurm/pbs queue (partition)")
    bat.add_argument("--account", default=None, help="slurm/pbs account")
    bat.add_argument("--walltime", default="04:00:00", help="slurm/pbs job walltime")
    bat.add_argument("--memory", default="8GB", help="slurm/pbs memory per job")
    bat.add_argument("--job-directive", action="append", default=[], metavar="LINE",
                     help="extra scheduler directive for the job script (repeatable)")
    bat.add_argument("--log-dir", default=None,
                     help="worker logs (Blender output); default: a temp dir named after "
                          "the run")
    _add_run_flags(bat)
    mcp = sub.add_parser("mcp", help="serve the loop as MCP tools over stdio")
    mcp.add_argument("--root", action="append", required=True, metavar="DIR",
                     help="a directory the tools may read and write under (repeatable); "
                          "every other path is refused")
    mcp.add_argument("--blender-bin", default=None,
                     help="Blender binary ('bpy' = embedded); default: DIRECTORYS.yaml, "
                          "$BLENDER, embedded bpy, blender on PATH")
    mcp.add_argument("--engine", choices=("workbench", "cycles"), default=None)
    mcp.add_argument("--resolution", type=int, default=None, help="render size in px")
    mcp.add_argument("--samples", type=int, default=None)
    mcp.add_argument("--config", default=None, help="DIRECTORYS.yaml to use")
    mcp.add_argument("--no-daemon", action="store_true",
                     help="Blender work in this process (or a subprocess per job) instead of "
                          "the warm worker")
    for s in (run, pro, rep, bat, mcp):
        s.error = p.error  # type: ignore[method-assign]
    return p


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("run", "propose", "report", "batch", "mcp", "-h", "--help"):
        argv = ["run", *argv]
    args = _parser().parse_args(argv)
    if args.command == "report":
        return _report(args.scene_dir)
    if args.command == "batch":
        return _batch(args, argv)
    if args.command == "mcp":
        return _mcp(args)
    if args.command == "propose":
        return _propose(args)
    # A scheduler's SIGTERM unwinds like an exception, so the run is marked failed.
    previous = signal.signal(signal.SIGTERM, _terminate)

    def body() -> int:
        from island_tools.scene.pipeline import run_scene

        settings, options = _run_options(args)
        _, run_job = job_runner(settings)
        progress = progress_printer(args)
        if args.propose:
            from island_tools.scene.propose import proposal_lines, propose_for_run

            doc, reused = propose_for_run(args.scene_dir, run_job, force=args.force)
            for line in proposal_lines(doc, reused):
                say(line)
        code, line = run_scene(args.scene_dir, options, run_job, progress=progress,
                               job_slots=job_slots(settings), argv=argv, prog=PROG)
        say(line)
        return code

    try:
        return run_main(PROG, body)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run_options(args: argparse.Namespace):
    """(Settings, RunOptions) from the flags ``run`` and ``batch`` share, validated."""
    from island_tools.scene.pipeline import RunOptions

    settings = settings_from(args)
    options = RunOptions(policy=args.policy, max_iter=args.max_iter, max_rounds=args.max_rounds,
                         min_delta=args.min_delta, timeout_s=args.timeout_s,
                         restart=args.restart, strict=args.strict, settings=settings,
                         workers=getattr(args, "group_workers", None),
                         include_uncertain=args.include_uncertain,
                         leave_uncertain=args.leave_uncertain)
    options.check()
    return settings, options


def _batch(args: argparse.Namespace, argv: list[str]) -> int:
    from scripts.batch import CLUSTERS, ClusterOptions, execute, print_job_script, render_table

    if args.cluster not in CLUSTERS and "://" not in args.cluster:
        print(f"[{PROG}] error (exit 2): --cluster must be local, slurm, pbs or a scheduler "
              f"address like tcp://HOST:8786, not {args.cluster!r}", file=sys.stderr)
        return 2
    if args.workers is not None and args.workers < 1 or args.retries < 0:
        print(f"[{PROG}] error (exit 2): --workers must be >= 1 and --retries >= 0",
              file=sys.stderr)
        return 2
    cluster = ClusterOptions(spec=args.cluster, workers=args.workers, retries=args.retries,
                             queue=args.queue, account=args.account, walltime=args.walltime,
                             memory=args.memory, job_directives=tuple(args.job_directive))
    if args.print_job_script:
        return print_job_script(cluster)
    if not args.scene_dirs:
        print(f"[{PROG}] error (exit 2): batch needs at least one SCENE_DIR", file=sys.stderr)
        return 2
    previous = signal.signal(signal.SIGTERM, _terminate)

    def body() -> int:
        _, options = _run_options(args)
        result = execute(args.scene_dirs, options, cluster, argv=argv, quiet=args.quiet,
                         log_dir=args.log_dir)
        sys.stdout.write(render_table(result))   # report.table escapes every cell
        return result.exit_code

    try:
        return run_main(PROG, body)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _propose(args: argparse.Namespace) -> int:
    def body() -> int:
        from island_tools.config import load_settings, with_overrides
        from island_tools.scene.propose import proposal_lines, propose_scene

        settings = with_overrides(load_settings(args.config), blender_bin=args.blender_bin)
        _, run_job = job_runner(settings)
        doc = propose_scene(args.scene_dir, run_job, force=args.force)
        for line in proposal_lines(doc, False):
            say(line)
        return 0

    return run_main(PROG, body)


def _mcp(args: argparse.Namespace) -> int:
    def body() -> int:
        from island_tools.mcp_server import serve

        def runner(settings):
            backend, run_job = job_runner(settings)
            return backend.describe(), run_job

        return serve(args.root, settings_from(args), runner, job_slots)

    return run_main("mcp", body)


def _report(scene_dir: str) -> int:
    from island_tools.scene.report import report_result

    code, text = report_result(scene_dir)
    if code:
        say(f"[{PROG}] error (exit {code}): {text}", file=sys.stderr)
    else:
        say(text.rstrip("\n"))
    return code


if __name__ == "__main__":
    sys.exit(main())
