"""Operators: each maps its inputs onto one call of ``tasks`` / ``worker`` (see runner.py for
where that call runs). Failures are ``self.report({'ERROR'}, one line)`` + ``{'CANCELLED'}``;
long operators show ``wm.progress_*`` and, when delegated with a UI, run modal (Esc cancels)."""
import contextlib
import traceback
from pathlib import Path

import bpy
from bpy.props import EnumProperty, IntProperty, StringProperty

from . import prefs, tasks
from .runner import Runner

ISLAND_SCENE_PREFIX = "Island "


# --------------------------------------------------------------------------- helpers
def state(context):
    return context.scene.island_refiner


def make_runner(context) -> Runner:
    return Runner(prefs.runner_config(context))


def group_path(context) -> Path | None:
    group = state(context).active_group()
    return Path(group.path) if group is not None and group.path else None


def _has_group(context) -> bool:
    return getattr(context.scene, "island_refiner", None) is not None \
        and group_path(context) is not None


def _one_line(exc: BaseException) -> str:
    if hasattr(exc, "one_line") and hasattr(exc, "exit_code"):
        return f"{exc.one_line()} (exit {exc.exit_code})"
    if isinstance(exc, LookupError):
        return str(exc.args[0] if exc.args else exc)
    return " ".join(f"internal: {type(exc).__name__}: {exc}".split())


@contextlib.contextmanager
def progress(context, total: int):
    wm = context.window_manager
    wm.progress_begin(0, max(total, 1))
    count = [0]

    def tick(message: str) -> None:
        count[0] += 1
        wm.progress_update(min(count[0], total))
        print(f"[island] {message}")

    try:
        yield tick
    finally:
        wm.progress_end()


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


def show_group(st) -> None:
    """The selected group's target spec into the fields, the browser on its latest iteration."""
    group = st.active_group()
    st.members.clear()
    st.members_iter = -1
    if group is None:
        return
    root = Path(group.path)
    meta = tasks.read_json(root / "metadata.json")
    count = len(meta.get("members", [])) - 1 if isinstance(meta, dict) else 1
    st.target_spec.fill(tasks.read_target_spec(root), max(count, 1),
                        str(root / "target_spec.json"))
    st.iteration = max(group.latest_iter, 0)


def load_images(renders: dict, prefix: str) -> list:
    images = []
    for view, path in sorted(renders.items()):
        name = f"{prefix} {view}"
        image = bpy.data.images.get(name)
        if image is not None:
            bpy.data.images.remove(image)
        image = bpy.data.images.load(path, check_existing=False)
        image.name = name
        images.append(image)
    return images


def show_image(context, image) -> bool:
    screen = getattr(context, "screen", None)
    for area in (screen.areas if screen is not None else ()):
        if area.type == "IMAGE_EDITOR":
            area.spaces.active.image = image
            return True
    return False


def load_into_scene(context, root: Path, n: int) -> str:
    """The iteration browser: ``iter_N`` into the scene ``Island <G>`` + its renders."""
    from worker import addon_ops

    view = tasks.iteration_view(root, n)
    result = addon_ops.load_iteration(view["blend"], view["members"],
                                      f"{ISLAND_SCENE_PREFIX}{root.name}", str(root), n,
                                      view["forward_local"], view["footprint_local"])
    images = load_images(view["renders"], f"{root.name} iter_{n}")
    bev = [i for i in images if i.name.endswith("bev")]
    if bev:
        show_image(context, bev[0])
    window = getattr(context, "window", None)
    if window is not None and not bpy.app.background:
        source = state(context)
        island_scene = bpy.data.scenes[result["scene"]]
        if island_scene != context.scene:
            target = island_scene.island_refiner
            target.scene_dir = source.scene_dir
            window.scene = island_scene
            refresh_groups(target, select=root.name)
            target.iteration = n
    return result["scene"]


