"""Tier 2 (bpy wheel): the warm worker (worker/daemon.py).

Every test that starts a daemon gives it a private directory (``$ISLAND_REFINER_DAEMON_DIR``)
and stops what it started in its teardown (``shutdown_all``), checking that no daemon process
is left. Renders are 64 px. The one Blender-binary test is marked ``blender_bin``.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from island_tools.config import Settings
from island_tools.errors import EXIT_TRANSFORMS, GroupInputError, UsageError, WorkerError
from island_tools.files import atomic
from island_tools.iteration import init_iter0, is_complete, iter_step, sha256_file
from island_tools.schemas import transforms_doc
from tests._helpers import snapshot
from worker import daemon
from worker.launch import resolve_blender, run_job

pytestmark = pytest.mark.bpy
REPO = Path(__file__).resolve().parents[1]
SETTINGS = Settings(blender_bin="bpy", engine="workbench", resolution=64, samples=1)
MOVES = [{"chair_1": {"delta_xyz": [0.1, 0.0, 0.0], "delta_yaw_deg": 20.0},
          "chair_4": {"delta_xyz": [0.0, -0.05, 0.0], "delta_yaw_deg": 0.0}},
         {"chair_2": {"delta_xyz": [-0.05, 0.02, 0.0], "delta_yaw_deg": -15.0}},
         {"chair_3": {"delta_xyz": [0.03, 0.0, 0.0], "delta_yaw_deg": 5.0}}]


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def backend():
    return resolve_blender("bpy", None)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory, backend) -> Path:
    """long_table_6/turned_90 with iter_0, built once (in-process) and copied per test."""
    from fixtures.build import build_fixture

    out = tmp_path_factory.mktemp("daemon_fixture")
    group = build_fixture("long_table_6", "turned_90", out, backend=backend)
    init_iter0(group, SETTINGS, lambda job: run_job(job, backend))
    return group


@pytest.fixture
def group(prepared: Path, tmp_path: Path) -> Path:
    dest = tmp_path / prepared.name
    shutil.copytree(prepared, dest)
    return dest


@pytest.fixture
def ddir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private daemon directory (short: socket paths are limited to 107 bytes); the
    daemons started in it are stopped afterwards and must really be gone."""
    path = Path(tempfile.mkdtemp(prefix="ir-daemon-"))
    monkeypatch.setenv(daemon.ENV_DIR, str(path))
    monkeypatch.setenv(daemon.ENV_ENABLE, "1")
    started: list[int] = []
    try:
        yield path
    finally:
        started = [e["pid"] for e in daemon.status(path) if e.get("running")]
        daemon.shutdown_all(path, timeout=10.0)
        shutil.rmtree(path, ignore_errors=True)
        assert not [p for p in started if daemon.pid_alive(p)], "a daemon survived its test"


def options(ddir: Path, **kw) -> daemon.DaemonOptions:
    return daemon.DaemonOptions(directory=str(ddir), **kw)


def via_daemon(backend, opts: daemon.DaemonOptions) -> Callable[[dict], dict]:
    return lambda job: run_job(job, backend, daemon=opts)


def live(ddir: Path, prefix: str = "bpy-") -> list[dict]:
    """Running warm workers (``prefix="host-"``: step hosts, scripts/_step_host.py)."""
    return [e for e in daemon.status(ddir) if e.get("running") and e["key"].startswith(prefix)]


def the_pid(ddir: Path, prefix: str = "bpy-") -> int:
    entries = live(ddir, prefix)
    assert len(entries) == 1, entries
    return entries[0]["pid"]


def write_decision(group: Path, n: int, members: dict) -> Path:
    refiner = group / "simple_refiner"
    (refiner / f"iter_{n}").mkdir(exist_ok=True)
    doc = transforms_doc({"members": members, "converged": False, "reason_summary": "test"},
                         n, sha256_file(refiner / f"iter_{n - 1}" / "render_bev.png"),
                         model="test", generated_by="tests")
    path = refiner / f"iter_{n}" / "transforms.json"
    atomic.write_json(path, doc)
    return path




