"""Build the self-contained extension zips, one per platform, each checked by Blender's validator.

    python blender_addon/build.py                          # every platform of PLATFORMS
    python blender_addon/build.py --platform linux-x64     # one (repeatable)
    python blender_addon/build.py --python 3.11            # only one Python (default 3.11, 3.13)
    python blender_addon/build.py --validator PATH         # Blender 4.2+'s blender_ext.py or binary

-> ``build/addon/island_refiner-<version>-<platform>.zip`` (``linux_x64``, ``macos_arm64``,
``macos_x64``, ``windows_x64``; the Windows zip is built and listed, never run here: what
works there and what refuses in one line is docs/ADDON.md "Windows and macOS"). Each zip
holds one top-level folder ``island_refiner/``:

* the add-on (``__init__.py``, operators, panel, ``tasks.py`` ...);
* ``lib/``: the library it runs - ``island_tools``, ``worker``, the loop CLIs of ``scripts``
  and the default ``DIRECTORYS.yaml`` - copied from this checkout (``.py`` files only), plus
  ``lib/build_info.json`` (source commit, dirty files, wheels, the validator's Blender);
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

Only what git tracks is shipped: the packaged files are ``git ls-files`` of this repository;
an untracked packaged file, or one that differs from HEAD, refuses the build (naming them)
unless ``--allow-dirty``, when the working tree is shipped as it is and ``build_info.json``
says ``"dirty": true`` and lists them. Outside git (an exported tree) the files are taken as
found and ``build_info.json`` says ``"git": false``.

Every zip is written to a temporary name, checked by Blender's own extension validator
(``blender_ext.py validate``, what ``blender -c extension validate`` runs; the script needs
only the stdlib) and only then moved to its path: an invalid zip never appears there. The
validator is, in this order: ``--validator PATH`` or ``$ISLAND_REFINER_EXT_VALIDATOR`` (a
``blender_ext.py``, run with this Python, or a Blender 4.2+ binary), the ``bpy``
module of this Python, ``blender`` 4.2+ on PATH. None found fails the build unless
``--no-validate`` (``build_info.json`` then says ``"validated": false``). Exit codes: 0 built,
1 a build error (one line: what and the fix), 2 bad arguments.
"""
from __future__ import annotations

import argparse
import email.parser
import hashlib
import importlib.util
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
# What the library imports beyond the stdlib and numpy (island_tools/measure/geometry.py: fcl;
# annotate.py: PIL; configfile.py: yaml for files that are not flat key: value lines).
# locks.py: filelock where there is no fcntl (Windows); pure Python, one wheel for all.
WHEELS = {"python-fcl": "python-fcl>=0.7", "pillow": "pillow>=10", "pyyaml": "pyyaml>=6",
          "filelock": "filelock>=3.30"}
# Shipped by every Blender 4.2+ (its Python's site-packages): never bundled.
BLENDER_SHIPS = {"numpy", "cython", "requests", "zstandard", "certifi", "idna", "urllib3",
                 "charset-normalizer"}
PYTHONS = ("3.11", "3.13")     # Blender 4.2 - 5.0: 3.11; Blender 5.1+: 3.13
LIB_PACKAGES = ("island_tools", "worker")
LIB_SCRIPTS = ("__init__.py", "_cli.py", "_step_host.py", "_step_host_server.py",
               "init_iter0.py", "iter_step.py")
ZIP_TIME = (2024, 1, 1, 0, 0, 0)
ZIP_CACHE_KEEP = 5   # cached_build keeps the zips of this many most recent input digests
                     # (one per validator: bpy 4.2, 4.5, 5.0, 5.2 in one CI run)