def summary(geometry: dict) -> str:
    g = geometry.get("group", {})
    parts = []
    if g.get("facing_error_max_deg") is not None:
        parts.append(f"facing max {g['facing_error_max_deg']:.1f} deg")
    if g.get("clearance_error_max_m") is not None:
        parts.append(f"clearance err max {g['clearance_error_max_m']:.3f} m")
    parts.append(f"penetrations {g.get('penetration_pairs', 0)}")
    match = (g.get("pattern") or {}).get("match")
    if match is not None:
        parts.append("pattern match" if match else "pattern MISMATCH")
    return ", ".join(parts)


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
        row.penetrations = len(m.get("penetrations") or {})
        facing_text = f"{facing:.1f} deg" if facing is not None else (m.get("facing_note") or "n/a")
        lines.append(f"{name}: facing {facing_text}, clearance {row.clearance_m:.3f} m"
                     + (f", {row.penetrations} penetration(s)" if row.penetrations else ""))
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
        if not hasattr(exc, "exit_code") and not isinstance(exc, LookupError):
            traceback.print_exc()
        message = _one_line(exc)
        self.report({"ERROR"}, message)
        st = getattr(context.scene, "island_refiner", None)
        if st is not None:
            st.last_message = message
        return {"CANCELLED"}

    def done(self, context, message: str) -> None:
        self.report({"INFO"}, message)
        state(context).last_message = message


class Plan:
    """What a long operator runs: ``in_process(tick)`` here, or the ``argv`` lists one after
    another with the external Python; then ``finish(context)`` for the result."""

    def __init__(self, steps: int, in_process, argv: list[list[str]] | None, finish) -> None:
        self.steps, self.in_process, self.argv, self.finish = steps, in_process, argv, finish


def _step_plan(op, runner: Runner, root, n: int, before=None, before_argv=None) -> Plan:
    """Step iteration n (after an optional decision step): the library call in-process, or
    iter_step.py with the external Python; then refresh the browser on iteration n."""

    def in_process(tick):
        if before is not None:
            before(tick)
        tasks.iter_step(str(root), n, runner.settings(), runner.worker_job, tick)

    argv = [runner.script_argv("iter_step.py", ["--group-dir", str(root), "--iter", str(n)])]
    return Plan(2 + (before is not None), in_process,
                ([before_argv] if before_argv else []) + argv,
                lambda ctx: _after_iteration(op, ctx, root, n))


class _LongOperator(_IslandOperator):
    def plan(self, context, runner: Runner) -> Plan:
        raise NotImplementedError

    def run(self, context):
        runner = make_runner(context)
        plan = self.plan(context, runner)
        with progress(context, plan.steps) as tick:
            if runner.in_process or plan.argv is None:
                plan.in_process(tick)
            else:
                for argv in plan.argv:
                    runner.start(argv).wait(tick)
        plan.finish(context)
        return {"FINISHED"}

    def invoke(self, context, event):
        try:
            runner = make_runner(context)
            if runner.in_process or bpy.app.background or context.window is None:
                return self.execute(context)
            self._plan = self.plan(context, runner)
            if self._plan.argv is None:
                return self.execute(context)
        except Exception as exc:  # noqa: BLE001
            return self.fail(context, exc)
        self._runner, self._queue, self._count = runner, list(self._plan.argv), 0
        self._proc = runner.start(self._queue.pop(0))
        wm = context.window_manager
        wm.progress_begin(0, self._plan.steps)
        self._timer = wm.event_timer_add(0.1, window=context.window)
        wm.modal_handler_add(self)
        state(context).last_message = f"{self.bl_label}: running (Esc cancels)"
        return {"RUNNING_MODAL"}

    def _end_modal(self, context) -> None:
        wm = context.window_manager
        wm.event_timer_remove(self._timer)
        wm.progress_end()

    def modal(self, context, event):
        if event.type == "ESC":
            self._proc.kill()
            self._end_modal(context)
            self.report({"WARNING"}, f"{self.bl_label}: cancelled; earlier iterations are intact")
            return {"CANCELLED"}
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        try:
            for line in self._proc.poll():
                self._count += 1
                context.window_manager.progress_update(min(self._count, self._plan.steps))
                state(context).last_message = line.strip()
            if not self._proc.done:
                return {"RUNNING_MODAL"}
            self._proc.result()
            if self._queue:
                self._proc = self._runner.start(self._queue.pop(0))
                return {"RUNNING_MODAL"}
            self._end_modal(context)
            self._plan.finish(context)
            return {"FINISHED"}
        except Exception as exc:  # noqa: BLE001
            self._end_modal(context)
            return self.fail(context, exc)


