"""Tier 2 (bpy): issue 25 end to end. A 2+2+1+1 dining table whose west end is 0.35 m from a
wall (``tests/real_scenes/build.py::build_infeasible_wall``; the end chair starts inside the
wall) is refined with ``scripts/refine_scene.py run`` as a user runs it; the merged .blend is
read back by ``tests/real_scenes/judge.py`` and judged with shapely footprints
(``tests/real_scenes/measure.py``, the test's own code): no chair inside the wall, the
anchor or another chair; the group's verdict is ``fail`` with the infeasible line naming the
wall, in verification.json, metrics.json, run.json and ``island-refine report``."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.real_scenes import run_refine, run_script
from tests.real_scenes.measure import Phase

pytestmark = pytest.mark.bpy
VARIANT = "infeasible_wall"


@pytest.fixture(scope="module")
def refined(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("hard")
    run_script("build.py", "--out", str(root), VARIANT)
    run = run_refine(root / VARIANT / "scene")
    run_script("judge.py", str(root / VARIANT))
    return root / VARIANT, run


def test_no_chair_in_the_wall_and_the_finding_is_named(refined: tuple[Path, dict]) -> None:
    out, run = refined
    truth = json.loads((out / "truth.json").read_text())
    before, after = Phase.load(out, "before"), Phase.load(out, "after")
    wall = after.footprint("wall_west")
    members = truth["groups"]["dining"]["members"]
    assert before.footprint("dining.chair_6").intersection(wall).area > 1e-3   # the bug's input
    table = after.footprint("dining.table")
    u2 = after.unit_scale ** 2
    for i, m in enumerate(members):
        foot = after.footprint(m)
        assert foot.intersection(wall).area * u2 < 1e-4, m
        assert foot.intersection(table).area * u2 < 1e-4, m
        for other in members[i + 1:]:
            assert foot.intersection(after.footprint(other)).area * u2 < 1e-4, (m, other)
    scene = out / "scene"
    metrics = json.loads((scene / "metrics.json").read_text())
    group = metrics["groups"]["dining"]["after"]
    assert group["verdict"] == "fail", run["stderr"][-1500:]
    assert group["infeasible"] and group["infeasible"].startswith("wall_west is 0.35 m")
    ver = json.loads((scene / "relation_groups/dining/verification.json").read_text()) \
        if (scene / "relation_groups/dining/verification.json").is_file() else None
    if ver is not None:
        assert ver["review_results"][0]["id"] == "group_infeasible"
    runlog = json.loads((scene / "relation_groups/dining/simple_refiner/run.json").read_text())
    assert "wall_west" in json.dumps(runlog)
    from island_tools.scene.report import report_result

    code, text = report_result(scene)
    assert code == 0 and "INFEASIBLE" in text and "wall_west is 0.35 m" in text
