"""Tier 2 (bpy wheel): the step host (scripts/_step_host.py) that runs whole CLI calls.

Every test gives the host and the warm worker a private directory and stops them afterwards
(the ``ddir`` fixture of tests/test_daemon.py). Renders are 64 px.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from island_tools.errors import EXIT_USAGE, EXIT_WORKER
from island_tools.iteration import is_complete
from scripts import _step_host
from tests._helpers import snapshot
from tests.test_daemon import (  # noqa: F401 - fixtures
    MOVES,
    REPO,
    backend,
    binary_fixture,
    cli,
    ddir,
    group,
    live,
    prepared,
    wait_for,
    write_decision,
)
from worker import daemon

pytestmark = pytest.mark.bpy
FLAGS = ("--resolution", "64", "--samples", "1", "--blender-bin", "bpy")

# Runs a CLI exactly as ``python scripts/X.py ARGS`` would, then reports which heavy
# modules the client process imported.
_PROBE = r"""
import json, sys
script, args = sys.argv[1], sys.argv[2:]
sys.argv = [script, *args]
sys.path[0] = script.rsplit("/", 1)[0]  # as `python script`; runpy would import typing
try:
    exec(compile(open(script).read(), script, "exec"), {"__name__": "__main__",
                                                        "__file__": script})
    code = 0
except SystemExit as exc:
    code = exc.code
heavy = [m for m in ("numpy", "PIL", "fcl", "trimesh", "bpy", "yaml", "dataclasses",
                     "typing", "subprocess", "argparse") if m in sys.modules]
