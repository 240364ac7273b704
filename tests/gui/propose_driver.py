"""Runs INSIDE a Blender window (``blender room.blend --python propose_driver.py -- args.json``,
under Xvfb): the artist's newest path on a plain file. Installs the add-on zip, opens the
Island tab with a real mouse click (xdotool), then presses the panel's buttons the way the
panel invokes them (``INVOKE_DEFAULT`` in the sidebar's context): Find Groups, every
proposal accepted (its checkbox's property), Build From Proposals, Init iter_0 and two
Solver Steps (Refine), Merge Back from the artist's scene (Apply), and saves the file.

Screenshots: the window with the proposals (lines drawn) and the same view with the
drawing switched off, after Build and after Merge. With each, the 2D points where the
proposal lines' ends project in the viewport. ``args["log"]`` gets what it saw; the test
(``test_gui_propose.py``) judges the screenshots, the files and the saved .blend.

Not a test module; the helpers follow ``driver.py`` (which runs the 5-group session).
"""
import json
import os
import subprocess
import sys
import time
import traceback

import addon_utils
import bpy

ARGS = json.loads(open(sys.argv[sys.argv.index("--") + 1], encoding="utf-8").read())
MODULE = "island_refiner"
LOG = {"timings_s": {}, "messages": {}, "shots": {}, "checks": {}, "errors": []}
DRAWS = [0]


def win():
    return bpy.context.window_manager.windows[0]


def area3d():
    return next(a for a in win().screen.areas if a.type == "VIEW_3D")


def region(kind: str):
    return next(r for r in area3d().regions if r.type == kind)


def ctx(kind: str = "UI"):
    w = win()
    return bpy.context.temp_override(window=w, screen=w.screen, area=area3d(),
                                     region=region(kind), scene=w.scene)


def st():
    return win().scene.island_refiner


def rect(r) -> list:
    return [r.x, r.y, r.width, r.height]


def shot(name: str, **extra) -> None:
    path = os.path.join(ARGS["shots"], f"{name}.png")
    with ctx("WINDOW"):
        bpy.ops.screen.screenshot(filepath=path)
    LOG["shots"][name] = {"path": path, "ui": rect(region("UI")),
                          "view": rect(region("WINDOW")),
                          "window": [win().width, win().height], **extra}


def xdotool(*args: str) -> None:
    subprocess.run(["xdotool", *args], check=True, timeout=10)


def to_x11(x: float, y: float) -> tuple:
    """Blender window coordinates (origin bottom-left) -> X11 screen (origin top-left)."""
    return int(win().x + x), int(win().y + win().height - y)


def rest_mouse() -> None:
    """Park the pointer over the viewport's corner: no tooltip in a screenshot."""
    r = region("WINDOW")
    xdotool("mousemove", *map(str, to_x11(r.x + 20, r.y + 20)))


def invoke(name: str, **props):
    """Press a button: the operator in the sidebar's context, as the panel invokes it."""
    with ctx("UI"):
        return getattr(bpy.ops.island, name)("INVOKE_DEFAULT", **props)


def timed(label: str, name: str, **props):
    """A short operator (it ends inside invoke); its time and the panel's message."""
    t0 = time.perf_counter()
    result = invoke(name, **props)
    LOG["timings_s"][label] = round(time.perf_counter() - t0, 3)
    LOG["checks"][f"{label}: result"] = sorted(result)
    yield 0.5
    LOG["messages"][label] = [st().last_level, st().last_message]


def run_modal(label: str, name: str, **props):
    """A long operator (modal, a child process): wait until it ends."""
    t0 = time.perf_counter()
    LOG["checks"][f"{label}: invoke"] = sorted(invoke(name, **props))
    while st().running:
        yield 0.1
    LOG["timings_s"][label] = round(time.perf_counter() - t0, 3)
    yield 0.5
    LOG["messages"][label] = [st().last_level, st().last_message]


def open_island_tab():
    """Click down the sidebar's tab column until the Island panel draws (3.4 has no API)."""
    area3d().spaces.active.show_region_ui = True
    yield 0.5
    r = region("UI")
    for dy in range(10, int(r.height), 18):
        before = DRAWS[0]
        xdotool("mousemove", *map(str, to_x11(r.x + r.width - 8, r.y + r.height - dy)),
                "click", "1")
        yield 0.4
        if DRAWS[0] > before:
            rest_mouse()
            return
    raise RuntimeError("the Island tab was not found in the sidebar")


def top_view():
    """Look straight down at the furniture (the proposal lines run in plan), framed on the
    objects of ``ARGS["frame"]`` (selected for the framing only)."""
    scene = win().scene
    for o in scene.objects:
        o.select_set(o.name in ARGS["frame"])
    with ctx("WINDOW"):
        bpy.ops.view3d.view_axis(type="TOP")
        bpy.ops.view3d.view_selected()
    for o in scene.objects:
        o.select_set(False)
    yield 0.8


