"""Tier 2 (bpy wheel): ``island-refine mcp`` driven by the official SDK's stdio client.

One server per session (``.venv/bin/python scripts/refine_scene.py mcp --root ROOT``,
embedded bpy, 64 px renders), spoken to through a blocking portal so the tests stay plain
functions. A fixture group is refined through the tools the way an MCP agent would (init,
read the evidence, decide, write, step, until the contract's stop, promote); the solver loop
is run and cancelled mid-way; hostile paths and malformed decisions are refused with the
CLI's one line and exit code.
"""
from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal

from island_tools.iteration import ITER_OUTPUTS
from tests.greedy_agent import propose

pytestmark = pytest.mark.bpy
REPO = Path(__file__).resolve().parents[1]
TOOLS = {"list_groups", "group_status", "init_iter0", "write_decision", "iter_step",
         "get_iteration", "promote_final", "solve_group", "refine_scene", "report"}


@asynccontextmanager
async def _session(root: Path, resolution: int = 64) -> AsyncIterator[Any]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=[str(REPO / "scripts" / "refine_scene.py"), "mcp", "--root", str(root),
              "--blender-bin", "bpy", "--resolution", str(resolution), "--samples", "1",
              "--no-daemon"],
        env={"ISLAND_REFINER_DAEMON": "0", "PYTHONUNBUFFERED": "1"}, cwd=str(REPO))
    log = open(root.parent / f"server-{resolution}.log", "w")  # noqa: SIM115 - closed below
    try:
        async with stdio_client(params, errlog=log) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session
    finally:
        log.close()


class Client:
    """Synchronous calls into the session living on the portal's event loop."""

    def __init__(self, portal: BlockingPortal, session: Any) -> None:
        self.portal = portal
        self.session = session

    def call(self, name: str, **args: Any) -> Any:
        async def go() -> Any:
            return await self.session.call_tool(name, args, read_timeout_seconds=120)
        return self.portal.call(go)

    def ok(self, name: str, **args: Any) -> dict[str, Any]:
        result = self.call(name, **args)
        assert not result.is_error, result.content[0].text
        return result.structured_content

    def error(self, name: str, **args: Any) -> tuple[int, str]:
        result = self.call(name, **args)
        assert result.is_error, result.content[0].text
        text = result.content[0].text
        assert len(text.splitlines()) == 1, text
        return result.structured_content["exit_code"], text


@pytest.fixture(scope="session")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp") / "root"


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fixtures.build import build_fixture
    from worker.launch import resolve_blender

    return build_fixture("long_table_5", "turned_90", tmp_path_factory.mktemp("mcp_fixture"),
                         backend=resolve_blender("bpy", None))


@pytest.fixture(scope="session")
def client(root: Path) -> Iterator[Client]:
    root.mkdir(parents=True)
    with start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(_session(root)) as session:
            yield Client(portal, session)


def fresh(template: Path, root: Path, name: str) -> Path:
    dest = root / "scene" / "relation_groups" / name
    shutil.copytree(template, dest)
    return dest


def test_tools_are_listed_with_descriptions(client: Client) -> None:
    listed = client.portal.call(client.session.list_tools).tools
    assert {t.name for t in listed} == TOOLS
    assert all(t.description and len(t.description) > 40 for t in listed)
    write = next(t for t in listed if t.name == "write_decision")
    assert {"group_dir", "decision"} <= set(write.input_schema["properties"])
    assert "ctx" not in next(t for t in listed if t.name == "iter_step").input_schema[
        "properties"]


def _png(block: Any) -> tuple[int, int]:
    from PIL import Image

    assert block.type == "image" and block.mime_type == "image/png"
    raw = base64.b64decode(block.data)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(io.BytesIO(raw)) as img:
        img.load()
        return img.size


