"""Tier 2 (bpy wheel): the Blender add-on registered, driven through ``bpy.ops`` in background
mode on a fixture island, compared artifact for artifact with the CLI path.

Renders are 64 px (a test DIRECTORYS.yaml); one fixture build per module, copied per test.
"""
from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from island_tools.files import atomic
from island_tools.iteration import sha256_file
from island_tools.schemas import transforms_doc

pytestmark = pytest.mark.bpy
REPO = Path(__file__).resolve().parents[1]
MODULE = "blender_addon"
GROUP = "long_table_6__turned_90"
MOVE = {"chair_1": {"delta_xyz": [0.2, 0.0, 0.0], "delta_yaw_deg": 15.0},
        "chair_2": {"delta_xyz": [0.0, -0.1, 0.0], "delta_yaw_deg": 0.0}}
SPEC = {"anchor_role": "long_table", "member_count": 2, "pattern": "row",
        "facing": "toward_anchor", "spacing": "tight", "clearance_m": 0.1}


def addon_classes() -> list:
    from blender_addon import ops, panel, prefs, props

    return [c for m in (prefs, props, ops, panel) for c in m.CLASSES]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Building runs worker jobs in this process (read_factory_settings): before enabling.
    from fixtures.build import build_fixture
    from worker.launch import resolve_blender

    out = tmp_path_factory.mktemp("addon_fixture")
    return build_fixture("long_table_6", "turned_90", out, backend=resolve_blender("bpy", None))


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("addon_cfg") / "DIRECTORYS.yaml"
    path.write_text("# test settings\nblender_bin: \"\"\nengine: workbench\nresolution: 64\n"
                    "samples: 1\n")
    return path


@pytest.fixture(scope="module")
def addon(built: Path, config: Path):
    import addon_utils

    addon_utils.enable(MODULE, default_set=True)
    prefs = bpy.context.preferences.addons[MODULE].preferences
    prefs.config_path = str(config)
    yield prefs
    addon_utils.disable(MODULE, default_set=True)


@pytest.fixture
def st(addon):
    bpy.ops.wm.read_homefile(use_empty=True)
    addon.execution = "AUTO"
    return bpy.context.scene.island_refiner


def new_scene(built: Path, root: Path, *, spec: bool = True) -> Path:
    group = root / "relation_groups" / GROUP
    shutil.copytree(built, group)
    if not spec:
        (group / "target_spec.json").unlink()
    return group


def use_scene(st, root: Path) -> None:
    st.scene_dir = str(root)
    assert bpy.ops.island.refresh_groups() == {"FINISHED"}


def cli(script: str, group: Path, config: Path, *args: str) -> None:
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / script), "--group-dir",
                           str(group), "--config", str(config), "--quiet", *args],
                          cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]


def artifacts(group: Path, n: int) -> tuple[dict, dict]:
    it = group / "simple_refiner" / f"iter_{n}"
    return (json.loads((it / "current_state.json").read_text()),
            json.loads((it / "geometry.json").read_text()))


def decision_file(group: Path, n: int, members: dict, where: Path) -> Path:
    image = group / "simple_refiner" / f"iter_{n - 1}" / "render_bev.png"
    doc = transforms_doc({"members": members, "converged": False, "reason_summary": "test"},
                         n, sha256_file(image), model="test", generated_by="tests")
    where.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_json(where, doc)
    return where


def cube(name: str, size: tuple, loc: tuple, yaw_deg: float):
    import bmesh

    mesh = bpy.data.meshes.new(name)
    bm = bmesh.new()
    bmesh.ops.create_cube(bm, size=1.0)
    bm.to_mesh(mesh)
    bm.free()
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    obj.location, obj.scale = loc, size
    obj.rotation_euler = (0.0, 0.0, math.radians(yaw_deg))
    return obj


def worlds(names) -> dict[str, np.ndarray]:
    bpy.context.view_layer.update()
    return {n: np.array(bpy.data.objects[n].matrix_world) for n in names}


