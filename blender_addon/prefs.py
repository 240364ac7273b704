"""Add-on preferences: an optional external Python, and a mirror of ``DIRECTORYS.yaml``.

The extension runs on its own: the library is bundled (``lib/``), its packages are the
extension's wheels, worker jobs run in children of this Blender. Nothing is asked for unless
the artist ticks *External Python* (Blender 3.4 - 4.1, which cannot install wheels, or a
checkout to develop against): then *Python* and, optionally, *Repository* appear.

``DIRECTORYS.yaml`` stays the source of truth: every operation reads the file (in-process
or through the CLIs' ``--config``), never these fields. The mirrored fields are an editor
for it: *Load* fills them from the file, *Save* validates them as CLI flags are validated
and writes them back, keeping the file's comments. Without a chosen file the add-on reads
the user's copy (``<Blender config>/island_refiner/DIRECTORYS.yaml``, written by *Save*),
else the bundled defaults.
"""
import os
from pathlib import Path

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, IntProperty, StringProperty

from . import runner

PACKAGE = __package__
ADDON_DIR = Path(__file__).resolve().parent
CONFIG_NAME = "DIRECTORYS.yaml"


class Defaults:
    """Preference values when the add-on was registered without an add-on entry (scripts)."""

    use_external = False
    repo_dir = ""
    python_path = ""
    config_path = ""
    execution = "AUTO"
    timeout_s = 600.0


def get(context=None):
    context = context or bpy.context
    addon = context.preferences.addons.get(PACKAGE)
    return addon.preferences if addon is not None and addon.preferences is not None \
        else Defaults()


def _abs(value: str) -> Path:
    return Path(bpy.path.abspath(value)).expanduser().resolve()


def user_config_path() -> Path:
    """The artist's own DIRECTORYS.yaml (outside the extension, which updates replace)."""
    return Path(bpy.utils.user_resource("CONFIG", path="island_refiner")) / CONFIG_NAME


def library_dir(context=None) -> Path:
    """island_tools/ + worker/ + scripts/: the opted-in repository, the bundled lib/, or the
    checkout this add-on is loaded from."""
    p = get(context)
    if p.use_external and p.repo_dir:
        repo = _abs(p.repo_dir)
        if not (repo / "island_tools").is_dir():
            raise LookupError(f"Repository '{repo.name}' has no island_tools/: pick the "
                              "island-refiner checkout, or clear Repository")
        return repo
    lib = runner.bundled_lib(ADDON_DIR) or runner.find_repo(ADDON_DIR)
    if lib is None:
        raise LookupError("this add-on has no lib/ folder: install the zip built by "
                          "'python blender_addon/build.py'")
    return lib


def config_path(context=None, lib: Path | None = None) -> Path:
    p = get(context)
    if p.config_path:
        return _abs(p.config_path)
    user = user_config_path()
    if user.is_file():
        return user
    lib = lib or library_dir(context)
    return lib / CONFIG_NAME if (lib / CONFIG_NAME).is_file() else user


def runner_config(context=None) -> runner.RunnerConfig:
    """Everything the runner needs; a LookupError (one line for the artist) otherwise."""
    p = get(context)
    lib = library_dir(context)
    python = None
    if p.use_external:
        # never resolve symlinks here: a venv's python is a link to the base interpreter
        python = os.path.abspath(os.path.expanduser(bpy.path.abspath(p.python_path))) \
            if p.python_path else runner.venv_python(
            _abs(p.repo_dir) if p.repo_dir else runner.find_repo(ADDON_DIR))
        if python is None:
            raise LookupError("External Python is ticked but Python is empty: set it in the "
                              "add-on preferences (a Python 3 with python-fcl, Pillow, PyYAML)")
    return runner.RunnerConfig(
        lib=lib, python=python, config_path=config_path(context, lib),
        execution=p.execution, timeout_s=float(p.timeout_s),
        blender_binary=bpy.app.binary_path or "",
        blender_version=".".join(str(v) for v in bpy.app.version))


class ISLAND_AP_preferences(bpy.types.AddonPreferences):
    bl_idname = PACKAGE

    use_external: BoolProperty(
        name="External Python",
        description="Run the library's work in another Python (Blender 3.4 - 4.1, which do "
                    "not install the bundled wheels, or a checkout under development)")
    repo_dir: StringProperty(
        name="Repository", subtype="DIR_PATH",
        description="Optional: an island-refiner checkout whose island_tools/worker/scripts "
                    "replace the bundled ones")
    python_path: StringProperty(
        name="Python", subtype="FILE_PATH",
        description="A Python 3 with python-fcl, Pillow and PyYAML. "
                    "Empty: <Repository>/.venv/bin/python")
    config_path: StringProperty(
        name="DIRECTORYS.yaml", subtype="FILE_PATH",
        description="Configuration file. Empty: your copy in Blender's config folder "
                    "(written by Save), else the bundled defaults")
    execution: EnumProperty(
        name="Execution",
        items=(("AUTO", "Auto", "Scripts and background runs in this Blender when the "
                                "packages import here; a window's long operators in a child"),
               ("IN_PROCESS", "In Blender", "Scripts and background runs always in this Python"),
               ("SUBPROCESS", "Child process", "Always through the CLIs in a child Python")),
        default="AUTO")
    timeout_s: FloatProperty(name="Timeout (s)", default=600.0, min=1.0,
                             description="Per child process")
    blender_bin: StringProperty(
        name="blender_bin", subtype="FILE_PATH",
        description="DIRECTORYS.yaml blender_bin: a Blender binary for the worker; "
                    "empty = this Blender's own binary (or the bpy module)")
    engine: EnumProperty(name="engine", items=(("workbench", "Workbench", ""),
                                               ("cycles", "Cycles", "")), default="workbench")
    resolution: IntProperty(name="resolution", default=512, min=16, max=8192)
    samples: IntProperty(name="samples", default=-1, min=-1, max=65536,
                         description="-1 = the engine's default (Workbench AA 5, Cycles 16)")

    def draw(self, context):
        layout = self.layout
        missing = runner.missing_modules()
        if missing and not self.use_external:
            box = layout.box()
            box.label(text=f"This Blender lacks {', '.join(missing)}.", icon="ERROR")
            box.label(text="Blender 4.2+ installs them from the extension's wheels;")
            box.label(text="here, tick External Python and give a Python 3 that has them.")
        col = layout.column()
        col.prop(self, "use_external")
        if self.use_external:
            col.prop(self, "python_path")
            col.prop(self, "repo_dir")
        col.prop(self, "timeout_s")
        col.prop(self, "execution")
        box = layout.box()
        box.label(text="DIRECTORYS.yaml (the file is the source of truth)")
        box.prop(self, "config_path")
        for key in ("blender_bin", "engine", "resolution", "samples"):
            box.prop(self, key)
        row = box.row()
        row.operator("island.load_settings", icon="FILE_REFRESH")
        row.operator("island.save_settings", icon="FILE_TICK")


CLASSES = (ISLAND_AP_preferences,)
