"""A newcomer's path through the README (issue 27, first half).

Tier 1: the README's commands name the venv's Python; its transforms.json example is the
file in docs/examples; a hand-written transforms.json meets refusals that name their rule
(the real CLIs on a group whose iter_0 a stand-in for Blender made, as in test_adapter);
``agent.py run`` fails in one line (the report's items: tests/test_scene_report.py).
Tier 2 (bpy): the example steps on the demo's group and turns each chair by its delta; a
run failing mid-loop is one line too. Tier 3 (a Blender binary): a file saved by the
embedded Blender 5 and opened with Debian's 3.4 names the Python whose embedded Blender
can open it.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from island_tools.errors import EXIT_AGENT, EXIT_TRANSFORMS, EXIT_USAGE, EXIT_WORKER
from island_tools.files import atomic
from island_tools.iteration import init_iter0
from island_tools.measure import meshcache
from tests.test_adapter import SETTINGS, FakeWorker

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
EXAMPLE = REPO / "docs" / "examples" / "transforms.json"
DEMO = ("long_table_6", "turned_90")   # scripts/demo.py's group


def cli(*args: str, cwd: Path = REPO, env: dict | None = None,
        stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                          input=stdin, env={**os.environ, **(env or {})}, timeout=300,
                          check=False)


def the_line(proc: subprocess.CompletedProcess, code: int) -> str:
    """The call failed with ``code`` and printed exactly one line, on stderr."""
    assert proc.returncode == code, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout == "", proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


# --------------------------------------------------------------------------- README

def test_readme_runs_every_command_with_the_venv_python() -> None:
    """A bare ``python`` has no embedded Blender: it falls back to the 3.4 binary, which
    cannot open what the fixtures and the demo save (item 1)."""
    bare = [line for line in README.read_text(encoding="utf-8").splitlines()
            if re.search(r"(?<![\w./-])python3? (scripts/|-m )", line)]
    assert not bare, bare
    text = README.read_text(encoding="utf-8")
    assert ".venv/bin/python -m fixtures.scenes --out" in text   # item 3: a scene to run
    assert ".venv/bin/island-refine run --scene-dir" in text


def test_readme_shows_the_example_transforms_verbatim() -> None:
    text = README.read_text(encoding="utf-8")
    at = text.index("docs/examples/transforms.json")
    start = text.index("```json\n", at) + len("```json\n")
    block = text[start:text.index("```", start)]
    assert block == EXAMPLE.read_text(encoding="utf-8")
    doc = json.loads(block)
    assert sorted(doc) == ["_island_meta", "converged", "final", "iter", "members",
                           "reason_summary"]
    assert all(sorted(d) == ["delta_xyz", "delta_yaw_deg"] for d in doc["members"].values())


# --------------------------------------------------------------------------- refusals

@pytest.fixture(scope="module")
def demo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's arrangement as a stand-in group with iter_0 (FakeWorker, no Blender)."""
    from fixtures import specs

    out = tmp_path_factory.mktemp("newcomer")
    arr = specs.arrange(*DEMO)
    root = out / "__".join(DEMO)
    root.mkdir()
    atomic.write_json(root / "metadata.json", arr.metadata())
    atomic.write_json(root / "target_spec.json", arr.target_spec())
    meshcache.save(out / "meshes.npz", arr.meshes,
                   {n: p for n, p in specs.member_props(DEMO[0]).items() if p})
    (root / "island.blend").write_text(json.dumps(
        {"poses": {n: [list(map(float, row)) for row in arr.canonical[n]] for n in arr.names},
         "mesh_cache": str(out / "meshes.npz")}))
    init_iter0(root, SETTINGS, FakeWorker())
    return root


@pytest.fixture
def stand_in(demo_template: Path, tmp_path: Path) -> Path:
    dest = tmp_path / demo_template.name
    shutil.copytree(demo_template, dest)
    return dest


def hand_written(group: Path, doc: dict) -> Path:
    path = group / "simple_refiner" / "iter_1" / "transforms.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))
    return path


def step_refusal(group: Path) -> str:
    return the_line(cli("scripts/iter_step.py", "--group-dir", str(group), "--iter", "1",
                        "--no-daemon", "--quiet"), EXIT_TRANSFORMS)


def test_a_pure_turn_without_delta_xyz_is_refused_naming_the_rule(stand_in: Path) -> None:
    doc = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    doc["members"]["chair_3"] = {"delta_yaw_deg": -90.0}
    path = hand_written(stand_in, doc)
    line = step_refusal(stand_in)
    assert str(path) in line and "members.chair_3.delta_xyz" in line
    assert "delta_xyz is required in every member entry, [0,0,0] for a pure turn" in line