def projected_segments() -> list:
    """Each proposal line's ends in viewport pixels (region origin bottom-left), from the
    add-on's own segment data and this view's projection."""
    from bpy_extras.view3d_utils import location_3d_to_region_2d
    from island_refiner import draw

    r = region("WINDOW")
    rv3d = area3d().spaces.active.region_3d
    out = []
    for s in draw.proposal_segments(st()):
        a = location_3d_to_region_2d(r, rv3d, s["start"])
        b = location_3d_to_region_2d(r, rv3d, s["end"])
        if a is not None and b is not None:
            out.append({"anchor": s["anchor"], "member": s["member"],
                        "a": [a.x, a.y], "b": [b.x, b.y], "color": list(s["color"])})
    return out


def projected_labels() -> list:
    """Each proposal label's anchor point in viewport pixels and its text."""
    from bpy_extras.view3d_utils import location_3d_to_region_2d
    from island_refiner import draw

    r = region("WINDOW")
    rv3d = area3d().spaces.active.region_3d
    out = []
    for at, text, _colour in draw.proposal_labels(st()):
        xy = location_3d_to_region_2d(r, rv3d, at)
        if xy is not None:
            out.append({"at": [xy.x, xy.y], "text": text})
    return out


def world(scene) -> dict:
    return {o.name: [list(row) for row in o.matrix_world] for o in scene.objects}


def sequence():
    yield 1.0
    bpy.ops.preferences.addon_install(filepath=ARGS["zip"])
    addon_utils.enable(MODULE, default_set=True)
    prefs = bpy.context.preferences.addons[MODULE].preferences
    # 3.4 installs no wheels: the library's packages come from the external Python
    prefs.use_external, prefs.python_path = True, ARGS["python"]
    prefs.config_path = ARGS["config"]
    from island_refiner import panel

    original = panel.ISLAND_PT_main.draw

    def counted(self, context):
        DRAWS[0] += 1
        original(self, context)

    panel.ISLAND_PT_main.draw = counted
    # the sidebar beside the viewport, not over it: framing then keeps the room in sight
    bpy.context.preferences.system.use_region_overlap = False
    yield from open_island_tab()
    artist = win().scene
    LOG["checks"]["before"] = world(artist)
    st().scene_dir = ARGS["scene_dir"]
    yield from top_view()

    yield from timed("find groups", "find_groups")
    LOG["checks"]["proposals"] = [
        {"id": p.name, "anchor": p.anchor, "status": p.status, "accepted": p.accepted,
         "members": sorted(m.name for m in p.members)} for p in st().proposals]
    rest_mouse()
    yield 1.0
    shot("propose_1_found", segments=projected_segments(), labels=projected_labels())
    st().show_proposals = False
    yield 1.0
    shot("propose_1_found_no_lines")
    st().show_proposals = True
    for p in st().proposals:     # the artist ticks every proposal (uncertain ones too)
        p.accepted = True
    yield 0.5
    shot("propose_2_accepted", segments=projected_segments())

    yield from timed("build from proposals", "rebuild_island", source="PROPOSALS")
    LOG["checks"]["groups"] = [[g.name, g.status] for g in st().groups]
    anchor_of = {p["id"]: p["anchor"] for p in LOG["checks"]["proposals"]}
    gid = next(g.name for g in st().groups if anchor_of.get(g.name) == ARGS["table"])
    LOG["checks"]["group"] = gid
    st().group_index = [g.name for g in st().groups].index(gid)
    yield 0.5
    shot("propose_3_built")

    yield from run_modal("init iter_0", "init_iter0")
    yield from run_modal("solver step 1", "solver_step")
    yield from run_modal("solver step 2", "solver_step")
    LOG["checks"]["scene_after_refine"] = win().scene.name
    yield from top_view()
    shot("propose_4_refined")

    # Apply: back in the artist's scene, Merge Back the loaded iteration
    win().scene = artist
    yield 0.5
    t0 = time.perf_counter()
    with ctx("UI"):
        bpy.ops.island.merge_back("EXEC_DEFAULT", scope="SELECTED")
    LOG["timings_s"]["merge back"] = round(time.perf_counter() - t0, 3)
    yield 0.5
    LOG["messages"]["merge back"] = [st().last_level, st().last_message]
    yield from top_view()
    shot("propose_5_applied", segments=projected_segments())
    with ctx("WINDOW"):
        bpy.ops.wm.save_as_mainfile(filepath=ARGS["merged"])
    LOG["checks"]["saved"] = bpy.data.filepath


_GEN = sequence()


def _tick():
    try:
        return float(next(_GEN))
    except StopIteration:
        pass
    except Exception:  # noqa: BLE001 - the log carries it to the test
        LOG["errors"].append(traceback.format_exc())
    with open(ARGS["log"], "w", encoding="utf-8") as fh:
        json.dump(LOG, fh, indent=1)
    bpy.ops.wm.quit_blender()
    return None


bpy.app.timers.register(_tick, first_interval=1.0)
