"""Operators: each maps its inputs onto one call of ``tasks`` / ``worker`` (runner.py says
where that call runs). Failures are ``self.report({'ERROR'}, one line for people)`` +
``{'CANCELLED'}`` (the CLI's exit code in ``last_exit_code``, the full line on the console).

Long operators (init, the three steps, render, geometry) run synchronously from scripts and
in background mode; invoked in a window they run modal: the CLI in a child Python, polled by
a 0.1 s timer, the panel redrawn on every progress line, **Esc** stops the child and then
reads the disk - the iteration was written (said so, and loaded) or it was not (and what
the operator had written for it, a solver's or an artist's ``transforms.json``, is removed).
"""
import json
import os
import re
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import bpy
from bpy.props import BoolProperty, EnumProperty, IntProperty, StringProperty

from . import prefs, tasks
from .runner import Runner

ISLAND_SCENE_PREFIX = "Island "
IMAGE_VIEWS = ("persp", "bev")
_RUNNING: set[str] = set()   # group folders a modal operator is working on


# --------------------------------------------------------------------------- helpers
def state(context):
    return context.scene.island_refiner


def all_states():
    return [s.island_refiner for s in bpy.data.scenes
            if getattr(s, "island_refiner", None) is not None]


def make_runner(context) -> Runner:
    return Runner(prefs.runner_config(context))


def group_path(context) -> Path | None:
    group = state(context).active_group()
    return Path(group.path) if group is not None and group.path else None


def _has_group(context) -> bool:
    return getattr(context.scene, "island_refiner", None) is not None \
        and group_path(context) is not None


def _idle_group(context) -> bool:
    return _has_group(context) and str(group_path(context)) not in _RUNNING


def tag_redraw() -> None:
    """Redraw the 3D views' sidebars (progress and results show without a mouse move) and
    the Image Editors; not the viewports themselves, whose redraw (software GL under Xvfb
    most of all) would hold up the window's events - Esc among them - for nothing."""
    wm = getattr(bpy.context, "window_manager", None)
    for window in (wm.windows if wm is not None else ()):
        for area in window.screen.areas:
            if area.type == "VIEW_3D":
                for region in area.regions:
                    if region.type == "UI":
                        region.tag_redraw()
            elif area.type == "IMAGE_EDITOR":
                area.tag_redraw()


_EXIT = re.compile(r"\s*\(exit \d+\)")
_TAG = re.compile(r"^\[[\w .-]+\]\s*")
_ABS = re.compile(r"(?<![\w.~])/(?:[^\s'\",:()/]+/)*([^\s'\",:()/]+/[^\s'\",:()/]+)")


def people(text: str, st=None) -> str:
    """Panel text: no CLI exit codes, paths relative to the scene folder, other absolute
    paths cut to their last two parts."""
    text = _TAG.sub("", _EXIT.sub("", str(text)).strip())
    root = st.scene_path() if st is not None else None
    if root is not None:
        for prefix in (root / "relation_groups", root):
            text = text.replace(str(prefix) + os.sep, "").replace(str(prefix), ".")
    text = _ABS.sub(lambda m: "…/" + m.group(1) if m.group(0) != "/" + m.group(1)
                    else m.group(0), text)
    return " ".join(text.split())


def wrap(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, max(width, 12), break_long_words=True,
                         break_on_hyphens=False) or [""]


def set_message(st, text: str, level: str = "INFO", code: int = 0) -> str:
    st.last_message, st.last_level, st.last_exit_code = people(text, st), level, code
    tag_redraw()
    return st.last_message


def refresh_groups(st, select: str | None = None) -> None:
    """Rescan ``st.scene_dir`` into ``st.groups`` (``st`` is a scene's ``island_refiner``)."""
    previous = select or (st.active_group().name if st.active_group() else None)
    root = st.scene_path()
    st.groups.clear()
    for info in tasks.list_groups(root) if root else []:
        item = st.groups.add()
        item.name, item.path, item.status = info["id"], info["path"], info["status"]
        item.latest_iter = info["latest_iter"]
    names = [g.name for g in st.groups]
    index = names.index(previous) if previous in names else 0
    if st.group_index != index:
        st.group_index = index  # the update callback shows the group
    else:
        show_group(st)


def sync_groups(st) -> bool:
    """The group list as the files on disk say, without touching what the artist set
    (selection, iteration field, target spec fields). True when something changed."""
    root = st.scene_path()
    infos = tasks.list_groups(root) if root else []
    if [g.name for g in st.groups] != [i["id"] for i in infos]:
        refresh_groups(st)
        return True
    changed = False
    for item, info in zip(st.groups, infos):
        if (item.status, item.latest_iter) != (info["status"], info["latest_iter"]):
            item.status, item.latest_iter = info["status"], info["latest_iter"]
            changed = True
    group = st.active_group()
    if group is not None and st.iteration > max(group.latest_iter, 0):
        st.iteration = max(group.latest_iter, 0)
        changed = True
    return changed


def show_group(st) -> None:
    """The selected group's target spec into the fields, the browser on its latest iteration."""
    group = st.active_group()
    st.members.clear()
    st.members_iter = -1
    st.review_verdict, st.review_line, st.review_iter = "", "", -1
    if group is None:
        return
    root = Path(group.path)
    meta = tasks.read_json(root / "metadata.json")
    count = len(meta.get("members", [])) - 1 if isinstance(meta, dict) else 1
    st.target_spec.fill(tasks.read_target_spec(root), max(count, 1),
                        str(root / "target_spec.json"))
    st.iteration = max(group.latest_iter, 0)


def follow_iteration(root: Path, n: int) -> None:
    """Every scene's panel that shows group ``root`` moves to iteration ``n`` (the panel of
    the artist's own scene must not keep a stale iteration)."""
    for st in all_states():
        sync_groups(st)
        group = st.active_group()
        if group is not None and Path(group.path) == root:
            st.iteration = n


def island_scene_name(root: Path) -> str:
    return f"{ISLAND_SCENE_PREFIX}{root.name}"


def loaded_iteration(root: Path) -> int | None:
    """The iteration of ``root`` loaded in its island scene, or None."""
    from worker import addon_ops

    scene = bpy.data.scenes.get(island_scene_name(root))
    iters = {o.get(addon_ops.PROP_ITER) for o in (scene.objects if scene else ())
             if o.get(addon_ops.PROP_GROUP) == str(root) and addon_ops.PROP_MEMBER in o}
    return iters.pop() if len(iters) == 1 else None