def test_a_file_without_island_meta_is_refused_naming_who_fills_it(stand_in: Path) -> None:
    doc = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    del doc["_island_meta"]
    hand_written(stand_in, doc)
    line = step_refusal(stand_in)
    assert ("_island_meta is required (agent.py write fills it: model, image_sha256, "
            "generated_by, mode, iter, timestamp_utc)") in line
    doc = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    del doc["_island_meta"]["timestamp_utc"]
    hand_written(stand_in, doc)
    line = step_refusal(stand_in)
    assert "_island_meta.timestamp_utc" in line and "agent.py write fills it" in line


def test_too_few_movers_in_the_pattern_phase_is_refused_naming_the_rule(
        stand_in: Path) -> None:
    """Three members listed, one of them by less than the movement tolerance: two move."""
    turn = {"delta_xyz": [0.0, 0.0, 0.0], "delta_yaw_deg": 90.0}
    decision = {"members": {"chair_2": turn, "chair_4": turn,
                            "chair_6": {"delta_xyz": [0.00001, 0.0, 0.0],
                                        "delta_yaw_deg": 0.0}}}
    line = the_line(cli("scripts/agent.py", "write", "--group-dir", str(stand_in), "--iter",
                        "1", stdin=json.dumps(decision)), EXIT_TRANSFORMS)
    assert "pattern phase (iter 1-3) must move at least 3 members per iteration" in line
    assert "got 2 (chair_2, chair_4)" in line and "chair_6" in line
    assert not (stand_in / "simple_refiner" / "iter_1").exists()


def test_the_example_decision_passes_agent_py_write(stand_in: Path) -> None:
    doc = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    decision = {k: doc[k] for k in ("members", "converged", "final", "reason_summary")}
    proc = cli("scripts/agent.py", "write", "--group-dir", str(stand_in), "--iter", "1",
               "--model", "opus", "--generated-by", "stage3-island-refiner subagent",
               stdin=json.dumps(decision))
    assert proc.returncode == 0, proc.stderr
    written = json.loads((stand_in / "simple_refiner/iter_1/transforms.json").read_text())
    assert written["members"] == doc["members"]
    assert sorted(written["_island_meta"]) == sorted(doc["_island_meta"])


# --------------------------------------------------------------------------- one line

def test_agent_run_on_a_missing_group_fails_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    for quiet in ((), ("--quiet",)):
        line = the_line(cli("scripts/agent.py", "run", "--group-dir", str(missing), *quiet),
                        EXIT_USAGE)
        assert line.startswith("[agent] error (exit 2): ") and str(missing) in line
        assert "None" not in line and "does not exist" in line


# --------------------------------------------------------------------------- tier 2

