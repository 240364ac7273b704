"""Tier 1: the contract's schemas and DIRECTORYS.yaml, each rule provoked."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest

from island_tools.config import DEFAULT_SAMPLES, Settings, load_settings, with_overrides
from island_tools.errors import (
    EXIT_GROUP_INPUT,
    EXIT_TARGET_SPEC,
    EXIT_TRANSFORMS,
    EXIT_USAGE,
    GroupInputError,
    TargetSpecError,
    TransformsError,
    UsageError,
)
from island_tools.measure import frames
from island_tools.schemas import (
    Metadata,
    load_metadata,
    load_target_spec,
    load_transforms,
    parse_target_spec,
    parse_transforms,
)

SPEC = {"anchor_role": "long_table", "member_count": 2, "pattern": "row",
        "facing": "toward_anchor", "spacing": "even_along_each_edge", "clearance_m": 0.1}
META = Metadata("table", ("table", "chair_1", "chair_2"), np.eye(4), np.eye(4),
                {n: np.eye(4) for n in ("table", "chair_1", "chair_2")})


def _transforms(**over) -> dict:
    doc = {"iter": 2, "members": {"chair_1": {"delta_xyz": [0.1, 0, 0], "delta_yaw_deg": 5}},
           "converged": False, "final": False, "reason_summary": "x",
           "_island_meta": {"model": "opus", "image_sha256": "a" * 64,
                            "generated_by": "test", "mode": "island_iter", "iter": 2,
                            "timestamp_utc": "2026-11-30T10:00:00Z"}}
    doc.update(over)
    return doc


def test_target_spec_valid_roundtrip() -> None:
    spec = parse_target_spec(dict(SPEC), "t.json", 2)
    assert spec.to_dict() == SPEC


def test_a_negative_clearance_is_a_member_pushed_in_under_its_anchor() -> None:
    # a chair tucked under its desk: its footprint overlaps the desk's by 0.3 m
    assert parse_target_spec({**SPEC, "clearance_m": -0.3}, "t.json", 2).clearance_m == -0.3


@pytest.mark.parametrize("change,field", [
    ({"pattern": "circle"}, "pattern"), ({"facing": "north"}, "facing"),
    ({"spacing": "dense"}, "spacing"), ({"member_count": 0}, "member_count"),
    ({"member_count": 3}, "member_count"), ({"member_count": True}, "member_count"),
    ({"clearance_m": -1.5}, "clearance_m"), ({"clearance_m": "0.1"}, "clearance_m"),
    ({"anchor_role": ""}, "anchor_role"), ({"pattern": "free"}, "free_note"),
    ({"facing": "mixed", "free_note": " "}, "free_note"),
])
def test_target_spec_rejects(change: dict, field: str) -> None:
    with pytest.raises(TargetSpecError) as err:
        parse_target_spec({**SPEC, **change}, "t.json", 2)
    assert err.value.exit_code == EXIT_TARGET_SPEC
    assert f"field '{field}'" in str(err.value) and "t.json" in str(err.value)


@pytest.mark.parametrize("key", list(SPEC))
def test_target_spec_missing_field(key: str) -> None:
    doc = dict(SPEC)
    del doc[key]
    with pytest.raises(TargetSpecError, match=key):
        parse_target_spec(doc, "t.json", 2)


def test_target_spec_file_missing_and_malformed(tmp_path: Path) -> None:
    with pytest.raises(TargetSpecError, match="missing"):
        load_target_spec(tmp_path / "target_spec.json", 2)
    (tmp_path / "target_spec.json").write_text('{"pattern": NaN}')
    with pytest.raises(TargetSpecError, match="non-finite"):
        load_target_spec(tmp_path / "target_spec.json", 2)
    (tmp_path / "target_spec.json").write_text('{"a": 1,')
    with pytest.raises(TargetSpecError, match="line 1"):
        load_target_spec(tmp_path / "target_spec.json", 2)


def test_transforms_valid() -> None:
    t = parse_transforms(_transforms(), "tr.json", 2, META)
    assert t.members["chair_1"].delta_xyz == (0.1, 0.0, 0.0) and not t.trivial


@pytest.mark.parametrize("doc,needle", [
    (_transforms(members={"table": {"delta_xyz": [0, 0, 0], "delta_yaw_deg": 0}}), "anchor"),
    (_transforms(groups={}), "groups"), (_transforms(objects={}), "objects"),
    (_transforms(deletes=[]), "deletes"), (_transforms(iter=3), "iter_2"),
    (_transforms(members={"sofa": {"delta_xyz": [0, 0, 0], "delta_yaw_deg": 0}}), "unknown"),
    (_transforms(members={"chair_1": {"delta_xyz": [0, 0], "delta_yaw_deg": 0}}), "three"),
    (_transforms(members={"chair_1": {"delta_xyz": [0, 0, float("nan")],
                                      "delta_yaw_deg": 0}}), "non-finite"),
    (_transforms(members={"chair_1": {"delta_xyz": [0, 0, 0],
                                      "delta_yaw_deg": float("inf")}}), "finite"),
    (_transforms(members={"chair_1": {"delta_xyz": [0, 0, True], "delta_yaw_deg": 0}}),
     "three numbers"),
    (_transforms(members={"chair_1": {"delta_xyz": [0, 0, 0]}}), "delta_yaw_deg"),
    (_transforms(members=[]), "members"),
    (_transforms(converged="yes"), "converged"),
])
def test_transforms_rejects(doc: dict, needle: str) -> None:
    with pytest.raises(TransformsError) as err:
        parse_transforms(doc, "tr.json", 2, META)
    assert err.value.exit_code == EXIT_TRANSFORMS
    assert needle in str(err.value)


@pytest.mark.parametrize("key", ["model", "image_sha256", "generated_by", "mode", "iter",
                                 "timestamp_utc"])
def test_transforms_island_meta_fields_required(key: str) -> None:
    doc = _transforms()
    del doc["_island_meta"][key]
    with pytest.raises(TransformsError, match=f"_island_meta.{key}"):
        parse_transforms(doc, "tr.json", 2, META)


def test_transforms_iter1_must_not_be_empty_and_file_errors(tmp_path: Path) -> None:
    doc = _transforms(iter=1, members={})
    doc["_island_meta"]["iter"] = 1
    with pytest.raises(TransformsError, match="iter_1 must not be empty"):
        parse_transforms(doc, "tr.json", 1, META)
    path = tmp_path / "transforms.json"
    with pytest.raises(TransformsError, match="missing"):
        load_transforms(path, 2, META)
    path.write_text('{"iter": 2, "iter": 2}')
    with pytest.raises(TransformsError, match="duplicate key"):
        load_transforms(path, 2, META)
    path.write_text(json.dumps(_transforms()).replace("0.1", "Infinity"))
    with pytest.raises(TransformsError, match="non-finite"):
        load_transforms(path, 2, META)


def test_metadata_validation(tmp_path: Path) -> None:
    path = tmp_path / "metadata.json"
    good = {"anchor_id": "table", "M_anchor_4x4": frames.to_list(frames.rot_z(30)),
            "M_inv_4x4": frames.to_list(frames.rot_z(-30)), "members": ["table", "chair"],
            "canonical_poses": {"table": frames.to_list(np.eye(4)),
                                "chair": frames.to_list(np.eye(4))}}
    path.write_text(json.dumps(good))
    assert load_metadata(path).refined_members == ("chair",)
    for change, needle in [({"M_inv_4x4": frames.to_list(np.eye(4))}, "inverse"),
                           ({"anchor_id": "sofa"}, "not in members"),
                           ({"members": ["table", "table"]}, "twice"),
                           ({"canonical_poses": {"table": frames.to_list(np.eye(4))}}, "chair")]:
        path.write_text(json.dumps({**good, **change}))
        with pytest.raises(GroupInputError, match=needle) as err:
            load_metadata(path)
        assert err.value.exit_code == EXIT_GROUP_INPUT


def test_settings_file_and_overrides(tmp_path: Path) -> None:
    cfg = tmp_path / "DIRECTORYS.yaml"
    cfg.write_text("blender_bin: ''\nengine: cycles\nresolution: 128\nsamples: 4\n")
    s = load_settings(cfg)
    assert (s.blender_bin, s.engine, s.resolution, s.samples) == (None, "cycles", 128, 4)
    s2 = with_overrides(s, engine="workbench", samples=None, resolution=64, blender_bin=None)
    assert (s2.engine, s2.samples, s2.resolution) == ("workbench", 4, 64)
    repo_default = load_settings(Path(__file__).resolve().parents[1] / "DIRECTORYS.yaml")
    assert repo_default.engine == "workbench" and repo_default.blender_bin is None


def test_settings_samples_default_per_engine(tmp_path: Path) -> None:
    assert DEFAULT_SAMPLES == {"workbench": 5, "cycles": 16}
    assert Settings().samples is None
    assert Settings().render_samples == 5 and Settings().render_job()["samples"] == 5
    assert Settings(engine="cycles").render_job() == {"engine": "cycles", "resolution": 512,
                                                      "samples": 16}
    for engine in ("workbench", "cycles"):  # an explicit value wins, 0 included
        assert Settings(engine=engine, samples=0).render_job()["samples"] == 0
        assert Settings(engine=engine, samples=8).render_samples == 8
    cfg = tmp_path / "DIRECTORYS.yaml"
    for text in ("engine: cycles\nsamples:\n", "engine: cycles\nsamples: null\n",
                 "engine: cycles\n"):
        cfg.write_text(text)
        s = load_settings(cfg)
        assert s.samples is None and s.render_job()["samples"] == 16, text
        assert with_overrides(s, engine="workbench").render_samples == 5
        assert with_overrides(s, samples=3).render_job()["samples"] == 3
    repo_default = load_settings(Path(__file__).resolve().parents[1] / "DIRECTORYS.yaml")
    assert repo_default.samples is None and repo_default.render_samples == 5


def test_decision_budget_setting_reaches_the_solver(tmp_path: Path) -> None:
    """``decision_budget_s`` (DIRECTORYS.yaml; the repo's file and the built-in default are
    the solver's ``DECISION_BUDGET_S``) is what the built-in solver policy builds its solver
    with."""
    from island_tools.adapter import SolverPolicy, make_policy
    from island_tools.solver import DECISION_BUDGET_S

    repo_default = load_settings(Path(__file__).resolve().parents[1] / "DIRECTORYS.yaml")
    assert repo_default.decision_budget_s == Settings().decision_budget_s == DECISION_BUDGET_S
    cfg = tmp_path / "DIRECTORYS.yaml"
    cfg.write_text("decision_budget_s: 0.25\n")
    settings = load_settings(cfg)
    assert settings.decision_budget_s == 0.25
    assert with_overrides(settings, decision_budget_s=3).decision_budget_s == 3.0
    policy = make_policy("solver", budget_s=settings.decision_budget_s)
    assert isinstance(policy, SolverPolicy) and policy.budget_s == 0.25


def test_worker_default_samples_match_config() -> None:
    # worker/render.py imports bpy at module level: read its DEFAULT_SAMPLES from the source.
    source = (Path(__file__).resolve().parents[1] / "worker/render.py").read_text()
    found = [ast.literal_eval(node.value) for node in ast.parse(source).body
             if isinstance(node, ast.Assign)
             and any(isinstance(t, ast.Name) and t.id == "DEFAULT_SAMPLES" for t in node.targets)]
    assert found == [DEFAULT_SAMPLES]


@pytest.mark.parametrize("text,needle", [
    ("engine: eevee\n", "field 'engine'"), ("resolution: big\n", "field 'resolution'"),
    ("samples: -1\n", "field 'samples'"), ("colour: red\n", "field 'colour'"),
    ("engine: [workbench\n", "malformed YAML at line"), ("- a\n- b\n", "mapping"),
    ("blender_bin: 3\n", "field 'blender_bin'"),
    ("decision_budget_s: 0\n", "field 'decision_budget_s'"),
    ("decision_budget_s: -1.5\n", "field 'decision_budget_s'"),
    ("decision_budget_s: 601\n", "field 'decision_budget_s'"),
    ("decision_budget_s: fast\n", "field 'decision_budget_s'"),
    ("decision_budget_s: true\n", "field 'decision_budget_s'"),
])
def test_settings_malformed_is_one_line_usage_error(tmp_path: Path, text: str,
                                                    needle: str) -> None:
    cfg = tmp_path / "DIRECTORYS.yaml"
    cfg.write_text(text)
    with pytest.raises(UsageError) as err:
        load_settings(cfg)
    assert err.value.exit_code == EXIT_USAGE and needle in str(err.value)
    assert "\n" not in str(err.value) and str(cfg) in str(err.value)


def test_frames_yaw_pivots_on_footprint_centre() -> None:
    # Corner-origin asset: local verts span x,y in [0, 1] x [0, 2]; centre (0.5, 1).
    verts = np.array([[0, 0, 0], [1, 0, 0], [1, 2, 0], [0, 2, 1.0]])
    pivot = frames.footprint_centre_local(verts)
    pose = frames.translation([3, 4, 0]) @ frames.rot_z(20) @ np.diag([2.0, 2.0, 2.0, 1.0])
    before = frames.pivot_in_frame(pose, pivot)
    after_pose = frames.apply_member_delta(pose, (0, 0, 0), 75.0, pivot)
    assert np.allclose(frames.pivot_in_frame(after_pose, pivot), before)
    assert frames.yaw_deg(after_pose) == pytest.approx(95.0)
    assert np.allclose(frames.decompose(after_pose)[2], [2, 2, 2])
    moved = frames.apply_member_delta(pose, (0.5, -0.25, 0), 0.0, pivot)
    assert np.allclose(moved[:3, 3], pose[:3, 3] + [0.5, -0.25, 0])
    m_anchor = frames.translation([1, 2, 0]) @ frames.rot_z(33) @ np.diag([1.5, 1.5, 1.5, 1])
    inv = frames.rigid_inverse(m_anchor)
    world = frames.translation([2, 2, 0]) @ frames.rot_z(-10)
    canon = frames.canonical_from_world(inv, world)
    assert np.allclose(frames.world_from_canonical(frames.rigid(m_anchor), canon), world)


def test_canonical_frame_is_in_metres_whatever_the_scene_unit() -> None:
    """A scene in centimetres: the canonical frame carries the unit scale, so canonical
    coordinates are real metres and M_anchor takes them back to scene units exactly."""
    anchor = frames.translation([300.0, -120.0, 0.0]) @ frames.rot_z(40) @ np.diag([80.0] * 3
                                                                                  + [1.0])
    chair_world = frames.translation([380.0, -120.0, 0.0]) @ frames.rot_z(130)
    m_anchor, m_inv = frames.canonical_frame(anchor, unit_scale=0.01)
    assert np.allclose(m_anchor @ m_inv, np.eye(4))
    canonical = m_inv @ chair_world
    # 80 cm along the world x axis = 0.8 m at -40 deg in the anchor's frame
    assert np.allclose(canonical[:3, 3], [0.8 * np.cos(np.radians(-40)),
                                          0.8 * np.sin(np.radians(-40)), 0.0])
    assert np.allclose(np.linalg.norm(canonical[:3, :3], axis=0), 0.01)  # cm -> m
    assert np.allclose(m_anchor @ canonical, chair_world)
    with pytest.raises(ValueError, match="unit scale"):
        frames.canonical_frame(anchor, unit_scale=0.0)


@pytest.mark.parametrize("unit_scale, offset, ok_shift, bad_shift", [
    (1.0, 0.0, 5e-6, 5e-5),            # metres near the origin: 1e-5 m
    (0.01, 0.0, 5e-4, 5e-3),           # centimetres: 1e-5 m is 1e-3 scene units
    (1.0, 1.0e4, 5e-3, 5e-2),          # 10 km from the origin: float32 holds ~1 mm there
])
def test_pose_mismatch_scales_with_the_scene(unit_scale: float, offset: float,
                                             ok_shift: float, bad_shift: float) -> None:
    pose = frames.translation([offset, 2.0, 0.0]) @ frames.rot_z(30)
    near = pose.copy()
    near[0, 3] += ok_shift
    far = pose.copy()
    far[0, 3] += bad_shift
    assert frames.pose_mismatch(pose, near, unit_scale)[0] <= 1.0
    ratio, detail = frames.pose_mismatch(pose, far, unit_scale)
    assert ratio > 1.0 and "location" in detail and " m " in detail
    turned = pose @ frames.rot_z(0.01)   # 1.7e-4 rad: never hidden by a large offset
    assert frames.pose_mismatch(pose, turned, unit_scale)[0] > 1.0


def test_metadata_unit_scale_is_validated(tmp_path: Path) -> None:
    path = tmp_path / "metadata.json"
    good = {"anchor_id": "t", "M_anchor_4x4": frames.to_list(np.eye(4)),
            "M_inv_4x4": frames.to_list(np.eye(4)), "members": ["t", "c"],
            "canonical_poses": {"t": frames.to_list(np.eye(4)), "c": frames.to_list(np.eye(4))}}
    path.write_text(json.dumps(good))
    assert load_metadata(path).unit_scale == 1.0
    path.write_text(json.dumps({**good, "unit_scale": 0.01}))
    assert load_metadata(path).unit_scale == 0.01
    for bad in (0, -1, "0.01", None, True):
        path.write_text(json.dumps({**good, "unit_scale": bad}))
        with pytest.raises(GroupInputError, match="unit_scale"):
            load_metadata(path)