def merge_choice(root: Path) -> tuple[int, str]:
    """Which iteration Merge Back places: the one loaded in the island scene (the artist
    looks at it), else the latest complete one."""
    done = tasks.completed_iters(root)
    if not done:
        from island_tools.errors import UsageError
        raise UsageError(f"{root.name} has no complete iteration", fix="run Init iter_0 first")
    loaded = loaded_iteration(root)
    if loaded is not None and loaded in done:
        why = "loaded" if loaded == done[-1] else f"loaded; latest is iter_{done[-1]}"
        return loaded, why
    return done[-1], "latest complete"


def group_images(gid: str) -> list:
    return [bpy.data.images[n] for n in (f"{ISLAND_SCENE_PREFIX}{gid} {v}" for v in IMAGE_VIEWS)
            if n in bpy.data.images]


def show_renders(context, gid: str, renders: dict, label: str) -> list:
    """One image pair per group (``Island <G> persp`` / ``bev``), re-pointed at ``renders``;
    shown in the panel (previews) and in any open Image Editor."""
    images = []
    for view in IMAGE_VIEWS:
        path = renders.get(view)
        if not path:
            continue
        name = f"{ISLAND_SCENE_PREFIX}{gid} {view}"
        image = bpy.data.images.get(name)
        if image is None:
            image = bpy.data.images.load(path, check_existing=False)
            image.name = name
        else:
            image.filepath = path
            image.reload()
        image["island_label"] = label
        if not bpy.app.background:
            try:
                image.preview_ensure()
                image.preview.reload()
            except (AttributeError, RuntimeError):
                pass
        images.append(image)
    bev = [i for i in images if i.name.endswith("bev")]
    if bev:
        show_image(context, bev[0])
    tag_redraw()
    return images


def show_image(context, image) -> bool:
    wm = getattr(context, "window_manager", None)
    for window in (wm.windows if wm is not None else ()):
        for area in window.screen.areas:
            if area.type == "IMAGE_EDITOR":
                area.spaces.active.image = image
                return True
    return False


def _remove_orphans(before: set) -> None:
    """Objects a load appended that nothing uses (the island's fixed context, which is not
    linked into the island scene), with their meshes: they would pile up as .001 copies."""
    for obj in [o for o in bpy.data.objects if o.name not in before and o.users == 0]:
        data = obj.data
        bpy.data.objects.remove(obj)
        if isinstance(data, bpy.types.Mesh) and data.users == 0:
            bpy.data.meshes.remove(data)


def load_into_scene(context, root: Path, n: int) -> str:
    """The iteration browser: ``iter_N`` into the scene ``Island <G>`` (one per group,
    reused) + its renders into the group's image pair."""
    from worker import addon_ops

    view = tasks.iteration_view(root, n)
    before = {o.name for o in bpy.data.objects}
    result = addon_ops.load_iteration(view["blend"], view["members"], island_scene_name(root),
                                      str(root), n, view["forward_local"],
                                      view["footprint_local"])
    _remove_orphans(before)
    show_renders(context, root.name, view["renders"], f"iter_{n} renders")
    window = getattr(context, "window", None)
    if window is not None and not bpy.app.background:
        source = state(context)
        island_scene = bpy.data.scenes[result["scene"]]
        if island_scene != window.scene:
            target = island_scene.island_refiner
            if target.scene_dir != source.scene_dir:
                target.scene_dir = source.scene_dir
            window.scene = island_scene
            refresh_groups(target, select=root.name)
            frame_views(window, island_scene)
    follow_iteration(root, n)
    return result["scene"]


def frame_views(window, scene) -> None:
    """Frame the island in the window's 3D views when the window switches to it (the
    island sits at the origin, small in a view framed on the artist's room)."""
    for area in window.screen.areas:
        if area.type != "VIEW_3D":
            continue
        region = next((r for r in area.regions if r.type == "WINDOW"), None)
        try:
            with bpy.context.temp_override(window=window, area=area, region=region,
                                           scene=scene):
                bpy.ops.view3d.view_all(center=False)
        except (AttributeError, RuntimeError, TypeError):
            pass  # best effort: Blender < 3.2 has no temp_override


def remove_island_scenes(context, roots: list[Path] | None = None) -> list[str]:
    """Remove the island scenes (all, or those of ``roots``), the objects loaded into them,
    their meshes and materials left without users, and the groups' image pairs."""
    from worker import addon_ops

    names = {island_scene_name(r) for r in roots} if roots is not None else None
    scenes = [s for s in bpy.data.scenes if s.name.startswith(ISLAND_SCENE_PREFIX)
              and (names is None or s.name in names)]
    keep = [s for s in bpy.data.scenes if s not in scenes]
    if not keep:
        return []
    window = getattr(context, "window", None)
    wm = getattr(context, "window_manager", None)
    for win in (wm.windows if wm is not None else ([window] if window else [])):
        if win.scene in scenes:
            win.scene = keep[0]
    removed = []
    for scene in scenes:
        gid = scene.name[len(ISLAND_SCENE_PREFIX):]
        objs = [o for o in scene.objects if addon_ops.PROP_GROUP in o]
        datas = {o.data for o in objs if o.data is not None}
        mats = {m for d in datas for m in getattr(d, "materials", []) if m is not None}
        for obj in objs:
            bpy.data.objects.remove(obj)
        for data in datas:
            if isinstance(data, bpy.types.Mesh) and data.users == 0:
                bpy.data.meshes.remove(data)
        for mat in mats:
            if mat.users == 0:
                bpy.data.materials.remove(mat)
        for image in group_images(gid):
            bpy.data.images.remove(image)
        removed.append(scene.name)
        bpy.data.scenes.remove(scene)
    return removed


def summary(geometry: dict) -> str:
    g = geometry.get("group", {})
    parts = []
    if g.get("facing_error_max_deg") is not None:
        parts.append(f"facing max {g['facing_error_max_deg']:.1f}°")
    if g.get("clearance_error_max_m") is not None:
        parts.append(f"clearance off {g['clearance_error_max_m']:.3f} m")
    pens = g.get("penetration_pairs", 0)
    parts.append(f"{pens} penetration(s)" if pens else "no penetrations")
    match = (g.get("pattern") or {}).get("match")
    if match is not None:
        parts.append("pattern matches" if match else "pattern does NOT match")
    return ", ".join(parts)


