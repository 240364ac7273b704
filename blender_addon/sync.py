"""Keep the panel true to the files on disk: a 1 s timer, and after undo / redo / file load.

The group list (status, latest iteration) is re-read from the scene folder; what the artist
set (selection, the iteration field, the target spec fields) is left alone. Undo restores
Blender's data (the loaded island, images), never files: after an undo the panel says so and
names each group's latest iteration on disk.
"""
import bpy
from bpy.app.handlers import persistent

from . import ops

INTERVAL_S = 1.0


def sync_all() -> bool:
    changed = False
    for st in ops.all_states():
        if st.scene_dir and st.scene_dir_problem() is None:
            try:
                changed |= ops.sync_groups(st)
            except OSError:
                continue
    if changed:
        ops.tag_redraw()
    return changed


def _tick():
    sync_all()
    return INTERVAL_S


def undo_message(st) -> str | None:
    latest = [f"{g.name} iter_{g.latest_iter}" for g in st.groups if g.latest_iter >= 0]
    if not latest:
        return None
    return ("Undo changed Blender's data only (the loaded island, images); the files on disk "
            f"did not change. Latest on disk: {', '.join(latest)}.")


@persistent
def _after_undo(*_args) -> None:
    sync_all()
    for st in ops.all_states():
        text = undo_message(st)
        if text and not st.running:
            st.last_message, st.last_level, st.last_exit_code = text, "WARNING", 0
    ops.tag_redraw()


@persistent
def _after_load(*_args) -> None:
    sync_all()


HANDLERS = (("undo_post", _after_undo), ("redo_post", _after_undo), ("load_post", _after_load))


def register() -> None:
    for name, fn in HANDLERS:
        getattr(bpy.app.handlers, name).append(fn)
    if not bpy.app.timers.is_registered(_tick):
        bpy.app.timers.register(_tick, first_interval=INTERVAL_S, persistent=True)


def unregister() -> None:
    for name, fn in HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        if fn in handlers:
            handlers.remove(fn)
    if bpy.app.timers.is_registered(_tick):
        bpy.app.timers.unregister(_tick)