def wait_for(predicate: Callable[[], object], timeout: float = 60.0, what: str = "") -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def cli(*args: str, env: dict | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                          check=False,
                          env={**os.environ, **(env or {})}, timeout=300)


# --------------------------------------------------------------------------- .blend compare

def _blocks(data: bytes) -> list[tuple[bytes, int, int, int]]:
    """(code, sdna index, count, data offset) per block; 5.0 and legacy headers."""
    large = data[7:9].isdigit()  # "BLENDER17-01v0500"
    off, out = (int(data[7:9]) if large else 12), []
    while off < len(data):
        if large:
            code, sdna, _old, length, count = struct.unpack_from("<4siQqq", data, off)
            off += 32
        else:
            code, length, _old, sdna, count = struct.unpack_from("<4siQii", data, off)
            off += 24
        out.append((code, sdna, count, off))
        if code == b"ENDB":
            break
        off += length
    return out


def _sdna(data: bytes, blocks: list) -> tuple[list[str], list[str], list[int], list]:
    _, _, _, p = next(b for b in blocks if b[0] == b"DNA1")
    i, tables = p + 4, {}
    for tag in (b"NAME", b"TYPE", b"TLEN", b"STRC"):
        i = p + ((i - p + 3) & ~3)   # 4-aligned within the block (5.2 blocks start anywhere)
        assert data[i:i + 4] == tag, tag
        i += 4
        if tag == b"TLEN":
            n = len(tables[b"TYPE"])
            tables[tag] = list(struct.unpack_from(f"<{n}h", data, i))
            i += 2 * n
            continue
        (n,) = struct.unpack_from("<i", data, i)
        i += 4
        if tag == b"STRC":
            structs = []
            for _ in range(n):
                t, nf = struct.unpack_from("<hh", data, i)
                structs.append((t, [struct.unpack_from("<hh", data, i + 4 + 4 * k)
                                    for k in range(nf)]))
                i += 4 + 4 * nf
            tables[tag] = structs
        else:
            items = []
            for _ in range(n):
                j = data.index(b"\0", i)
                items.append(data[i:j].decode())
                i = j + 1
            tables[tag] = items
    return tables[b"NAME"], tables[b"TYPE"], tables[b"TLEN"], tables[b"STRC"]


def blend_canonical(data: bytes) -> bytes:
    """The file with exactly what Blender does not write deterministically normalised:
    every ``session_uid`` (a per-process runtime counter) and, in ``FileGlobal``, the
    uninitialised tail of each char array after its NUL and the ``_pad*`` fields are zeroed;
    each UI ``ScrEdge``'s two vertex ids are put in ascending order (Blender orders them by
    memory address)."""
    blocks = _blocks(data)
    names, types, tlen, structs = _sdna(data, blocks)
    by_type = {t: i for i, (t, _) in enumerate(structs)}
    out = bytearray(data)

    def fields(si: int):  # (offset, size, type name, field name) incl. nested structs
        off = 0
        for ft, fn in structs[si][1]:
            name = names[fn]
            dims = int(np.prod([int(d) for d in re.findall(r"\[(\d+)\]", name)] or [1]))
            pointer = name.startswith(("*", "(*"))
            size = 8 if pointer else tlen[ft]
            if not pointer and ft in by_type:
                for k in range(dims):
                    for o, s, t, n in fields(by_type[ft]):
                        yield off + k * size + o, s, t, n
            else:
                yield off, size * dims, types[ft], name
            off += size * dims

    cache: dict[int, list] = {}
    for code, sdna, count, p in blocks:
        if code in (b"DNA1", b"ENDB") or sdna >= len(structs):
            continue
        layout = cache.setdefault(sdna, list(fields(sdna)))
        size = tlen[structs[sdna][0]]
        kind = types[structs[sdna][0]]
        glob = kind == "FileGlobal"
        edge = {n: o for o, _, _, n in layout if n in ("*v1", "*v2")} if kind == "ScrEdge" else {}
        for k in range(count):
            base = p + k * size
            for o, s, t, n in layout:
                a = base + o
                if n == "session_uid" or (glob and n.startswith("_pad")):
                    out[a:a + s] = bytes(s)
                elif glob and t == "char" and "[" in n:
                    end = out.find(b"\0", a, a + s)
                    if end >= 0:
                        out[end:a + s] = bytes(a + s - end)
            if edge:
                v1, v2 = base + edge["*v1"], base + edge["*v2"]
                pair = sorted((bytes(out[v1:v1 + 8]), bytes(out[v2:v2 + 8])),
                              key=lambda b: int.from_bytes(b, "little"))
                out[v1:v1 + 8], out[v2:v2 + 8] = pair
    return bytes(out)