def review_line(context, root: Path, n: int) -> tuple[str, str]:
    """(verdict, sentence) of iteration ``n``: the one review (``tasks.review_summary`` =
    ``island_tools.review.review_island``, the scene pipeline's verdict). In this process
    when the library's packages import here, else through ``tasks.py review`` in the child
    Python the runner uses; ("", reason) when neither can say."""
    from .runner import missing_modules

    try:
        if not missing_modules():
            doc = tasks.review_summary(root, n)
        else:
            out = make_runner(context).tasks_cli(["review", "--group-dir", str(root),
                                                  "--iter", str(n)])
            doc = json.loads(out.strip().splitlines()[-1])
        return str(doc["verdict"]), str(doc["line"])
    except Exception as exc:  # noqa: BLE001 - the panel never raises; it says why
        reason = getattr(exc, "reason", None) or f"{type(exc).__name__}: {exc}"
        return "", f"Review: not available ({people(str(reason))})"


def show_review(st, context, root: Path, n: int) -> str:
    """Put iteration ``n``'s verdict line in the panel (above the member list)."""
    verdict, line = review_line(context, root, n)
    st.review_verdict, st.review_line, st.review_iter = verdict, line, n
    return line


def fill_members(st, geometry: dict) -> list[str]:
    st.members.clear()
    st.members_iter = int(geometry.get("iter", -1))
    lines = []
    for name, m in sorted(geometry.get("members", {}).items()):
        row = st.members.add()
        row.name, row.edge = name, str(m.get("edge") or "")
        facing = m.get("facing_error_deg")
        row.has_facing = facing is not None
        row.facing_error_deg = float(facing or 0.0)
        row.clearance_m = float(m.get("clearance_m") or 0.0)
        inside = sorted(m.get("obstacle_penetrations") or {})
        row.penetrations = len(m.get("penetrations") or {}) + len(inside)
        facing_text = f"{facing:.1f}°" if facing is not None else (m.get("facing_note") or "n/a")
        lines.append(f"{name}: facing {facing_text}, clearance {row.clearance_m:.3f} m"
                     + (f", {row.penetrations} penetration(s)" if row.penetrations else "")
                     + (f" (inside {', '.join(inside)})" if inside else ""))
    return lines


# --------------------------------------------------------------------------- bases
class _IslandOperator:
    bl_options = {"REGISTER"}

    def execute(self, context):
        try:
            return self.run(context) or {"FINISHED"}
        except Exception as exc:  # noqa: BLE001 - every failure is a report, never a raise
            return self.fail(context, exc)

    def fail(self, context, exc: BaseException):
        code = int(getattr(exc, "exit_code", 0) or 0)
        if hasattr(exc, "one_line"):
            full = exc.one_line()
        elif isinstance(exc, LookupError):
            full = str(exc.args[0] if exc.args else exc)
        else:
            traceback.print_exc()
            full = " ".join(f"internal error: {type(exc).__name__}: {exc}".split())
            code = code or 1
        print(f"[island] error{f' (exit {code})' if code else ''}: {full}")
        st = getattr(context.scene, "island_refiner", None)
        text = set_message(st, full, "ERROR", code) if st is not None else people(full)
        self.report({"ERROR"}, text)
        return {"CANCELLED"}

    def done(self, context, message: str, level: str = "INFO") -> None:
        """Report, and show the message in the panel of every scene of this scene folder
        (the artist's scene and the island scenes alike)."""
        st = state(context)
        text = set_message(st, message, level)
        for other in all_states():
            if other != st and other.scene_dir == st.scene_dir:
                other.last_message, other.last_level, other.last_exit_code = text, level, 0
        self.report({level}, text)


@dataclass
class Plan:
    """What a long operator runs: ``in_process(tick)`` here, or the ``argv`` lists one after
    another in a child Python; ``marker`` is the file whose new version means the work was
    written; ``created`` the inputs this operator wrote for it (removed if it was not);
    then ``finish(context)`` shows the result."""

    label: str
    root: Path
    steps: int
    in_process: object
    argv: list
    finish: object
    marker: Path
    created: list = field(default_factory=list)
    before: list | None = None

    def __post_init__(self) -> None:
        self.before = tasks.file_mark(self.marker)


def _settle(plan: Plan) -> dict:
    try:
        return tasks.settle(plan.root, plan.marker, plan.before, [str(p) for p in plan.created])
    except Exception as exc:  # noqa: BLE001 - reported, the group is left as it is
        return {"done": tasks.file_mark(plan.marker) not in (None, plan.before),
                "removed": [], "error": getattr(exc, "reason", str(exc))}


def _step_plan(op, runner: Runner, root: Path, n: int, created=(), before=None,
               before_argv=None) -> Plan:
    """Step iteration n (after an optional decision step): the library call in-process, or
    iter_step.py in a child; then refresh the browser on iteration n."""

    def in_process(tick):
        if before is not None:
            before(tick)
        tasks.iter_step(str(root), n, runner.settings(), runner.worker_job, tick)

    argv = [runner.script_argv("iter_step.py", ["--group-dir", str(root), "--iter", str(n)])]
    return Plan(f"{root.name} iter_{n}", root, 2 + (before is not None), in_process,
                ([before_argv] if before_argv else []) + argv,
                lambda ctx: _after_iteration(op, ctx, root, n),
                root / tasks.REFINER_DIR / f"iter_{n}" / "current_state.json", list(created))