def _after_iteration(op, context, root: Path, n: int) -> None:
    """Shared end of init / apply / solver step: list, browser, optional load, report."""
    refresh_groups(state(context), select=root.name)
    st = state(context)
    st.iteration = n
    geometry = tasks.read_json(root / tasks.REFINER_DIR / f"iter_{n}" / "geometry.json") or {}
    fill_members(st, geometry)
    if st.auto_load:
        load_into_scene(context, root, n)
    op.done(context, f"{root.name} iter_{n}: {summary(geometry)}")


# --------------------------------------------------------------------------- operators
class ISLAND_OT_refresh_groups(_IslandOperator, bpy.types.Operator):
    """Scan the scene directory for relation groups and their status"""

    bl_idname = "island.refresh_groups"
    bl_label = "Refresh Groups"
    bl_options = {"INTERNAL"}

    @classmethod
    def poll(cls, context):
        st = getattr(context.scene, "island_refiner", None)
        return st is not None and bool(st.scene_dir)

    def run(self, context):
        refresh_groups(state(context))
        self.done(context, f"{len(state(context).groups)} group(s)")


class ISLAND_OT_rebuild_island(_IslandOperator, bpy.types.Operator):
    """Write island.blend + metadata.json in the anchor's canonical frame from objects of this file"""  # noqa: E501 (tooltip: one line)

    bl_idname = "island.rebuild_island"
    bl_label = "Rebuild Island"

    source: EnumProperty(
        name="Source",
        items=(("SELECTION", "Selection", ("Active object = anchor, other selected = members; "
                                          "group id from the panel")),
               ("RELATION_GRAPH", "relation_graph.json",
                "Every group of <scene>/inputs/relation_graph.json")),
        default="SELECTION")

    @classmethod
    def poll(cls, context):
        st = getattr(context.scene, "island_refiner", None)
        return st is not None and bool(st.scene_dir)

    def run(self, context):
        make_runner(context)  # the repository on sys.path, or a clear error
        from island_tools.errors import IslandError, UsageError
        from worker import addon_ops

        st = state(context)
        scene_dir = st.scene_path()
        if self.source == "SELECTION":
            anchor = context.active_object
            members = [o.name for o in context.selected_objects if o != anchor]
            if anchor is None or not members:
                raise UsageError("select the members and make the anchor the active object",
                                 fix="Shift-click the anchor last")
            gid = st.new_group_id.strip()
            if not tasks.SAFE_GROUP_ID.match(gid):
                raise UsageError(f"group id {gid!r} is not a safe directory name",
                                 field="Group id", fix="letters, digits, _ . - only")
            groups = [{"id": gid, "anchor": anchor.name, "members": members,
                       "target_spec": None}]
        else:
            groups = tasks.relation_graph_groups(scene_dir)
        for g in groups:  # every group checked before any island is written
            try:
                addon_ops.group_objects(g["anchor"], g["members"])
            except IslandError as exc:
                raise type(exc)(f"group '{g['id']}': {exc.reason}", file=exc.file,
                                field=exc.field, fix=exc.fix) from None
        for g in groups:
            root = scene_dir / "relation_groups" / g["id"]
            addon_ops.write_island(root, g["anchor"], g["members"])
            if g["target_spec"] is not None:
                tasks.write_target_spec(root, g["target_spec"])
        refresh_groups(state(context), select=groups[-1]["id"])
        self.done(context, f"{len(groups)} island(s) written: "
                           f"{', '.join(g['id'] for g in groups)}")


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

    @classmethod
    def poll(cls, context):
        return _has_group(context)

    def plan(self, context, runner):
        root = group_path(context)
        return Plan(3, lambda tick: tasks.init_iter0(str(root), runner.settings(),
                                                     runner.worker_job, tick),
                    [runner.script_argv("init_iter0.py", ["--group-dir", str(root)])],
                    lambda ctx: _after_iteration(self, ctx, root, 0))


