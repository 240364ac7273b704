"""Runs INSIDE a Blender window (``blender scene.blend --python driver.py -- args.json``,
under Xvfb): installs the add-on zip, opens the Island tab with a real mouse click
(xdotool), drives the operators the way the panel's buttons do (``INVOKE_DEFAULT`` in the
sidebar's context, Esc as a real key press), takes screenshots, and writes what it saw to
``args["log"]``: the test judges the files on disk and this log with its own code.

Not a test module (no ``test_`` prefix): ``tests/gui/test_gui_blender34.py`` starts it.
"""
import json
import math
import os
import subprocess
import sys
import time
import traceback

import addon_utils
import bpy

ARGS = json.loads(open(sys.argv[sys.argv.index("--") + 1], encoding="utf-8").read())
MODULE = "island_refiner"
LOG = {"timings_s": {}, "messages": {}, "shots": {}, "checks": {}, "progress": {},
       "redraws": {}, "errors": []}
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


def shot(name: str) -> None:
    path = os.path.join(ARGS["shots"], f"{name}.png")
    with ctx("WINDOW"):
        bpy.ops.screen.screenshot(filepath=path)
    r = region("UI")
    LOG["shots"][name] = {"path": path, "ui": [r.x, r.y, r.width, r.height],
                          "window": [win().width, win().height]}


def xdotool(*args: str) -> None:
    subprocess.run(["xdotool", *args], check=True, timeout=10)


def to_x11(x: float, y: float) -> tuple[int, int]:
    """Blender window coordinates (origin bottom-left) -> X11 screen (origin top-left)."""
    return int(win().x + x), int(win().y + win().height - y)


def rest_mouse() -> None:
    """Park the pointer over an empty part of the viewport: no tooltip in a screenshot."""
    r = region("WINDOW")
    xdotool("mousemove", *map(str, to_x11(r.x + 40, r.y + 40)))


def group_dir(gid: str) -> str:
    return os.path.join(ARGS["scene_dir"], "relation_groups", gid)


T_INVOKE = [0.0]
LINES: list = []   # every progress line the add-on's children printed (runner.Process.poll)


def invoke(name: str, **props):
    """Press a button: the operator in the sidebar's context, as the panel invokes it."""
    T_INVOKE[0] = time.perf_counter()
    with ctx("UI"):
        return getattr(bpy.ops.island, name)("INVOKE_DEFAULT", **props)


def press_esc_during(op: str, progress_word: str, label: str):
    """Invoke ``op``, press a real Escape into the window once the panel shows the progress
    line with ``progress_word``, and wait for the operator to end; logs the timings."""
    t0 = time.perf_counter()
    invoke(op)
    while st().running and progress_word not in st().progress_line \
            and time.perf_counter() - t0 < 60:
        yield 0.05
    rest_mouse()
    LOG.setdefault("esc_sent", []).append(round(time.perf_counter() - T_INVOKE[0], 3))
    LOG.setdefault("esc_line", []).append(st().progress_line)
    # a fast operator can end before its progress word shows: then the key reaches nothing
    LOG.setdefault("esc_running", []).append(bool(st().running))
    t_key = time.perf_counter()
    xdotool("key", "Escape")
    while st().running:
        yield 0.05
    LOG["timings_s"][f"{label} stopped by Esc"] = round(time.perf_counter() - t0, 3)
    LOG["timings_s"][f"Esc key to message ({label})"] = round(time.perf_counter() - t_key, 3)