# ----------------------------------------------------------------------------- registration
def test_register_unregister_twice_leaves_nothing(built: Path) -> None:
    import addon_utils

    for _ in range(2):
        addon_utils.enable(MODULE, default_set=True)
        assert MODULE in bpy.context.preferences.addons
        assert hasattr(bpy.types.Scene, "island_refiner")
        assert all(c.is_registered for c in addon_classes())
        assert "init_iter0" in dir(bpy.ops.island)
        addon_utils.disable(MODULE, default_set=True)
        assert MODULE not in bpy.context.preferences.addons
        assert not hasattr(bpy.types.Scene, "island_refiner")
        leftovers = [c.__name__ for c in addon_classes() if c.is_registered]
        assert leftovers == []


# ----------------------------------------------------------------------------- operators
def test_operators_produce_the_cli_artifacts(st, built: Path, config: Path,
                                             tmp_path: Path) -> None:
    assert not bpy.ops.island.refresh_groups.poll()
    assert not bpy.ops.island.init_iter0.poll()
    group_a = new_scene(built, tmp_path / "a")
    group_b = new_scene(built, tmp_path / "b")
    use_scene(st, tmp_path / "a")
    assert [(g.name, g.status) for g in st.groups] == [(GROUP, "ready")]
    assert st.target_spec.pattern == "2+2+1+1" and st.target_spec.member_count == 6
    assert bpy.ops.island.init_iter0.poll() and bpy.ops.island.solver_step.poll()

    assert bpy.ops.island.init_iter0() == {"FINISHED"}
    cli("init_iter0.py", group_b, config)
    assert artifacts(group_a, 0) == artifacts(group_b, 0)
    assert st.groups[0].status == "iter_0"

    # apply_delta from a transforms.json outside the group: copied to iter_1/, then stepped
    source = decision_file(group_a, 1, MOVE, tmp_path / "decision" / "transforms.json")
    assert bpy.ops.island.apply_delta(filepath=str(source)) == {"FINISHED"}
    decision_file(group_b, 1, MOVE, group_b / "simple_refiner/iter_1/transforms.json")
    cli("iter_step.py", group_b, config, "--iter", "1")
    assert artifacts(group_a, 1) == artifacts(group_b, 1)

    # one iteration with the built-in solver: the same decision the adapter writes for agents
    assert bpy.ops.island.solver_step() == {"FINISHED"}
    written = json.loads((group_a / "simple_refiner/iter_2/transforms.json").read_text())
    from island_tools.adapter import SolverPolicy, phase_for, write_decision
    from island_tools.iteration import load_group
    policy = SolverPolicy(model=None, generated_by="test")
    decision = policy.decide(load_group(group_b), 2, phase_for(2, 6), 2)
    write_decision(group_b, 2, decision, model="solver", generated_by="test")
    expected = json.loads((group_b / "simple_refiner/iter_2/transforms.json").read_text())
    assert written["members"] == expected["members"] and written["members"]
    assert written["_island_meta"]["model"] == "solver"
    cli("iter_step.py", group_b, config, "--iter", "2")
    assert artifacts(group_a, 2) == artifacts(group_b, 2)

    # the browser followed each step and loaded the island into its own scene
    scene = bpy.data.scenes[f"Island {GROUP}"]
    loaded = {o["island_member"]: o for o in scene.objects}
    state = artifacts(group_a, 2)[0]["poses"]
    assert sorted(loaded) == sorted(state) and st.iteration == 2
    for name, obj in loaded.items():
        assert np.allclose(np.array(obj.matrix_world), state[name]["matrix_4x4"], atol=1e-6)
    assert list(loaded["chair_1"]["island_forward_local"]) == pytest.approx([0.0, -1.0], abs=1e-6)
    bev = bpy.data.images[f"Island {GROUP} bev"]  # one image pair per group, re-pointed
    assert bev["island_label"] == "iter_2 renders"
    assert Path(bev.filepath).resolve() == group_a / "simple_refiner/iter_2/render_bev.png"
    from blender_addon.draw import arrow_segments
    chair = loaded["chair_1"]
    (start, tip), *head = arrow_segments(chair)
    forward = np.array(chair.matrix_world.to_3x3()) @ [0.0, -1.0, 0.0]
    assert len(head) == 2 and np.allclose(np.array(tip - start) / (tip - start).length,
                                          forward / np.linalg.norm(forward), atol=1e-6)
    assert arrow_segments(loaded["table"]) == []  # symmetric anchor: no arrow

    # member geometry recomputes the same geometry.json and lists every member
    geometry = group_a / "simple_refiner/iter_2/geometry.json"
    before = geometry.read_bytes()
    assert bpy.ops.island.member_geometry() == {"FINISHED"}
    assert geometry.read_bytes() == before
    assert len(st.members) == 6 and st.members_iter == 2
    assert all(m.has_facing and m.facing_error_deg < 1.0 for m in st.members)
    # the panel's verdict line is the one review (the scene pipeline's review_group)
    from island_tools import review
    rev = review.review_island(group_a, json.loads(before))
    assert st.review_iter == 2 and st.review_verdict == rev["summary"]["verdict"]
    assert st.review_line == review.sentence(rev, 40)
    assert st.review_line.startswith(f"Review: {st.review_verdict} (")
    assert st.review_line in st.last_message

    # render: the iteration's own renders stay, new ones go to renders/iter_2/
    own = sha256_file(group_a / "simple_refiner/iter_2/render_bev.png")
    assert bpy.ops.island.render() == {"FINISHED"}
    from PIL import Image
    with Image.open(group_a / "renders/iter_2/render_persp.png") as img:
        assert img.size == (64, 64)
    assert sha256_file(group_a / "simple_refiner/iter_2/render_bev.png") == own
    assert Path(bev.filepath).resolve() == group_a / "renders/iter_2/render_bev.png"
    assert bev["island_label"] == "iter_2 re-rendered"
    assert sorted(json.loads((group_a / "renders/iter_2/render.json").read_text())) == [
        "blender_version", "iter", "render", "settings", "source"]
    assert not list((group_a / "renders").glob(".*"))  # no staging left

    # browse back to iter_0
    assert bpy.ops.island.load_iteration(iteration=0) == {"FINISHED"}
    state0 = artifacts(group_a, 0)[0]["poses"]
    for obj in scene.objects:
        assert obj["island_iter"] == 0
        assert np.allclose(np.array(obj.matrix_world),
                           state0[obj["island_member"]]["matrix_4x4"], atol=1e-6)