@pytest.fixture(scope="module")
def demo_group(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's group built by the embedded Blender, with iter_0 at 64 px."""
    from fixtures.build import build_fixture
    from worker.launch import resolve_blender, run_job

    backend = resolve_blender("bpy", None)
    group = build_fixture(*DEMO, tmp_path_factory.mktemp("demo"), backend=backend)
    init_iter0(group, SETTINGS, lambda job: run_job(job, backend))
    return group


def yaw_deg(matrix: list[list[float]]) -> float:
    return math.degrees(math.atan2(matrix[1][0], matrix[0][0]))


@pytest.mark.bpy
def test_the_example_steps_on_the_demo_group(demo_group: Path, tmp_path: Path) -> None:
    group = tmp_path / demo_group.name
    shutil.copytree(demo_group, group)
    hand_written(group, json.loads(EXAMPLE.read_text(encoding="utf-8")))
    proc = cli("scripts/iter_step.py", "--group-dir", str(group), "--iter", "1",
               "--resolution", "64", "--samples", "1", "--blender-bin", "bpy", "--no-daemon")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("[iter_step] sanity OK")
    refiner = group / "simple_refiner"
    before = json.loads((refiner / "iter_0/current_state.json").read_text())
    after = json.loads((refiner / "iter_1/current_state.json").read_text())
    deltas = json.loads(EXAMPLE.read_text(encoding="utf-8"))["members"]

    for name, delta in deltas.items():
        a, b = before["poses"][name]["matrix_4x4"], after["poses"][name]["matrix_4x4"]
        turned = (yaw_deg(b) - yaw_deg(a) - delta["delta_yaw_deg"] + 180.0) % 360.0 - 180.0
        assert abs(turned) < 0.01, (name, yaw_deg(a), yaw_deg(b))


@pytest.mark.bpy
def test_agent_run_failing_mid_loop_is_one_line(demo_group: Path, tmp_path: Path) -> None:
    group = tmp_path / demo_group.name
    shutil.copytree(demo_group, group)
    proc = cli("scripts/agent.py", "run", "--group-dir", str(group), "--policy",
               "command:echo junk", "--resolution", "64", "--samples", "1", "--blender-bin",
               "bpy", "--no-daemon", "--quiet")
    line = the_line(proc, EXIT_AGENT)
    assert line.startswith("[agent] error (exit 9): iter 1 (decide): agent command")
    assert line.endswith(f"run.json: {group / 'simple_refiner' / 'run.json'}")
    loud = cli("scripts/agent.py", "run", "--group-dir", str(group), "--policy",
               "command:echo junk", "--resolution", "64", "--samples", "1", "--blender-bin",
               "bpy", "--no-daemon")
    assert loud.returncode == EXIT_AGENT and loud.stdout == ""
    assert sum("printed no JSON decision" in ln for ln in loud.stderr.splitlines()) == 1


# --------------------------------------------------------------------------- tier 3

@pytest.fixture(scope="module")
def saved_by_bpy(demo_group: Path) -> tuple[Path, str]:
    import bpy

    return demo_group / "island.blend", "{}.{}".format(*bpy.app.version[:2])


def debian_blender():
    from worker.launch import resolve_blender

    found = os.environ.get("BLENDER") or shutil.which("blender")
    assert found, "no Blender binary (bash scripts/setup_env.sh --with-blender)"
    backend = resolve_blender(found, None)
    assert tuple(map(int, backend.version.split(".")[:2])) < (5, 0), backend.version
    return backend


@pytest.mark.blender_bin
def test_an_older_binary_says_this_pythons_embedded_blender_can_open_the_file(
        saved_by_bpy: tuple[Path, str]) -> None:
    from island_tools.errors import BlendVersionError
    from worker.launch import run_job

    blend, saved = saved_by_bpy
    backend = debian_blender()
    with pytest.raises(BlendVersionError) as err:
        run_job({"op": "read_poses", "blend": str(blend), "members": ["table"]}, backend)
    msg = err.value.one_line()
    assert err.value.exit_code == EXIT_WORKER and str(blend) in msg
    assert f"saved by Blender {saved}, this Blender is {backend.version}" in msg
    version = importlib_version("bpy")
    assert f"this Python's embedded Blender {version} can open it" in msg
    assert f"--blender-bin a Blender >= {saved}" in msg


def importlib_version(name: str) -> str:
    import importlib.metadata

    return importlib.metadata.version(name)


@pytest.mark.blender_bin
def test_a_python_without_bpy_is_told_which_venv_python_can_open_the_file(
        saved_by_bpy: tuple[Path, str], tmp_path: Path) -> None:
    """The newcomer's call: ``python scripts/init_iter0.py`` in a checkout whose ``.venv``
    has the wheel, with a Python that has everything but ``bpy`` - so ``blender`` on PATH
    (Debian's 3.4) is chosen. The checkout is a copy of this tree with this venv as its
    ``.venv``; the Python is this one without site-packages, given them back minus bpy."""
    blend, saved = saved_by_bpy
    backend = debian_blender()
    checkout = tmp_path / "checkout"
    for package in ("island_tools", "worker", "scripts"):
        shutil.copytree(REPO / package, checkout / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (checkout / ".venv").symlink_to(sys.prefix)
    site = tmp_path / "site_without_bpy"
    site.mkdir()
    import numpy

    for entry in Path(numpy.__file__).resolve().parents[1].iterdir():
        if not entry.name.startswith(("bpy", "__editable__", "_island")):
            (site / entry.name).symlink_to(entry)
    group = tmp_path / blend.parent.name
    shutil.copytree(blend.parent, group, ignore=shutil.ignore_patterns("simple_refiner*"))
    env = {"PYTHONPATH": str(site), "BLENDER": "",
           "PATH": f"{Path(backend.path).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run([sys.executable, "-S", "scripts/init_iter0.py", "--group-dir",
                           str(group), "--no-daemon", "--quiet"], cwd=checkout,
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, **env})
    line = the_line(proc, EXIT_WORKER)
    version = importlib_version("bpy")
    assert f"saved by Blender {saved}, this Blender is {backend.version}" in line, line
    assert (f"run with .venv/bin/python (embedded Blender {version}), or --blender-bin a "
            f"Blender >= {saved}") in line, line