class _LongOperator(_IslandOperator):
    @classmethod
    def poll(cls, context):
        return _idle_group(context)

    def plan(self, context, runner: Runner) -> Plan:
        raise NotImplementedError

    def run(self, context):
        runner = make_runner(context)
        if not runner.in_process:
            runner.require_library()
        plan = self.plan(context, runner)
        wm = context.window_manager
        wm.progress_begin(0, max(plan.steps, 1))
        count = [0]

        def tick(message: str) -> None:
            count[0] += 1
            wm.progress_update(min(count[0], plan.steps))
            print(f"[island] {message}")

        try:
            if runner.in_process:
                plan.in_process(tick)
            else:
                for argv in plan.argv:
                    runner.start(argv).wait(tick)
        except BaseException:
            _settle(plan)
            raise
        finally:
            wm.progress_end()
        plan.finish(context)
        return {"FINISHED"}

    def invoke(self, context, event):
        if bpy.app.background or context.window is None:
            return self.execute(context)
        try:
            runner = make_runner(context)
            runner.require_library()
            self._plan = self.plan(context, runner)
            self._runner, self._queue, self._count = runner, list(self._plan.argv), 0
            self._proc = runner.start(self._queue.pop(0))
        except Exception as exc:  # noqa: BLE001
            plan = getattr(self, "_plan", None)
            if plan is not None:
                _settle(plan)
            return self.fail(context, exc)
        wm = context.window_manager
        wm.progress_begin(0, max(self._plan.steps, 1))
        self._timer = wm.event_timer_add(0.1, window=context.window)
        wm.modal_handler_add(self)
        _RUNNING.add(str(self._plan.root))
        st = state(context)
        st.running, st.progress_line = f"{self.bl_label}: {self._plan.label}", "starting…"
        set_message(st, f"{self.bl_label} running on {self._plan.label} (Esc stops it)")
        return {"RUNNING_MODAL"}

    def _end_modal(self, context) -> None:
        wm = context.window_manager
        wm.event_timer_remove(self._timer)
        wm.progress_end()
        _RUNNING.discard(str(self._plan.root))
        for st in all_states():
            st.running, st.progress_line = "", ""
        tag_redraw()

    def modal(self, context, event):
        if event.type == "ESC" and event.value == "PRESS":
            return self._stop(context)
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        try:
            lines = self._proc.poll()
            if lines:
                for line in lines:
                    print(f"[island] {line.strip()}")
                self._count += len(lines)
                context.window_manager.progress_update(min(self._count, self._plan.steps))
                state(context).progress_line = people(lines[-1], state(context))
                tag_redraw()
            if not self._proc.done:
                return {"RUNNING_MODAL"}
            self._proc.result()
            if self._queue:
                self._proc = self._runner.start(self._queue.pop(0))
                return {"RUNNING_MODAL"}
        except Exception as exc:  # noqa: BLE001
            self._end_modal(context)
            outcome = _settle(self._plan)
            if outcome.get("removed"):
                print(f"[island] removed {', '.join(outcome['removed'])}")
            return self.fail(context, exc)
        self._end_modal(context)
        try:
            self._plan.finish(context)
        except Exception as exc:  # noqa: BLE001
            return self.fail(context, exc)
        return {"FINISHED"}

    def _stop(self, context):
        """Esc: stop the child, then say what the disk holds (never a half state)."""
        self._proc.stop()
        self._end_modal(context)
        outcome = _settle(self._plan)
        st = state(context)
        refresh_groups(st, select=self._plan.root.name)
        for other in all_states():
            sync_groups(other)
        if outcome["done"] and not self._queue:
            try:
                self._plan.finish(context)
            except Exception as exc:  # noqa: BLE001
                return self.fail(context, exc)
            self.done(context, f"Esc came too late: {self._plan.label} had already been "
                               f"written, and it is kept. {st.last_message}", "WARNING")
            return {"FINISHED"}
        removed = outcome.get("removed") or []
        text = f"Stopped: {self._plan.label} was not written; the group is as it was"
        if removed:
            text += f" (removed {', '.join(Path(r).name for r in removed)})"
        if outcome.get("error"):
            text += f". Clean-up failed: {outcome['error']}"
        self.done(context, text + ".", "WARNING")
        return {"CANCELLED"}


def _after_iteration(op, context, root: Path, n: int) -> None:
    """Shared end of init / the steps: list, browser, optional load, report."""
    st = state(context)
    refresh_groups(st, select=root.name)
    follow_iteration(root, n)
    geometry = tasks.read_json(root / tasks.REFINER_DIR / f"iter_{n}" / "geometry.json") or {}
    if st.auto_load:
        load_into_scene(context, root, n)
    line = review_line(context, root, n)
    for other in all_states():
        group = other.active_group()
        if group is not None and Path(group.path) == root:
            fill_members(other, geometry)
            other.review_verdict, other.review_line, other.review_iter = *line, n
    op.done(context, f"{root.name} iter_{n} written. {line[1]} {summary(geometry)}. Undo "
                     "does not remove it from disk.")


# --------------------------------------------------------------------------- operators
class ISLAND_OT_refresh_groups(_IslandOperator, bpy.types.Operator):
    """Scan the scene folder for relation groups and their status"""

    bl_idname = "island.refresh_groups"
    bl_label = "Refresh Groups"
    bl_options = {"INTERNAL"}

    @classmethod
    def poll(cls, context):
        st = getattr(context.scene, "island_refiner", None)
        return st is not None and bool(st.scene_dir)

    def run(self, context):
        st = state(context)
        problem = st.scene_dir_problem()
        if problem:
            from island_tools.errors import UsageError
            raise UsageError(problem)
        refresh_groups(st)
        self.done(context, f"{len(st.groups)} group(s) in {st.scene_path().name}")


def _ask_for_folder(op, context) -> bool:
    """Open a folder browser when the Scene folder is unusable (e.g. '//islands' in an
    unsaved file, which would land in Blender's working directory)."""
    st = state(context)
    if st.scene_dir_problem() is None or op.directory:
        return False
    if context.window is None or bpy.app.background:
        return False
    context.window_manager.fileselect_add(op)
    return True