def pixels(path: Path) -> np.ndarray:
    from PIL import Image
    with Image.open(path) as img:
        return np.asarray(img.convert("RGB"), dtype=np.int16)


INFO_TIMINGS = ("seconds", "worker_timings_s")


def info_without_timings(path: Path) -> dict:
    doc = json.loads(path.read_text())
    for key in INFO_TIMINGS:
        doc.pop(key, None)
    for key in ("seconds", "view_seconds"):
        (doc.get("render") or {}).pop(key, None)
    return doc


# --------------------------------------------------------------------------- tests

def test_policy_under_pytest_ci_and_flags() -> None:
    assert daemon.daemon_allowed(True, {}) is True
    assert daemon.daemon_allowed(False, {"ISLAND_REFINER_DAEMON": "1"}) is False  # --no-daemon
    assert daemon.daemon_allowed(True, {"PYTEST_CURRENT_TEST": "x"}) is False
    assert daemon.daemon_allowed(True, {"CI": "true"}) is False
    assert daemon.daemon_allowed(True, {"CI": "true", "ISLAND_REFINER_DAEMON": "1"}) is True
    assert daemon.daemon_allowed(True, {"ISLAND_REFINER_DAEMON": "0"}) is False


def test_cli_starts_one_daemon_on_demand_reuses_it_and_keeps_stdout_clean(
        group: Path, ddir: Path) -> None:
    flags = ["--group-dir", str(group), "--resolution", "64", "--samples", "1",
             "--blender-bin", "bpy"]
    pids = []
    for n in (1, 2):
        write_decision(group, n, MOVES[n - 1])
        proc = cli("scripts/iter_step.py", *flags, "--iter", str(n))
        assert proc.returncode == 0, proc.stderr[-2000:]
        lines = proc.stdout.splitlines()
        assert lines[0] == "[iter_step] sanity OK" and len(lines) == 3, lines
        assert lines[1].startswith(f"[iter_step] iter_{n}: ")
        assert lines[2].startswith("[iter_step] geometry: ")
        for noise in ("Read blend", "Saved", "Info:", "EGL"):
            assert noise not in proc.stdout and noise not in proc.stderr
        pids.append(the_pid(ddir))
    assert pids[0] == pids[1]
    entry = live(ddir)[0]
    bpy_version = importlib.metadata.version("bpy")  # the wheel in this venv: 5.0.x or 5.2.x
    assert entry["jobs"] == 2 and entry["key"].startswith(f"bpy-{bpy_version}-")
    host = live(ddir, "host-")  # the CLI handed both whole calls to the step host
    assert len(host) == 1 and host[0]["jobs"] == 2 and host[0]["kind"] == "step host"
    assert "Saved:" in Path(entry["log"]).read_text()  # Blender's output went to the log
    status = cli("-m", "worker.daemon", "--status", "--json", "--dir", str(ddir))
    assert {e["pid"] for e in json.loads(status.stdout)} == {pids[0], host[0]["pid"]}
    # A bad transforms.json is the client's error (exit 3); the daemon is untouched.
    bad = write_decision(group, 3, {"table": {"delta_xyz": [0, 0, 0], "delta_yaw_deg": 1}})
    proc = cli("scripts/iter_step.py", *flags, "--iter", "3")
    assert proc.returncode == EXIT_TRANSFORMS and str(bad) in proc.stderr
    assert the_pid(ddir) == pids[0]
    # --no-daemon: in-process, even with the daemon forced on; the daemon gets no job.
    write_decision(group, 3, MOVES[2])
    proc = cli("scripts/iter_step.py", *flags, "--iter", "3", "--no-daemon")
    assert proc.returncode == 0 and proc.stdout.startswith("[iter_step] sanity OK")
    assert live(ddir)[0]["jobs"] == 2
    stopped = cli("-m", "worker.daemon", "--stop", "--dir", str(ddir))
    assert "stopped 2 warm worker(s)" in stopped.stdout and str(pids[0]) in stopped.stdout
    assert not live(ddir) and not live(ddir, "host-")
    assert not daemon.pid_alive(pids[0])