def run_modal(label: str, name: str, shoot_running: str | None = None, **props):
    """Invoke a long operator and wait until it ends, recording progress and redraws."""
    t0 = time.perf_counter()
    draws0 = DRAWS[0]
    LINES[:] = []
    result = invoke(name, **props)
    LOG["checks"][f"{label}: invoke"] = sorted(result)
    seen = []
    shot_taken = False
    while st().running:
        line = st().progress_line
        if line and (not seen or seen[-1][0] != line):
            seen.append((line, DRAWS[0]))
            if shoot_running and not shot_taken and line != "starting…":
                yield 0.3
                shot(shoot_running)
                shot_taken = True
        yield 0.05
    LOG["timings_s"][label] = round(time.perf_counter() - t0, 3)
    LOG["progress"][label] = [s[0] for s in seen]
    LOG.setdefault("child_lines", {})[label] = list(LINES)
    LOG["redraws"][label] = {"panel_draws": DRAWS[0] - draws0,
                             "draws_at_lines": [s[1] - draws0 for s in seen]}
    yield 0.5  # the result's redraw
    LOG["messages"][label] = [st().last_level, st().last_message]


def open_island_tab():
    """Click down the sidebar's tab column until the Island panel draws (3.4 has no API)."""
    space = area3d().spaces.active
    space.show_region_ui = True
    yield 0.5
    r = region("UI")
    for dy in range(10, int(r.height), 18):
        before = DRAWS[0]
        x, y = to_x11(r.x + r.width - 8, r.y + r.height - dy)
        xdotool("mousemove", str(x), str(y), "click", "1")
        yield 0.4
        if DRAWS[0] > before:
            LOG["checks"]["tab_click_dy"] = dy
            rest_mouse()
            return
    raise RuntimeError("the Island tab was not found in the sidebar")


class Recorder:
    """A stand-in for ``UILayout`` that records every text a panel draws and the width its
    button gets (columns: the full width; rows: shared equally; splits: by factor), so each
    text can be measured with Blender's own UI font against the real sidebar width."""

    def __init__(self, width: float, out: list, kind: str = "column") -> None:
        self.width, self.out, self.kind, self.items = width, out, kind, []
        self.use_property_split = False

    def _child(self, kind: str, factor: float | None = None):
        child = Recorder(self.width, self.out, kind)
        child.factor = factor
        self.items.append(child)
        return child

    def column(self, **_k):
        return self._child("column")

    def row(self, **_k):
        return self._child("row")

    def box(self):
        return self._child("box")

    def split(self, factor=0.5, **_k):
        return self._child("split", factor)

    def _text(self, text, icon, label=False):
        # BLANK1 draws nothing but takes an icon's room, like any icon
        self.items.append(("text", text or "", icon not in (None, "NONE"), label))

    def label(self, text="", icon="NONE", **_k):
        self._text(text, icon, label=True)

    def operator(self, idname, text=None, icon="NONE", **_k):
        if text is None:
            group, name = idname.split(".")
            text = getattr(getattr(bpy.ops, group), name).get_rna_type().name
        self._text(text, icon)
        return type("Props", (), {})()

    def prop(self, data, key, text=None, **_k):
        if text is None:
            text = data.bl_rna.properties[key].name
        self._text(text, "NONE")

    def template_list(self, *a, **k):
        pass

    def template_icon(self, *a, **k):
        pass

    def separator(self, *a, **k):
        pass

    def layout_widths(self, width: float) -> None:
        n = len(self.items)
        for i, item in enumerate(self.items):
            if self.kind == "row":
                w = width / max(n, 1)
            elif self.kind == "split":
                w = width * self.factor if i == 0 else width * (1 - self.factor) / max(n - 1, 1)
            elif self.kind == "box":
                w = width - 12
            else:
                w = width
            if isinstance(item, Recorder):
                item.layout_widths(w)
            else:
                self.out.append((item[1], item[2], w, item[3]))


# What a text needs beyond itself (3.4, pixels at UI scale 1): an icon column, the button's
# text padding, and for a label the clip margin below which Blender cuts it with "…".
ICON_PX, PAD_PX, CLIP_PX = 20, 16, 4
# Calibration, seen in this window at the default sidebar (229 px): the geometry message's
# line "m, no penetrations, pattern" (after an icon column) was drawn cut ("patt…"), and
# "10.0°, clearance off 0.029" (same place) whole. The measure must agree with both.
SEEN_CUT, SEEN_WHOLE = "m, no penetrations, pattern", "10.0°, clearance off 0.029"