class ISLAND_OT_rebuild_island(_IslandOperator, bpy.types.Operator):
    """Write island.blend + metadata.json (and target_spec.json) of a group in its anchor's frame from objects of this file"""  # noqa: E501 (tooltip: one line)

    bl_idname = "island.rebuild_island"
    bl_label = "Build Island"

    source: EnumProperty(
        name="Source",
        items=(("SELECTION", "Selection", ("Active object = anchor, other selected = members; "
                                          "group id from the panel")),
               ("RELATION_GRAPH", "relation_graph.json",
                "Every group of <scene>/inputs/relation_graph.json"),
               ("PROPOSALS", "Proposals",
                "The accepted proposals of Find Groups; they are written as "
                "<scene>/inputs/relation_graph.json (a hand-written one is never replaced)")),
        default="SELECTION")
    directory: StringProperty(name="Scene folder", subtype="DIR_PATH",
                              description="Where relation_groups/ goes")
    filter_folder: BoolProperty(default=True, options={"HIDDEN"})

    @classmethod
    def poll(cls, context):
        return getattr(context.scene, "island_refiner", None) is not None

    def invoke(self, context, event):
        if _ask_for_folder(self, context):
            return {"RUNNING_MODAL"}
        return self.execute(context)

    def run(self, context):
        runner = make_runner(context)  # the library on sys.path, or a clear error
        from island_tools.errors import IslandError, UsageError
        from worker import addon_ops

        st = state(context)
        if self.directory:
            st.scene_dir = bpy.path.abspath(self.directory)
            self.directory = ""
        problem = st.scene_dir_problem()
        if problem:
            raise UsageError(problem, fix="pick a folder in the Scene field")
        scene_dir = st.scene_path()
        graph_doc = None
        if self.source == "SELECTION":
            anchor = context.active_object
            members = [o.name for o in context.selected_objects if o != anchor]
            if anchor is None or not members:
                raise UsageError("select the members and make the anchor the active object",
                                 fix="Shift-click the anchor last")
            gid = st.new_group_id.strip()
            if not tasks.SAFE_GROUP_ID.match(gid) or gid in (".", ".."):
                raise UsageError(f"group id {gid!r} is not a safe folder name",
                                 field="Group id", fix="letters, digits, _ . - only")
            groups = [{"id": gid, "anchor": anchor.name, "members": members,
                       "target_spec": None}]
        elif self.source == "PROPOSALS":
            graph_doc = proposals_graph(st, scene_dir)
            groups = [{"id": g["id"], "anchor": g["anchor"], "members": list(g["members"]),
                       "target_spec": None, "forward_axis": {}, "relation_label": None}
                      for g in graph_doc["groups"]]
        else:
            groups = tasks.relation_graph_groups(scene_dir)
        for g in groups:  # every group checked before any island is written
            try:
                addon_ops.group_objects(g["anchor"], g["members"])
            except IslandError as exc:
                raise type(exc)(f"group '{g['id']}': {exc.reason}", file=exc.file,
                                field=exc.field, fix=exc.fix) from None
        inferred = {}
        if self.source != "SELECTION" and any(g["target_spec"] is None for g in groups):
            inferred = _infer_specs(runner, scene_dir, groups,
                                    graph_doc if self.source == "PROPOSALS" else None)
        if self.source == "PROPOSALS":
            from island_tools.files import atomic

            graph_file = scene_dir / "inputs" / "relation_graph.json"
            graph_file.parent.mkdir(parents=True, exist_ok=True)
            atomic.write_json(graph_file, graph_doc)
        for g in groups:
            root = scene_dir / "relation_groups" / g["id"]
            addon_ops.write_island(root, g["anchor"], g["members"])
            if self.source != "SELECTION":
                tasks.annotate_metadata(root, g)
            spec = g["target_spec"] or (inferred.get(g["id"]) or {}).get("target_spec")
            if spec is not None:
                tasks.write_target_spec(root, spec)
        refresh_groups(st, select=groups[-1]["id"])
        text = f"{len(groups)} island(s) written: {', '.join(g['id'] for g in groups)}"
        if inferred:
            text += (f"; target spec inferred for {len(inferred)} "
                     f"({', '.join(sorted(inferred))}) as the scene pipeline does")
        if self.source == "PROPOSALS":
            text += "; inputs/relation_graph.json written"
        self.done(context, text)


def _infer_specs(runner: Runner, scene_dir: Path, groups: list[dict],
                 graph_doc: dict | None = None) -> dict:
    """Target specs of the groups the graph gives none, by the scene pipeline's inference,
    measured on the units of this file (in this Python, or by ``tasks.py infer-specs``).
    ``graph_doc``: the graph about to be written (the accepted proposals), else the file."""
    import numpy as np

    from island_tools.measure import meshcache
    from worker.blend_io import scene_unit_scale
    from worker.meshes import collect_units

    roots = [n for g in groups for n in [g["anchor"], *g["members"]]]
    meshes, props, _, refused = collect_units(roots)
    if refused:
        from island_tools.errors import GroupInputError, refusal_line
        raise GroupInputError(refusal_line(refused))
    bpy.context.view_layer.update()
    world = {n: [list(r) for r in np.array(bpy.data.objects[n].matrix_world, dtype=float)]
             for n in roots}
    wanted = {g["id"] for g in groups if g["target_spec"] is None}
    if runner.in_process:
        found = tasks.infer_target_specs(scene_dir, world, meshes, props, scene_unit_scale(),
                                         graph_doc)
    else:
        runner.require_library()
        with tempfile.TemporaryDirectory(prefix="island_infer_") as tmp:
            npz, doc = Path(tmp) / "meshes.npz", Path(tmp) / "scene.json"
            meshcache.save(npz, meshes, props)
            import json
            doc.write_text(json.dumps({"world": world, "unit_scale": scene_unit_scale(),
                                       "graph": graph_doc}), encoding="utf-8")
            out = runner.tasks_cli(["infer-specs", "--scene-dir", str(scene_dir),
                                    "--scene-json", str(doc), "--meshes", str(npz)])
            found = json.loads(out.strip().splitlines()[-1])
    return {gid: v for gid, v in found.items() if gid in wanted}


# --------------------------------------------------------------------------- Find Groups
BY_ARTIST = "decided by the artist in the Blender add-on (Find Groups)"
PROPOSAL_MAX_ROUNDS = 4   # measurements a delegated propose asks for (two at most)


def propose_open_file(runner: Runner) -> dict:
    """The proposed relation graph of the open file: ``tasks.propose_open_scene`` (the one
    proposer, ``island-refine propose``'s ``units_of`` + ``propose_units``) on this file's
    objects (``worker.scene.scene_objects``) measured by ``worker.meshes.measured_units``;
    in this Python, or by ``tasks.py propose`` with the measurements it asks for."""
    from worker.blend_io import scene_unit_scale
    from worker.meshes import measured_units
    from worker.scene import scene_objects

    bpy.context.view_layer.update()
    objects, unit_scale = scene_objects(), scene_unit_scale()

    def measure(names):
        meshes, _, _, refusals = measured_units(names)
        return meshes, refusals

    if runner.in_process:
        return tasks.propose_open_scene(objects, unit_scale, measure)
    runner.require_library()
    from island_tools.measure import meshcache

    with tempfile.TemporaryDirectory(prefix="island_propose_") as tmp:
        measured: list[dict] = []
        doc = Path(tmp) / "scene.json"
        for _ in range(PROPOSAL_MAX_ROUNDS):
            doc.write_text(json.dumps({"objects": objects, "unit_scale": unit_scale,
                                       "measured": measured}), encoding="utf-8")
            out = json.loads(runner.tasks_cli(["propose", "--scene-json", str(doc)])
                             .strip().splitlines()[-1])
            if "graph" in out:
                return out["graph"]
            meshes, props, units, refusals = measured_units(out["measure"])
            npz = Path(tmp) / f"measured_{len(measured)}.npz"
            meshcache.save(npz, meshes, props, units)
            measured.append({"names": out["measure"], "meshes": str(npz),
                             "refusals": refusals})
    raise RuntimeError("tasks.py propose kept asking for measurements")


def _evidence_text(g: dict) -> str:
    p = g["proposal"]
    ev = p.get("evidence") or {}
    parts = [f"anchor: {ev['anchor']}"] if ev.get("anchor") else []
    parts += [f"{k}: {v}" for k, v in ev.items() if k not in ("anchor", "members")]
    return "; ".join(parts)


