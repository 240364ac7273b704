"""Add-on preferences: how to reach the project, and a mirror of ``DIRECTORYS.yaml``.

``DIRECTORYS.yaml`` stays the source of truth: every operation reads the file (in-process
or through the CLIs' ``--config``), never these fields. The mirrored fields are an editor
for it: *Load* fills them from the file, *Save* validates them as CLI flags are validated
and writes them back, keeping the file's comments.
"""
from pathlib import Path

import bpy
from bpy.props import EnumProperty, FloatProperty, IntProperty, StringProperty

from . import runner

PACKAGE = __package__
ADDON_DIR = Path(__file__).resolve().parent


class Defaults:
    """Preference values when the add-on was registered without an add-on entry (scripts)."""

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


def repo_path(context=None) -> Path | None:
    value = get(context).repo_dir
    if value:
        return Path(bpy.path.abspath(value)).resolve()
    return runner.find_repo(ADDON_DIR)


def runner_config(context=None) -> runner.RunnerConfig:
    """Everything the runner needs; a UsageError when the project cannot be found."""
    p = get(context)
    repo = repo_path(context)
    if repo is None or not (repo / "island_tools").is_dir():
        raise LookupError("the island-refiner repository is not set or has no island_tools/: "
                          "set it in the add-on preferences")
    config = Path(bpy.path.abspath(p.config_path)) if p.config_path else repo / "DIRECTORYS.yaml"
    python = bpy.path.abspath(p.python_path) if p.python_path else runner.default_python(repo)
    return runner.RunnerConfig(
        repo=repo, python=python, config_path=config, execution=p.execution,
        timeout_s=float(p.timeout_s), blender_binary=bpy.app.binary_path or "",
        blender_version=".".join(str(v) for v in bpy.app.version))


class ISLAND_AP_preferences(bpy.types.AddonPreferences):
    bl_idname = PACKAGE

    repo_dir: StringProperty(
        name="Repository", subtype="DIR_PATH",
        description="The island-refiner checkout (island_tools/, worker/, scripts/). "
                    "Empty: the checkout this add-on is loaded from")
    python_path: StringProperty(
        name="Python", subtype="FILE_PATH",
        description="Python with the project's packages, for work Blender's own Python "
                    "cannot do. Empty: <repository>/.venv/bin/python, else this Python")
    config_path: StringProperty(
        name="DIRECTORYS.yaml", subtype="FILE_PATH",
        description="Configuration file. Empty: <repository>/DIRECTORYS.yaml")
    execution: EnumProperty(
        name="Execution",
        items=(("AUTO", "Auto", ("In this Python when the project's packages import here, "
                                "else through the external Python")),
               ("IN_PROCESS", "In Blender", "Always in this Python"),
               ("SUBPROCESS", "External Python", "Always through the external Python's CLIs")),
        default="AUTO")
    timeout_s: FloatProperty(name="Timeout (s)", default=600.0, min=1.0,
                             description="Per external process")
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
        col = layout.column()
        col.prop(self, "repo_dir")
        col.prop(self, "python_path")
        col.prop(self, "execution")
        col.prop(self, "timeout_s")
        box = layout.box()
        box.label(text="DIRECTORYS.yaml (the file is the source of truth)")
        box.prop(self, "config_path")
        for key in ("blender_bin", "engine", "resolution", "samples"):
            box.prop(self, key)
        row = box.row()
        row.operator("island.load_settings", icon="FILE_REFRESH")
        row.operator("island.save_settings", icon="FILE_TICK")


CLASSES = (ISLAND_AP_preferences,)
