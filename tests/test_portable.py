"""Windows and macOS readiness: the add-on's import and in-process path without what only a
POSIX system has.

In a child of this Python (the ``bpy`` module), before the add-on is imported, the modules
Windows lacks are made unavailable (``sys.modules[name] = None``: ``fcntl``, ``termios``,
``resource``, ``pwd``, ``grp``, ``tty``, ``pty``) and so are the names Windows' ``os``,
``signal`` and ``socket`` lack (``os.O_NOFOLLOW``, ``os.O_DIRECTORY``, ``os.O_CLOEXEC``,
``os.fchmod``, ``os.killpg``, ``os.setsid``, ``os.getuid`` ..., ``signal.SIGKILL``,
``socket.AF_UNIX``). There the add-on is enabled and driven in this process (*Execution: In
this process*): Find Groups on a plain file, Build From Proposals, Init iter_0, a Solver
Step, Merge Back. Every call either works or refuses in one line naming what is missing;
none may raise ImportError, AttributeError or NameError (what a Windows artist would meet
as a traceback). Worker jobs run in child processes, which this test does not restrict.

``POSIX_ONLY`` is the list docs/ADDON.md ("Windows and macOS") gives: where each use is and
what replaced it; ``test_posix_only_uses_are_the_listed_ones`` keeps the list true.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BLOCKED_MODULES = ("fcntl", "termios", "resource", "pwd", "grp", "tty", "pty")
BLOCKED_ATTRS = {
    "os": ("O_NOFOLLOW", "O_DIRECTORY", "O_CLOEXEC", "fchmod", "killpg", "setsid", "getpgid",
           "getpgrp", "setpgid", "getuid", "geteuid", "getgid", "sched_getaffinity",
           "statvfs", "mkfifo", "getloadavg"),
    "signal": ("SIGKILL", "SIGPIPE", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGALRM", "SIGCHLD"),
    "socket": ("AF_UNIX",),
}

IMPORTED = ["island_tools.files.atomic", "island_tools.files.locks", "island_tools.iteration",
            "island_tools.adapter", "island_tools.scene.run", "worker.launch",
            "worker.lifetime", "worker.daemon_client", "blender_addon.runner",
            "blender_addon.tasks"]

DRIVER = r'''
import json, sys, traceback
args = json.loads(sys.argv[1])
import bpy, addon_utils              # Blender itself starts as it does anywhere
import os, signal, socket, tempfile, shutil, subprocess, selectors  # the stdlib, loaded
for name in args["modules"]:
    sys.modules[name] = None         # import name -> ImportError, as on Windows
for mod, names in args["attrs"].items():
    module = sys.modules[mod]
    for attr in names:
        if hasattr(module, attr):
            delattr(module, attr)
sys.path.insert(0, args["repo"])
out = {"calls": {}}


def call(label, fn, *a, **k):
    try:
        result = fn(*a, **k)
        out["calls"][label] = ["ok", sorted(result) if isinstance(result, set) else None,
                               bpy.context.scene.island_refiner.last_message
                               if hasattr(bpy.context.scene, "island_refiner") else ""]
    except Exception as exc:
        out["calls"][label] = ["raised", type(exc).__name__, str(exc),
                               traceback.format_exc()]


import importlib
for name in args["import"]:          # the add-on's in-process path, imported up front
    call("import " + name, importlib.import_module, name)
call("enable", addon_utils.enable, "blender_addon", default_set=True)
prefs = bpy.context.preferences.addons["blender_addon"].preferences
prefs.config_path = args["config"]
prefs.execution = "IN_PROCESS"
bpy.ops.wm.open_mainfile(filepath=args["blend"])
st = bpy.context.scene.island_refiner
st.scene_dir = args["scene_dir"]
call("find groups", bpy.ops.island.find_groups)
for p in st.proposals:
    p.accepted = True
call("build from proposals", bpy.ops.island.rebuild_island, source="PROPOSALS")
names = [g.name for g in st.groups]
table = next((p.name for p in st.proposals if p.anchor == args["table"]), None)
if table in names:
    st.group_index = names.index(table)
call("init iter_0", bpy.ops.island.init_iter0)
call("solver step", bpy.ops.island.solver_step)
call("merge back", bpy.ops.island.merge_back, scope="SELECTED")
out["groups"] = names
out["blocked"] = {n: sys.modules.get(n, "absent") is None for n in args["modules"]}
print("PORTABLE RESULT " + json.dumps(out))
'''


@pytest.fixture(scope="module")
def plain_room(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fixtures import rooms
    from tests.test_addon_propose import the_room
    from worker.launch import resolve_blender

    out = rooms.build_room(the_room(), tmp_path_factory.mktemp("portable_room"),
                           resolve_blender("bpy", None))
    return out / rooms.SCENE_BLEND


@pytest.mark.bpy
def test_addon_in_process_path_without_posix_modules(plain_room: Path, tmp_path: Path) -> None:
    from tests.test_addon_propose import TABLE

    config = tmp_path / "DIRECTORYS.yaml"
    config.write_text("blender_bin: \"\"\nengine: workbench\nresolution: 64\nsamples: 1\n")
    scene = tmp_path / "scene"
    args = {"repo": str(REPO), "config": str(config), "blend": str(plain_room),
            "scene_dir": str(scene), "table": TABLE, "modules": list(BLOCKED_MODULES),
            "attrs": {k: list(v) for k, v in BLOCKED_ATTRS.items()}, "import": IMPORTED}
    proc = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(args)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, check=False)
    line = next((ln for ln in proc.stdout.splitlines()
                 if ln.startswith("PORTABLE RESULT ")), None)
    assert proc.returncode == 0 and line, (proc.stdout[-3000:], proc.stderr[-3000:])
    out = json.loads(line[len("PORTABLE RESULT "):])
    assert all(out["blocked"].values()), out["blocked"]
    for label, result in out["calls"].items():
        if result[0] == "raised":
            kind, message = result[1], result[2]
            # a refusal is an operator error (RuntimeError) of one line, never a traceback
            # of a missing module or name
            assert kind == "RuntimeError", (label, result[3])
            assert not re.search(r"ImportError|AttributeError|NameError|No module named|"
                                 r"has no attribute", message), (label, message)
            assert len(message.strip().splitlines()) == 1, (label, message)
    print(json.dumps({k: v[:3] for k, v in out["calls"].items()}, indent=1))
    calls = out["calls"]
    # what needs no lock works: the add-on, Find Groups, Build From Proposals
    for label in (*(f"import {n}" for n in IMPORTED), "enable", "find groups",
                  "build from proposals"):
        assert calls[label][0] == "ok", (label, calls[label])
    assert (scene / "relation_groups" / out["groups"][0] / "metadata.json").is_file()
    # the step's group lock: here neither fcntl nor Windows' LockFileEx (filelock) exists,
    # so it refuses in one line naming the fix; on Windows filelock takes the lock
    kind, message = calls["init iter_0"][1:3]
    assert kind == "RuntimeError" and "file locks: not available on" in message, message
    assert "filelock" in message and "fcntl" in message, message