def test_rebuild_from_selection_and_merge_back_round_trip(st, tmp_path: Path) -> None:
    table = cube("table", (1.6, 0.8, 0.75), (3.0, -1.0, 0.375), 30.0)
    chairs = [cube("chair_a", (0.45, 0.45, 0.9), (3.3, -1.8, 0.45), 40.0),
              cube("chair_b", (0.45, 0.45, 0.9), (2.4, -0.2, 0.45), 190.0)]
    names = ["table", "chair_a", "chair_b"]
    original = worlds(names)
    st.scene_dir = str(tmp_path / "scene")
    for obj in chairs + [table]:
        obj.select_set(True)
    bpy.context.view_layer.objects.active = table
    st.new_group_id = "G1"
    assert bpy.ops.island.rebuild_island(source="SELECTION") == {"FINISHED"}
    assert all(np.array_equal(original[n], w) for n, w in worlds(names).items())
    group = tmp_path / "scene" / "relation_groups" / "G1"
    meta = json.loads((group / "metadata.json").read_text())
    assert meta["anchor_id"] == "table" and meta["members"] == names
    anchor = np.array(meta["canonical_poses"]["table"])
    assert np.allclose(anchor[:3, 3], 0.0, atol=1e-6)
    assert np.allclose(anchor[:3, :3], np.diag([1.6, 0.8, 0.75]), atol=1e-6)
    assert st.active_group().name == "G1" and st.active_group().status == "no target_spec"

    # target spec from the panel fields: a wrong member count is refused, nothing written
    st.target_spec.fill({**SPEC, "member_count": 3}, 2, "")
    with pytest.raises(RuntimeError, match="member_count"):
        bpy.ops.island.save_target_spec()
    assert not (group / "target_spec.json").exists()
    st.target_spec.fill(SPEC, 2, "")
    assert bpy.ops.island.save_target_spec() == {"FINISHED"}
    assert json.loads((group / "target_spec.json").read_text()) == SPEC

    assert bpy.ops.island.init_iter0() == {"FINISHED"}
    loaded = [o.name for o in bpy.data.scenes["Island G1"].objects]
    assert sorted(loaded) == ["chair_a.001", "chair_b.001", "table.001"]  # originals kept

    # an artist's decision: move and turn a member in the island scene, step from it
    island = bpy.data.scenes["Island G1"]
    edited = island.objects["chair_a.001"]
    edited.location.x += 0.15
    edited.rotation_euler.z += math.radians(25.0)
    island.view_layers[0].update()
    wanted = np.array(edited.matrix_world)
    assert bpy.ops.island.step_from_viewport() == {"FINISHED"}
    doc = json.loads((group / "simple_refiner/iter_1/transforms.json").read_text())
    assert list(doc["members"]) == ["chair_a"] and doc["_island_meta"]["model"] == "artist"
    assert doc["members"]["chair_a"]["delta_yaw_deg"] == pytest.approx(25.0, abs=1e-4)
    state = json.loads((group / "simple_refiner/iter_1/current_state.json").read_text())
    assert np.allclose(state["poses"]["chair_a"]["matrix_4x4"], wanted, atol=1e-5)
    anchor = next(o for o in island.objects if o["island_member"] == "table")
    assert anchor["island_iter"] == 1
    anchor.location.x += 0.1  # the anchor stays at the origin
    with pytest.raises(RuntimeError, match="anchor 'table' moved"):
        bpy.ops.island.step_from_viewport()
    assert not (group / "simple_refiner/iter_2").exists()
    for obj in [table, *chairs]:
        obj.location.x += 0.5
        obj.rotation_euler.z += 0.3
    assert bpy.ops.island.merge_back(scope="SELECTED", iteration=0) == {"FINISHED"}
    assert st.last_message.startswith("Merged G1 iter_0 (asked for)")
    for name, world in worlds(names).items():
        assert np.allclose(world, original[name], atol=1e-5), name
    # a stale browser field (iter_0 here) is not what Merge Selected uses: the iteration
    # loaded in the island scene is (iter_1, the artist's), named in the report
    st.iteration = 0
    anchor.location.x -= 0.1
    assert bpy.ops.island.merge_back(scope="SELECTED") == {"FINISHED"}
    assert st.last_message.startswith("Merged G1 iter_1 (loaded)"), st.last_message
    m_anchor = np.array(meta["M_anchor_4x4"])
    assert np.allclose(worlds(["chair_a"])["chair_a"], m_anchor @ wanted, atol=1e-5)
    assert np.allclose(worlds(["chair_b"])["chair_b"], original["chair_b"], atol=1e-5)
    # browsing back to iter_0 makes it the loaded one; the report says the latest is iter_1
    assert bpy.ops.island.load_iteration(iteration=0) == {"FINISHED"}
    assert bpy.ops.island.merge_back(scope="SELECTED") == {"FINISHED"}
    assert st.last_message.startswith("Merged G1 iter_0 (loaded; latest is iter_1)")
    assert np.allclose(worlds(["chair_a"])["chair_a"], original["chair_a"], atol=1e-5)
    assert bpy.ops.island.merge_back(scope="ALL") == {"FINISHED"}  # latest: the artist's iter_1
    assert st.last_message.startswith("Merged G1 iter_1 (latest complete)")
    assert np.allclose(worlds(["chair_a"])["chair_a"], m_anchor @ wanted, atol=1e-5)