def test_a_full_loop_through_the_tools(client: Client, template: Path, root: Path) -> None:
    group = fresh(template, root, "loop")
    t0 = time.perf_counter()
    init = client.ok("init_iter0", group_dir=str(group))
    assert init["lines"][0].startswith("[init_iter0] iter_0 ready:")
    listed = client.ok("list_groups", scene_dir=str(root / "scene"))
    assert any(g["group_id"] == "loop" and g["latest"] == 0 for g in listed["groups"])
    stop = None
    for n in range(1, 21):
        status = client.ok("group_status", group_dir=str(group))
        assert status["next_iter"] == n and not status["loop"]["stop"]
        assert status["phase"]["name"] == ("pattern" if n <= 3 else "member" if n <= 10
                                           else "micro")
        evidence = client.call("get_iteration", group_dir=str(group))
        assert not evidence.is_error
        images = [b for b in evidence.content if b.type == "image"]
        sizes = [_png(b) for b in images]   # the annotated top view is drawn at >= 512 px
        assert len(sizes) == 2 and sizes[0] == (64, 64) and sizes[1][0] >= 64
        geometry_text = next(b.text for b in evidence.content
                             if b.type == "text" and b.text.startswith("geometry.json:"))
        geometry = json.loads(geometry_text.split("\n", 1)[1])
        decision = propose(geometry, n)
        written = client.ok("write_decision", group_dir=str(group), iter=n, decision=decision,
                            model="test", generated_by="tests/test_mcp.py")
        assert written["line"].startswith("[agent] wrote ")
        assert written["transforms"]["_island_meta"]["model"] == "test"
        step = client.ok("iter_step", group_dir=str(group), iter=n)
        assert "[iter_step] sanity OK" in step["lines"] and step["iter"] == n
        assert step["lines"][-1].startswith("[iter_step] geometry: facing max")
        status = client.ok("group_status", group_dir=str(group))
        if status["loop"]["stop"]:
            stop = (n, status["loop"]["stop_reason"])
            break
    seconds = time.perf_counter() - t0
    assert stop is not None and stop[0] >= 5, stop
    assert "converged" in stop[1] or "empty" in stop[1]
    review = status["last_geometry"]["review"]   # the one verdict (review.review_island)
    assert review["verdict"] == "pass" and review["fail"] == 0, review
    assert review["source"] == "island_tools.scene.verify.review_group"
    assert "obstacle_penetrations" in review["figures"]
    assert step["review"]["verdict"] == "pass"
    promoted = client.ok("promote_final", group_dir=str(group))
    last = stop[0]
    assert promoted["final_iter"] == last
    refiner = group / "simple_refiner"
    assert json.loads((refiner / f"iter_{last}/transforms.json").read_text())["final"] is True
    assert (group / "island.blend").read_bytes() == (
        refiner / f"iter_{last}/island.blend").read_bytes()
    assert client.ok("group_status", group_dir=str(group))["promoted"] is True
    print(f"\nMCP loop: {last} iterations in {seconds:.2f} s")