def test_daemon_and_fresh_process_outputs_are_identical(group: Path, ddir: Path) -> None:
    """iter_2 through a daemon that has run other jobs, then the same step again in a fresh
    ``--no-daemon`` process (what an agent would run otherwise): same staging inputs."""
    flags = ["--group-dir", str(group), "--resolution", "64", "--samples", "1",
             "--blender-bin", "bpy", "--quiet"]
    for n in (1, 2):
        write_decision(group, n, MOVES[n - 1])
        warm = cli("scripts/iter_step.py", *flags, "--iter", str(n))
        assert warm.returncode == 0
    it2 = group / "simple_refiner" / "iter_2"
    first = {p.name: p.read_bytes() for p in it2.iterdir()}
    fresh = cli("scripts/iter_step.py", *flags, "--iter", "2", "--no-daemon")
    assert fresh.returncode == 0
    assert warm.stdout == fresh.stdout  # streamed back by the step host, line for line
    assert live(ddir)[0]["jobs"] == 2  # the --no-daemon step never reached it
    for name in ("geometry.json", "current_state.json", "transforms.json"):
        assert (it2 / name).read_bytes() == first[name], name
    again = Path(tempfile.mkdtemp())
    try:
        for name, data in first.items():
            (again / name).write_bytes(data)
        assert info_without_timings(it2 / "info.json") == info_without_timings(
            again / "info.json")
        views = sorted(name for name in first if name.endswith(".png"))
        assert {"render_persp.png", "render_bev.png"} <= set(views)
        for view in views:  # pixels; the PNG text chunks hold a date and the staging path
            assert np.array_equal(pixels(it2 / view), pixels(again / view)), view
    finally:
        shutil.rmtree(again)
    # island.blend: byte-identical once the bytes Blender writes per process are normalised
    # (worker/daemon.py, "Output equivalence").
    blend = (it2 / "island.blend").read_bytes()
    assert len(blend) == len(first["island.blend"])
    assert blend_canonical(blend) == blend_canonical(first["island.blend"])


def test_idle_timeout_exit_and_private_permissions(group: Path, ddir: Path, backend) -> None:
    opts = options(ddir, idle_s=1.5)
    blend = str(group / "island.blend")
    out = run_job({"op": "read_poses", "blend": blend, "members": ["table"]}, backend,
                  daemon=opts)
    assert out["poses"]["table"][3] == [0.0, 0.0, 0.0, 1.0]
    pid = the_pid(ddir)
    paths = daemon.Paths(ddir, daemon.backend_key(backend))
    assert stat.S_IMODE(os.stat(ddir).st_mode) == 0o700
    assert stat.S_ISSOCK(os.stat(paths.sock).st_mode)
    for path in (paths.sock, paths.log, paths.status, paths.daemon_lock, paths.client_lock):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
    # SO_PEERCRED on a real connection names the daemon and our uid.
    sock, peer_pid = daemon._connect(paths)
    with sock:
        assert daemon.peer_credentials(sock)[:2] == (pid, os.getuid()) and peer_pid == pid
        daemon.send_message(sock, {"protocol": daemon.PROTOCOL, "kind": "ping"})
        assert daemon.recv_message(sock)["status"]["pid"] == pid
    assert daemon.peer_allowed(os.getuid()) and not daemon.peer_allowed(os.getuid() + 1)
    wait_for(lambda: not daemon.pid_alive(pid), 15.0, "the idle daemon to exit")
    assert not paths.sock.exists() and not paths.status.exists()
    assert "idle for 1.5 s" in paths.log.read_text()


