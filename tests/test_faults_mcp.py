"""Tier 2 (bpy wheel): the MCP server under hostile clients (issue 26, items 2-4).

* Confinement holds for a whole call: the group directory, or its ``simple_refiner/``, is
  swapped for a symlink to a copy outside the root while ``solve_group`` runs. The swap is
  made deterministically by the server process itself: a launcher (test code) wraps
  ``adapter.write_decision`` and swaps on iteration 2, between two iterations of the loop.
  Nothing may change outside the root, the call ends with one line and exit 2, and the
  iterations made before the swap stay whole.
* ``get_iteration`` serves the tool's own hard-linked renders and refuses a file hard-linked
  from outside the roots.
* Every request gets an answer: raw lines that the SDK's transport cannot parse, and
  arguments of the wrong type, each get a JSON-RPC response within seconds.
"""
from __future__ import annotations

import base64
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal

from tests._helpers import snapshot
from tests.test_mcp import Client, _iterations_whole, fresh
from tests.test_mcp import template as template  # noqa: PLC0414 - the shared fixture

pytestmark = pytest.mark.bpy
REPO = Path(__file__).resolve().parents[1]
NUDGE = {f"chair_{i}": {"delta_xyz": [0.01, 0.0, 0.0], "delta_yaw_deg": 0.0} for i in (1, 2, 3)}

# The server with a test hook: before iteration ``at_iter``'s decision is written, the
# directory ``swap`` is copied to ``outside``, renamed to ``<name>.moved`` and replaced by a
# symlink to the copy (a snapshot of the copy is written first, to compare with afterwards).
_LAUNCH = r"""
import json, os, shutil, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from island_tools import adapter
from tests._helpers import snapshot
plan_file = Path(sys.argv[2])
real = adapter.write_decision

def write_decision(root, n, *args, **kwargs):
    if plan_file.is_file():
        plan = json.loads(plan_file.read_text())
        if n == plan["at_iter"] and Path(root).name == plan["group"]:
            plan_file.unlink()
            victim, outside = Path(plan["swap"]), Path(plan["outside"])
            shutil.copytree(victim, outside, symlinks=True)
            Path(plan["snapshot"]).write_text(json.dumps(snapshot(outside)))
            os.rename(victim, victim.with_name(victim.name + ".moved"))
            os.symlink(outside, victim, target_is_directory=True)
    return real(root, n, *args, **kwargs)

adapter.write_decision = write_decision
from scripts.refine_scene import main
sys.exit(main(sys.argv[3:]))
"""


@asynccontextmanager
async def _hooked_session(root: Path, plan: Path) -> AsyncIterator[Any]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", _LAUNCH, str(REPO), str(plan), "mcp", "--root", str(root),
              "--blender-bin", "bpy", "--resolution", "64", "--samples", "1", "--no-daemon"],
        env={"ISLAND_REFINER_DAEMON": "0", "PYTHONUNBUFFERED": "1"}, cwd=str(REPO))
    log = open(root.parent / "server-hooked.log", "w")  # noqa: SIM115 - closed below
    try:
        async with stdio_client(params, errlog=log) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session
    finally:
        log.close()


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mcp_faults") / "root"
    path.mkdir()
    return path


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("outside_the_roots")


@pytest.fixture(scope="module")
def plan(root: Path) -> Path:
    return root.parent / "swap_plan.json"


@pytest.fixture(scope="module")
def client(root: Path, plan: Path) -> Iterator[Client]:
    with start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(_hooked_session(root, plan)) as session:
            yield Client(portal, session)


def _one_line_error(result: Any) -> tuple[int, str]:
    assert result.is_error, result.content[0].text
    text = result.content[0].text
    assert len(text.splitlines()) == 1, text
    return result.structured_content["exit_code"], text


def _swap_during_solve(client: Client, plan: Path, group: Path, victim: Path,
                       copy: Path) -> tuple[int, str, dict[str, str]]:
    taken = plan.with_name(f"{copy.name}.snapshot.json")
    plan.write_text(json.dumps({"group": group.name, "at_iter": 2, "swap": str(victim),
                                "outside": str(copy), "snapshot": str(taken)}))
    result = client.call("solve_group", group_dir=str(group))
    assert not plan.exists(), "the swap never happened"
    code, line = _one_line_error(result)
    print(f"\nswap of {victim.name}/ at iter 2: {line}")
    return code, line, json.loads(taken.read_text())


def test_group_dir_swapped_for_a_symlink_during_solve_group(
        client: Client, template: Path, root: Path, outside: Path, plan: Path) -> None:
    group = fresh(template, root, "swap_group")
    copy = outside / "swap_group"
    code, line, before = _swap_during_solve(client, plan, group, group, copy)
    assert snapshot(copy) == before, "files were written outside the root"
    assert code == 2 and "symlink" in line and str(group) in line, line
    moved = group.with_name("swap_group.moved")
    assert _iterations_whole(moved / "simple_refiner") == [0, 1]
    assert not (moved / "simple_refiner" / "iter_2").exists()
    assert (moved / "island.blend").read_bytes() == (template / "island.blend").read_bytes()