VALIDATOR_ENV = "ISLAND_REFINER_EXT_VALIDATOR"
VALIDATOR_MIN_BLENDER = (4, 2)  # extensions (and their validator) exist from 4.2 on
# Inside a Blender (or bpy) install: <X.Y>/scripts/...; tags.py is what `blender -c extension
# validate` checks tags against, so the standalone script is given it too.
VALIDATOR_SCRIPT = "scripts/addons_core/bl_pkg/cli/blender_ext.py"
VALIDATOR_TAGS = "scripts/modules/_bpy_internal/extensions/tags.py"


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
    # Built and listed, never run here (no Windows machine): docs/ADDON.md "Windows and
    # macOS" says what is ported (locks: filelock) and what refuses in one line.
    Platform("windows-x64", ("win_amd64",)),
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


MANIFEST = "blender_addon/blender_manifest.toml"
LIB_EXTRA = (*(f"scripts/{name}" for name in LIB_SCRIPTS), "DIRECTORYS.yaml")
PACKAGED_ROOTS = ("blender_addon", *LIB_PACKAGES, "scripts", "DIRECTORYS.yaml")
REQUIRED = ("blender_addon/__init__.py", MANIFEST, *LIB_EXTRA)


def packaged(rel: str) -> bool:
    """Whether the repository-relative path ``rel`` goes into the zip."""
    parts = rel.split("/")
    if parts[0] == "blender_addon":
        return len(parts) == 2 and (rel == MANIFEST
                                    or (rel.endswith(".py") and parts[1] not in EXCLUDE))
    if parts[0] in LIB_PACKAGES:
        return rel.endswith(".py") and "__pycache__" not in parts
    return rel in LIB_EXTRA


@dataclass(frozen=True)
class Sources:
    """The files a zip is made of (repository-relative, sorted) and what git says of them."""
    files: tuple[str, ...]
    commit: str | None                   # HEAD; None outside git
    git: bool
    dirty: dict[str, list[str]]          # kind -> packaged files not as in HEAD; {} when clean

    def addon(self) -> list[str]:
        return [f for f in self.files if f.startswith("blender_addon/") and f.endswith(".py")]

    def lib(self) -> list[str]:
        return [f for f in self.files if not f.startswith("blender_addon/")]

    def info(self) -> dict[str, object]:
        """What ``build_info.json`` says of the source."""
        if not self.git:
            return {"source_commit": None, "git": False,
                    "source": "no git (an exported tree): the files as found"}
        info: dict[str, object] = {"source_commit": self.commit, "git": True,
                                   "dirty": bool(self.dirty)}
        if self.dirty:
            info["dirty_files"] = self.dirty
        return info