def test_unsafe_directories_are_refused(tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    with pytest.raises(WorkerError, match="open to others"):
        daemon.private_dir(loose)
    assert stat.S_IMODE(os.stat(loose).st_mode) == 0o755      # never chmod-ed: not ours to
    shared = tmp_path / "shared"                                # change
    shared.mkdir()
    shared.chmod(0o1777)
    private = daemon.private_dir(shared)
    assert private == shared / f"island-refiner-{os.getuid()}"
    assert stat.S_IMODE(os.lstat(private).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(shared).st_mode) == 0o1777
    link = tmp_path / "link"
    link.symlink_to(loose)
    with pytest.raises(WorkerError, match="not a directory"):
        daemon.private_dir(link)
    if os.getuid() == 0:
        other = tmp_path / "other"
        other.mkdir(mode=0o700)
        os.chown(other, 12345, 12345)
        with pytest.raises(WorkerError, match="belongs to uid 12345"):
            daemon.private_dir(other)


@pytest.mark.required_in_ci
@pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as a second uid")
def test_daemon_refuses_another_uid(group: Path, ddir: Path, backend) -> None:
    run_job({"op": "read_poses", "blend": str(group / "island.blend"), "members": ["table"]},
            backend, daemon=options(ddir))
    paths = daemon.Paths(ddir, daemon.backend_key(backend))
    # Open the file permissions so only the SO_PEERCRED check stands in the way.
    os.chmod(ddir, 0o711)
    os.chmod(paths.sock, 0o666)
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            os.setgid(12345)
            os.setuid(12345)
            import socket
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(20)
            s.connect(str(paths.sock))
            daemon.send_message(s, {"protocol": daemon.PROTOCOL, "kind": "ping"})
            try:
                code = 0 if daemon.recv_message(s) is None else 2  # dropped unanswered
            except ConnectionResetError:  # dropped with our request unread
                code = 0
        except BaseException:  # noqa: BLE001 - any other failure is reported as 3
            code = 3
        os._exit(code)
    _, status = os.waitpid(child, 0)
    os.chmod(ddir, 0o700)
    assert os.waitstatus_to_exitcode(status) == 0
    assert "refused a connection from uid 12345" in paths.log.read_text()
    assert len(live(ddir)) == 1


def test_recycled_after_max_jobs_and_errors_keep_it_alive(group: Path, ddir: Path,
                                                          backend) -> None:
    opts = options(ddir, max_jobs=2)
    job = {"op": "read_poses", "blend": str(group / "island.blend"), "members": ["table"]}
    pids = []
    for _ in range(3):
        run_job(job, backend, daemon=opts)
        pids.append(the_pid(ddir))
    assert pids[0] == pids[1] != pids[2]
    assert not daemon.pid_alive(pids[0])
    # Worker errors come back as the same class and message; the daemon survives them.
    missing = dict(job, members=["table", "nope"])
    with pytest.raises(GroupInputError) as via:
        run_job(missing, backend, daemon=opts)
    with pytest.raises(GroupInputError) as local:
        run_job(missing, backend)
    assert str(via.value) == str(local.value) and via.value.exit_code == 8
    with pytest.raises(UsageError, match="unknown worker op"):
        run_job({"op": "nope"}, backend, daemon=opts)
    assert the_pid(ddir) not in pids[:2]


def test_two_clients_at_once_start_one_daemon(group: Path, ddir: Path, backend) -> None:
    job = {"op": "read_poses", "blend": str(group / "island.blend"), "members": ["table"]}
    results: list[object] = []

    def client() -> None:
        try:
            results.append(run_job(job, backend, daemon=options(ddir)))
        except BaseException as exc:  # noqa: BLE001 - reported below
            results.append(exc)

    threads = [threading.Thread(target=client) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(isinstance(r, dict) for r in results) and len(results) == 3, results
    entry = live(ddir)
    assert len(entry) == 1 and entry[0]["jobs"] == 3
    assert len(re.findall(r"\] ready:", Path(entry[0]["log"]).read_text())) == 1


def _kill_when_paused(ddir: Path, seen: list[int], count: int) -> None:
    """SIGKILL the daemon each time it pauses mid-job, ``count`` times."""
    for _ in range(count):
        entry = wait_for(lambda: next((e for e in daemon.status(ddir) if e.get("running")
                                       and e.get("state") == "paused"
                                       and e["pid"] not in seen), None), 60.0, "a paused job")
        seen.append(entry["pid"])
        os.kill(entry["pid"], signal.SIGKILL)


def test_daemon_killed_mid_job_retries_once_then_fails_cleanly(
        group: Path, ddir: Path, backend, monkeypatch: pytest.MonkeyPatch) -> None:
    pause = ddir.parent / f"{ddir.name}.pause"
    pause.write_text("")
    monkeypatch.setenv(daemon.ENV_PAUSE_FILE, str(pause))
    notices: list[str] = []
    run = via_daemon(backend, options(ddir, notice=notices.append))
    outcome: list[object] = []

    def step(n: int) -> None:
        try:
            outcome.append(iter_step(group, n, SETTINGS, run))
        except BaseException as exc:  # noqa: BLE001 - inspected below
            outcome.append(exc)

    try:
        # 1. Killed once mid-job: retried on a fresh daemon, the step succeeds.
        write_decision(group, 1, MOVES[0])
        seen: list[int] = []
        worker_thread = threading.Thread(target=step, args=(1,))
        worker_thread.start()
        _kill_when_paused(ddir, seen, 1)
        entry = wait_for(lambda: next((e for e in live(ddir) if e["state"] == "paused"
                                       and e["pid"] not in seen), None), 60.0, "the retry")
        pause.unlink()
        worker_thread.join(120)
        assert not isinstance(outcome[0], BaseException), outcome
        assert is_complete(group / "simple_refiner" / "iter_1")
        assert outcome[0].info["sanity"] == "ok"
        assert any(f"pid {seen[0]}) died" in n for n in notices)
        assert the_pid(ddir) == entry["pid"] != seen[0]

        # 2. Killed on the retry as well: a clean WorkerError, nothing half-written.
        write_decision(group, 2, MOVES[1])
        before = snapshot(group / "simple_refiner")
        pause.write_text("")
        worker_thread = threading.Thread(target=step, args=(2,))
        worker_thread.start()
        _kill_when_paused(ddir, seen, 2)
        worker_thread.join(120)
        err = outcome[1]
        assert isinstance(err, WorkerError) and err.exit_code == 7, err
        assert "died twice" in str(err)
        assert snapshot(group / "simple_refiner") == before
        assert not list((group / "simple_refiner").glob(".staging*"))
        assert not is_complete(group / "simple_refiner" / "iter_2")
    finally:
        if pause.exists():
            pause.unlink()


def binary_fixture(variant: str, out: Path):
    """(Blender binary backend, long_table_6/<variant> built with it) or skip."""
    from fixtures.build import build_fixture

    blender = os.environ.get("BLENDER") or shutil.which("blender")
    if not blender:
        pytest.skip("no Blender binary")
    backend = resolve_blender(blender, None)
    return backend, build_fixture("long_table_6", variant, out, backend=backend)


@pytest.mark.blender_bin
def test_blender_binary_gets_its_own_daemon(tmp_path: Path, ddir: Path) -> None:
    backend, built = binary_fixture("correct", tmp_path)
    opts = options(ddir)
    staged = tmp_path / "island.blend"
    shutil.copyfile(built / "island.blend", staged)
    pose = [[1.0, 0.0, 0.0, 0.3], [0.0, 1.0, 0.0, -1.5], [0.0, 0.0, 1.0, 0.0], [0, 0, 0, 1.0]]
    out = run_job({"op": "step", "blend": str(staged), "members": ["table", "chair_1"],
                   "anchor_id": "table", "poses": {"chair_1": pose},
                   "render": {"engine": "workbench", "resolution": 64, "samples": 1},
                   "export_meshes": None}, backend, daemon=opts)
    assert out["blender_version"] == backend.version and out["saved"]
    assert np.allclose(out["poses"]["chair_1"], pose, atol=1e-6)
    assert (tmp_path / "render_bev.png").is_file()
    pid = the_pid(ddir, "blender-")
    with pytest.raises(UsageError, match="unknown worker op"):
        run_job({"op": "nope"}, backend, daemon=opts)
    entry = live(ddir, "blender-")[0]
    assert entry["pid"] == pid and entry["jobs"] == 2
    assert entry["key"].startswith(f"blender-{backend.version}-")