def _need_px(text: str, icon: bool, scale: float, label: bool = True) -> float:
    import blf

    extra = (ICON_PX if icon else 0) + PAD_PX + (CLIP_PX if label else 0)
    return blf.dimensions(0, text)[0] + extra * scale


def labels_that_do_not_fit(texts: list | None = None) -> list:
    """Every text of every Island panel that is wider than the button it gets; with
    ``texts`` (level, message) pairs, the main panel is drawn once with each as the last
    message (and each progress line in the running box) too."""
    import blf
    from island_refiner import panel

    r = region("UI")
    scale = bpy.context.preferences.system.ui_scale
    blf.size(0, panel.FONT_SIZE, int(72 * scale))
    # the region minus its category tabs (26 px) and the panel's margins (2 x 10 px)
    room = r.width - 46 * scale
    bad = []

    def draw(cls) -> None:
        out: list = []
        root = Recorder(r.width, out)
        attrs = {k: v for k, v in vars(cls).items() if not k.startswith("__")}
        fake = type("Fake", (), {**attrs, "layout": root})()
        cls.draw(fake, bpy.context)
        root.layout_widths(room)
        for text, icon, width, label in out:
            need = _need_px(text, icon, scale, label)
            if text and need > width and [cls.__name__, text] not in [b[:2] for b in bad]:
                bad.append([cls.__name__, text, round(need), round(width)])

    s_ = st()
    saved = (s_.last_message, s_.last_level, s_.running, s_.progress_line)
    with ctx("UI"):
        for cls in (panel.ISLAND_PT_main, panel.ISLAND_PT_build, panel.ISLAND_PT_target_spec,
                    panel.ISLAND_PT_iterations, panel.ISLAND_PT_merge):
            draw(cls)
        try:
            for level, text in texts or ():
                s_.running, s_.last_message, s_.last_level = "", text, level
                draw(panel.ISLAND_PT_main)
            for label, lines in (LOG["progress"].items() if texts else ()):
                for line in lines:
                    s_.running, s_.progress_line = f"{label}: dining", line
                    draw(panel.ISLAND_PT_main)
        finally:
            s_.last_message, s_.last_level, s_.running, s_.progress_line = saved
    # the measure can fail: it must call the line seen cut too wide and the one seen whole
    # not, and the old panel's "[Render Views] [Member Geometry]" row (both with icons)
    # does not fit this sidebar
    LOG["checks"]["calibration"] = {"room_px": round(room, 1), "scale": scale,
                                    "seen_cut_needs_px": round(_need_px(SEEN_CUT, True, scale), 1),
                                    "seen_whole_needs_px": round(_need_px(SEEN_WHOLE, True, scale),
                                                                 1)}
    need = max(blf.dimensions(0, t)[0] for t in ("Render Views", "Member Geometry"))
    LOG["checks"]["old_label_px"] = [round(need + 36 * scale), round(room / 2)]
    return bad


def prefs_texts(prefs) -> list:
    """The texts the add-on preferences draw (what they ask the artist for)."""
    out: list = []
    root = Recorder(600, out)

    class Proxy:
        layout = root

        def __getattr__(self, name):
            return getattr(prefs, name)

    type(prefs).draw(Proxy(), bpy.context)
    root.layout_widths(600)
    return [item[0] for item in out]


def refiner_listing(gid: str) -> dict:
    ref = os.path.join(group_dir(gid), "simple_refiner")
    it1 = os.path.join(ref, "iter_1")
    return {"entries": sorted(os.listdir(ref)),
            "iter_1": sorted(os.listdir(it1)) if os.path.isdir(it1) else None,
            "group": sorted(os.listdir(group_dir(gid)))}


def matrices(scene_name: str) -> dict:
    scene = bpy.data.scenes[scene_name]
    scene.view_layers[0].update()
    return {o.get("island_member", o.name): [list(r) for r in o.matrix_world]
            for o in scene.objects if "island_member" in o}