class ISLAND_OT_apply_delta(_LongOperator, bpy.types.Operator):
    """Step the next iteration from a transforms.json: apply deltas, save, read back, render, geometry"""  # noqa: E501 (tooltip: one line)

    bl_idname = "island.apply_delta"
    bl_label = "Apply transforms.json"
    bl_options = {"REGISTER", "UNDO"}

    filepath: StringProperty(name="transforms.json", subtype="FILE_PATH",
                             description="Empty: iter_N/transforms.json of the next iteration")
    filter_glob: StringProperty(default="*.json", options={"HIDDEN"})

    @classmethod
    def poll(cls, context):
        return _has_group(context)

    def invoke(self, context, event):
        if not self.filepath and context.window is not None and not bpy.app.background:
            context.window_manager.fileselect_add(self)
            return {"RUNNING_MODAL"}
        return super().invoke(context, event)

    def plan(self, context, runner):
        root = group_path(context)
        source = bpy.path.abspath(self.filepath) if self.filepath else str(
            root / tasks.REFINER_DIR / f"iter_{tasks.next_iter(root)}" / "transforms.json")
        n = tasks.place_transforms(root, source)
        self.filepath = ""  # a redo or the next call picks the next iteration again
        return _step_plan(self, runner, root, n)


class ISLAND_OT_solver_step(_LongOperator, bpy.types.Operator):
    """One iteration with the built-in geometric solver: write transforms.json, then step it"""

    bl_idname = "island.solver_step"
    bl_label = "Solver Step"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        return _has_group(context)

    def plan(self, context, runner):
        root = group_path(context)
        n = tasks.next_iter(root)

        def decide(tick):
            tick(f"solver decision for iter_{n}")
            tasks.solver_decision(root, n)

        return _step_plan(self, runner, root, n, decide,
                          runner.tasks_argv(["solver-decision", "--group-dir", str(root),
                                             "--iter", str(n)]))


class ISLAND_OT_step_from_viewport(_LongOperator, bpy.types.Operator):
    """Step the next iteration from the members moved in the island scene: their deltas from the loaded iteration become transforms.json"""  # noqa: E501 (tooltip: one line)

    bl_idname = "island.step_from_viewport"
    bl_label = "Step from Viewport Edits"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        return _has_group(context)

    def plan(self, context, runner):
        from island_tools.errors import UsageError
        from worker import addon_ops

        root = group_path(context)
        scene = bpy.data.scenes.get(f"{ISLAND_SCENE_PREFIX}{root.name}")
        latest = tasks.latest_iter(root)
        loaded = [o for o in (scene.objects if scene else ())
                  if o.get(addon_ops.PROP_GROUP) == str(root)]
        if not loaded or any(o.get(addon_ops.PROP_ITER) != latest for o in loaded):
            raise UsageError(f"load the latest iteration (iter_{latest}) of {root.name}, "
                             "move its members, then step", fix="press Latest")
        n = tasks.write_viewport_transforms(root, addon_ops.loaded_poses(scene, str(root)))
        return _step_plan(self, runner, root, n)


class ISLAND_OT_member_geometry(_LongOperator, bpy.types.Operator):
    """Recompute geometry.json of the browser's iteration; report facing error and clearance per member"""  # noqa: E501 (tooltip: one line)

    bl_idname = "island.member_geometry"
    bl_label = "Member Geometry"

    @classmethod
    def poll(cls, context):
        return _has_group(context)

    def plan(self, context, runner):
        root = group_path(context)
        n = state(context).iteration

        def finish(ctx):
            geometry = tasks.read_json(root / tasks.REFINER_DIR / f"iter_{n}" / "geometry.json")
            st = state(ctx)
            st.show_arrows = True
            for line in fill_members(st, geometry or {}):
                self.report({"INFO"}, line)
            self.done(ctx, f"{root.name} iter_{n}: {summary(geometry or {})}")

        return Plan(1, lambda tick: tasks.member_geometry(root, n),
                    [runner.tasks_argv(["geometry", "--group-dir", str(root), "--iter", str(n)])],
                    finish)