def test_simple_refiner_swapped_for_a_symlink_during_solve_group(
        client: Client, template: Path, root: Path, outside: Path, plan: Path) -> None:
    group = fresh(template, root, "swap_refiner")
    copy = outside / "swap_refiner_simple_refiner"
    code, line, before = _swap_during_solve(client, plan, group, group / "simple_refiner",
                                            copy)
    assert snapshot(copy) == before, "files were written outside the root"
    assert code == 2 and "simple_refiner" in line and "symlink" in line, line
    assert _iterations_whole(group / "simple_refiner.moved") == [0, 1]
    assert (group / "island.blend").read_bytes() == (template / "island.blend").read_bytes()


def test_get_iteration_serves_the_tools_own_links_and_refuses_a_link_from_outside(
        client: Client, template: Path, root: Path, outside: Path) -> None:
    group = fresh(template, root, "links")
    client.ok("init_iter0", group_dir=str(group))
    client.ok("write_decision", group_dir=str(group), iter=1, decision={"members": NUDGE})
    client.ok("iter_step", group_dir=str(group), iter=1)
    client.ok("write_decision", group_dir=str(group), iter=2, decision={"members": {}})
    client.ok("iter_step", group_dir=str(group), iter=2)
    it1, it2 = group / "simple_refiner" / "iter_1", group / "simple_refiner" / "iter_2"
    # The quiet step linked iter_1's renders (the tool's own links): they are served.
    persp = it2 / "render_persp.png"
    assert os.path.samefile(it1 / "render_persp.png", persp) and persp.stat().st_nlink == 2
    served = client.call("get_iteration", group_dir=str(group), iter=2)
    assert not served.is_error, served.content[0].text
    image = next(b for b in served.content if b.type == "image")
    assert base64.b64decode(image.data) == persp.read_bytes()
    # transforms.json replaced by a hard link to a file outside the roots: refused.
    secret = outside / "secret.json"
    secret.write_text('{"token": "outside-the-roots-7f3a"}')
    (it2 / "transforms.json").unlink()
    os.link(secret, it2 / "transforms.json")
    result = client.call("get_iteration", group_dir=str(group), iter=2)
    code, line = _one_line_error(result)
    assert code == 2 and "transforms.json" in line and "hard link" in line, line
    print(f"\nhard link from outside: {line}")
    assert not any("7f3a" in getattr(b, "text", "") for b in result.content)
    # ... and so is a render hard-linked from outside, though the tool links renders.
    (it1 / "render_persp.png").unlink()
    os.link(outside / "secret.json", it1 / "render_persp.png")
    code, line = _one_line_error(client.call("get_iteration", group_dir=str(group), iter=1))
    assert code == 2 and "render_persp.png" in line, line