def fill_proposals(st, doc: dict) -> None:
    """The proposer's groups into ``st.proposals``; only confident ones start accepted
    (an uncertain proposal is never decided for the artist)."""
    st.proposals.clear()
    st.proposal_doc = json.dumps(doc)
    for g in doc["groups"]:
        p = g["proposal"]
        item = st.proposals.add()
        item.name, item.anchor, item.status = g["id"], g["anchor"], p["status"]
        item.confidence = float(p["confidence"])
        item.reasons = "; ".join(p.get("reasons") or [])
        item.evidence = _evidence_text(g)
        item.source = json.dumps(g)
        item.edited = False
        item.accepted = p["status"] == "confident"
        for m in g["members"]:
            row = item.members.add()
            row.name = m
            row.confidence = float((p.get("member_confidence") or {}).get(m, 0.0))
            row.uncertain = str((p.get("uncertain_members") or {}).get(m, ""))
    st.proposal_index = 0
    tag_redraw_views()


def proposals_graph(st, scene_dir: Path) -> dict:
    """The relation graph of the accepted proposals (``tasks.proposal_groups``), after
    refusing to replace a hand-written ``inputs/relation_graph.json`` (one without
    ``proposed``)."""
    from island_tools.errors import UsageError

    path = scene_dir / "inputs" / "relation_graph.json"
    if path.exists():
        old = tasks.read_json(path)
        if not (isinstance(old, dict) and "proposed" in old):
            raise UsageError("inputs/relation_graph.json was written by hand; Build From "
                             "Proposals never replaces it", file=str(path),
                             fix="build From Relation Graph, or move that file away first")
    accepted = []
    for item in st.proposals:
        if not item.accepted:
            continue
        source = json.loads(item.source) if item.source else {}
        accepted.append({"id": item.name, "anchor": item.anchor,
                         "members": item.member_names(),
                         "relation": source.get("relation") or {},
                         "proposal": source.get("proposal") or {
                             "status": "uncertain", "confidence": 0.0, "reasons": []},
                         "edited": item.edited})
    if not accepted:
        raise UsageError("no proposal is accepted",
                         fix="tick the proposals to build (or press Find Groups first)")
    doc = json.loads(st.proposal_doc) if st.proposal_doc else {}
    return tasks.proposal_groups(doc, accepted, BY_ARTIST)


def tag_redraw_views() -> None:
    """Redraw the 3D viewports (the proposals are drawn there)."""
    wm = getattr(bpy.context, "window_manager", None)
    for window in (wm.windows if wm is not None else ()):
        for area in window.screen.areas:
            if area.type == "VIEW_3D":
                area.tag_redraw()


def _has_proposal(context) -> bool:
    st = getattr(context.scene, "island_refiner", None)
    return st is not None and st.active_proposal() is not None


class ISLAND_OT_find_groups(_IslandOperator, bpy.types.Operator):
    """Propose relation groups from the furniture of this file (as island-refine propose does): anchor, members, confidence; uncertain ones are not accepted until you tick them"""  # noqa: E501 (tooltip: one line)

    bl_idname = "island.find_groups"
    bl_label = "Find Groups"
    bl_options = {"REGISTER"}

    @classmethod
    def poll(cls, context):
        return getattr(context.scene, "island_refiner", None) is not None

    def run(self, context):
        runner = make_runner(context)
        doc = propose_open_file(runner)
        st = state(context)
        fill_proposals(st, doc)
        groups = doc["groups"]
        uncertain = sum(1 for g in groups if g["proposal"]["status"] == "uncertain")
        left = len(doc["proposed"]["unassigned"])
        self.done(context, f"{len(groups)} groups proposed ({uncertain} uncertain); {left} "
                           "objects in no group", "INFO" if groups else "WARNING")


class ISLAND_OT_proposal_from_selection(_IslandOperator, bpy.types.Operator):
    """Edit the selected proposal: the active object becomes its anchor, the other selected objects its members"""  # noqa: E501 (tooltip: one line)

    bl_idname = "island.proposal_from_selection"
    bl_label = "Edit from Selection"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        return _has_proposal(context)

    def run(self, context):
        from island_tools.errors import UsageError

        st = state(context)
        item = st.active_proposal()
        anchor = context.active_object
        members = sorted(o.name for o in context.selected_objects if o != anchor)
        if anchor is None or not members:
            raise UsageError("select the members and make the anchor the active object",
                             fix="Shift-click the anchor last")
        old = {m.name: (m.confidence, m.uncertain) for m in item.members}
        item.anchor = anchor.name
        item.members.clear()
        for name in members:
            row = item.members.add()
            row.name = name
            row.confidence, row.uncertain = old.get(name, (0.0, "set by the artist"))
        item.edited, item.accepted = True, True
        tag_redraw_views()
        self.done(context, f"{item.name}: anchor {anchor.name}, members {', '.join(members)} "
                           "(edited, accepted)")


class ISLAND_OT_drop_proposal(_IslandOperator, bpy.types.Operator):
    """Drop the selected proposal: it is not built and its objects are recorded as in no group"""  # noqa: E501 (tooltip: one line)

    bl_idname = "island.drop_proposal"
    bl_label = "Drop"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        return _has_proposal(context)

    def run(self, context):
        st = state(context)
        gid = st.active_proposal().name
        st.proposals.remove(st.proposal_index)
        st.proposal_index = min(st.proposal_index, max(len(st.proposals) - 1, 0))
        tag_redraw_views()
        self.done(context, f"{gid} dropped; {len(st.proposals)} proposal(s) left")


class ISLAND_OT_save_target_spec(_IslandOperator, bpy.types.Operator):
    """Validate the target spec fields against the contract and write target_spec.json"""

    bl_idname = "island.save_target_spec"
    bl_label = "Save Target Spec"

    @classmethod
    def poll(cls, context):
        return _has_group(context)

    def run(self, context):
        make_runner(context)
        root = group_path(context)
        tasks.write_target_spec(root, state(context).target_spec.to_doc())
        refresh_groups(state(context), select=root.name)
        self.done(context, f"{root.name}: target_spec.json saved")


class ISLAND_OT_init_iter0(_LongOperator, bpy.types.Operator):
    """Fresh simple_refiner/iter_0 (an earlier run is rotated to a backup): render, poses, geometry"""  # noqa: E501 (tooltip: one line)

    bl_idname = "island.init_iter0"
    bl_label = "Init iter_0"
    bl_options = {"REGISTER", "UNDO"}

    def plan(self, context, runner):
        root = group_path(context)
        return Plan(f"{root.name} iter_0", root, 3,
                    lambda tick: tasks.init_iter0(str(root), runner.settings(),
                                                  runner.worker_job, tick),
                    [runner.script_argv("init_iter0.py", ["--group-dir", str(root)])],
                    lambda ctx: _after_iteration(self, ctx, root, 0),
                    root / tasks.REFINER_DIR / "iter_0" / "current_state.json")


