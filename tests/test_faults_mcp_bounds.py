"""Tier 2 (bpy wheel): the MCP server's bounds (issue 33, item 5), through the official SDK's
stdio client as in ``tests/test_mcp.py``.

* An error never echoes a client's value whole: a 16 MiB ``group_dir`` (outside the roots,
  and one beneath a root) was answered with a 50 MB reply. The reply is one line of a few
  hundred characters, exit 2, saying how long the value was.
* ``refine_scene`` with ``workers=1000`` started one warm Blender worker per group whatever
  the machine. The count is capped by the cores and the available memory, the reply says
  so, and the tool's description states the cap. (The scene here has a relation graph that
  is refused at once, so no Blender work is needed to see what the call would have used.)

Judged by the reply's size and text, ``os.sched_getaffinity`` and ``/proc/meminfo``.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from anyio.from_thread import start_blocking_portal

from tests.test_mcp import Client, _session

pytestmark = pytest.mark.bpy
HUGE = 16 * 1024 * 1024
REPLY_MAX = 2000   # characters: "a few hundred" plus the fix naming the roots


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bounds") / "root"
    out.mkdir()
    return out


@pytest.fixture(scope="module")
def client(root: Path) -> Iterator[Client]:
    with start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(_session(root)) as session:
            yield Client(portal, session)


def refusal(client: Client, name: str, **args: object) -> tuple[int, str, int]:
    """(exit code, the reply's text, its size in characters over every content item)."""
    result = client.call(name, **args)
    assert result.is_error, result.content[0].text[:500]
    size = sum(len(getattr(c, "text", "")) for c in result.content)
    size += len(json.dumps(result.structured_content))
    return result.structured_content["exit_code"], result.content[0].text, size


@pytest.mark.parametrize("where", ["outside", "beneath"])
def test_a_16_mib_path_is_refused_without_being_echoed_whole(client: Client, root: Path,
                                                             where: str) -> None:
    raw = ("/" if where == "outside" else str(root) + "/") + "a" * HUGE
    code, text, size = refusal(client, "group_status", group_dir=raw)
    assert code == 2, text[:500]
    assert size < REPLY_MAX, size
    assert len(text.splitlines()) == 1
    assert f"{len(raw)} characters" in text, text


def _cap() -> int:
    cores = len(os.sched_getaffinity(0))
    meminfo = Path("/proc/meminfo").read_text()
    avail_mib = int(re.search(r"MemAvailable:\s+(\d+) kB", meminfo).group(1)) // 1024
    return max(1, min(cores, avail_mib // 512))


def test_refine_scene_workers_are_capped_and_the_cap_is_described(client: Client,
                                                                   root: Path) -> None:
    listed = client.portal.call(client.session.list_tools).tools
    desc = next(t for t in listed if t.name == "refine_scene").description
    assert "capped" in desc and "cores" in desc and "memory" in desc, desc
    assert f"here: {_cap()}" in desc, desc

    scene = root / "scene"
    (scene / "inputs").mkdir(parents=True)
    (scene / "blend").mkdir()
    (scene / "inputs" / "relation_graph.json").write_text('{"version": 1, "groups": 7}')
    result = client.call("refine_scene", scene_dir=str(scene), workers=1000)
    assert result.is_error
    data = result.structured_content
    assert data["workers"] <= len(os.sched_getaffinity(0)), data
    assert data["workers"] == data["workers_cap"] == _cap(), data
    assert any(line.startswith(f"[refine_scene] workers 1000 capped at {data['workers']} (")
               for line in data["lines"]), data["lines"]
