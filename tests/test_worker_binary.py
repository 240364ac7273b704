"""worker/ through a Blender binary subprocess (Debian's Blender 3.4 in CI) + backend resolution."""
from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import stat
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from island_tools.errors import (
    BlendVersionError,
    GroupInputError,
    IslandError,
    UsageError,
    WorkerError,
)
from island_tools.measure import meshcache
from worker import launch

BLENDER = next((p for p in ("/usr/bin/blender", shutil.which("blender") or "")
                if p and os.access(p, os.X_OK)), None)
HAVE_BPY = importlib.util.find_spec("bpy") is not None
needs_binary = [pytest.mark.blender_bin,
                pytest.mark.skipif(BLENDER is None, reason="no Blender binary")]
MEMBERS = ["table", "chair_a", "chair_b"]


def box(sx, sy, sz):
    v = np.array([[x, y, z] for x in (-sx / 2, sx / 2) for y in (-sy / 2, sy / 2)
                  for z in (0.0, sz)], dtype=float)
    f = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                  [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    return v, f


def pose(x, y, yaw_deg=0.0):
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    return [[c, -s, 0.0, x], [s, c, 0.0, y], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]


def build_job(d: Path, out: Path) -> dict:
    meshcache.save(d / "objects.npz", {"table": box(1.6, 0.8, 0.75),
                                       "chair_a": box(0.45, 0.45, 0.9),
                                       "chair_b": box(0.45, 0.45, 0.9)})
    return {"op": "build_island", "out_blend": str(out), "objects_npz": str(d / "objects.npz"),
            "objects": [{"name": "table", "matrix_world": pose(0, 0)},
                        {"name": "chair_a", "matrix_world": pose(0, -0.8),
                         "props": {"forward_axis": "-Y"}},
                        {"name": "chair_b", "matrix_world": pose(0.3, 0.8, 180)}],
            "text_blocks": []}


@pytest.fixture(scope="session")
def backend():
    if BLENDER is None:
        pytest.skip("no Blender binary")
    return launch.resolve_blender(BLENDER, None, env={})


@pytest.fixture(scope="session")
def bin_island(backend, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bin_island")
    out = d / "island.blend"
    res = launch.run_job(build_job(d, out), backend)
    assert res["out_blend"] == str(out) and res["blender_version"] == backend.version
    return out


# -- through the binary -------------------------------------------------------------------

@pytest.mark.blender_bin
@pytest.mark.skipif(BLENDER is None, reason="no Blender binary")
def test_step_with_poses_and_render_under_the_binary(backend, bin_island, tmp_path):
    staged = tmp_path / "island.blend"
    shutil.copyfile(bin_island, staged)
    wanted = {"chair_a": pose(-0.2, -0.85, 12.0), "chair_b": pose(0.4, 0.9, 171.0)}
    res = launch.run_job({"op": "step", "blend": str(staged), "members": MEMBERS,
                          "anchor_id": "table", "poses": wanted,
                          "render": {"engine": "workbench", "resolution": 64, "samples": 8},
                          "export_meshes": str(tmp_path / "meshes.npz")}, backend)
    assert res["blender_version"] == backend.version
    assert res["file_version"] == ".".join(backend.version.split(".")[:2])
    for name, m in wanted.items():
        assert np.allclose(res["poses"][name], m, atol=1e-6)
    for key in ("persp", "bev"):
        head = Path(res["render"][key]).read_bytes()[:26]
        assert head[:8] == b"\x89PNG\r\n\x1a\n"
        assert struct.unpack(">IIBB", head[16:26]) == (64, 64, 8, 2)
    assert res["render"]["render_aa"] == "8"
    meshes, props = meshcache.load(tmp_path / "meshes.npz")
    assert list(meshes) == MEMBERS and meshes["table"][1].shape == (12, 3)
    assert props == {"chair_a": {"forward_axis": "-Y"}}
    # The worker's own read-back agrees with a fresh process reading the file.
    again = launch.run_job({"op": "read_poses", "blend": str(staged), "members": MEMBERS},
                           backend)
    assert np.allclose(again["poses"]["chair_b"], wanted["chair_b"], atol=1e-6)


@pytest.mark.blender_bin
@pytest.mark.skipif(BLENDER is None, reason="no Blender binary")
@pytest.mark.skipif(not HAVE_BPY, reason="needs the bpy wheel to save a 5.0 file")
def test_file_from_bpy_5_is_refused_by_the_older_binary(backend, tmp_path):
    newer = tmp_path / "island_5.blend"
    launch.run_job(build_job(tmp_path, newer), launch.resolve_blender("bpy", None, env={}))
    if tuple(map(int, backend.version.split(".")[:2])) >= (5, 0):
        pytest.skip(f"the binary is Blender {backend.version}, not older than 5.0")
    with pytest.raises(BlendVersionError) as err:
        launch.run_job({"op": "read_poses", "blend": str(newer), "members": MEMBERS}, backend)
    msg = str(err.value)
    import bpy  # the wheel that saved it: 5.0.x in .venv, 5.2.x in .venv313

    saved_by = "{}.{}".format(*bpy.app.version[:2])
    assert saved_by in msg and backend.version in msg and str(newer) in msg
    assert err.value.exit_code == 7


@pytest.mark.blender_bin
@pytest.mark.skipif(BLENDER is None, reason="no Blender binary")
def test_worker_errors_keep_their_class_and_exit_code(backend, bin_island, tmp_path):
    with pytest.raises(GroupInputError, match="'ghost'") as err:
        launch.run_job({"op": "read_poses", "blend": str(bin_island),
                        "members": ["table", "ghost"]}, backend)
    assert err.value.exit_code == 8
    # The process exit status itself is the error's code, and the result file says so.
    job = tmp_path / "job.json"
    result = tmp_path / "result.json"
    job.write_text(json.dumps({"op": "explode"}))
    proc = subprocess.run(launch.command(backend, str(job), str(result)),
                          capture_output=True, text=True, timeout=120,
                          env=launch._child_env(backend))   # as run_job starts it
    assert proc.returncode == UsageError.exit_code == 2
    err_obj = json.loads(result.read_text())["error"]
    assert err_obj["type"] == "UsageError" and err_obj["exit_code"] == 2
    assert "explode" in err_obj["message"]
    # A bug inside the worker: InternalError, exit 1, "ExcType: msg" on one line.
    bad = {"op": "step", "blend": str(bin_island), "members": ["table"],
           "anchor_id": "table", "poses": None, "render": {"engine": "workbench",
                                                           "resolution": "big"}}
    with pytest.raises(IslandError) as err:
        launch.run_job(bad, backend)
    assert type(err.value) is IslandError and err.value.exit_code == 1
    assert str(err.value).startswith("ValueError: ")


# -- backend resolution and process failures (no real Blender needed) ----------------------

def fake_blender(tmp_path: Path, body: str) -> Path:
    exe = tmp_path / "fake-blender"
    exe.write_text("#!/bin/sh\n"
                   'if [ "$1" = "--version" ]; then echo "Blender 9.9.9"; exit 0; fi\n' + body)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def test_resolution_order_and_sources(tmp_path):
    exe = fake_blender(tmp_path, "exit 0\n")
    b = launch.resolve_blender(str(exe), "/nope/config-blender", env={"BLENDER": "/nope/env"})
    assert (b.kind, b.path, b.source, b.version) == ("binary", str(exe), "--blender-bin",
                                                    "9.9.9")
    b = launch.resolve_blender(None, str(exe), env={"BLENDER": "/nope/env"})
    assert b.source == "DIRECTORYS.yaml blender_bin"
    b = launch.resolve_blender("", "", env={"BLENDER": str(exe)})
    assert b.source == "$BLENDER"
    for source, args in (("--blender-bin", ("/nope/flag", None, {})),
                         ("DIRECTORYS.yaml blender_bin", (None, "/nope/cfg", {})),
                         ("$BLENDER", (None, None, {"BLENDER": "/nope/env"}))):
        with pytest.raises(UsageError) as err:
            launch.resolve_blender(*args[:2], env=args[2])
        assert source in str(err.value) and "/nope/" in str(err.value)
        assert err.value.exit_code == 2
    if HAVE_BPY:
        assert launch.resolve_blender(None, None, env={}).kind == "embedded"
        b = launch.resolve_blender("bpy", str(exe), env={})
        assert b.embedded and b.version.startswith("5.")
    else:
        with pytest.raises(UsageError, match="embedded"):
            launch.resolve_blender("embedded", None, env={})


def test_blender_that_dies_without_a_result(tmp_path):
    exe = fake_blender(tmp_path, 'echo "Read blend: x" >&2\n'
                                 'echo "Segmentation fault in GPU_init" >&2\n'
                                 'echo "Blender quit" >&2\nexit 139\n')
    backend = launch.resolve_blender(str(exe), None, env={})
    with pytest.raises(WorkerError) as err:
        launch.run_job({"op": "read_poses", "blend": "/x.blend", "members": ["a"]}, backend)
    msg = str(err.value)
    assert "status 139" in msg and "Segmentation fault in GPU_init" in msg
    assert "9.9.9" in msg and "\n" not in msg


def _aborting_blender(tmp_path: Path, aborts: int) -> Path:
    """A binary whose '--version' dies by SIGABRT on its first ``aborts`` starts."""
    exe = tmp_path / "abort-blender"
    count = tmp_path / "starts"
    exe.write_text("#!/bin/sh\n"
                   f'echo x >> "{count}"\n'
                   f'if [ "$(wc -l < "{count}")" -le {aborts} ]; then\n'
                   '  echo "Error: Not freed memory blocks" >&2; kill -ABRT $$; fi\n'
                   'echo "Blender 3.4.1"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def test_a_version_probe_killed_by_a_signal_is_asked_again(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    launch.binary_version.cache_clear()
    exe = _aborting_blender(tmp_path, aborts=launch.VERSION_ATTEMPTS - 1)
    assert launch.binary_version(str(exe)) == "3.4.1"
    assert len((tmp_path / "starts").read_text().split()) == launch.VERSION_ATTEMPTS
    launch.binary_version.cache_clear()
    (tmp_path / "starts").unlink()
    (tmp_path / "cache").mkdir(exist_ok=True)
    for f in (tmp_path / "cache").rglob("*.json"):
        f.unlink()
    always = _aborting_blender(tmp_path, aborts=99)
    with pytest.raises(WorkerError) as err:
        launch.binary_version(str(always))
    msg = str(err.value)
    assert "exit -6" in msg and "Not freed memory blocks" in msg and "\n" not in msg
    assert len((tmp_path / "starts").read_text().split()) == launch.VERSION_ATTEMPTS
    launch.binary_version.cache_clear()


def test_blender_timeout(tmp_path):
    exe = fake_blender(tmp_path, "sleep 5\n")
    backend = launch.resolve_blender(str(exe), None, env={})
    with pytest.raises(WorkerError, match="within 0.5 s"):
        launch.run_job({"op": "read_poses", "blend": "/x.blend", "members": ["a"]}, backend,
                       timeout=0.5)


def test_launch_imports_without_bpy():
    code = ("import sys, worker, worker.launch; "
            "assert 'bpy' not in sys.modules, 'worker.launch imported bpy'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(launch.__file__).resolve().parents[1], timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_job_must_be_plain_json(tmp_path):
    backend = launch.resolve_blender(str(fake_blender(tmp_path, "exit 0\n")), None, env={})
    with pytest.raises(UsageError, match="not plain JSON"):
        launch.run_job({"op": "read_poses", "members": np.array([1])}, backend)


def test_binary_children_drop_the_bpy_modules_colour_config(monkeypatch):
    """bpy 5.2 setenv()s OCIO to its own config on import; Debian's 3.4 aborts on it (seen
    under .venv313: 'minor version 5 is not supported'). A user's own OCIO is kept."""
    from worker import launch

    backend = launch.Backend(kind="binary", path="/usr/bin/blender", source="test",
                             version="3.4.1")
    module_cfg = ("/work/x/.venv313/lib/python3.13/site-packages/bpy/5.2/datafiles/"
                  "colormanagement/config.ocio")
    monkeypatch.setenv("OCIO", module_cfg)
    assert "OCIO" not in launch._child_env(backend)
    monkeypatch.setenv("OCIO", "/studio/aces/config.ocio")
    assert launch._child_env(backend)["OCIO"] == "/studio/aces/config.ocio"
    monkeypatch.delenv("OCIO")
    assert "OCIO" not in launch._child_env(backend)