class ISLAND_OT_apply_delta(_LongOperator, bpy.types.Operator):
    """Step the next iteration from a transforms.json: apply deltas, save, read back, render, geometry"""  # noqa: E501 (tooltip: one line)

    bl_idname = "island.apply_delta"
    bl_label = "Step from File"
    bl_options = {"REGISTER", "UNDO"}

    filepath: StringProperty(name="transforms.json", subtype="FILE_PATH",
                             description="Empty: iter_N/transforms.json of the next iteration")
    filter_glob: StringProperty(default="*.json", options={"HIDDEN"})

    def invoke(self, context, event):
        if not self.filepath and context.window is not None and not bpy.app.background:
            context.window_manager.fileselect_add(self)
            return {"RUNNING_MODAL"}
        return super().invoke(context, event)

    def execute(self, context):
        if context.window is not None and not bpy.app.background and self.filepath \
                and not getattr(self, "_from_invoke", False):
            # the file browser returns here: run modal like the other steps
            self._from_invoke = True
            return super().invoke(context, None)
        return super().execute(context)

    def plan(self, context, runner):
        root = group_path(context)
        n = tasks.next_iter(root)
        dest = root / tasks.REFINER_DIR / f"iter_{n}" / "transforms.json"
        existed = dest.is_file()
        source = bpy.path.abspath(self.filepath) if self.filepath else str(dest)
        n = tasks.place_transforms(root, source)
        self.filepath = ""  # a redo or the next call picks the next iteration again
        return _step_plan(self, runner, root, n, created=[] if existed else [dest])


class ISLAND_OT_solver_step(_LongOperator, bpy.types.Operator):
    """One iteration with the built-in geometric solver: write transforms.json, then step it"""

    bl_idname = "island.solver_step"
    bl_label = "Solver Step"
    bl_options = {"REGISTER", "UNDO"}

    def plan(self, context, runner):
        root = group_path(context)
        n = tasks.next_iter(root)
        dest = root / tasks.REFINER_DIR / f"iter_{n}" / "transforms.json"

        def decide(tick):
            tick(f"solver decision for iter_{n}")
            tasks.solver_decision(root, n)

        return _step_plan(self, runner, root, n, [] if dest.is_file() else [dest], decide,
                          runner.tasks_argv(["solver-decision", "--group-dir", str(root),
                                             "--iter", str(n)]))


class ISLAND_OT_step_from_viewport(_LongOperator, bpy.types.Operator):
    """Step the next iteration from the members moved in the island scene: their deltas from the loaded iteration become transforms.json"""  # noqa: E501 (tooltip: one line)

    bl_idname = "island.step_from_viewport"
    bl_label = "Step from Viewport"
    bl_options = {"REGISTER", "UNDO"}

    def plan(self, context, runner):
        from island_tools.errors import UsageError
        from worker import addon_ops

        root = group_path(context)
        scene = bpy.data.scenes.get(island_scene_name(root))
        latest = tasks.latest_iter(root)
        if loaded_iteration(root) != latest:
            raise UsageError(f"load the latest iteration (iter_{latest}) of {root.name}, "
                             "move its members, then step", fix="press Latest")
        dest = root / tasks.REFINER_DIR / f"iter_{latest + 1}" / "transforms.json"
        existed = dest.is_file()
        n = tasks.write_viewport_transforms(root, addon_ops.loaded_poses(scene, str(root)))
        return _step_plan(self, runner, root, n, [] if existed else [dest])


class ISLAND_OT_member_geometry(_LongOperator, bpy.types.Operator):
    """Recompute geometry.json of the browser's iteration; report facing error and clearance per member"""  # noqa: E501 (tooltip: one line)

    bl_idname = "island.member_geometry"
    bl_label = "Geometry"

    def plan(self, context, runner):
        root = group_path(context)
        n = state(context).iteration

        def finish(ctx):
            geometry = tasks.read_json(root / tasks.REFINER_DIR / f"iter_{n}" / "geometry.json")
            st = state(ctx)
            st.show_arrows = True
            for line in fill_members(st, geometry or {}):
                self.report({"INFO"}, line)
            verdict = show_review(st, ctx, root, n)
            self.done(ctx, f"{root.name} iter_{n}: {verdict} {summary(geometry or {})}")

        return Plan(f"{root.name} iter_{n}", root, 1,
                    lambda tick: tasks.member_geometry(root, n),
                    [runner.tasks_argv(["geometry", "--group-dir", str(root), "--iter", str(n)])],
                    finish, root / tasks.REFINER_DIR / f"iter_{n}" / "geometry.json")


class ISLAND_OT_render(_LongOperator, bpy.types.Operator):
    """Render the browser's iteration again (persp + top view) with DIRECTORYS.yaml's settings into <group>/renders/iter_N/ and show it"""  # noqa: E501 (tooltip: one line)

    bl_idname = "island.render"
    bl_label = "Render"
    bl_options = {"REGISTER"}

    def plan(self, context, runner):
        root = group_path(context)
        n = state(context).iteration
        out_dir = root / tasks.RENDER_DIR / f"iter_{n}"

        def in_process(tick):
            tasks.render_iteration(root, n, runner.settings(), runner.worker_job,
                                   progress=tick)

        def finish(ctx):
            show_renders(ctx, root.name, {v: str(out_dir / f"render_{v}.png")
                                          for v in IMAGE_VIEWS}, f"iter_{n} re-rendered")
            self.done(ctx, f"{root.name} iter_{n} rendered into "
                           f"{root.name}/{tasks.RENDER_DIR}/iter_{n}")

        argv = [runner.tasks_argv(["render", "--group-dir", str(root), "--iter", str(n),
                                   "--config", str(runner.config.config_path),
                                   *runner.blender_flags()])]
        return Plan(f"{root.name} iter_{n} render", root, 1, in_process, argv, finish,
                    out_dir / "render.json")


class ISLAND_OT_view_render(_IslandOperator, bpy.types.Operator):
    """Open the group's render in a new window with an Image Editor"""

    bl_idname = "island.view_render"
    bl_label = "View Render"
    bl_options = {"INTERNAL"}

    view: EnumProperty(items=(("bev", "Top", ""), ("persp", "Perspective", "")), default="bev")

    @classmethod
    def poll(cls, context):
        return _has_group(context) and context.window is not None

    def run(self, context):
        root = group_path(context)
        image = bpy.data.images.get(f"{ISLAND_SCENE_PREFIX}{root.name} {self.view}")
        if image is None:
            from island_tools.errors import UsageError
            raise UsageError(f"{root.name} has no render loaded", fix="press Load or Render")
        if show_image(context, image):
            return {"FINISHED"}
        before = set(context.window_manager.windows[:])
        bpy.ops.wm.window_new()
        new = [w for w in context.window_manager.windows if w not in before]
        if new:
            area = max(new[0].screen.areas, key=lambda a: a.width * a.height)
            area.type = "IMAGE_EDITOR"
            area.spaces.active.image = image
        return {"FINISHED"}