def sequence():
    yield 1.0
    bpy.ops.preferences.addon_install(filepath=ARGS["zip"])
    addon_utils.enable(MODULE, default_set=True)
    prefs = bpy.context.preferences.addons[MODULE].preferences
    LOG["checks"]["prefs_default"] = prefs_texts(prefs)
    prefs.use_external, prefs.python_path = True, ARGS["python"]
    LOG["checks"]["prefs_external"] = prefs_texts(prefs)
    prefs.config_path = ARGS["config"]
    from island_refiner import panel

    original = panel.ISLAND_PT_main.draw

    def counted(self, context):
        DRAWS[0] += 1
        original(self, context)

    panel.ISLAND_PT_main.draw = counted
    from island_refiner import ops as addon_ops

    stop = addon_ops._LongOperator._stop

    def recorded_stop(self, context):
        """When Esc reached the operator, and whether its child had ended by then."""
        LOG.setdefault("esc_seen", []).append(
            {"t": round(time.perf_counter() - T_INVOKE[0], 3), "child": self._proc.name,
             "child_exit": self._proc.popen.poll(), "queued": len(self._queue)})
        return stop(self, context)

    addon_ops._LongOperator._stop = recorded_stop
    from island_refiner import runner as addon_runner

    poll = addon_runner.Process.poll

    def recorded_poll(self, wait_s=0.0):
        lines = poll(self, wait_s)
        LINES.extend(lines)
        return lines

    addon_runner.Process.poll = recorded_poll
    yield from open_island_tab()
    LOG["checks"]["sidebar_width_px"] = region("UI").width
    artist_scene = win().scene.name

    # a Scene folder with no place (relative): the panel says so, Build asks for a folder
    st().scene_dir = "islands"
    yield 0.5
    LOG["checks"]["scene_dir_problem"] = st().scene_dir_problem()
    shot("addon_1_scene")
    wm = bpy.context.window_manager
    LOG["checks"]["build: invoke"] = sorted(invoke("rebuild_island", source="RELATION_GRAPH"))
    yield 1.0
    browsers = [(w, a) for w in wm.windows for a in w.screen.areas if a.type == "FILE_BROWSER"]
    LOG["checks"]["folder_browser"] = [[w == win(), a.spaces.active.params.use_filter_folder]
                                       for w, a in browsers]
    w, area = browsers[0]
    params = area.spaces.active.params
    try:
        params.directory = ARGS["scene_dir"].encode()
    except TypeError:
        params.directory = ARGS["scene_dir"]
    yield 0.3
    t0 = time.perf_counter()
    with bpy.context.temp_override(window=w, screen=w.screen, area=area,
                                   region=next(r for r in area.regions if r.type == "WINDOW")):
        bpy.ops.file.execute()  # the browser hands the folder to Build as an event
    while not st().groups and time.perf_counter() - t0 < 60:
        yield 0.02
    LOG["timings_s"]["build islands (relation graph)"] = round(time.perf_counter() - t0, 3)
    yield 0.5
    LOG["checks"]["scene_dir_after_browser"] = bpy.path.abspath(st().scene_dir)
    LOG["checks"]["windows_after_browser"] = len(wm.windows)
    LOG["messages"]["build"] = [st().last_level, st().last_message]
    LOG["checks"]["groups"] = [[g.name, g.status] for g in st().groups]
    st().group_index = [g.name for g in st().groups].index("dining")
    yield 0.5
    shot("addon_2_built")

    yield from run_modal("init iter_0", "init_iter0", shoot_running="addon_3_running")
    LOG["checks"]["scene_after_init"] = win().scene.name
    shot("addon_4_iter0")

    # Esc while the solver step's iter_step child applies, saves and renders (a real key
    # press into the window, once the panel shows that progress line)
    yield from press_esc_during("solver_step", "applying", "solver step")
    LOG["checks"]["after_esc"] = refiner_listing("dining")
    yield 0.5
    LOG["messages"]["esc"] = [st().last_level, st().last_message]
    shot("addon_5_esc")

    yield from run_modal("solver step", "solver_step", shoot_running="addon_5b_step_running")
    island = bpy.data.scenes["Island dining"]
    chair = next(o for o in island.objects if o.get("island_member") == "dining.chair_3")
    chair.location.x += 0.05
    chair.rotation_euler.z += math.radians(10.0)
    yield 0.2
    yield from run_modal("step from viewport", "step_from_viewport")
    # the artist's iteration: iter_2, or iter_3 when the Esc above came too late
    ref = os.path.join(group_dir("dining"), "simple_refiner")
    last = max(int(n[5:]) for n in os.listdir(ref) if n.startswith("iter_")
               and os.path.isfile(os.path.join(ref, n, "current_state.json")))
    LOG["checks"]["viewport_iter"] = last
    LOG["checks"]["island_after_steps"] = matrices("Island dining")
    LOG["checks"]["loaded_iter"] = sorted({o.get("island_iter") for o in island.objects
                                           if "island_member" in o})
    # Esc during Render (modal like the steps): stopped before the renders were swapped in,
    # or said to be too late; the disk is read right after
    yield from press_esc_during("render", "rendering", "render")
    renders = os.path.join(group_dir("dining"), "renders")
    out = os.path.join(renders, f"iter_{last}")
    LOG["checks"]["after_render_esc"] = {
        "renders": sorted(os.listdir(renders)) if os.path.isdir(renders) else None,
        "iter": sorted(os.listdir(out)) if os.path.isdir(out) else None}
    yield 0.3
    LOG["messages"]["render esc"] = [st().last_level, st().last_message]
    yield from run_modal("render", "render")
    images = [i for i in bpy.data.images if i.name.startswith("Island dining")]
    LOG["checks"]["images"] = {i.name: [bpy.path.abspath(i.filepath), i.get("island_label"),
                                        bool(i.preview and i.preview.icon_id)] for i in images}
    shot("addon_6_render")
    windows = len(bpy.context.window_manager.windows)
    invoke("view_render", view="bev")
    yield 0.8
    new = list(bpy.context.window_manager.windows)[windows:]
    LOG["checks"]["view_window"] = [
        [a.type, getattr(a.spaces.active, "image", None) and a.spaces.active.image.name]
        for w in new for a in w.screen.areas if a.type == "IMAGE_EDITOR"]
    for w in new:
        with bpy.context.temp_override(window=w, screen=w.screen):
            bpy.ops.wm.window_close()
    yield 0.5
    yield from run_modal("geometry", "member_geometry")
    LOG["checks"]["members_table"] = len(st().members)
    LOG["checks"]["labels_too_wide"] = labels_that_do_not_fit()
    shot("addon_7_geometry")

    # back in the artist's own scene: its panel must not be stale, Merge names the iteration
    win().scene = bpy.data.scenes[artist_scene]
    yield 0.5
    LOG["checks"]["artist_panel_iteration"] = st().iteration
    t0 = time.perf_counter()
    with ctx("UI"):
        bpy.ops.island.merge_back("EXEC_DEFAULT", scope="SELECTED")
    LOG["timings_s"]["merge back"] = round(time.perf_counter() - t0, 3)
    LOG["messages"]["merge"] = [st().last_level, st().last_message]
    LOG["checks"]["merged"] = {o.name: [list(r) for r in o.matrix_world]
                               for o in win().scene.objects if o.name.startswith("dining.")}
    yield 0.5
    shot("addon_8_merge")

    with ctx("WINDOW"):
        bpy.ops.ed.undo()
    yield 1.5
    LOG["messages"]["undo"] = [st().last_level, st().last_message]
    shot("addon_9_undo")
    LOG["checks"]["labels_too_wide_all_messages"] = labels_that_do_not_fit(
        list(LOG["messages"].values()))

    with ctx("UI"):
        bpy.ops.island.remove_islands("EXEC_DEFAULT", scope="ALL")
    LOG["checks"]["scenes_after_remove"] = sorted(s.name for s in bpy.data.scenes)
    LOG["checks"]["images_after_remove"] = sorted(i.name for i in bpy.data.images)
    LOG["messages"]["remove"] = [st().last_level, st().last_message]


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
