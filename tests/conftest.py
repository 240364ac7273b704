"""Test tiers: pure (default), ``bpy`` (the embedded Blender wheel: 5.0 or 5.2), ``blender_bin``
(a real Blender binary, Debian's 3.4 in CI). A tier whose engine is missing is skipped,
unless ISLAND_REFINER_REQUIRE_BPY / ISLAND_REFINER_REQUIRE_BLENDER is set (CI), where a
missing engine fails the test instead of hiding it."""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

HAVE_BPY = importlib.util.find_spec("bpy") is not None
BLENDER_BIN = os.environ.get("BLENDER") or shutil.which("blender")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if "bpy" in item.keywords and not HAVE_BPY:
        if os.environ.get("ISLAND_REFINER_REQUIRE_BPY"):
            pytest.fail("bpy is required here (ISLAND_REFINER_REQUIRE_BPY) but not importable")
        pytest.skip("bpy wheel not installed (bash scripts/setup_env.sh)")
    if "blender_bin" in item.keywords and not BLENDER_BIN:
        if os.environ.get("ISLAND_REFINER_REQUIRE_BLENDER"):
            pytest.fail("a Blender binary is required here (ISLAND_REFINER_REQUIRE_BLENDER)")
        pytest.skip("no Blender binary ($BLENDER or blender on PATH)")