def _git(repo: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                              check=False, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _nul_split(text: str | None) -> list[str]:
    return [item for item in (text or "").split("\0") if item]


def sources(repo: Path = REPO) -> Sources:
    """The packaged files: ``git ls-files`` of ``repo`` (plus what is untracked, reported as
    dirty with what differs from HEAD); every file as found when ``repo`` is no git checkout
    of its own (an exported tree, perhaps inside another repository)."""
    top = _git(repo, "rev-parse", "--show-toplevel")
    commit = _git(repo, "rev-parse", "--verify", "--quiet", "HEAD") if top else None
    if not top or not commit or Path(top.strip()).resolve() != repo.resolve():
        found = []
        for root in PACKAGED_ROOTS:
            base = repo / root
            for path in (base.rglob("*") if base.is_dir() else [base]):
                if path.is_file():
                    found.append(path.relative_to(repo).as_posix())
        return Sources(tuple(sorted(f for f in found if packaged(f))), None, False, {})
    spec = ("--", *PACKAGED_ROOTS)
    tracked = {f for f in _nul_split(_git(repo, "ls-files", "-z", *spec)) if packaged(f)}
    untracked = {f for f in _nul_split(_git(repo, "ls-files", "-z", "--others",
                                            "--exclude-standard", *spec)) if packaged(f)}
    changed = _nul_split(_git(repo, "diff", "-z", "--name-status", "--no-renames", "HEAD",
                              *spec))
    kinds = {"M": "modified", "T": "modified", "A": "added", "D": "deleted"}
    dirty: dict[str, set[str]] = {}
    for status, rel in zip(changed[::2], changed[1::2]):
        if packaged(rel):
            dirty.setdefault(kinds.get(status[0], "modified"), set()).add(rel)
    if untracked:
        dirty["untracked"] = untracked
    files = {f for f in tracked | untracked if (repo / f).is_file()}
    return Sources(tuple(sorted(files)), commit.strip(), True,
                   {kind: sorted(paths) for kind, paths in sorted(dirty.items())})


def refuse_dirty(src: Sources) -> None:
    """One line naming the packaged files that are untracked or differ from HEAD."""
    if not src.dirty:
        return
    shown: list[str] = []
    count = 0
    for kind, paths in src.dirty.items():
        room = max(0, 8 - count)  # name at most eight files: the line stays one line
        count += len(paths)
        if paths[:room]:
            shown.append(f"{kind} {', '.join(paths[:room])}")
    more = count - min(count, 8)
    listed = "; ".join(shown)
    raise BuildError(
        f"{count} packaged file(s) untracked or not as in HEAD {(src.commit or '')[:12]}: "
        f"{listed}{f' and {more} more' if more else ''} (fix: commit or remove them, or pass "
        "--allow-dirty to ship the tree as it is, listed in build_info.json)")


def require_files(src: Sources) -> None:
    missing = [rel for rel in REQUIRED if rel not in src.files]
    if missing:
        raise BuildError(f"{missing[0]} is missing from the checkout (fix: restore it; every "
                         "zip carries it)")


@dataclass(frozen=True)
class Validator:
    """Blender's extension validator: ``command`` + the zip's path."""
    command: tuple[str, ...]
    via: str                          # where it was found
    blender_version: str | None       # the Blender it comes with

    def info(self) -> dict[str, object]:
        return {"via": self.via, "blender_version": self.blender_version}

    def check(self, archive: Path, shown_as: Path) -> None:
        """Raise ``BuildError`` (one line naming ``shown_as``, the field and the fix) unless
        the validator accepts ``archive``."""
        try:
            proc = subprocess.run([*self.command, str(archive)], capture_output=True,
                                  text=True, check=False, timeout=600)
        except (OSError, subprocess.SubprocessError) as exc:
            raise BuildError(f"the extension validator ({self.via}) did "
                             f"not run: {exc} (fix: pass --validator PATH)") from exc
        output = proc.stdout + proc.stderr
        if proc.returncode == 0 and "FATAL_ERROR" not in output:
            return
        raise BuildError(f"{shown_as}: {validator_error(output)}")


def validator_error(output: str) -> str:
    """The validator's first complaint as 'field: what (fix: where)'."""
    errors = [ln.removeprefix("FATAL_ERROR:").strip() for ln in output.splitlines()
              if ln.startswith("FATAL_ERROR")]
    detail = [e for e in errors if not e.startswith("Error parsing TOML in")] or errors or [
        ln.strip() for ln in output.splitlines() if ln.strip()][-1:] or ["no output"]
    more = f" (+{len(detail) - 1} more)" if len(detail) > 1 else ""
    msg = detail[0]
    field, why = None, msg
    if m := re.match(r'key "([^"]+)" invalid: (?:value of "([^"]+)": )?(.*)', msg):
        field, why = m[1] + (f".{m[2]}" if m[2] else ""), m[3]
    elif m := re.match(r'missing "([^"]+)"', msg):
        field, why = m[1], "missing"
    elif m := re.match(r'"([^"]+)" must be', msg):
        field = m[1]
    if field is None:
        return (f"Blender's extension validator rejects it: {msg}{more} (fix: see "
                "blender_addon/blender_manifest.toml and blender_addon/build.py)")
    where = ("blender_addon/build.py, which writes it" if field.split(".")[0]
             in ("platforms", "wheels") else "blender_addon/blender_manifest.toml")
    return (f"blender_manifest.toml {field}: {why}{more} (fix: change {field} in {where}; "
            "Blender's extension validator rejects the zip)")


def _install_version(script: Path) -> tuple[Path | None, str | None]:
    """(the ``<X.Y>`` folder, the Blender version) of a ``.../<X.Y>/scripts/.../blender_ext.py``:
    the bpy wheel's own version when the folder is inside a bpy package, else X.Y."""
    if not script.as_posix().endswith(VALIDATOR_SCRIPT):
        return None, None
    root = script.parents[len(Path(VALIDATOR_SCRIPT).parts) - 1]
    if not re.fullmatch(r"\d+\.\d+", root.name):
        return root, None
    if root.parent.name == "bpy":
        dists = sorted(root.parent.parent.glob("bpy-*.dist-info"))
        if dists:
            return root, dists[-1].name.removeprefix("bpy-").removesuffix(".dist-info")
    return root, root.name


def script_validator(script: Path, via: str) -> Validator:
    """The standalone ``blender_ext.py``, run with this Python (it needs only the stdlib of
    3.11+), with Blender's tag list when it sits next to it as in every install."""
    root, found = _install_version(script)
    command = [sys.executable, "-I", str(script), "validate"]
    if root is not None and (root / VALIDATOR_TAGS).is_file():
        command += ["--valid-tags", str(root / VALIDATOR_TAGS)]
    return Validator(tuple(command), via, found)


def blender_version(binary: str) -> tuple[tuple[int, ...], str] | None:
    try:
        proc = subprocess.run([binary, "--version"], capture_output=True, text=True,
                              check=False, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"^Blender (\d+)\.(\d+)(?:\.(\d+))?", proc.stdout, re.MULTILINE)
    if m is None:
        return None
    numbers = tuple(int(g) for g in m.groups() if g is not None)
    return numbers, ".".join(map(str, numbers))


def binary_validator(binary: str, via: str) -> Validator | str:
    """``blender --command extension validate`` of a Blender 4.2+, or why not."""
    version = blender_version(binary)
    if version is None:
        return f"{binary} ({via}) does not say its version to --version"
    if version[0][:2] < VALIDATOR_MIN_BLENDER:
        return f"{binary} ({via}) is Blender {version[1]}, older than 4.2"
    return Validator((binary, "--factory-startup", "--command", "extension", "validate"), via,
                     version[1])


def bpy_validator() -> Validator | None:
    """The validator the ``bpy`` module of this Python ships (found without importing it)."""
    spec = importlib.util.find_spec("bpy")
    if spec is None or not spec.origin:
        return None
    scripts = [s for s in Path(spec.origin).parent.glob(f"*/{VALIDATOR_SCRIPT}")
               if _install_version(s)[1]]
    if not scripts:
        return None
    script = max(scripts, key=lambda s: tuple(map(int, s.parents[4].name.split("."))))
    return script_validator(script, "the bpy module")


def find_validator(explicit: str | None = None) -> Validator:
    """``explicit`` (``--validator``) or ``$ISLAND_REFINER_EXT_VALIDATOR``: a ``blender_ext.py``
    or a Blender 4.2+ binary; else the ``bpy`` module's; else ``blender`` 4.2+ on PATH."""
    chosen, via = explicit, "--validator"
    if not chosen:
        chosen, via = os.environ.get(VALIDATOR_ENV) or None, f"${VALIDATOR_ENV}"
    if chosen:
        path = Path(chosen).expanduser()
        if not path.is_file():
            raise BuildError(f"{via} {chosen}: no such file (fix: give Blender 4.2+'s "
                             f"<X.Y>/{VALIDATOR_SCRIPT} or a Blender 4.2+ binary)")
        if path.suffix == ".py":
            return script_validator(path.resolve(), via)
        found = binary_validator(str(path), via)
        if isinstance(found, str):
            raise BuildError(f"{found} (fix: give Blender 4.2+'s binary or its "
                             f"<X.Y>/{VALIDATOR_SCRIPT})")
        return found
    bpy_found = bpy_validator()
    if bpy_found is not None:
        return bpy_found
    notes = ""
    on_path = shutil.which("blender")
    if on_path:
        found = binary_validator(on_path, "blender on PATH")
        if isinstance(found, Validator):
            return found
        notes = f" ({found})"
    raise BuildError(
        f"no extension validator found{notes} (fix: pass --validator PATH or set "
        f"${VALIDATOR_ENV} to Blender 4.2+'s <X.Y>/{VALIDATOR_SCRIPT} or binary, install the "
        "bpy module into this Python, or put Blender 4.2+ on PATH as blender; --no-validate "
        "builds without, build_info.json then says validated: false)")


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


def _add(zf: zipfile.ZipFile, name: str, data: bytes, stored: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
    info.external_attr = 0o644 << 16
    info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


def build_platform(platform: Platform, out_dir: Path, cache: Path,
                   pythons: tuple[str, ...] = PYTHONS, src: Sources | None = None,
                   validator: Validator | None = None) -> Path:
    """One zip, written under a temporary name, checked by ``validator`` (when given) and
    only then moved to its path."""
    src = src or sources()
    package = manifest_field("id")
    # a pure (py3-none-any) wheel serves every Python: listed and stored once
    wheels = sorted({w.name: w for py in pythons
                     for w in download_wheels(platform, py, cache)}.values(),
                    key=lambda p: p.name)
    out = out_dir / f"{package}-{manifest_field('version')}-{platform.suffix}.zip"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.stem}.{os.getpid()}.tmp.zip")
    build_info = {"platform": platform.blender, "pythons": list(pythons), **src.info(),
                  "validated": validator is not None,
                  "validator": validator.info() if validator else None,
                  "wheels": sorted(w.name for w in wheels)}
    try:
        with zipfile.ZipFile(tmp, "w") as zf:
            for rel in src.addon():
                _add(zf, f"{package}/{Path(rel).name}", (REPO / rel).read_bytes())
            _add(zf, f"{package}/blender_manifest.toml",
                 manifest(platform, wheels).encode("utf-8"))
            for rel in src.lib():
                _add(zf, f"{package}/lib/{rel}", (REPO / rel).read_bytes())
            _add(zf, f"{package}/lib/build_info.json",
                 (json.dumps(build_info, indent=2) + "\n").encode("utf-8"))
            for wheel in sorted(wheels, key=lambda p: p.name):
                _add(zf, f"{package}/wheels/{wheel.name}", wheel.read_bytes(), stored=True)
        if validator is not None:
            validator.check(tmp, out)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def _build(out_dir: Path, names: list[str], pythons: tuple[str, ...], cache: str | Path | None,
           src: Sources, validator: Validator | None) -> list[Path]:
    unknown = [n for n in names if n not in PLATFORMS]
    if unknown:
        raise BuildError(f"unknown platform {unknown[0]!r} (one of {', '.join(PLATFORMS)})")
    require_files(src)
    cache_dir = Path(cache) if cache else cache_root() / "addon-wheels"
    return [build_platform(PLATFORMS[n], out_dir, cache_dir, pythons, src, validator)
            for n in names]


def build(out_dir: str | Path, platforms: list[str] | None = None,
          pythons: tuple[str, ...] = PYTHONS, cache: str | Path | None = None, *,
          validator: str | None = None, validate: bool = True,
          allow_dirty: bool = False) -> list[Path]:
    """Build one zip per platform (default: every one of ``PLATFORMS``); returns their
    paths. Refuses a dirty tree unless ``allow_dirty``; validates each zip unless not
    ``validate`` (``validator``: see ``find_validator``)."""
    src = sources()
    if not allow_dirty:
        refuse_dirty(src)
    checker = find_validator(validator) if validate else None
    return _build(Path(out_dir), platforms or list(PLATFORMS), tuple(pythons), cache, src,
                  checker)


def inputs_digest(pythons: tuple[str, ...] = PYTHONS, src: Sources | None = None,
                  validator: Validator | None = None) -> str:
    """sha256 over everything a zip is made of except the (cached, immutable) wheels: the
    add-on and library files and what git says of them, the manifest, this script, the
    Pythons asked for, the validator."""
    src = src or sources()
    h = hashlib.sha256(json.dumps([list(pythons), sorted(WHEELS.values()), src.info(),
                                   validator.info() if validator else None]).encode())
    files = [(rel, REPO / rel) for rel in src.files] + [("build.py", Path(__file__).resolve())]
    for rel, path in files:
        h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def cached_build(platforms: list[str] | None = None, pythons: tuple[str, ...] = PYTHONS,
                 root: str | Path | None = None, *, allow_dirty: bool = True) -> list[Path]:
    """``build`` into ``<cache>/addon-zips/<inputs_digest>/`` unless those zips are there
    already (a rerun with unchanged sources costs nothing); older digests beyond the
    ``ZIP_CACHE_KEEP`` most recent are removed. The zips are validated as ``build``'s are;
    the tree is taken as it is by default (the tests run in checkouts with work in
    progress): their ``build_info.json`` then says ``"dirty": true``."""
    names = platforms or list(PLATFORMS)
    src = sources()
    if not allow_dirty:
        refuse_dirty(src)
    validator = find_validator()
    base = Path(root) if root else cache_root() / "addon-zips"
    out = base / inputs_digest(pythons, src, validator)
    package, version = manifest_field("id"), manifest_field("version")

    def path(name: str) -> Path:
        return out / f"{package}-{version}-{PLATFORMS[name].suffix}.zip"

    missing = [n for n in names if n not in PLATFORMS or not path(n).is_file()]
    if missing:
        _build(out, missing, tuple(pythons), None, src, validator)  # unknown names raise there
    zips = [path(n) for n in names]
    out.touch()
    others = sorted((d for d in base.iterdir() if d.is_dir() and d != out),
                    key=lambda d: d.stat().st_mtime, reverse=True)
    for stale in others[ZIP_CACHE_KEEP - 1:]:
        shutil.rmtree(stale, ignore_errors=True)
    return zips


def main(argv: list[str] | None = None) -> int:
    built = ", ".join(PLATFORMS)
    p = argparse.ArgumentParser(
        prog="blender_addon/build.py", description=__doc__.splitlines()[0],
        epilog=f"Platforms built: {built} (Windows: docs/ADDON.md 'Windows and macOS'). "
               "Exit codes: 0 built, 1 build error, 2 bad arguments.")
    p.add_argument("--out", default=str(REPO / "build" / "addon"))
    p.add_argument("--platform", action="append", choices=list(PLATFORMS),
                   help=f"repeatable; default: every platform built ({built})")
    p.add_argument("--python", action="append", help="default: 3.11 and 3.13")
    p.add_argument("--wheel-cache", default=None,
                   help="default: ~/.cache/island-refiner/addon-wheels")
    check = p.add_mutually_exclusive_group()
    check.add_argument("--validator", metavar="PATH",
                       help=f"Blender 4.2+'s <X.Y>/{VALIDATOR_SCRIPT} (run with this Python) "
                            f"or a Blender 4.2+ binary; default: ${VALIDATOR_ENV}, else the "
                            "bpy module of this Python, else blender 4.2+ on PATH")
    check.add_argument("--no-validate", action="store_true",
                       help="build without Blender's validator (build_info.json: "
                            '"validated": false)')
    p.add_argument("--allow-dirty", action="store_true",
                   help="ship packaged files that are untracked or differ from HEAD "
                        '(build_info.json: "dirty": true and their list)')
    args = p.parse_args(argv)
    try:
        zips = build(args.out, args.platform, tuple(args.python or PYTHONS), args.wheel_cache,
                     validator=args.validator, validate=not args.no_validate,
                     allow_dirty=args.allow_dirty)
    except BuildError as exc:
        print(f"build.py: error: {exc}", file=sys.stderr)
        return 1
    for path in zips:
        print(f"{path}  {path.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
