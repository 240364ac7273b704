"""Build the self-contained extension zips, one per platform (stdlib + pip; no Blender needed).

    python blender_addon/build.py                          # all three platforms
    python blender_addon/build.py --platform linux-x64     # one (repeatable)
    python blender_addon/build.py --python 3.11            # only one Python (default 3.11, 3.13)

-> ``build/addon/island_refiner-<version>-<platform>.zip`` (``linux_x64``, ``macos_arm64``,
``macos_x64``; no Windows zip: the loop's file locks, process groups and the warm worker's
Unix socket are POSIX-only, see docs/ADDON.md "Known limits"). Each zip holds one top-level
folder ``island_refiner/``:

* the add-on (``__init__.py``, operators, panel, ``tasks.py`` ...);
* ``lib/``: the library it runs - ``island_tools``, ``worker``, the loop CLIs of ``scripts``
  and the default ``DIRECTORYS.yaml`` - copied from this checkout (``.py`` files only);
* ``wheels/``: the third-party packages the library imports and Blender does not ship
  (``WHEELS``), for every Python of ``--python`` and that platform, downloaded unmodified
  from PyPI with ``pip download --only-binary=:all: --no-deps --platform ... --python-version``
  (cached in ``~/.cache/island-refiner/addon-wheels/<platform>-cp3XX/``, ``$XDG_CACHE_HOME``
  honoured, so a rebuild is offline);
* ``blender_manifest.toml``: the checked-in manifest plus ``platforms`` and ``wheels``.

Blender 4.2+ installs the listed wheels into its extensions' site-packages (one Python's
each). Blender 3.4 - 4.1 install the same zip as a legacy add-on (``bl_info``); they ignore
the manifest and its wheels (docs/ADDON.md). What Blender already ships is never bundled:
a wheel whose ``Requires-Dist`` names anything but ``WHEELS`` or ``BLENDER_SHIPS`` fails the
build, naming the wheel and the requirement. Zips are reproducible (fixed timestamps, sorted
entries); wheels are stored, not deflated again. ``cached_build`` (what the tests call)
keeps built zips under ``~/.cache/island-refiner/addon-zips/<digest of every input>/``.
"""
from __future__ import annotations

import argparse
import email.parser
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

ADDON_DIR = Path(__file__).resolve().parent
REPO = ADDON_DIR.parent
EXCLUDE = ("build.py",)
# What the library imports beyond the stdlib and numpy (island_tools/geometry.py: fcl;
# annotate.py: PIL; configfile.py: yaml for files that are not flat key: value lines).
WHEELS = {"python-fcl": "python-fcl>=0.7", "pillow": "pillow>=10", "pyyaml": "pyyaml>=6"}
# Shipped by every Blender 4.2+ (its Python's site-packages): never bundled.
BLENDER_SHIPS = {"numpy", "cython", "requests", "zstandard", "certifi", "idna", "urllib3",
                 "charset-normalizer"}
PYTHONS = ("3.11", "3.13")     # Blender 4.2 - 5.0: 3.11; Blender 5.1+: 3.13
LIB_PACKAGES = ("island_tools", "worker")
LIB_SCRIPTS = ("__init__.py", "_cli.py", "_step_host.py", "_step_host_server.py",
               "init_iter0.py", "iter_step.py")
ZIP_TIME = (2024, 1, 1, 0, 0, 0)
ZIP_CACHE_KEEP = 3   # cached_build keeps the zips of this many most recent input digests


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/island-refiner`` (default ``~/.cache/island-refiner``): outside the
    checkout, so a fresh clone or another worktree reuses the downloads."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "island-refiner"


@dataclass(frozen=True)
class Platform:
    blender: str                  # the manifest's platform name
    pip: tuple[str, ...]          # pip --platform tags, most specific first

    @property
    def suffix(self) -> str:
        return self.blender.replace("-", "_")


_MAC_X64 = tuple(f"macosx_{v}_x86_64" for v in ("11_0", "10_16", "10_15", "10_14", "10_13",
                                                 "10_12", "10_11", "10_10", "10_9"))
PLATFORMS = {p.blender: p for p in (
    # Blender 4.2+ needs glibc 2.28 (VFX platform 2024) and macOS 11.2.
    Platform("linux-x64", ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64",
                           "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
                           "manylinux2014_x86_64")),
    Platform("macos-arm64", ("macosx_11_0_arm64",)),
    Platform("macos-x64", _MAC_X64),
    # No windows-x64: a zip would install and then fail in every operator (fcntl, killpg,
    # AF_UNIX). Its wheels resolve (win_amd64); add it back with a Windows port of the loop.
)}