def test_rebuild_from_relation_graph_checks_every_group_first(st, tmp_path: Path) -> None:
    cube("desk", (1.2, 0.6, 0.75), (0, 0, 0.375), 0)
    cube("stool", (0.4, 0.4, 0.5), (0, -0.6, 0.25), 0)
    cube("sofa", (2.0, 0.9, 0.8), (5, 0, 0.4), 90)
    scene_dir = tmp_path / "scene"
    st.scene_dir = str(scene_dir)
    graph = scene_dir / "inputs" / "relation_graph.json"
    graph.parent.mkdir(parents=True)

    def write(groups: list) -> None:
        graph.write_text(json.dumps({"groups": groups}))

    good = {"id": "G1", "anchor": "desk", "members": ["stool"],
            "target_spec": {**SPEC, "member_count": 1}}
    for bad, message in (({"id": "G2", "anchor": "sofa", "members": ["chair_x"]},
                          "group 'G2'.*chair_x"),
                         ({"id": "G2", "anchor": "sofa", "members": ["sofa"]},
                          "anchor 'sofa' is also listed as a member"),
                         ({"id": "../G2", "anchor": "sofa", "members": ["stool"]},
                          "not a safe directory name")):
        write([good, bad])
        with pytest.raises(RuntimeError, match=message):
            bpy.ops.island.rebuild_island(source="RELATION_GRAPH")
        assert not (scene_dir / "relation_groups").exists()
        assert "Traceback" not in st.last_message
    write([good])
    assert bpy.ops.island.rebuild_island(source="RELATION_GRAPH") == {"FINISHED"}
    assert json.loads((scene_dir / "relation_groups/G1/target_spec.json").read_text())[
        "member_count"] == 1
    assert [(g.name, g.status) for g in st.groups] == [("G1", "ready")]


