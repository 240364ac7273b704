"""The run-after-propose diagnostics of issue 32 (pure parts, no Blender): which rooms the
bench's ``propose`` section runs ``run --propose`` on (the earlier rows first, then more
disordered rooms and untouched-fresh rooms), its per-split summary, and how
``scripts/propose_tuned_runs.py`` reads what a run did with a group and refuses untouched
seeds."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from scripts import propose_tuned_runs as runs  # noqa: E402
from scripts.benchmarks import propose as bench  # noqa: E402


def _sets(first: int, n: int, designed: tuple[str, ...] = ()) -> list[tuple[str, str, None]]:
    out = []
    for s in range(first, first + n):
        out += [(f"generator {s}", "tidy", None), (f"generator {s}", "disordered", None)]
    for d in designed:
        out += [(d, "tidy", None), (d, "disordered", None)]
    return out


def _keys(rows: list[tuple[str, str, None]]) -> list[tuple[str, str]]:
    return [(label, state) for label, state, _ in rows]


def test_run_choice_keeps_the_earlier_rows_first_then_more_disordered_rooms() -> None:
    chosen = _keys(bench.run_choice("tuned", _sets(200, 20, ("servicesim_meeting",)), False))
    assert chosen[:4] == [("generator 200", "tidy"), ("generator 200", "disordered"),
                          ("generator 201", "tidy"), ("generator 201", "disordered")]
    gen = [c for c in chosen if c[0].startswith("generator")]
    assert sum(1 for c in gen if c[1] == "disordered") == bench.RUN_DISORDERED
    assert sum(1 for c in gen if c[1] == "tidy") == 2
    assert gen[4:] == [(f"generator {s}", "disordered") for s in range(202, 206)]
    assert chosen[-2:] == [("servicesim_meeting", "tidy"), ("servicesim_meeting", "disordered")]


def test_run_choice_runs_untouched_fresh_rooms_disordered_and_tidy() -> None:
    chosen = _keys(bench.run_choice(bench.FRESH_PART, _sets(500, 100), False))
    dis = [c for c in chosen if c[1] == "disordered"]
    tidy = [c for c in chosen if c[1] == "tidy"]
    assert len(dis) == bench.FRESH_RUN_DISORDERED == 4 and len(tidy) == bench.FRESH_RUN_TIDY == 2
    assert dis[0] == ("generator 500", "disordered") and tidy[0] == ("generator 500", "tidy")
    quick = _keys(bench.run_choice(bench.FRESH_PART, _sets(500, 2), True))
    assert quick == [("generator 500", "disordered")]


def test_run_choice_quick_is_as_before() -> None:
    chosen = _keys(bench.run_choice("tuned", _sets(200, 2, ("servicesim_meeting",)), True))
    assert chosen == [("servicesim_meeting", "tidy"), ("generator 200", "disordered")]


def test_run_summary_sums_rows_per_split_source_and_state() -> None:
    rows = [["tuned", "generator 200", "tidy", 4, "4/4 (100%)", 0, 2, 0, 24, 4.5],
            ["tuned", "generator 200", "disordered", 4, "3/4 (75%)", 1, "-", 0, 24, 5.3],
            ["tuned", "generator 201", "disordered", 5, "1/5 (20%)", 0, "-", 0, 24, 4.8],
            ["tuned", "servicesim_meeting", "disordered", 3, "2/3 (67%)", 0, "-", 0, 0, 13]]
    got = {tuple(r[:3]): r[3:] for r in bench.run_summary(rows)}
    assert got[("tuned", "generator", "disordered")] == [2, 9, "4/9 (44%)", 1, "-"]
    assert got[("tuned", "generator", "tidy")] == [1, 4, "4/4 (100%)", 0, 2]
    assert got[("tuned", "designed", "disordered")] == [1, 3, "2/3 (67%)", 0, "-"]


@pytest.mark.parametrize("text", ["40", "0-40", "100", "500-503", "3,250"])
def test_the_runs_script_refuses_untouched_seeds(text: str) -> None:
    with pytest.raises(SystemExit, match="only tuned seeds 0-39"):
        runs.seeds_of(text, "--seeds")


def test_the_runs_script_reads_seed_lists() -> None:
    assert runs.seeds_of("0-3", "--seeds") == [0, 1, 2, 3]
    assert runs.seeds_of("1,4,7", "--tidy") == [1, 4, 7]
    assert runs.seeds_of("", "--tidy") == []
    with pytest.raises(SystemExit, match="not a seed list"):
        runs.seeds_of("a-b", "--seeds")


def _scene(tmp: Path, state: dict, islands: dict, metrics: dict) -> Path:
    (tmp / "json").mkdir()
    (tmp / "state.json").write_text(json.dumps(state))
    (tmp / "json" / "island_groups.json").write_text(json.dumps(islands))
    (tmp / "metrics.json").write_text(json.dumps(metrics))
    return tmp


def test_run_action_names_what_the_run_did(tmp_path: Path) -> None:
    scene = _scene(tmp_path, {
        "groups_needing_island": ["g1", "g3"],
        "islands_refused": [{"id": "g2", "reason": "field 'groups[1].proposal': uncertain "
                                                   "proposal: ..."},
                            {"id": "g5", "reason": "field 'groups[4].members[0]': no mesh"}],
        "islands_failed": [],
        "islands_uncertain": [{"id": "g3", "reason": "membership not settled"}]},
        {"groups": {"g1": {"members": ["a", "b"]}, "g3": {"members": ["c"]},
                    "g4": {"members": ["d"], "kept_in_order": "its members fail only ..."}}},
        {"groups": {"g1": {"after": {"verdict": "pass"}},
                    "g2": {"status": "refused", "after": None},
                    "g3": {"after": {"verdict": "uncertain", "geometry_verdict": "pass"}},
                    "g4": {"after": {"verdict": "fail"}}}})
    assert runs.run_action(None, scene, [])["action"] == "not proposed"
    g1 = runs.run_action("g1", scene, ["a", "b"])
    assert (g1["action"], g1["verdict"], g1["held"]) == ("refined", "pass", [])
    g2 = runs.run_action("g2", scene, ["x"])
    assert (g2["action"], g2["verdict"]) == ("left uncertain", "refused")
    assert runs.run_action("g5", scene, ["y"])["action"] == "refused"
    g3 = runs.run_action("g3", scene, ["c", "e"])
    assert (g3["action"], g3["held"], g3["geometry_verdict"]) == (
        "refined, doubt open", ["e"], "pass")
    g4 = runs.run_action("g4", scene, ["d"])
    assert g4["action"] == "left in order" and g4["why"].startswith("its members fail only")


def test_aggregate_counts_pass_per_state_and_action() -> None:
    def g(ok: bool, action: str) -> dict:
        return {"pass": ok, "run": {"action": action}}
    results = [{"state": "disordered", "groups": [g(True, "refined"), g(False, "refined"),
                                                  g(False, "left uncertain")]},
               {"state": "tidy", "groups": [g(True, "left in order")]}]
    agg = runs.aggregate(results)
    assert agg["disordered"] == {"all": [1, 3], "refined": [1, 2], "left uncertain": [0, 1]}
    assert agg["tidy"] == {"all": [1, 1], "left in order": [1, 1]}


def _pose(x: float, y: float, yaw_deg: float) -> list[list[float]]:
    import math
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    return [[c, -s, 0.0, x], [s, c, 0.0, y], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]


def test_member_place_says_where_a_failing_member_stood_and_whether_it_moved() -> None:
    graph = {"groups": [
        {"id": "t1", "members": ["a", "b"], "proposal": {"uncertain_members": {"b": "why"},
                                                         "doubtful": {"c": "why"}}},
        {"id": "t2", "members": ["d"], "proposal": {}}]}
    islands = {"groups": {"t1": {"members": ["a"]}}}   # b held out by the run
    objects = {n: {"matrix_world": _pose(0, 0, 0)} for n in "abcde"}
    after = {"a": _pose(0.3, 0.4, 90.0), "b": _pose(0, 0, 0)}
    got = {n: runs.member_place(n, "t1", graph, islands, objects, after) for n in "abcde"}
    assert (got["a"]["place"], got["a"]["moved_m"], got["a"]["turned_deg"]) == (
        "held", 0.5, 90.0)
    assert (got["b"]["place"], got["b"]["moved_m"]) == ("held in doubt", 0.0)
    assert got["c"]["place"] == "doubtful"
    assert got["d"]["place"] == "held by t2"
    assert got["e"]["place"] == "in no group"
    # a group the run left (not in island_groups): its doubted member is still "in doubt"
    assert runs.member_place("b", "t1", graph, {"groups": {}}, objects, {})["place"] == \
        "held in doubt"
    results = [{"state": "disordered", "groups": [{"failing": [got["a"], got["b"], got["d"]]}]}]
    assert runs.failing_places(results) == {"disordered: held, moved": 1,
                                            "disordered: held in doubt, not moved": 1,
                                            "disordered: held by another group, not moved": 1}