class ISLAND_OT_render(_LongOperator, bpy.types.Operator):
    """Render the browser's iteration again (persp + BEV) with DIRECTORYS.yaml's settings into <group>/renders/iter_N/"""  # noqa: E501 (tooltip: one line)

    bl_idname = "island.render"
    bl_label = "Render Views"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        return _has_group(context)

    def plan(self, context, runner):
        root = group_path(context)
        n = state(context).iteration
        out = {}

        def in_process(tick):
            tick(f"rendering iter_{n}")
            out.update(tasks.render_iteration(root, n, runner.settings(), runner.worker_job))

        def finish(ctx):
            images = load_images({v: out[v] for v in ("persp", "bev")},
                                 f"{root.name} render iter_{n}")
            show_image(ctx, images[0])
            self.done(ctx, f"{root.name} iter_{n}: rendered into {out['out_dir']}")

        return Plan(1, in_process, None, finish)


class ISLAND_OT_load_iteration(_IslandOperator, bpy.types.Operator):
    """Iteration browser: append iter_N's island into the scene 'Island <group>' and load its renders"""  # noqa: E501 (tooltip: one line)

    bl_idname = "island.load_iteration"
    bl_label = "Load Iteration"
    bl_options = {"REGISTER", "UNDO"}

    iteration: IntProperty(name="Iteration", default=-1, min=-1,
                           description="-1: the browser's iteration")
    latest: bpy.props.BoolProperty(name="Latest", default=False)

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
        st.iteration = n
        self.done(context, f"{root.name} iter_{n} loaded into scene '{scene}'")


class ISLAND_OT_merge_back(_IslandOperator, bpy.types.Operator):
    """Move the group objects of this file to M_anchor @ canonical pose of an iteration"""

    bl_idname = "island.merge_back"
    bl_label = "Merge Back"
    bl_options = {"REGISTER", "UNDO"}

    scope: EnumProperty(
        name="Scope",
        items=(("SELECTED", "Selected group", "The browser's iteration of the selected group"),
               ("ALL", "All groups", "Each group's latest complete iteration")),
        default="SELECTED")

    @classmethod
    def poll(cls, context):
        return _has_group(context)

    def run(self, context):
        make_runner(context)
        from worker import addon_ops

        st = state(context)
        if self.scope == "SELECTED":
            todo = [(group_path(context), st.iteration)]
        else:
            todo = [(Path(g.path), tasks.latest_iter(g.path)) for g in st.groups
                    if g.latest_iter >= 0]
        poses = {}
        for root, n in todo:  # every pose computed before any object moves
            poses.update(tasks.world_poses(root, n))
        moved = addon_ops.set_world_poses(poses)
        self.done(context, f"merged {len(todo)} group(s): {len(moved)} object(s) placed")


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
        self.done(context, f"loaded {prefs.runner_config(context).config_path}")


class ISLAND_OT_save_settings(_IslandOperator, bpy.types.Operator):
    """Validate the mirrored fields and write them into DIRECTORYS.yaml"""

    bl_idname = "island.save_settings"
    bl_label = "Save to DIRECTORYS.yaml"
    bl_options = {"INTERNAL"}

    def run(self, context):
        config = prefs.runner_config(context)
        make_runner(context)
        p = prefs.get(context)
        tasks.save_settings(config.config_path, tasks.settings_from_prefs(
            {k: getattr(p, k) for k in tasks.SETTINGS_KEYS}))
        self.done(context, f"saved {config.config_path}")


CLASSES = (ISLAND_OT_refresh_groups, ISLAND_OT_rebuild_island, ISLAND_OT_save_target_spec,
           ISLAND_OT_init_iter0, ISLAND_OT_apply_delta, ISLAND_OT_solver_step,
           ISLAND_OT_step_from_viewport,
           ISLAND_OT_member_geometry, ISLAND_OT_render, ISLAND_OT_load_iteration,
           ISLAND_OT_merge_back, ISLAND_OT_load_settings, ISLAND_OT_save_settings)