def test_hostile_paths_are_refused(client: Client, template: Path, root: Path,
                                   tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    shutil.copytree(template, outside)
    before = sorted(p.name for p in outside.iterdir())
    (root / "escape").symlink_to(outside, target_is_directory=True)
    cases = [str(root / ".." / "outside"), str(outside), "/etc", "../../etc",
             str(root / "escape")]
    for path in cases:
        for tool, extra in (("init_iter0", {}), ("group_status", {}), ("get_iteration", {}),
                            ("write_decision", {"iter": 1, "decision": {"members": {}}})):
            code, line = client.error(tool, group_dir=path, **extra)
            assert code == 2 and "(exit 2)" in line and "outside the server's roots" in line, \
                (tool, path, line)
    code, line = client.error("iter_step", group_dir=str(root / "escape"), iter=1)
    assert code == 2 and line.startswith("[iter_step] error (exit 2): ") and \
        "through a symlink" in line
    code, line = client.error("list_groups", scene_dir="/")
    assert code == 2 and "outside the server's roots" in line
    code, line = client.error("refine_scene", scene_dir=str(outside))
    assert code == 2 and line.startswith("[refine_scene] error (exit 2)")
    # Links that stay inside the roots are followed.
    inner = fresh(template, root, "aliased")
    (root / "alias").symlink_to(inner, target_is_directory=True)
    status = client.ok("group_status", group_dir="alias")   # relative: from the first root
    assert status["group_dir"] == str(inner) and status["next_step"] == "init_iter0"
    code, line = client.error("group_status", group_dir=str(root / "missing"))
    assert code == 2 and "group directory does not exist" in line
    (root / "loop_a").symlink_to(root / "loop_b")
    (root / "loop_b").symlink_to(root / "loop_a")
    code, line = client.error("group_status", group_dir=str(root / "loop_a"))
    assert code == 2 and "cannot be resolved" in line
    # A group inside the root holding a link that leads out of it.
    group = fresh(template, root, "planted")
    (group / "masked.png").symlink_to("/etc/hostname")
    code, line = client.error("init_iter0", group_dir=str(group))
    assert code == 2 and "masked.png" in line and "symlink leading outside" in line
    assert not (group / "simple_refiner").exists()
    assert sorted(p.name for p in outside.iterdir()) == before


def test_malformed_decisions_are_refused_with_the_clis_line(client: Client, template: Path,
                                                            root: Path) -> None:
    group = fresh(template, root, "decisions")
    # A call may not occupy the machine: render sizes above the server's cap are refused
    # before anything is written.
    code, line = client.error("init_iter0", group_dir=str(group), resolution=8192)
    assert code == 2 and "'resolution'" in line and "at most 2048 over MCP" in line, line
    code, line = client.error("init_iter0", group_dir=str(group), samples=65536)
    assert code == 2 and "at most 1024 over MCP" in line, line
    assert not (group / "simple_refiner").exists()
    client.ok("init_iter0", group_dir=str(group))
    nudge = {"delta_xyz": [0.1, 0.0, 0.0], "delta_yaw_deg": 0.0}
    three = {f"chair_{i}": nudge for i in (1, 2, 3)}
    cases = [
        ('{"members": {"chair_1": {"delta_xyz": [NaN, 0, 0], "delta_yaw_deg": 0}}}',
         ["members.chair_1.delta_xyz", "non-finite"]),
        ({"members": {**three, "chair_2": {"delta_xyz": [float("nan"), 0, 0],
                                           "delta_yaw_deg": 0}}}, ["chair_2"]),
        ("members: chair_1", ["not valid JSON"]),
        ({"members": {**three, "chair_99": nudge}}, ["chair_99"]),
        ({"members": {**three, "chair_1": {"delta_xyz": [1.5, 0, 0], "delta_yaw_deg": 0}}},
         ["pattern phase (iter 1-3)", "1.0 m", "'chair_1'"]),
        ({"members": {"chair_1": nudge}}, ["pattern phase (iter 1-3)", "at least 3"]),
        ({"members": {"table": nudge, **three}}, ["table"]),
    ]
    strict = [  # decision_json: the text as an agent writes it, parsed like agent.py write
        ('{"members": {"chair_1": {"delta_xyz": [NaN, 0, 0], "delta_yaw_deg": 0}}}', ["NaN"]),
        ('{"members": {}, "members": {}}', ["duplicate", "members"]),
    ]
    for decision, words in [*cases, *strict]:
        given = ({"decision_json": decision} if (decision, words) in strict
                 else {"decision": decision})
        code, line = client.error("write_decision", group_dir=str(group), iter=1, **given)
        assert code == 3 and line.startswith("[agent] error (exit 3): "), line
        assert all(w in line for w in words), (words, line)
        assert not (group / "simple_refiner" / "iter_1" / "transforms.json").exists()
    code, line = client.error("write_decision", group_dir=str(group), iter=1)
    assert code == 2 and "exactly one of decision" in line
    # The same one line as the CLI, for the same rejection.
    decision = cases[4][0]
    _, line = client.error("write_decision", group_dir=str(group), iter=1, decision=decision)
    cli = subprocess.run([sys.executable, "scripts/agent.py", "write", "--group-dir",
                          str(group), "--iter", "1"], cwd=REPO, input=json.dumps(decision),
                         capture_output=True, text=True, check=False)
    assert cli.returncode == 3 and cli.stderr.strip() == line
    # Exit codes of iter_step map the same way (2: no such iteration yet).
    code, line = client.error("iter_step", group_dir=str(group), iter=3)
    cli = subprocess.run([sys.executable, "scripts/iter_step.py", "--group-dir", str(group),
                          "--iter", "3", "--no-daemon", "--quiet"], cwd=REPO,
                         capture_output=True, text=True, check=False)
    assert code == cli.returncode == 2 and cli.stderr.strip() == line
    # ... and 5 (target_spec.json missing), before anything is written.
    broken = fresh(template, root, "no_spec")
    (broken / "target_spec.json").unlink()
    code, line = client.error("init_iter0", group_dir=str(broken))
    cli = subprocess.run([sys.executable, "scripts/init_iter0.py", "--group-dir", str(broken),
                          "--no-daemon", "--quiet"], cwd=REPO, capture_output=True, text=True,
                         check=False)
    assert code == cli.returncode == 5 and cli.stderr.strip() == line
    assert line.startswith("[init_iter0] error (exit 5): ") and "target_spec.json" in line
    assert not (broken / "simple_refiner").exists()
    # A corrupt geometry.json is one line too, from the reading tools.
    (group / "simple_refiner" / "iter_0" / "geometry.json").write_text("{")
    for tool in ("get_iteration", "group_status"):
        code, line = client.error(tool, group_dir=str(group))
        assert code == 2 and "geometry.json" in line and "iter_step" in line, line


def _iterations_whole(refiner: Path) -> list[int]:
    """Every iter_N is complete (all outputs) or holds no output at all; no staging left."""
    complete = []
    for d in sorted(refiner.iterdir()):
        assert not d.name.startswith((".staging", ".old.")), d
        if not d.name.startswith("iter_"):
            continue
        present = {f for f in (*ITER_OUTPUTS, "current_state.json") if (d / f).exists()}
        assert present in (set(), {*ITER_OUTPUTS, "current_state.json"}), (d, present)
        if present:
            complete.append(int(d.name[5:]))
    return sorted(complete)


def test_solve_group_reports_progress_and_a_cancel_leaves_whole_iterations(
        client: Client, template: Path, root: Path) -> None:
    group = fresh(template, root, "solve")
    seen: list[tuple[float, str | None]] = []

    async def solve() -> Any:
        async def progress(value: float, total: float | None, message: str | None) -> None:
            seen.append((value, message))
        return await client.session.call_tool("solve_group", {"group_dir": str(group)},
                                              progress_callback=progress)

    t0 = time.perf_counter()
    result = client.portal.call(solve)
    seconds = time.perf_counter() - t0
    assert not result.is_error, result.content[0].text
    data = result.structured_content
    assert data["report"].startswith("Final iter_5; stop: converged at iter 5")
    assert any(m and m.startswith("[agent] iter 1/20") for _, m in seen)
    assert [v for v, _ in seen] == sorted(v for v, _ in seen)
    print(f"\nMCP solve_group: {data['final_iter']} iterations in {seconds:.2f} s")

    # Cancel the same loop once iteration 2 is under way.
    cancelled = fresh(template, root, "cancelled")
    seen.clear()

    async def solve_and_cancel() -> None:
        started = anyio.Event()

        async def progress(value: float, total: float | None, message: str | None) -> None:
            seen.append((value, message))
            if message and message.startswith("[iter_step] iter_1: applying"):
                started.set()   # iter_1's Blender job is running (512 px: long enough)

        async with anyio.create_task_group() as tg:
            async def call() -> None:
                await client.session.call_tool(
                    "solve_group", {"group_dir": str(cancelled), "resolution": 512},
                    progress_callback=progress)
            tg.start_soon(call)
            with anyio.fail_after(60):
                await started.wait()
            tg.cancel_scope.cancel()

    client.portal.call(solve_and_cancel)
    # A writing call waits until the cancelled one has unwound: a rejected decision is the
    # barrier (it writes nothing).
    code, _ = client.error("write_decision", group_dir=str(cancelled), iter=1,
                           decision={"members": {}})
    assert code in (2, 3)
    refiner = cancelled / "simple_refiner"
    complete = _iterations_whole(refiner)
    assert complete in ([0], [0, 1]), complete
    pending = refiner / f"iter_{complete[-1] + 1}"
    print(f"\ncancelled after {seen[-1][1]!r}: complete {complete}, {pending.name} holds "
          f"{sorted(p.name for p in pending.glob('*'))}")
    # Nothing was promoted: the group's island is the one it started with.
    assert (cancelled / "island.blend").read_bytes() == (template / "island.blend").read_bytes()
    run = json.loads((refiner / "run.json").read_text())
    assert run["status"] == "running"      # interrupted, as a Ctrl-C leaves it
    # The group goes on from where it stopped: the next iteration steps cleanly.
    nxt = complete[-1] + 1
    if not (refiner / f"iter_{nxt}" / "transforms.json").exists():
        client.ok("write_decision", group_dir=str(cancelled), iter=nxt,
                  decision={"members": {}} if nxt > 1 else
                  {"members": {f"chair_{i}": {"delta_xyz": [0.01, 0, 0], "delta_yaw_deg": 0}
                               for i in (1, 2, 3)}})
    assert "[iter_step] sanity OK" in client.ok("iter_step", group_dir=str(cancelled),
                                                iter=nxt)["lines"]
    assert _iterations_whole(refiner)[-1] == nxt


def test_refine_scene_and_report(client: Client, root: Path) -> None:
    from fixtures.scenes import build_scene
    from worker.launch import resolve_blender

    scene = build_scene(root / "tv_scene", resolve_blender("bpy", None), groups=["tv"])
    code, line = client.error("report", scene_dir=str(scene))
    assert code == 2 and line.startswith("[refine_scene] error (exit 2): ") and "ledger" in line
    seen: list[str] = []

    async def refine_and_cancel() -> None:
        stepping = anyio.Event()

        async def progress(value: float, total: float | None, message: str | None) -> None:
            seen.append(message or "")
            if message and "[iter_step]" in message:
                stepping.set()

        async with anyio.create_task_group() as tg:
            async def call() -> None:
                await client.session.call_tool("refine_scene", {"scene_dir": str(scene),
                                                                "max_iter": 6},
                                               progress_callback=progress)
            tg.start_soon(call)
            with anyio.fail_after(60):
                await stepping.wait()
            tg.cancel_scope.cancel()

    client.portal.call(refine_and_cancel)
    # The next call waits for the cancelled run to unwind, then resumes the scene.
    t0 = time.perf_counter()
    done = client.ok("refine_scene", scene_dir=str(scene), max_iter=6)
    seconds = time.perf_counter() - t0
    assert done["line"].startswith("[refine_scene] done: 1 completed, 0 failed")
    from tests._helpers import ledger_rows

    runs = ledger_rows(scene, "runs")
    assert [(r["event"], r["exit_code"]) for r in runs] == [
        ("started", None), ("failed", 130), ("started", None), ("finished", 0)], \
        [(r["event"], r["exit_code"], r["run_id"], r.get("detail")) for r in runs]
    assert runs[1]["detail"] == "interrupted"
    assert (scene / "blend" / "stage3-scene.blend").is_file()
    text = client.ok("report", scene_dir=str(scene))["report"]
    assert text.startswith(f"island-refine report: {scene}") and "tv" in text
    groups = client.ok("list_groups", scene_dir=str(scene))["groups"]
    assert [g["group_id"] for g in groups] == ["tv"]
    print(f"\nMCP refine_scene (1 group): {seconds:.2f} s")


def test_server_refuses_to_start_without_a_valid_root(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "scripts/refine_scene.py", "mcp", "--root",
                           str(tmp_path / "missing")], cwd=REPO, capture_output=True,
                          text=True, check=False, timeout=60,
                          env={**os.environ, "ISLAND_REFINER_DAEMON": "0"})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().startswith("[mcp] error (exit 2): ")