def test_failures_are_reports_in_both_execution_modes(st, addon, built: Path,
                                                      tmp_path: Path) -> None:
    group = new_scene(built, tmp_path / "scene", spec=False)
    use_scene(st, tmp_path / "scene")
    assert st.groups[0].status == "no target_spec"
    for execution in ("AUTO", "SUBPROCESS"):
        addon.execution = execution
        with pytest.raises(RuntimeError, match=r"target_spec.json is missing") as err:
            bpy.ops.island.init_iter0()
        assert st.last_exit_code == 5 and "(exit" not in str(err.value)
        assert "target_spec.json" in st.last_message and "Traceback" not in st.last_message
        assert str(tmp_path) not in st.last_message  # paths relative to the scene folder
        assert not (group / "simple_refiner").exists()
    addon.execution = "AUTO"
    with pytest.raises(RuntimeError, match="iter_0 is missing"):
        bpy.ops.island.solver_step()
    with pytest.raises(RuntimeError, match="iter_3 is not complete"):
        bpy.ops.island.load_iteration(iteration=3)

    shutil.copy(built / "target_spec.json", group / "target_spec.json")
    assert bpy.ops.island.init_iter0() == {"FINISHED"}
    bad = decision_file(group, 1, {**MOVE, "table": MOVE["chair_1"]}, tmp_path / "bad.json")
    with pytest.raises(RuntimeError, match=r"table"):
        bpy.ops.island.apply_delta(filepath=str(bad))
    assert st.last_exit_code == 3
    assert not (group / "simple_refiner" / "iter_1").exists()

    # the delegated path (external Python running tasks.py) gives the same geometry
    geometry = group / "simple_refiner/iter_0/geometry.json"
    before = geometry.read_bytes()
    geometry.unlink()
    addon.execution = "SUBPROCESS"
    assert bpy.ops.island.member_geometry() == {"FINISHED"}
    assert geometry.read_bytes() == before and len(st.members) == 6