# --------------------------------------------------------------------------- raw lines
class RawServer:
    """The server on a pipe, spoken to line by line (what no SDK client would send)."""

    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "scripts" / "refine_scene.py"), "mcp", "--root",
             str(root), "--blender-bin", "bpy", "--no-daemon"], cwd=REPO,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env={**os.environ, "ISLAND_REFINER_DAEMON": "0", "PYTHONUNBUFFERED": "1"})
        self._buf = b""

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode("utf-8") + b"\n")
        self.proc.stdin.flush()

    def reply(self, rid: int, seconds: float = 10.0) -> dict[str, Any] | None:
        """The response to request ``rid``, or None when none came within ``seconds``."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        end = time.monotonic() + seconds
        while True:
            while b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
                msg = json.loads(line)
                if msg.get("id") == rid and ("result" in msg or "error" in msg):
                    return msg
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self._buf += chunk

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def raw(root: Path) -> Iterator[RawServer]:
    server = RawServer(root)
    server.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}}))
    assert server.reply(0, 60) is not None, "the server did not start"
    server.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    yield server
    server.close()


def _call(rid: int, tool: str, arguments: str) -> str:
    return ('{"jsonrpc": "2.0", "id": ' + str(rid) + ', "method": "tools/call", "params": '
            '{"name": "' + tool + '", "arguments": ' + arguments + '}}')


UNREADABLE = {
    "arguments_100k_deep": (11, _call(11, "group_status", '{"group_dir": ' + "[" * 100_000
                                      + "]" * 100_000 + "}")),
    "decision_5k_deep": (12, _call(12, "write_decision", '{"group_dir": "g", "decision": '
                                   + '{"a": ' * 5000 + "1" + "}" * 5000 + "}")),
    "lone_surrogate": (13, _call(13, "group_status", '{"group_dir": "\\udcff"}')),
    "integer_5000_digits": (14, _call(14, "group_status", '{"group_dir": "g", "max_iter": '
                                      + "9" * 5000 + "}")),
}


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_a_line_the_transport_cannot_parse_gets_an_answer(raw: RawServer, case: str) -> None:
    rid, line = UNREADABLE[case]
    raw.send(line)
    reply = raw.reply(rid)
    assert reply is not None, f"{case}: no response within 10 s (the client would hang)"
    error = reply["error"]
    assert error["data"]["exit_code"] == 2, error
    message = error["message"]
    assert len(message.splitlines()) == 1 and message.startswith("[mcp] error (exit 2): ")
    assert "fix:" in message, message
    raw.send(json.dumps({"jsonrpc": "2.0", "id": rid + 100, "method": "ping"}))
    assert raw.reply(rid + 100) is not None, "the server stopped answering"


def test_a_wrong_argument_type_is_the_clis_one_line_with_the_exit_code(raw: RawServer
                                                                        ) -> None:
    for rid, tool, arguments, field in (
            (21, "group_status", '{"group_dir": 123}', "group_dir"),
            (22, "solve_group", '{"group_dir": "g", "max_iter": "many"}', "max_iter"),
            (23, "get_iteration", '{}', "group_dir")):
        raw.send(_call(rid, tool, arguments))
        reply = raw.reply(rid)
        assert reply is not None, f"{tool}: no response"
        result = reply["result"]
        text = result["content"][0]["text"]
        assert result["isError"] and len(text.splitlines()) == 1, text
        assert result["structuredContent"]["exit_code"] == 2, result
        assert text.startswith(f"[mcp] error (exit 2): field '{field}': "), text
        assert "(fix: send" in text, text


def test_a_reply_that_cannot_be_encoded_is_an_error_not_a_dead_server(raw: RawServer,
                                                                       root: Path) -> None:
    """A group directory whose name is not UTF-8: the reply naming it cannot be encoded;
    the client still gets an answer for its id, and the server goes on."""
    bad = os.fsencode(root / "bytes_scene" / "relation_groups") + b"/bad\xff"
    os.makedirs(bad)
    with open(bad + b"/metadata.json", "w") as fh:
        fh.write("{")
    raw.send(_call(31, "list_groups", json.dumps({"scene_dir": str(root / "bytes_scene")})))
    reply = raw.reply(31)
    assert reply is not None, "no response (the server died)"
    message = reply["error"]["message"]
    assert len(message.splitlines()) == 1 and reply["error"]["data"]["exit_code"] == 2
    assert "UTF-8" in message, message
    raw.send(json.dumps({"jsonrpc": "2.0", "id": 32, "method": "ping"}))
    assert raw.reply(32) is not None, "the server stopped answering"


def test_the_shared_writer_refuses_a_symlink_swapped_in_under_a_guard(tmp_path: Path
                                                                       ) -> None:
    """The primitives the library writes with (``island_tools/files/atomic.py``), under the guard
    the server installs for a writing call: a directory swapped for a symlink to an outside
    copy, or for another directory, refuses every kind of write, and nothing outside
    changes (not even a removal)."""
    from island_tools.files import atomic

    top, away = tmp_path / "root", tmp_path / "away"
    group = top / "g"
    (group / "sub").mkdir(parents=True)
    (group / "sub" / "keep.txt").write_text("kept")
    guard = atomic.Confined([top])
    with atomic.confined(guard):
        guard.pin(group)
        atomic.write_json(group / "sub" / "a.json", {"ok": 1})     # beneath the root: fine
        atomic.link_or_copy(group / "sub" / "a.json", group / "b.json")
        (group / "sub").rename(group / "sub.moved")
        (away / "sub").mkdir(parents=True)
        (away / "sub" / "keep.txt").write_text("outside")
        (group / "sub").symlink_to(away / "sub", target_is_directory=True)
        before = snapshot(away)
        attempts = [lambda: atomic.write_json(group / "sub" / "x.json", {}),
                    lambda: atomic.write_bytes(group / "sub" / "keep.txt", b"x"),
                    lambda: atomic.copy_file(group / "b.json", group / "sub" / "c.json"),
                    lambda: atomic.link_or_copy(group / "b.json", group / "sub" / "d"),
                    lambda: atomic.link_or_copy(group / "sub" / "keep.txt", group / "e"),
                    lambda: atomic.make_dir(group / "sub" / "new"),
                    lambda: atomic.replace(group / "b.json", group / "sub" / "b.json"),
                    lambda: atomic.open_beneath(group / "sub" / "lock", os.O_CREAT
                                                | os.O_RDWR)]
        for attempt in attempts:
            with pytest.raises(atomic.ConfinementError, match="symlink"):
                attempt()
        atomic.remove_tree(group / "sub" / "keep.txt")
        atomic.remove_tree(group / "sub")
        assert snapshot(away) == before and (group / "sub").is_symlink()
        assert not (group / "e").exists()
        # the group itself replaced by another real directory: the pin refuses
        group.rename(top / "g.moved")
        group.mkdir()
        with pytest.raises(atomic.ConfinementError, match="replaced"):
            atomic.write_json(group / "y.json", {})
    assert not (group / "y.json").exists()
    assert (top / "g.moved" / "sub.moved" / "a.json").is_file()
