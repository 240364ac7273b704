"""CI cannot skip what it requires (tests/conftest.py): a generated test tree runs in a
pytest subprocess with tests/conftest.py as its plugin, once as CI runs it
(ISLAND_REFINER_REQUIRE_BPY/_BLENDER set) and once as a developer does (unset)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import REQUIRED_PREFIX, chattr_refusal, ext4_image

REPO = Path(__file__).resolve().parents[1]

CASES = '''
import pytest

import tests.conftest as ci

ci.HAVE_BPY = False          # as in a venv without the wheel
ci.BLENDER_BIN = "/usr/bin/blender-stand-in"


@pytest.fixture
def skipping_fixture():
    pytest.skip("fixture cannot work here")


@pytest.mark.bpy
@pytest.mark.skipif(True, reason="skipif in the bpy tier")
def test_bpy_skipif():
    pass


@pytest.mark.bpy
def test_bpy_engine_missing():
    pass


@pytest.mark.blender_bin
def test_bin_skip_in_call():
    pytest.skip("pytest.skip in the blender_bin tier")


@pytest.mark.blender_bin
def test_bin_importorskip_in_call():
    pytest.importorskip("no_such_module_for_ci_skips")


@pytest.mark.blender_bin
def test_bin_fixture_skip(skipping_fixture):
    pass


@pytest.mark.required_in_ci
def test_fault_needs_root():
    pytest.skip("needs root")


@pytest.mark.required_in_ci
@pytest.mark.skipif(True, reason="skipif on a required test")
def test_fault_skipif():
    pass


def test_pure_optional_skip():
    pytest.skip("optional, never required")


@pytest.mark.blender_bin
def test_bin_passes():
    pass


@pytest.mark.blender_bin
@pytest.mark.xfail(reason="known", strict=True)
def test_bin_xfail():
    raise AssertionError


@pytest.mark.bpy
class TestBpyClass:
    @pytest.mark.skip(reason="skip marker on a method")
    def test_method(self):
        pass
'''

MODULE_SKIP = '''
import pytest

bpy = pytest.importorskip("no_such_bpy_for_ci_skips")


def test_never_collected():
    pass
'''

INI = """[pytest]
markers =
    bpy: tier
    blender_bin: tier
    required_in_ci: required