class BuildError(Exception):
    """One line: what failed and how to fix it."""


def manifest_text() -> str:
    return (ADDON_DIR / "blender_manifest.toml").read_text(encoding="utf-8")


def manifest_field(name: str) -> str:
    match = re.search(rf'^{name}\s*=\s*"([^"]+)"', manifest_text(), re.MULTILINE)
    if match is None:
        raise BuildError(f"blender_addon/blender_manifest.toml has no {name}")
    return match.group(1)


def addon_files() -> list[Path]:
    return [p for p in sorted(ADDON_DIR.glob("*.py")) if p.name not in EXCLUDE]


def lib_files() -> list[tuple[str, Path]]:
    """(path inside lib/, source) for the library the add-on runs."""
    out = []
    for package in LIB_PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if "__pycache__" not in path.parts:
                out.append((path.relative_to(REPO).as_posix(), path))
    for name in LIB_SCRIPTS:
        out.append((f"scripts/{name}", REPO / "scripts" / name))
    out.append(("DIRECTORYS.yaml", REPO / "DIRECTORYS.yaml"))
    return out


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _cp(python: str) -> str:
    return "cp" + python.replace(".", "")


def _wheel_requires(path: Path) -> list[str]:
    with zipfile.ZipFile(path) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        msg = email.parser.Parser().parsestr(zf.read(meta).decode("utf-8", "replace"))
    out = []
    for req in msg.get_all("Requires-Dist") or []:
        if ";" in req and "extra ==" in req.split(";", 1)[1]:
            continue  # optional extras are not installed
        out.append(_norm(re.split(r"[\s<>=!~;\[(]", req.strip(), maxsplit=1)[0]))
    return out


def wheel_project(path: Path) -> str:
    return _norm(path.name.split("-", 1)[0])


def download_wheels(platform: Platform, python: str, cache: Path,
                    pip: tuple[str, ...] = (sys.executable, "-m", "pip")) -> list[Path]:
    """One wheel per ``WHEELS`` project for this platform and Python (cached)."""
    dest = cache / f"{platform.blender}-{_cp(python)}"
    dest.mkdir(parents=True, exist_ok=True)
    found = {wheel_project(p): p for p in dest.glob("*.whl")}
    if not all(_norm(name) in found for name in WHEELS):
        cmd = [*pip, "download", "--quiet", "--disable-pip-version-check", "--no-deps",
               "--only-binary=:all:", "--implementation", "cp", "--python-version", python,
               "--dest", str(dest)]
        for tag in platform.pip:
            cmd += ["--platform", tag]
        proc = subprocess.run(cmd + list(WHEELS.values()), capture_output=True, text=True,
                              check=False)
        if proc.returncode != 0:
            last = [ln for ln in proc.stderr.splitlines() if ln.startswith("ERROR")]
            raise BuildError(f"pip download for {platform.blender} Python {python} failed: "
                             f"{(last or proc.stderr.splitlines() or ['no output'])[-1]} "
                             "(fix: check the network / PyPI, or drop that --platform/--python)")
        found = {wheel_project(p): p for p in dest.glob("*.whl")}
    wheels = []
    for name in WHEELS:
        path = found.get(_norm(name))
        if path is None:
            raise BuildError(f"PyPI has no {_cp(python)} wheel of {name} for {platform.blender} "
                             f"(tags {', '.join(platform.pip)})")
        extra = [r for r in _wheel_requires(path) if r not in {_norm(n) for n in WHEELS}
                 and r not in BLENDER_SHIPS]
        if extra:
            raise BuildError(f"{path.name} requires {extra[0]}, which is neither bundled nor "
                             "shipped by Blender (fix: add it to WHEELS in blender_addon/build.py)")
        wheels.append(path)
    return wheels


def manifest(platform: Platform, wheels: list[Path]) -> str:
    text = manifest_text().rstrip("\n")
    if re.search(r"^(platforms|wheels)\s*=", text, re.MULTILINE):
        raise BuildError("blender_addon/blender_manifest.toml must not list platforms/wheels "
                         "itself: build.py writes them per platform")
    keys = ["# written by blender_addon/build.py", f'platforms = ["{platform.blender}"]',
            "wheels = ["]
    keys += [f'  "./wheels/{w.name}",' for w in sorted(wheels, key=lambda p: p.name)]
    keys += ["]", ""]
    # top-level keys go before the first [table]: after it they would belong to that table
    table = re.search(r"^\[", text, re.MULTILINE)
    at = table.start() if table else len(text) + 1
    return text[:at] + "\n".join(keys) + "\n" + text[at:] + "\n"