print("PROBE " + json.dumps({"code": code, "heavy": heavy}))
"""


def probe(script: str, *args: str, env: dict | None = None, cwd: Path = REPO
          ) -> tuple[dict, subprocess.CompletedProcess]:
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(REPO / script), *args], cwd=cwd,
                          capture_output=True, text=True, check=False, timeout=300,
                          env={**os.environ, **(env or {})})
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("PROBE ")]
    assert line, proc.stderr[-2000:]
    return json.loads(line[-1][6:]), proc


def test_client_stays_light_and_host_runs_the_step(group: Path, ddir: Path) -> None:
    """The CLI process imports no numpy/PIL/fcl/trimesh/bpy (nor yaml, dataclasses, typing,
    subprocess, argparse: ~20 ms of imports in all): the host does the work."""
    for n in (1, 2):
        write_decision(group, n, MOVES[n - 1])
        out, proc = probe("scripts/iter_step.py", "--group-dir", str(group), "--iter", str(n),
                          *FLAGS)
        # The first call starts the host (subprocess); the next is the steady state.
        assert out == {"code": 0, "heavy": ["subprocess"] if n == 1 else []}, \
            (out, proc.stderr[-2000:])
        assert proc.stdout.startswith("[iter_step] sanity OK\n")
        assert f"[iter_step] iter_{n}: applying" in proc.stderr  # streamed
        assert is_complete(group / "simple_refiner" / f"iter_{n}")
    host = live(ddir, "host-")
    assert len(host) == 1 and host[0]["jobs"] == 2 and host[0]["rss_mb"]
    assert live(ddir)[0]["jobs"] == 2  # and the host handed the Blender jobs on
    # Usage errors come back from the host as from a fresh process: exit 2, usage text.
    out, proc = probe("scripts/iter_step.py", "--group-dir", str(group), "--iter", "x")
    assert out["code"] == EXIT_USAGE and "invalid int value: 'x'" in proc.stderr
    assert proc.stderr.startswith("usage: iter_step")
    assert live(ddir, "host-")[0]["jobs"] == 3
    # --help never needs the host.
    out, proc = probe("scripts/iter_step.py", "--help")
    assert out["code"] == 0 and "--no-daemon" in proc.stdout
    assert live(ddir, "host-")[0]["jobs"] == 3


def test_host_uses_the_callers_cwd_and_environment(group: Path, ddir: Path,
                                                   tmp_path: Path) -> None:
    """A relative --group-dir and $ISLAND_REFINER_CONFIG are the caller's, per call, on one
    host (which keeps running with its own environment in between)."""
    configs = []
    for px in (32, 48):
        cfg = tmp_path / f"cfg_{px}.yaml"
        cfg.write_text(f"resolution: {px}\nsamples: 1\nblender_bin: bpy\n")
        configs.append(cfg)
    pids = set()
    for n, cfg in ((1, configs[0]), (2, configs[1])):
        write_decision(group, n, MOVES[n - 1])
        proc = cli(str(REPO / "scripts/iter_step.py"), "--group-dir", group.name, "--iter",
                   str(n), "--quiet", env={"ISLAND_REFINER_CONFIG": str(cfg)},
                   cwd=group.parent)
        assert proc.returncode == 0, proc.stderr[-2000:]
        info = json.loads((group / "simple_refiner" / f"iter_{n}" / "info.json").read_text())
        assert info["render"]["resolution"] == (32, 48)[n - 1]
        pids.add(live(ddir, "host-")[0]["pid"])
    assert len(pids) == 1


def test_host_killed_mid_call_is_retried_once_then_fails_cleanly(
        group: Path, ddir: Path) -> None:
    pause = ddir.parent / f"{ddir.name}.pause"
    env = {daemon.ENV_PAUSE_FILE: str(pause)}
    argv = [sys.executable, str(REPO / "scripts/iter_step.py"), "--group-dir", str(group),
            *FLAGS, "--quiet"]

    def paused_host(seen: list[int]) -> dict:
        return wait_for(lambda: next((e for e in live(ddir, "host-") if e["state"] == "paused"
                                      and e["pid"] not in seen), None), 60.0, "a paused host")

    def launch(n: int) -> subprocess.Popen:
        return subprocess.Popen([*argv, "--iter", str(n)], cwd=REPO, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, **env})

    try:
        # 1. Killed once mid-call: a fresh host runs the call again and it succeeds.
        write_decision(group, 1, MOVES[0])
        pause.write_text("")
        seen: list[int] = []
        proc = launch(1)
        seen.append(paused_host(seen)["pid"])
        os.kill(seen[0], signal.SIGKILL)
        retry = paused_host(seen)
        pause.unlink()
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err[-2000:]
        assert f"the step host (pid {seen[0]}) died during iter_step; retrying once" in err
        assert is_complete(group / "simple_refiner" / "iter_1")
        assert live(ddir, "host-")[0]["pid"] == retry["pid"]

        # 2. Killed again on the retry: exit 7 in one line, nothing written.
        write_decision(group, 2, MOVES[1])
        before = snapshot(group / "simple_refiner")
        pause.write_text("")
        proc = launch(2)
        for _ in range(2):
            seen.append(paused_host(seen)["pid"])
            os.kill(seen[-1], signal.SIGKILL)
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == EXIT_WORKER, err[-2000:]
        last = err.strip().splitlines()[-1]
        assert last.startswith("[iter_step] error (exit 7): ")
        assert "the step host died twice during iter_step" in last
        assert snapshot(group / "simple_refiner") == before
        assert not is_complete(group / "simple_refiner" / "iter_2")
    finally:
        if pause.exists():
            pause.unlink()


def test_host_that_cannot_start_falls_back_to_this_process(
        ddir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(_step_host, "host_command",
                        lambda paths, options: [sys.executable, "-c", "raise SystemExit(3)"])
    assert _step_host.run_cli("iter_step", ["--group-dir", "x", "--iter", "1"]) is None
    err = capsys.readouterr().err
    assert err.startswith("[iter_step] step host unavailable, running in this process: the "
                          "step host exited with status 3 while starting: no output; log: ")
    # Not wanted at all: --no-daemon, daemon: false in the config.
    assert _step_host.run_cli("iter_step", ["--no-daemon", "--iter", "1"]) is None
    cfg = ddir / "off.yaml"
    cfg.write_text("daemon: false\n")
    assert _step_host.run_cli("iter_step", ["--config", str(cfg), "--iter", "1"]) is None
    assert not live(ddir, "host-")


def test_host_limits_come_from_the_config_recycling_and_idle_exit(group: Path, ddir: Path,
                                                                  tmp_path: Path) -> None:
    """daemon_max_jobs / daemon_idle_s of DIRECTORYS.yaml govern the host as the worker."""
    cfg = tmp_path / "limits.yaml"
    cfg.write_text("daemon_max_jobs: 1\ndaemon_idle_s: 1.5\nblender_bin: bpy\n"
                   "resolution: 64\nsamples: 1\n")
    env = {"ISLAND_REFINER_CONFIG": str(cfg)}
    log = ddir / f"{_step_host.host_key()}.log"

    def recycled(count: int) -> list[str]:
        found = re.findall(r"\[daemon (\d+) [^]]+\] exiting: recycled after 1 jobs",
                           log.read_text())
        return found if len(found) >= count else []

    hosts = []
    for n in (1, 2):
        write_decision(group, n, MOVES[n - 1])
        proc = cli("scripts/iter_step.py", "--group-dir", str(group), "--iter", str(n),
                   "--quiet", env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        hosts.append(int(wait_for(lambda n=n: recycled(n), 30.0, "a recycled host")[n - 1]))
    assert hosts[0] != hosts[1]
    wait_for(lambda: not any(daemon.pid_alive(p) for p in hosts), 30.0, "recycled hosts gone")
    # Idle exit: a host that is not recycled leaves after daemon_idle_s without a call.
    cfg.write_text("daemon_idle_s: 1.5\nblender_bin: bpy\nresolution: 64\nsamples: 1\n")
    write_decision(group, 3, MOVES[2])
    assert cli("scripts/iter_step.py", "--group-dir", str(group), "--iter", "3", "--quiet",
               env=env).returncode == 0
    wait_for(lambda: not live(ddir) and not live(ddir, "host-"), 30.0, "everything to exit")
    assert re.search(r"exiting: idle for 1\.5 s after 1 job", log.read_text())


def test_init_iter0_runs_on_the_host_too(group: Path, ddir: Path) -> None:
    out, proc = probe("scripts/init_iter0.py", "--group-dir", str(group), *FLAGS)
    assert out["code"] == 0 and "numpy" not in out["heavy"], proc.stderr[-2000:]
    assert proc.stdout.startswith("[init_iter0] iter_0 ready: ")
    assert "rotated to simple_refiner.bak." in proc.stderr  # the no-resume policy, streamed
    assert is_complete(group / "simple_refiner" / "iter_0")
    assert len(list(group.glob("simple_refiner.bak.*"))) == 1
    # The host records the call in its status file after replying (off the client's clock).
    last = wait_for(lambda: (live(ddir, "host-") or [{}])[0].get("last_job"), 30.0, "status")
    assert last["op"] == "init_iter0" and last["ok"]


@pytest.mark.blender_bin
def test_host_drives_a_blender_binary_worker(tmp_path: Path, ddir: Path) -> None:
    """init_iter0.py + iter_step.py with --blender-bin: host -> Debian Blender 3.4 daemon."""
    backend, built = binary_fixture("turned_90", tmp_path)
    flags = ["--group-dir", str(built), "--resolution", "64", "--samples", "1",
             "--blender-bin", str(backend.path), "--quiet"]
    proc = cli("scripts/init_iter0.py", *flags)
    assert proc.returncode == 0, proc.stderr[-2000:]
    write_decision(built, 1, MOVES[0])
    proc = cli("scripts/iter_step.py", *flags, "--iter", "1")
    assert proc.returncode == 0 and proc.stdout.startswith("[iter_step] sanity OK"), \
        proc.stderr[-2000:]
    info = json.loads((built / "simple_refiner" / "iter_1" / "info.json").read_text())
    assert info["blender_version"] == backend.version and info["sanity"] == "ok"
    workers = live(ddir, "blender-")
    assert len(workers) == 1 and workers[0]["jobs"] == 3  # export+render, then the step
    assert live(ddir, "host-")[0]["jobs"] == 2 and not live(ddir)  # no bpy worker
