"""Test tiers: pure (default), ``bpy`` (the embedded Blender wheel: 5.0 or 5.2), ``blender_bin``
(a real Blender binary, Debian's 3.4 in CI). A tier whose engine is missing is skipped,
unless ISLAND_REFINER_REQUIRE_BPY / ISLAND_REFINER_REQUIRE_BLENDER is set (CI).

CI cannot skip what it requires: with ISLAND_REFINER_REQUIRE_BPY set, any skip of a ``bpy``
test fails it; with ISLAND_REFINER_REQUIRE_BLENDER, any skip of a ``blender_bin`` test; with
either set, any skip of a ``required_in_ci`` test (the faults behind the README's exit codes:
immutable directories, a full tmpfs, a mount inside the group, a second uid; ruff and mypy)
and any skip while collecting a module (its tests' tiers are unknown then). "Any skip" is a
skipif/skip marker, ``pytest.skip`` or ``pytest.importorskip`` in a test or a fixture, or
at module level: each becomes a failure whose one line says what was required and why it
skipped. xfail stays xfail."""
from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

HAVE_BPY = importlib.util.find_spec("bpy") is not None
BLENDER_BIN = os.environ.get("BLENDER") or shutil.which("blender")

ENV_BPY = "ISLAND_REFINER_REQUIRE_BPY"
ENV_BLENDER = "ISLAND_REFINER_REQUIRE_BLENDER"
REQUIRED_PREFIX = "required here, must not skip"


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A missing engine skips its tier; ``pytest_runtest_makereport`` below turns that skip
    into a failure where the tier is required."""
    if isinstance(item, CollectionSkipped):
        return
    if "bpy" in item.keywords and not HAVE_BPY:
        pytest.skip("bpy wheel not installed (bash scripts/setup_env.sh)")
    if "blender_bin" in item.keywords and not BLENDER_BIN:
        pytest.skip("no Blender binary ($BLENDER or blender on PATH)")


# --------------------------------------------------------------------------- required skips

def _env(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def in_ci() -> bool:
    return _env(ENV_BPY) or _env(ENV_BLENDER)


def required_because(item: pytest.Item) -> str | None:
    """Why ``item`` must not skip in this run, or None where a skip is allowed."""
    why = []
    if _env(ENV_BPY) and item.get_closest_marker("bpy") is not None:
        why.append(f"bpy tier, {ENV_BPY} is set")
    if _env(ENV_BLENDER) and item.get_closest_marker("blender_bin") is not None:
        why.append(f"blender_bin tier, {ENV_BLENDER} is set")
    if in_ci() and item.get_closest_marker("required_in_ci") is not None:
        why.append(f"required_in_ci, {ENV_BPY if _env(ENV_BPY) else ENV_BLENDER} is set")
    return "; ".join(why) or None


def _skip_reason(longrepr: object) -> str:
    """The reason of a skip report (``(path, lineno, "Skipped: reason")``), and where."""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        path, lineno, message = longrepr
        message = str(message).removeprefix("Skipped: ")
        with contextlib.suppress(ValueError):   # outside the repository: as it is
            path = Path(path).resolve().relative_to(REPO_ROOT)
        return f"{message} ({path}:{lineno})" if lineno is not None else f"{message} ({path})"
    return str(longrepr)


def _one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """The outermost wrapper (after the skipping plugin has made xfail/skip reports): a
    skip of a required test becomes a failure, in whichever phase it happened."""
    report = yield
    if report.skipped and not hasattr(report, "wasxfail"):
        why = required_because(item)
        if why is not None:
            report.outcome = "failed"
            report.longrepr = _one_line(
                f"{REQUIRED_PREFIX} ({why}) but skipped: {_skip_reason(report.longrepr)}")
            report.required_skip = True
    return report


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    """A required skip counts as a failed test, also when it happened in setup (a skipif
    marker, a fixture) where a failure would otherwise read as an error."""
    if getattr(report, "required_skip", False):
        return "failed", "F", "FAILED"
    return None


class CollectionSkipped(pytest.Item):
    """Stands in, in CI, for a module that skipped while being collected (a module-level
    ``pytest.importorskip``/``pytest.skip``): one failing test carrying every tier marker,
    so ``-m bpy`` and ``-m blender_bin`` runs select it as well."""

    def __init__(self, *, reason: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.reason = reason
        for name in ("bpy", "blender_bin", "required_in_ci"):
            self.add_marker(name)

    def runtest(self) -> None:
        raise pytest.fail.Exception(self.reason, pytrace=False)

    def repr_failure(self, excinfo, style=None):
        return str(excinfo.value)

    def reportinfo(self):
        return self.path, None, f"{self.name} (module skipped while collecting)"


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_make_collect_report(collector: pytest.Collector):
    report = yield
    if report.skipped and in_ci():
        reason = _one_line(
            f"{REQUIRED_PREFIX} ({ENV_BPY if _env(ENV_BPY) else ENV_BLENDER} is set: a module "
            f"that skips while collecting hides tests of every tier) but skipped: "
            f"{_skip_reason(report.longrepr)}")
        item = CollectionSkipped.from_parent(collector, name="collection_skipped",
                                             reason=reason)
        report = pytest.CollectReport(collector.nodeid, "passed", None, [item])
    return report


# --------------------------------------------------------------------------- chattr +i

def chattr_refusal(directory: Path) -> str | None:
    """None when the immutable flag (``chattr +i``) can be set in ``directory`` and keeps a
    file from being written; else why not, in a few words."""
    if shutil.which("chattr") is None:
        return "no chattr (Debian's e2fsprogs)"
    fd, name = tempfile.mkstemp(prefix=".chattr-probe.", dir=directory)
    os.close(fd)
    probe = Path(name)
    try:
        proc = subprocess.run(["chattr", "+i", str(probe)], capture_output=True, text=True,
                              check=False)
        if proc.returncode:
            return _one_line(f"chattr +i in {directory}: {proc.stderr.strip() or 'refused'}")
        try:
            with open(probe, "ab"):
                pass
        except PermissionError:
            return None
        return f"chattr +i in {directory} left the file writable"
    finally:
        subprocess.run(["chattr", "-i", str(probe)], capture_output=True, check=False)
        probe.unlink(missing_ok=True)


@contextlib.contextmanager
def ext4_image(where: Path, size_mb: int = 64) -> Iterator[Path]:
    """A fresh ext4 file system (an image file, loop-mounted; needs root) mounted at
    ``where/mnt`` until the block ends; skips with the reason when it cannot be made."""
    if os.getuid() != 0:
        pytest.skip("an ext4 image for chattr +i needs root (mount -o loop)")
    missing = [t for t in ("mkfs.ext4", "mount", "umount", "chattr") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"an ext4 image for chattr +i needs {', '.join(missing)} (e2fsprogs, mount)")
    image, mnt = where / "ext4.img", where / "mnt"
    mnt.mkdir(parents=True, exist_ok=True)
    with open(image, "wb") as fh:
        fh.truncate(size_mb << 20)
    for cmd in (["mkfs.ext4", "-q", "-F", "-m", "0", str(image)],
                ["mount", "-o", "loop", str(image), str(mnt)]):
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode:
            image.unlink(missing_ok=True)
            pytest.skip(_one_line(f"{' '.join(cmd[:3])}: {proc.stderr.strip()}"))
    try:
        yield mnt
    finally:
        subprocess.run(["chattr", "-R", "-i", str(mnt)], capture_output=True, check=False)
        if subprocess.run(["umount", str(mnt)], capture_output=True, check=False).returncode:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True, check=False)
        image.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def immutable_capable_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A directory whose file system honours ``chattr +i``: the session's temporary directory
    where it does (ext4 as root), else a loop-mounted ext4 image (overlay, tmpfs and ramfs
    may not), else a skip naming both reasons (a failure where the test is required)."""
    base = tmp_path_factory.mktemp("immutable")
    why = chattr_refusal(base)
    if why is None:
        yield base
        return
    try:
        with ext4_image(base) as mnt:
            again = chattr_refusal(mnt)
            if again is not None:
                pytest.skip(f"{why}; on an ext4 image: {again}")
            yield mnt
    except pytest.skip.Exception as exc:
        pytest.skip(f"{why}; {exc.msg}")


# --------------------------------------------------------------------------- bpy 4.2 exit
# The bpy 4.2 LTS *module* (the wheel, not Blender's binary) crashes with SIGSEGV while the
# interpreter finalizes once any property with an ``update`` callback has been registered,
# even after it was unregistered again (`tests/test_lts.py`
# ``test_bpy42_module_exit_crash_still_there`` keeps the reproducer): every test has run and
# been reported by then, but the exit status would be 139. Under bpy 4.2 only, the run ends
# with pytest's own status once it has said everything, skipping the finalization.
_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    if not HAVE_BPY or not _EXIT_STATUS or "bpy" not in sys.modules:
        return
    if tuple(sys.modules["bpy"].app.version[:2]) == (4, 2):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT_STATUS[-1])
