"""Shared plumbing of the agent-facing CLIs: repo on sys.path, settings, error -> exit code."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from island_tools.clirun import run_main  # noqa: E402,F401 - the CLIs take it from here
from island_tools.config import Settings, load_settings, with_overrides  # noqa: E402
from island_tools.errors import EXIT_USAGE, printable  # noqa: E402


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's default exit code is 2 as well
        self.print_usage(sys.stderr)
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def parser(prog: str, description: str) -> argparse.ArgumentParser:
    p = _Parser(prog=prog, description=description)
    p.add_argument("--group-dir", required=True, help="<scene_dir>/relation_groups/<G>")
    p.add_argument("--samples", type=int, default=None,
                   help="Cycles samples; Workbench: anti-aliasing samples (0 off, 1-4 FXAA, "
                        "else 5/8/11/16/32); default: DIRECTORYS.yaml, else the engine's "
                        "(Workbench 5, Cycles 16)")
    p.add_argument("--blender-bin", default=None,
                   help="Blender binary to run as a subprocess ('bpy' = embedded module); "
                        "default: DIRECTORYS.yaml::blender_bin, $BLENDER, embedded bpy, "
                        "blender on PATH")
    p.add_argument("--engine", choices=("workbench", "cycles"), default=None)
    p.add_argument("--resolution", type=int, default=None, help="square render size in px")
    p.add_argument("--config", default=None, help="DIRECTORYS.yaml to use")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--no-daemon", action="store_true",
                   help="run the whole call in this process, Blender in-process (or as a "
                        "subprocess), instead of on the warm step host and worker; default: "
                        "DIRECTORYS.yaml::daemon (true)")
    return p


def settings_from(args: argparse.Namespace) -> Settings:
    return with_overrides(load_settings(args.config), blender_bin=args.blender_bin,
                          engine=args.engine, resolution=args.resolution, samples=args.samples,
                          daemon=False if getattr(args, "no_daemon", False) else None)


def progress_printer(args: argparse.Namespace) -> Callable[[str], None] | None:
    if args.quiet:
        return None
    return lambda msg: print(printable(msg), file=sys.stderr, flush=True)


def say(text: str, file=None) -> None:
    """Print ``text`` with each line's control characters escaped (``errors.printable``):
    every line naming objects, groups or scenes goes out through here (issue 33)."""
    print("\n".join(printable(line) for line in text.split("\n")), file=file or sys.stdout,
          flush=file is sys.stderr)


def job_runner(settings: Settings):
    """(backend, run_job): the warm worker when ``worker.daemon.daemon_allowed`` says so
    (DIRECTORYS.yaml ``daemon``, ``--no-daemon``, $ISLAND_REFINER_DAEMON, off under pytest/CI),
    else Blender in this process or as a subprocess per job."""
    from worker.daemon import DaemonOptions, daemon_allowed
    from worker.launch import resolve_blender, run_job

    backend = resolve_blender(settings.blender_bin, None)
    daemon = None
    if daemon_allowed(settings.daemon):
        daemon = DaemonOptions(idle_s=settings.daemon_idle_s, max_jobs=settings.daemon_max_jobs,
                               max_rss_mb=settings.daemon_max_rss_mb)
    return backend, (lambda job: run_job(job, backend, daemon=daemon))


def job_slots(settings: Settings):
    """``slot -> run_job`` for work that runs groups side by side (``island-refine run``),
    or None when Blender work cannot run concurrently here (the bpy module in this
    process). Warm workers: slot 0 is the usual one, slot k its k-th sibling (key
    ``...-wk``); a Blender binary without the warm worker: a subprocess per job."""
    from worker.daemon import DaemonOptions, daemon_allowed
    from worker.launch import resolve_blender, run_job

    backend = resolve_blender(settings.blender_bin, None)
    if daemon_allowed(settings.daemon):
        base = DaemonOptions(idle_s=settings.daemon_idle_s, max_jobs=settings.daemon_max_jobs,
                             max_rss_mb=settings.daemon_max_rss_mb)
        return lambda slot: (lambda job: run_job(job, backend, daemon=base.with_slot(slot)))
    if getattr(backend, "embedded", True):
        return None
    return lambda slot: (lambda job: run_job(job, backend))
