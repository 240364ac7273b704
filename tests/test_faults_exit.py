"""Tier 2 (bpy wheel): exit codes and error lines of issue 26 (item 5) and issue 27, each case
provoked for real.

* a full disk (a real tmpfs, filled up) while ``island-refine run`` rebuilds the islands,
  steps an iteration of the refine stage and merges back: exit 10 naming where, one line,
  every file written before byte-identical, and the same run finishing once space is freed;
* a UTF-8 byte order mark in ``transforms.json``, ``target_spec.json`` and
  ``relation_graph.json``: accepted;
* malformed JSON in an existing file: the fix names the line and column, never "write";
* a 5000-digit integer in ``transforms.json``, ``target_spec.json`` and the relation graph:
  the tool's own line naming the field, no Python hint;
* ``clearance_m: 1e6``: refused when the spec is read (exit 5 / 20), naming the bound;
* a truncated ``island.blend`` (iter_0's, the group's) and input scene: exit 8 naming it;
* an explicit ``target_spec`` with a member missing from the scene: the missing object, not
  a member_count mismatch;
* control characters (an ANSI colour, a newline) in a member name and an object name:
  escaped in the one line.

Lines are judged here by their text (exit code, one line, the names and fixes in it);
"nothing lost" by comparing every file's bytes. Renders are 64 px.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests._helpers import snapshot
from tests.test_daemon import (  # noqa: F401 - fixtures
    MOVES,
    backend,
    group,
    prepared,
    write_decision,
)
from tests.test_faults import mounted, one_line, step, umount

pytestmark = pytest.mark.bpy

EXIT_TRANSFORMS, EXIT_TARGET_SPEC, EXIT_GROUP_INPUT, EXIT_FILESYSTEM = 3, 5, 8, 10
EXIT_RELATION_GRAPH = 20
SCENE_FLAGS = ["--blender-bin", "bpy", "--resolution", "64", "--samples", "1", "--max-iter",
               "3", "--quiet"]
BOM = b"\xef\xbb\xbf"
COLOUR_NEWLINE = "\x1b[31m\nX"
ESCAPED = "\\x1b[31m\\nX"
PYTHON_HINT = ("set_int_max_str_digits", "sys.", "Exceeds the limit")
# What a run updates when it stops (its bookkeeping: the scene's, the loop's run log).
BOOKKEEPING = ("state.json", "ledger.sqlite", "metrics.json", "run.json")


# --------------------------------------------------------------------------- helpers

def lines_of(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.strip()]


def safe_line(line: str) -> None:
    """No raw control character (an escape sequence, a carriage return) in what is echoed."""
    assert not re.search(r"[\x00-\x1f\x7f-\x9f]", line), repr(line)


def corrupt_json(path: Path) -> None:
    """Cut the last closing brace off: a file that exists, with malformed content."""
    text = path.read_text(encoding="utf-8").rstrip()
    assert text.endswith("}")
    path.write_text(text[:-1], encoding="utf-8")


def truncate(path: Path) -> None:
    """Half of the file, written as a new file (hard links elsewhere keep the whole one)."""
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data[: len(data) // 2])


def long_int_in(path: Path, key: str) -> None:
    """Replace the first number of ``"key": <number>`` in ``path`` by 5000 digits."""
    text, count = re.subn(rf'("{key}": \[?\s*)-?[0-9.eE+-]+', lambda m: m.group(1) + "7" * 5000,
                          path.read_text(encoding="utf-8"), count=1)
    assert count == 1, key
    path.write_text(text, encoding="utf-8")


def changed(before: dict[str, str], after: dict[str, str], *, keep: tuple[str, ...] = ()
            ) -> list[str]:
    """Files of ``before`` that are gone or differ in ``after`` (``keep``: names skipped, and
    hidden staging directories: the failed step's own, removed when it fails)."""
    return [k for k, v in before.items()
            if Path(k).name not in keep and not any(part.startswith((".staging.", ".rebuild"))
                                                    for part in Path(k).parts)
            and after.get(k) != v]


# --------------------------------------------------------------------------- the loop CLI

def test_bom_in_transforms_and_target_spec_is_accepted(group: Path) -> None:
    path = write_decision(group, 1, MOVES[0])
    path.write_bytes(BOM + path.read_bytes())
    spec = group / "target_spec.json"
    spec.write_bytes(BOM + spec.read_bytes())
    data = path.read_bytes()
    proc = step(group)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "[iter_step] sanity OK" in proc.stdout.splitlines()
    assert (group / "simple_refiner/iter_1/transforms.json").read_bytes() == data  # as written
    state = json.loads((group / "simple_refiner/iter_1/current_state.json").read_text())
    assert state["iter"] == 1


def test_malformed_json_in_an_existing_file_says_where_to_fix_it(group: Path) -> None:
    path = write_decision(group, 1, MOVES[0])
    corrupt_json(path)
    before = snapshot(group)
    line = one_line(step(group), EXIT_TRANSFORMS, str(path), "malformed JSON at line")
    where = re.search(r"line (\d+) column (\d+)", line)
    assert where, line
    fix = line.split("(fix: ", 1)[1]
    assert f"line {where[1]} column {where[2]}" in fix and "correct" in fix, line
    assert "write" not in fix, line
    assert snapshot(group) == before


@pytest.mark.parametrize("which", ["transforms", "target_spec"])
def test_5000_digit_integer_is_the_tools_own_line_naming_the_field(group: Path,
                                                                   which: str) -> None:
    path = write_decision(group, 1, MOVES[0])
    if which == "transforms":
        long_int_in(path, "delta_xyz")
        code, fld = EXIT_TRANSFORMS, "members.chair_1.delta_xyz[0]"
    else:
        path = group / "target_spec.json"
        long_int_in(path, "member_count")
        code, fld = EXIT_TARGET_SPEC, "member_count"
    before = snapshot(group)
    line = one_line(step(group), code, str(path), f"field '{fld}'", "5000-digit")
    assert not any(hint in line for hint in PYTHON_HINT), line
    assert snapshot(group) == before


def test_clearance_of_a_million_metres_is_refused_when_read(group: Path) -> None:
    write_decision(group, 1, MOVES[0])
    path = group / "target_spec.json"
    spec = json.loads(path.read_text())
    spec["clearance_m"] = 1e6
    path.write_text(json.dumps(spec))
    before = snapshot(group)
    line = one_line(step(group), EXIT_TARGET_SPEC, str(path), "field 'clearance_m'", "100 m")
    assert "internal" not in line
    assert snapshot(group) == before


@pytest.mark.parametrize("which", ["iter_0", "group"])
def test_truncated_island_blend_is_exit_8_naming_it(group: Path, which: str) -> None:
    write_decision(group, 1, MOVES[0])
    if which == "iter_0":
        path = group / "simple_refiner/iter_0/island.blend"
        truncate(path)
        before = snapshot(group)
        proc = step(group)
    else:
        from tests.test_daemon import cli

        path = group / "island.blend"
        truncate(path)
        before = snapshot(group)
        proc = cli("scripts/init_iter0.py", "--group-dir", str(group), "--resolution", "64",
                   "--samples", "1", "--blender-bin", "bpy")
    line = one_line(proc, EXIT_GROUP_INPUT, f"{path}:", "truncated")
    assert ".staging" not in line, line
    assert snapshot(group) == before


def test_control_characters_in_a_member_name_are_escaped(group: Path) -> None:
    path = write_decision(group, 1, MOVES[0])
    doc = json.loads(path.read_text())
    doc["members"]["chair" + COLOUR_NEWLINE] = {"delta_xyz": [0.0, 0.0, 0.0],
                                                "delta_yaw_deg": 0.0}
    path.write_text(json.dumps(doc))
    before = snapshot(group)
    proc = step(group)
    line = one_line(proc, EXIT_TRANSFORMS, str(path), f"'chair{ESCAPED}'")
    assert len(lines_of(proc.stderr)) == 1, proc.stderr
    safe_line(proc.stderr.rstrip("\n"))
    assert f"field 'members.chair{ESCAPED}'" in line
    assert snapshot(group) == before


# --------------------------------------------------------------------------- island-refine run

@pytest.fixture(scope="module")
def tv_template(tmp_path_factory: pytest.TempPathFactory, backend) -> Path:
    from fixtures.scenes import build_scene

    return build_scene(tmp_path_factory.mktemp("tv") / "scene", backend, groups=["tv"])


def refine(scene: Path, capsys: pytest.CaptureFixture) -> tuple[int, list[str]]:
    """``island-refine run`` in this process: (exit code, the lines on stderr)."""
    from scripts.refine_scene import main

    capsys.readouterr()
    code = main(["run", "--scene-dir", str(scene), *SCENE_FLAGS])
    return code, lines_of(capsys.readouterr().err)


def refused(scene: Path, capsys: pytest.CaptureFixture, code: int, *needles: str) -> str:
    """The run ends with ``code`` in one safe line naming ``needles``, nothing written."""
    before = snapshot(scene)
    got, err = refine(scene, capsys)
    assert got == code and len(err) == 1, (got, err)
    line = err[0]
    assert line.startswith(f"[refine_scene] error (exit {code}): "), line
    safe_line(line)
    for needle in needles:
        assert needle in line, (needle, line)
    assert snapshot(scene) == before
    return line


def edit_graph(scene: Path, edit: Callable[[dict], None]) -> Path:
    path = scene / "inputs/relation_graph.json"
    graph = json.loads(path.read_text())
    edit(graph["groups"][0])
    path.write_text(json.dumps(graph))
    return path


SPEC = {"anchor_role": "tv_stand", "member_count": 3, "pattern": "row",
        "facing": "toward_anchor", "spacing": "even_along_each_edge", "clearance_m": 1.2}


@pytest.fixture
def scene(tv_template: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "scene"
    shutil.copytree(tv_template, dest)
    return dest


def test_bom_in_the_relation_graph_is_accepted(scene: Path,
                                               capsys: pytest.CaptureFixture) -> None:
    path = scene / "inputs/relation_graph.json"
    path.write_bytes(BOM + path.read_bytes())
    code, err = refine(scene, capsys)
    assert code == 0, err
    assert (scene / "blend/stage3-scene.blend").is_file()


def test_malformed_relation_graph_says_where_to_fix_it(scene: Path,
                                                       capsys: pytest.CaptureFixture) -> None:
    corrupt_json(scene / "inputs/relation_graph.json")
    line = refused(scene, capsys, EXIT_RELATION_GRAPH, "relation_graph.json",
                   "malformed JSON at line")
    fix = line.split("(fix: ", 1)[1]
    assert re.search(r"correct the JSON at line \d+ column \d+", fix), line
    assert "write" not in fix, line


def test_missing_member_is_named_before_any_member_count(scene: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    def edit(g: dict) -> None:   # a fourth, misspelt member; the spec counts the real three
        g["members"].append("tv.chair_typo")
        g["target_spec"] = dict(SPEC)

    edit_graph(scene, edit)
    line = refused(scene, capsys, EXIT_RELATION_GRAPH, "field 'groups[0].members[3]'",
                   "'tv.chair_typo' is not in the scene")
    assert "member_count" not in line and "metadata.json" not in line, line


@pytest.mark.parametrize("where", ["target_spec", "relation"])
def test_clearance_of_a_million_metres_in_the_graph_is_refused(
        scene: Path, capsys: pytest.CaptureFixture, where: str) -> None:
    def edit(g: dict) -> None:
        if where == "target_spec":
            g["target_spec"] = {**SPEC, "clearance_m": 1e6}
        else:
            g["relation"]["clearance_m"] = 1e6

    edit_graph(scene, edit)
    line = refused(scene, capsys, EXIT_RELATION_GRAPH,
                   f"field 'groups[0].{where}.clearance_m'", "100 m")
    assert "internal" not in line


def test_5000_digit_integer_in_the_graph_names_the_field(scene: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    path = edit_graph(scene, lambda g: g.update(target_spec=dict(SPEC)))
    long_int_in(path, "member_count")
    line = refused(scene, capsys, EXIT_RELATION_GRAPH,
                   "field 'groups[0].target_spec.member_count'", "5000-digit")
    assert not any(hint in line for hint in PYTHON_HINT), line


def test_control_characters_in_an_object_name_are_escaped(scene: Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    # (a group id with them is refused as unsafe, the id shown escaped: tests of the graph)
    edit_graph(scene, lambda g: g["members"].__setitem__(1, "tv.chair" + COLOUR_NEWLINE))
    refused(scene, capsys, EXIT_RELATION_GRAPH, "field 'groups[0].members[1]'",
            f"'tv.chair{ESCAPED}' is not in the scene")


def test_truncated_input_scene_is_exit_8_naming_it(scene: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    blend = scene / "blend/stage3-sub-planned.blend"
    truncate(blend)
    refused(scene, capsys, EXIT_GROUP_INPUT, f"{blend}:", "truncated")


# --------------------------------------------------------------------------- a full disk

LEFT_FREE = 64 << 10   # far less than an island (~700 kB): Blender's save must fail


def fill(mnt: Path, left: int = LEFT_FREE) -> Path:
    """Fill the file system of ``mnt`` up to ``left`` bytes, for real; returns the filler."""
    filler = mnt / "filler"
    with open(filler, "ab") as fh:
        while True:
            st = os.statvfs(mnt)
            room = st.f_bavail * st.f_frsize - left
            if room <= 0:
                break
            try:
                fh.write(b"\0" * min(room, 1 << 20))
                fh.flush()
            except OSError:
                break
    return filler


@pytest.fixture
def small_disk(tv_template: Path, tmp_path: Path) -> Iterator[Path]:
    """The tv scene on a 24 MB tmpfs of its own (root; a failure in CI where it cannot)."""
    mnt = tmp_path / "small"
    if not mounted(mnt, "24m"):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        shutil.copytree(tv_template, mnt / "scene")
        yield mnt
    finally:
        umount(mnt)


# Where each stage writes when the disk fills up: the rebuilt island, the iteration, the
# merged scene.
WRITING = {"scene_rebuild": "relation_groups/tv/.rebuild", "step": "simple_refiner/",
           "scene_merge": "scene/blend"}


def _is_stage(op: str) -> Callable[[dict], bool]:
    if op == "step":   # an iteration of the refine stage: a step that moves members
        return lambda job: job["op"] == "step" and bool(job.get("poses"))
    return lambda job: job["op"] == op


@pytest.mark.required_in_ci
@pytest.mark.parametrize("op", ["scene_rebuild", "step", "scene_merge"])
def test_full_disk_during_a_run_is_exit_10_and_loses_nothing(
        small_disk: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch,
        op: str) -> None:
    """The disk fills up just before the stage's Blender job (rebuild, a refine iteration,
    merge back): the run stops with exit 10 in one line naming the scene's file system, every
    file written before is byte-identical, and the run finishes once space is freed."""
    import scripts.refine_scene as refine_scene

    scene = small_disk / "scene"
    real_runner = refine_scene.job_runner
    at_fill: dict[str, dict[str, str]] = {}
    is_stage = _is_stage(op)

    def runner(settings):
        backend_, run_job = real_runner(settings)

        def job(spec: dict) -> dict:
            if not at_fill and is_stage(spec):
                at_fill["files"] = snapshot(scene)
                fill(small_disk)
            return run_job(spec)
        return backend_, job

    monkeypatch.setattr(refine_scene, "job_runner", runner)
    code, err = refine(scene, capsys)
    assert at_fill, f"no {op} job ran"
    assert code == EXIT_FILESYSTEM and len(err) == 1, (code, err)
    line = err[0]
    assert line.startswith("[refine_scene] error (exit 10): ") and "Traceback" not in line
    assert "no space left on the device" in line and str(scene) in line, line
    assert "Error: Success" not in line and "No such file" not in line, line
    assert WRITING[op] in line, line          # where the stage was writing, not a later file
    state = json.loads((scene / "state.json").read_text())
    assert state["islands_failed"] == [], state["islands_failed"]    # no failure of the group
    assert "Error: Success" not in json.dumps(state)
    assert changed(at_fill["files"], snapshot(scene), keep=BOOKKEEPING) == []
    assert not list(scene.rglob(".write-probe*")) and not list(scene.rglob("*.blend@"))
    if op == "scene_merge":
        assert not (scene / "blend/stage3-scene.blend").exists()

    (small_disk / "filler").unlink()
    monkeypatch.setattr(refine_scene, "job_runner", real_runner)
    code, err = refine(scene, capsys)
    assert code == 0, err
    assert (scene / "blend/stage3-scene.blend").is_file()