"""


def run_tree(tmp_path: Path, env_vars: dict[str, str]) -> tuple[int, dict[str, tuple[str, str]]]:
    """Exit code and {test name: (outcome, message)} of the generated tree under ``env``."""
    tree = tmp_path / "tree"
    tree.mkdir(exist_ok=True)
    (tree / "pytest.ini").write_text(INI)
    (tree / "test_cases.py").write_text(CASES)
    (tree / "test_module_skip.py").write_text(MODULE_SKIP)
    junit = tmp_path / f"junit-{len(list(tmp_path.glob('junit-*')))}.xml"
    env = {k: v for k, v in os.environ.items()
           if k not in ("ISLAND_REFINER_REQUIRE_BPY", "ISLAND_REFINER_REQUIRE_BLENDER")}
    env.update(env_vars, PYTHONPATH=str(REPO), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.conftest",
                           "-p", "no:cacheprovider", "-q", "-rA", f"--junitxml={junit}"],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert junit.exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
    outcomes: dict[str, tuple[str, str]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "")
        if case.get("classname", "").endswith("TestBpyClass"):
            name = f"TestBpyClass.{name}"
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "failed"}.get(child.tag, "skipped")
                if child.get("type") == "pytest.xfail":
                    outcome = "xfailed"
                message = child.get("message") or child.text or ""
        outcomes[name] = (outcome, message)
    return proc.returncode, outcomes


def test_ci_turns_every_required_skip_into_a_one_line_failure(tmp_path: Path) -> None:
    rc, got = run_tree(tmp_path, {"ISLAND_REFINER_REQUIRE_BPY": "1",
                                  "ISLAND_REFINER_REQUIRE_BLENDER": "1"})
    assert rc == 1
    failed = {"test_bpy_skipif": "skipif in the bpy tier",
              "test_bpy_engine_missing": "bpy wheel not installed",
              "test_bin_skip_in_call": "pytest.skip in the blender_bin tier",
              "test_bin_importorskip_in_call": "no_such_module_for_ci_skips",
              "test_bin_fixture_skip": "fixture cannot work here",
              "test_fault_needs_root": "needs root",
              "test_fault_skipif": "skipif on a required test",
              "TestBpyClass.test_method": "skip marker on a method",
              "collection_skipped": "no_such_bpy_for_ci_skips"}
    for name, needle in failed.items():
        outcome, message = got[name]
        assert outcome == "failed", (name, got[name])
        assert REQUIRED_PREFIX in message and needle in message, (name, message)
        assert "\n" not in message.strip(), (name, message)
    assert "ISLAND_REFINER_REQUIRE_BPY" in got["test_bpy_skipif"][1]
    assert "ISLAND_REFINER_REQUIRE_BLENDER" in got["test_bin_skip_in_call"][1]
    assert "test_cases.py:28)" in got["test_bin_skip_in_call"][1]   # where it skipped
    assert got["test_pure_optional_skip"][0] == "skipped"
    assert got["test_bin_passes"][0] == "passed"
    assert got["test_bin_xfail"][0] == "xfailed"
    assert "test_never_collected" not in got
    assert len(got) == len(failed) + 3


def test_one_variable_requires_its_own_tier_and_the_ci_cases(tmp_path: Path) -> None:
    rc, got = run_tree(tmp_path, {"ISLAND_REFINER_REQUIRE_BPY": "1"})
    assert rc == 1
    for name in ("test_bpy_skipif", "test_bpy_engine_missing", "TestBpyClass.test_method",
                 "test_fault_needs_root", "test_fault_skipif", "collection_skipped"):
        assert got[name][0] == "failed", (name, got[name])
    for name in ("test_bin_skip_in_call", "test_bin_importorskip_in_call",
                 "test_bin_fixture_skip", "test_pure_optional_skip"):
        assert got[name][0] == "skipped", (name, got[name])


def test_without_the_variables_the_same_cases_skip(tmp_path: Path) -> None:
    rc, got = run_tree(tmp_path, {"ISLAND_REFINER_REQUIRE_BPY": "0"})
    assert rc == 0
    assert {n for n, (o, _) in got.items() if o == "failed"} == set()
    assert got["test_bin_passes"][0] == "passed" and got["test_bin_xfail"][0] == "xfailed"
    assert "collection_skipped" not in got
    assert {n for n, (o, _) in got.items() if o == "skipped"} == {
        "test_module_skip", "test_bpy_skipif", "test_bpy_engine_missing",
        "test_bin_skip_in_call", "test_bin_importorskip_in_call", "test_bin_fixture_skip",
        "test_fault_needs_root", "test_fault_skipif", "test_pure_optional_skip",
        "TestBpyClass.test_method"}


@pytest.mark.required_in_ci
def test_an_ext4_image_takes_the_immutable_flag(tmp_path: Path) -> None:
    """The fallback of ``immutable_capable_dir`` where the temp dir's file system has no
    immutable flag: a loop-mounted ext4 image, gone after the block."""
    with ext4_image(tmp_path, size_mb=16) as mnt:
        assert os.path.ismount(mnt)
        assert chattr_refusal(mnt) is None
        (mnt / "d").mkdir()
        subprocess.run(["chattr", "+i", str(mnt / "d")], check=True)
        with pytest.raises(PermissionError):
            (mnt / "d" / "f").write_text("x")
    assert not os.path.ismount(mnt) and not (tmp_path / "ext4.img").exists()


def test_the_ci_script_requires_both_tiers() -> None:
    text = (REPO / ".ci" / "run").read_text()
    assert "export ISLAND_REFINER_REQUIRE_BLENDER=1 ISLAND_REFINER_REQUIRE_BPY=1" in text
    assert textwrap.dedent("""\
        run_pytest .venv/bin/python -m pytest -q
        run_pytest .venv313/bin/python -m pytest -q -m bpy""") in text