def test_preferences_mirror_directorys_yaml(addon, config: Path, tmp_path: Path) -> None:
    path = tmp_path / "DIRECTORYS.yaml"
    shutil.copy(config, path)
    addon.config_path = str(path)
    try:
        assert bpy.ops.island.load_settings() == {"FINISHED"}
        assert (addon.resolution, addon.samples, addon.engine) == (64, 1, "workbench")
        addon.resolution, addon.engine = 128, "cycles"
        assert bpy.ops.island.save_settings() == {"FINISHED"}
        text = path.read_text()
        assert text.startswith("# test settings\n") and "resolution: 128" in text
        from island_tools.config import load_settings
        assert load_settings(path).engine == "cycles"
        # samples: -1 in the preferences <-> null (the engine's default) in the file
        assert addon.bl_rna.properties["samples"].default == -1
        addon.samples = -1
        assert bpy.ops.island.save_settings() == {"FINISHED"}
        assert "\nsamples: null\n" in path.read_text()
        assert load_settings(path).samples is None
        assert load_settings(path).render_job()["samples"] == 16  # cycles
        addon.samples = 7
        assert bpy.ops.island.load_settings() == {"FINISHED"}
        assert addon.samples == -1
        path.write_text(path.read_text().replace("samples: null", "samples:"))
        addon.samples = 7
        assert bpy.ops.island.load_settings() == {"FINISHED"}
        assert addon.samples == -1
        addon.samples = 5
        assert bpy.ops.island.save_settings() == {"FINISHED"}
        assert load_settings(path).samples == 5
    finally:
        addon.config_path = str(config)