def _git_commit() -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"],
                              capture_output=True, text=True, check=False, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() or None


def _add(zf: zipfile.ZipFile, name: str, data: bytes, stored: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
    info.external_attr = 0o644 << 16
    info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


def build_platform(platform: Platform, out_dir: Path, cache: Path,
                   pythons: tuple[str, ...] = PYTHONS) -> Path:
    package = manifest_field("id")
    wheels = [w for py in pythons for w in download_wheels(platform, py, cache)]
    out = out_dir / f"{package}-{manifest_field('version')}-{platform.suffix}.zip"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    build_info = {"platform": platform.blender, "pythons": list(pythons),
                  "source_commit": _git_commit(), "wheels": sorted(w.name for w in wheels)}
    try:
        with zipfile.ZipFile(tmp, "w") as zf:
            for path in addon_files():
                _add(zf, f"{package}/{path.name}", path.read_bytes())
            _add(zf, f"{package}/blender_manifest.toml",
                 manifest(platform, wheels).encode("utf-8"))
            for rel, path in lib_files():
                _add(zf, f"{package}/lib/{rel}", path.read_bytes())
            _add(zf, f"{package}/lib/build_info.json",
                 (json.dumps(build_info, indent=2) + "\n").encode("utf-8"))
            for wheel in sorted(wheels, key=lambda p: p.name):
                _add(zf, f"{package}/wheels/{wheel.name}", wheel.read_bytes(), stored=True)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def build(out_dir: str | Path, platforms: list[str] | None = None,
          pythons: tuple[str, ...] = PYTHONS, cache: str | Path | None = None) -> list[Path]:
    """Build one zip per platform; returns their paths."""
    names = platforms or list(PLATFORMS)
    unknown = [n for n in names if n not in PLATFORMS]
    if unknown:
        raise BuildError(f"unknown platform {unknown[0]!r} (one of {', '.join(PLATFORMS)})")
    cache_dir = Path(cache) if cache else cache_root() / "addon-wheels"
    return [build_platform(PLATFORMS[n], Path(out_dir), cache_dir, tuple(pythons))
            for n in names]


def inputs_digest(pythons: tuple[str, ...] = PYTHONS) -> str:
    """sha256 over everything a zip is made of except the (cached, immutable) wheels: the
    add-on and library files, the manifest, this script, the Pythons asked for."""
    h = hashlib.sha256(json.dumps([list(pythons), sorted(WHEELS.values()),
                                   _git_commit()]).encode())
    files = [(p.name, p) for p in addon_files()] + lib_files() + [
        ("blender_manifest.toml", ADDON_DIR / "blender_manifest.toml"),
        ("build.py", Path(__file__).resolve())]
    for rel, path in files:
        h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def cached_build(platforms: list[str] | None = None, pythons: tuple[str, ...] = PYTHONS,
                 root: str | Path | None = None) -> list[Path]:
    """``build`` into ``<cache>/addon-zips/<inputs_digest>/`` unless those zips are there
    already (a rerun with unchanged sources costs nothing); older digests beyond the
    ``ZIP_CACHE_KEEP`` most recent are removed."""
    names = platforms or list(PLATFORMS)
    base = Path(root) if root else cache_root() / "addon-zips"
    out = base / inputs_digest(pythons)
    package, version = manifest_field("id"), manifest_field("version")

    def path(name: str) -> Path:
        return out / f"{package}-{version}-{PLATFORMS[name].suffix}.zip"

    missing = [n for n in names if n not in PLATFORMS or not path(n).is_file()]
    if missing:
        build(out, missing, pythons)  # unknown names raise BuildError there
    zips = [path(n) for n in names]
    out.touch()
    others = sorted((d for d in base.iterdir() if d.is_dir() and d != out),
                    key=lambda d: d.stat().st_mtime, reverse=True)
    for stale in others[ZIP_CACHE_KEEP - 1:]:
        shutil.rmtree(stale, ignore_errors=True)
    return zips


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="blender_addon/build.py",
                                description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(REPO / "build" / "addon"))
    p.add_argument("--platform", action="append", choices=list(PLATFORMS),
                   help="default: all four")
    p.add_argument("--python", action="append", help="default: 3.11 and 3.13")
    p.add_argument("--wheel-cache", default=None,
                   help="default: ~/.cache/island-refiner/addon-wheels")
    args = p.parse_args(argv)
    try:
        zips = build(args.out, args.platform, tuple(args.python or PYTHONS), args.wheel_cache)
    except BuildError as exc:
        print(f"build.py: error: {exc}", file=sys.stderr)
        return 1
    for path in zips:
        print(f"{path}  {path.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