def test_a_client_going_away_mid_step_leaves_whole_iterations(template: Path,
                                                              tmp_path: Path) -> None:
    root = tmp_path / "root"
    group = fresh(template, root, "g")

    async def go() -> None:
        async with _session(root, resolution=512) as session:
            stepping = anyio.Event()

            async def progress(value: float, total: float | None, message: str | None) -> None:
                if message and message.startswith("[iter_step] iter_1: applying"):
                    stepping.set()

            async with anyio.create_task_group() as tg:
                async def call() -> None:
                    await session.call_tool("solve_group", {"group_dir": str(group)},
                                            progress_callback=progress)
                tg.start_soon(call)
                with anyio.fail_after(60):
                    await stepping.wait()
                tg.cancel_scope.cancel()
        # Leaving the session closed the server's stdin: it unwound and exited by itself.

    anyio.run(go)
    refiner = group / "simple_refiner"
    assert _iterations_whole(refiner) == [0]
    assert sorted(p.name for p in (refiner / "iter_1").iterdir()) == ["transforms.json"]


def test_refine_scene_reports_a_partial_run(client: Client, root: Path) -> None:
    """A refused unit costs its group only: exit 24 is a success whose structured content
    says ``status: partial`` and names the refused group with its cause."""
    from fixtures.scenes import build_scene
    from tests.real_scenes import spoil_unit
    from worker.launch import resolve_blender

    scene = build_scene(root / "partial_scene", resolve_blender("bpy", None),
                        groups=["tv", "ring"])
    ring = next(g for g in json.loads((scene / "inputs/relation_graph.json").read_text())
                ["groups"] if g["id"] == "ring")
    spoil_unit(scene / "blend/stage3-sub-planned.blend", "constrained", ring["members"][0])
    done = client.ok("refine_scene", scene_dir=str(scene), max_iter=6)
    assert done["status"] == "partial" and done["exit_code"] == 24, done
    assert list(done["groups_refused"]) == ["ring"], done
    assert "constraint 'Copy Location'" in done["groups_refused"]["ring"]
    assert "1 completed, 0 failed, 1 refused (partial: refused ring)" in done["line"]