# ----------------------------------------------------------------------------- artist trip-ups
def test_unsaved_file_never_writes_into_the_working_directory(st, tmp_path: Path,
                                                              monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert not bpy.data.filepath
    cube("table", (1.6, 0.8, 0.75), (0, 0, 0.375), 0).select_set(True)
    chair = cube("chair", (0.45, 0.45, 0.9), (0, -0.8, 0.45), 0)
    chair.select_set(True)
    bpy.context.view_layer.objects.active = bpy.data.objects["table"]
    for value, words in (("//islands", "not saved"), ("islands", "not an absolute folder")):
        st.scene_dir = value
        assert st.scene_path() is None and len(st.groups) == 0
        with pytest.raises(RuntimeError, match=words):
            bpy.ops.island.rebuild_island(source="SELECTION")
        assert list(tmp_path.iterdir()) == []  # nothing in the working directory
    st.scene_dir = str(tmp_path / "chosen")
    assert bpy.ops.island.rebuild_island(source="SELECTION") == {"FINISHED"}
    assert (tmp_path / "chosen/relation_groups/G1/island.blend").is_file()


def test_relation_graph_hints_become_target_specs_as_the_pipeline_infers(st, tmp_path: Path
                                                                         ) -> None:
    cube("long", (1.6, 0.8, 0.75), (0, 0, 0.375), 10)
    cube("c1", (0.45, 0.45, 0.9), (-0.4, -0.75, 0.45), 10)
    cube("c2", (0.45, 0.45, 0.9), (0.4, -0.75, 0.45), 10)
    cube("small", (1.3, 1.0, 0.75), (5, 0, 0.375), 0)
    cube("c3", (0.45, 0.45, 0.9), (5, -0.9, 0.45), 0)
    scene_dir = tmp_path / "scene"
    (scene_dir / "inputs").mkdir(parents=True)
    (scene_dir / "inputs/relation_graph.json").write_text(json.dumps({"groups": [
        {"id": "G1", "anchor": "long", "members": ["c1", "c2"],
         "relation": {"pattern": "row", "clearance_m": 0.2}, "forward_axis": {"c1": "-Y"}},
        {"id": "G2", "anchor": "small", "members": ["c3"]}]}))
    st.scene_dir = str(scene_dir)
    assert bpy.ops.island.rebuild_island(source="RELATION_GRAPH") == {"FINISHED"}
    assert "target spec inferred for 2" in st.last_message
    assert [(g.name, g.status) for g in st.groups] == [("G1", "ready"), ("G2", "ready")]
    spec = {g: json.loads((scene_dir / f"relation_groups/{g}/target_spec.json").read_text())
            for g in ("G1", "G2")}
    # docs/SCENE_PIPELINE.md's inference table, then the relation hints on top
    base = {"facing": "toward_anchor", "spacing": "even_along_each_edge"}
    assert spec["G1"] == {**base, "anchor_role": "long_table", "member_count": 2,
                          "pattern": "row", "clearance_m": 0.2}
    assert spec["G2"] == {**base, "anchor_role": "table", "member_count": 1, "pattern": "row",
                          "clearance_m": 0.1}
    meta = json.loads((scene_dir / "relation_groups/G1/metadata.json").read_text())
    assert meta["forward_axis_overrides"] == {"c1": "-Y"} and meta["group_id"] == "G1"


def test_a_stopped_step_leaves_the_iteration_written_or_untouched(st, addon, built: Path,
                                                                  tmp_path: Path) -> None:
    """The child a modal step runs, stopped at several moments (as Esc stops it), then
    settled: iter_1 is complete, or it and the solver's decision are gone - nothing else."""
    import time

    from blender_addon import ops, tasks

    group = new_scene(built, tmp_path / "scene")
    use_scene(st, tmp_path / "scene")
    assert bpy.ops.island.init_iter0() == {"FINISHED"}
    runner = ops.make_runner(bpy.context)
    refiner = group / "simple_refiner"
    marker = refiner / "iter_1/current_state.json"
    seen = set()
    for delay in (0.2, 1.2, 2.0, None):
        decision = refiner / "iter_1/transforms.json"
        tasks.solver_decision(group, 1)
        proc = runner.start(runner.script_argv("iter_step.py",
                                               ["--group-dir", str(group), "--iter", "1"]))
        if delay is None:
            proc.wait()
        else:
            time.sleep(delay)
            proc.stop()
        outcome = tasks.settle(group, marker, None, [str(decision)])
        leftovers = [p.name for p in refiner.iterdir() if p.name.startswith(".")]
        assert leftovers == [] and not list(group.glob(".staging*")), leftovers
        if outcome["done"]:
            assert tasks.completed_iters(group) == [0, 1] and decision.is_file()
            shutil.rmtree(refiner / "iter_1")
        else:
            assert not (refiner / "iter_1").exists() and outcome["removed"] == [str(decision)]
        seen.add(outcome["done"])
    assert seen == {True, False}


def test_the_file_stays_clean(st, built: Path, tmp_path: Path) -> None:
    new_scene(built, tmp_path / "scene")
    use_scene(st, tmp_path / "scene")
    assert bpy.ops.island.init_iter0() == {"FINISHED"}

    def counts() -> tuple:
        return tuple(len(c) for c in (bpy.data.objects, bpy.data.meshes, bpy.data.materials,
                                      bpy.data.images, bpy.data.scenes))

    first = counts()
    for _ in range(3):
        assert bpy.ops.island.load_iteration(iteration=0) == {"FINISHED"}
    assert counts() == first  # one island scene, reused; one image pair; no .001 pile-up
    assert sorted(i.name for i in bpy.data.images) == [f"Island {GROUP} bev",
                                                       f"Island {GROUP} persp"]
    assert bpy.ops.island.remove_islands() == {"FINISHED"}
    assert [s.name for s in bpy.data.scenes] == ["Scene"]
    assert len(bpy.data.images) == 0 and len(bpy.data.objects) == 0
    assert tasks_completed(built, tmp_path) == [0]  # the files on disk are untouched


def tasks_completed(built: Path, tmp_path: Path) -> list[int]:
    from blender_addon import tasks

    return tasks.completed_iters(tmp_path / "scene" / "relation_groups" / GROUP)


def test_undo_says_the_disk_did_not_change(st, built: Path, tmp_path: Path) -> None:
    from blender_addon import sync

    new_scene(built, tmp_path / "scene")
    use_scene(st, tmp_path / "scene")
    assert bpy.ops.island.init_iter0() == {"FINISHED"}
    assert "Undo does not remove it from disk" in st.last_message
    sync._after_undo()
    assert st.last_level == "WARNING"
    assert "files on disk did not change" in st.last_message
    assert f"Latest on disk: {GROUP} iter_0" in st.last_message


def test_panel_text_is_for_people(st, tmp_path: Path) -> None:
    from blender_addon.ops import people

    st.scene_dir = str(tmp_path)
    line = (f"[iter_step] error (exit 3): {tmp_path}/relation_groups/G1/simple_refiner/iter_4/"
            "transforms.json, field 'members': bad (fix: see /opt/very/long/path/to/README.md)")
    text = people(line, st)
    assert text == ("error: G1/simple_refiner/iter_4/transforms.json, field 'members': bad "
                    "(fix: see …/to/README.md)")