class ISLAND_OT_load_iteration(_IslandOperator, bpy.types.Operator):
    """Iteration browser: append iter_N's island into the scene 'Island <group>' and show its renders"""  # noqa: E501 (tooltip: one line)

    bl_idname = "island.load_iteration"
    bl_label = "Load Iteration"
    bl_options = {"REGISTER", "UNDO"}

    iteration: IntProperty(name="Iteration", default=-1, min=-1,
                           description="-1: the browser's iteration")
    latest: BoolProperty(name="Latest", default=False)

    @classmethod
    def poll(cls, context):
        return _has_group(context)

    def run(self, context):
        make_runner(context)
        root = group_path(context)
        st = state(context)
        n = tasks.latest_iter(root) if self.latest else (
            self.iteration if self.iteration >= 0 else st.iteration)
        scene = load_into_scene(context, root, n)
        self.done(context, f"{root.name} iter_{n} loaded into scene '{scene}'")


class ISLAND_OT_merge_back(_IslandOperator, bpy.types.Operator):
    """Move the group's objects of this file to M_anchor @ the canonical poses of an iteration (the loaded one, else the latest)"""  # noqa: E501 (tooltip: one line)

    bl_idname = "island.merge_back"
    bl_label = "Merge Back"
    bl_options = {"REGISTER", "UNDO"}

    scope: EnumProperty(
        name="Scope",
        items=(("SELECTED", "Selected group", "The iteration loaded in the group's island "
                                              "scene, else its latest complete one"),
               ("ALL", "All groups", "Each group's latest complete iteration")),
        default="SELECTED")
    iteration: IntProperty(name="Iteration", default=-1, min=-1,
                           description="Selected group only; -1: loaded, else latest")

    @classmethod
    def poll(cls, context):
        return _has_group(context)

    def run(self, context):
        make_runner(context)
        from worker import addon_ops

        st = state(context)
        sync_groups(st)
        if self.scope == "SELECTED":
            root = group_path(context)
            if self.iteration >= 0:
                if self.iteration not in tasks.completed_iters(root):
                    from island_tools.errors import UsageError
                    raise UsageError(f"{root.name} iter_{self.iteration} is not complete",
                                     fix=f"pick one of {tasks.completed_iters(root)}")
                todo = [(root, self.iteration, "asked for")]
            else:
                todo = [(root, *merge_choice(root))]
        else:
            todo = [(Path(g.path), tasks.latest_iter(g.path), "latest complete")
                    for g in st.groups if tasks.completed_iters(g.path)]
        poses = {}
        for root, n, _ in todo:  # every pose computed before any object moves
            poses.update(tasks.world_poses(root, n))
        moved = addon_ops.set_world_poses(poses)
        what = "; ".join(f"{root.name} iter_{n} ({why})" for root, n, why in todo)
        self.done(context, f"Merged {what}: {len(moved)} object(s) placed")


class ISLAND_OT_remove_islands(_IslandOperator, bpy.types.Operator):
    """Remove the island scenes of this file with the objects, meshes and render images the add-on loaded (files on disk stay)"""  # noqa: E501 (tooltip: one line)

    bl_idname = "island.remove_islands"
    bl_label = "Remove Island Scenes"
    bl_options = {"REGISTER", "UNDO"}

    scope: EnumProperty(items=(("ALL", "All", ""), ("SELECTED", "Selected group", "")),
                        default="ALL")

    @classmethod
    def poll(cls, context):
        return any(s.name.startswith(ISLAND_SCENE_PREFIX) for s in bpy.data.scenes)

    def run(self, context):
        roots = [group_path(context)] if self.scope == "SELECTED" and group_path(context) \
            else None
        removed = remove_island_scenes(context, roots)
        self.done(context, f"Removed {len(removed)} island scene(s)"
                           + (f": {', '.join(removed)}" if removed else "")
                           + "; the files on disk are untouched")


class ISLAND_OT_load_settings(_IslandOperator, bpy.types.Operator):
    """Fill the preferences from DIRECTORYS.yaml"""

    bl_idname = "island.load_settings"
    bl_label = "Load from DIRECTORYS.yaml"
    bl_options = {"INTERNAL"}

    def run(self, context):
        values = make_runner(context).settings_dict()
        p = prefs.get(context)
        for key, value in tasks.prefs_from_settings(values).items():
            setattr(p, key, value)
        self.report({"INFO"}, f"loaded {prefs.runner_config(context).config_path}")


class ISLAND_OT_save_settings(_IslandOperator, bpy.types.Operator):
    """Validate the mirrored fields and write them into DIRECTORYS.yaml (your copy in Blender's config folder unless a file is chosen)"""  # noqa: E501 (tooltip: one line)

    bl_idname = "island.save_settings"
    bl_label = "Save to DIRECTORYS.yaml"
    bl_options = {"INTERNAL"}

    def run(self, context):
        config = prefs.runner_config(context)
        make_runner(context)
        p = prefs.get(context)
        target = Path(bpy.path.abspath(p.config_path)) if p.config_path \
            else prefs.user_config_path()
        if not target.exists() and config.config_path.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)  # keep the bundled comments
            from island_tools.files import atomic
            atomic.copy_file(config.config_path, target)
        tasks.save_settings(target, tasks.settings_from_prefs(
            {k: getattr(p, k) for k in tasks.SETTINGS_KEYS}))
        self.report({"INFO"}, f"saved {target}")


CLASSES = (ISLAND_OT_refresh_groups, ISLAND_OT_rebuild_island, ISLAND_OT_find_groups,
           ISLAND_OT_proposal_from_selection, ISLAND_OT_drop_proposal,
           ISLAND_OT_save_target_spec,
           ISLAND_OT_init_iter0, ISLAND_OT_apply_delta, ISLAND_OT_solver_step,
           ISLAND_OT_step_from_viewport, ISLAND_OT_member_geometry, ISLAND_OT_render,
           ISLAND_OT_view_render, ISLAND_OT_load_iteration, ISLAND_OT_merge_back,
           ISLAND_OT_remove_islands, ISLAND_OT_load_settings, ISLAND_OT_save_settings)
