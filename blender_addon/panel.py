"""The "Island" tab of the 3D viewport sidebar: groups, target spec, iterations, merge back.

Written for the sidebar's default width: short button labels (the tooltips say the rest),
messages wrapped to the region's width, a running operator's progress line in its own box.
"""
from pathlib import Path

import bpy

from . import compat, ops
from .ops import state

CHAR_PX = 6.2     # average UI character width at scale 1 when blf cannot measure
FONT_SIZE = 11    # Blender's default UI font size (points at 72 dpi, times the UI scale)
# A label's room in the sidebar, measured on the 3.4 window: the region's width minus the
# category tabs (26), the panel's margins (20), an icon column (20), the label's padding (16),
# the clip margin below which Blender cuts text with "…" (4) and 6 to spare. (82 let a line
# of 140 px through at the default 229 px width, which the window drew cut.)
MARGIN_PX = 92


def _measure(scale: float):
    """``text -> pixels`` with Blender's UI font, or None (background mode, no font)."""
    try:
        import blf

        compat.set_font_size(0, FONT_SIZE, scale)
        if blf.dimensions(0, "abc")[0] <= 0:
            return None
        return lambda text: blf.dimensions(0, text)[0]
    except (ImportError, TypeError, ValueError, SystemError):
        return None


def lines_for(context, text: str) -> list[str]:
    """``text`` wrapped to what fits in a label of this region (measured with the UI font)."""
    region = getattr(context, "region", None)
    width = region.width if region is not None else 240
    scale = context.preferences.system.ui_scale if context.preferences else 1.0
    room = max(width - MARGIN_PX * scale, 80)
    measure = _measure(scale)
    if measure is None:
        return ops.wrap(text, int(room / (CHAR_PX * scale)))
    lines: list[str] = []
    for word in text.split():
        if lines and measure(f"{lines[-1]} {word}") <= room:
            lines[-1] = f"{lines[-1]} {word}"
            continue
        while measure(word) > room and len(word) > 1:  # a long path: break it
            cut = max(i for i in range(1, len(word) + 1) if measure(word[:i]) <= room
                      or i == 1)
            lines.append(word[:cut])
            word = word[cut:]
        lines.append(word)
    return lines or [""]


def wrapped(layout, context, text: str, icon: str = "NONE") -> None:
    col = layout.column(align=True)
    for i, line in enumerate(lines_for(context, text)):
        col.label(text=line, icon=icon if i == 0 else "BLANK1" if icon != "NONE" else "NONE")


class ISLAND_UL_groups(bpy.types.UIList):
    def draw_item(self, context, layout, data, item, icon, active_data, active_propname,
                  index=0):
        row = layout.row(align=True)
        split = row.split(factor=0.6)
        split.label(text=item.name, icon="GROUP")
        split.label(text=item.status)


class ISLAND_UL_proposals(bpy.types.UIList):
    """Find Groups' proposals: accept checkbox, id, anchor, confidence (? when uncertain)."""

    def draw_item(self, context, layout, data, item, icon, active_data, active_propname,
                  index=0):
        row = layout.row(align=True)
        row.prop(item, "accepted", text="")
        split = row.split(factor=0.5)
        split.label(text=item.name, icon="QUESTION" if item.status == "uncertain"
                    else "CHECKMARK")
        sub = split.split(factor=0.6)
        sub.label(text=item.anchor)
        sub.label(text="?" if item.status == "uncertain" else f"{item.confidence:.2f}")


class ISLAND_UL_members(bpy.types.UIList):
    def draw_item(self, context, layout, data, item, icon, active_data, active_propname,
                  index=0):
        group = data.active_group()
        prefix = f"{group.name}." if group is not None else ""
        name = item.name[len(prefix):] if prefix and item.name.startswith(prefix) else item.name
        split = layout.split(factor=0.5)
        split.label(text=name, icon="ERROR" if item.penetrations else "NONE")
        row = split.row(align=True)
        row.label(text=f"{item.facing_error_deg:.1f}°" if item.has_facing else "sym.")
        row.label(text=f"{item.clearance_m:+.2f}")


class _Tab:
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Island"

    @classmethod
    def poll(cls, context):
        return getattr(context.scene, "island_refiner", None) is not None


class ISLAND_PT_main(_Tab, bpy.types.Panel):
    bl_label = "Island Refiner"
    bl_idname = "ISLAND_PT_main"

    def draw(self, context):
        st = state(context)
        layout = self.layout
        col = layout.column(align=True)
        col.label(text="Scene folder")
        col.prop(st, "scene_dir", text="")
        problem = st.scene_dir_problem() if st.scene_dir else None
        if problem:
            wrapped(layout, context, problem, "ERROR")
        row = layout.row()
        row.template_list("ISLAND_UL_groups", "", st, "groups", st, "group_index", rows=3)
        row.operator("island.refresh_groups", text="", icon="FILE_REFRESH")
        if st.running:
            box = layout.box()
            wrapped(box, context, st.running, "SORTTIME")
            if st.progress_line:
                wrapped(box, context, st.progress_line)
            box.label(text="Esc stops it")
        elif st.last_message:
            icon = {"ERROR": "ERROR", "WARNING": "INFO"}.get(st.last_level, "CHECKMARK")
            wrapped(layout, context, st.last_message, icon)


class ISLAND_PT_build(_Tab, bpy.types.Panel):
    bl_label = "Build Islands"
    bl_parent_id = "ISLAND_PT_main"

    def draw(self, context):
        st = state(context)
        col = self.layout.column(align=True)
        row = col.row(align=True)
        row.label(text="Group id")
        row.prop(st, "new_group_id", text="")
        col.operator("island.rebuild_island", text="From Selection",
                     icon="RESTRICT_SELECT_OFF").source = "SELECTION"
        col.operator("island.rebuild_island", text="From Relation Graph",
                     icon="OUTLINER").source = "RELATION_GRAPH"
        self.draw_proposals(context, self.layout, st)

    @staticmethod
    def draw_proposals(context, layout, st) -> None:
        """Find Groups, its proposals, the selected one's evidence, edit / drop / build."""
        layout.separator()
        layout.operator("island.find_groups", icon="VIEWZOOM")   # a row of its own: the
        if not len(st.proposals):                                 # 3.4 sidebar is narrow
            return
        layout.prop(st, "show_proposals", text="Draw", icon="HIDE_OFF")
        layout.template_list("ISLAND_UL_proposals", "", st, "proposals", st,
                             "proposal_index", rows=min(max(len(st.proposals), 2), 6))
        p = st.active_proposal()
        if p is not None:
            box = layout.box()
            members = ", ".join(f"{m.name} {m.confidence:.2f}" + (" ?" if m.uncertain else "")
                                for m in p.members)
            wrapped(box, context, f"{p.name}: anchor {p.anchor}; members {members}"
                    + (" (edited)" if p.edited else ""))
            if p.status == "uncertain" and p.reasons:
                wrapped(box, context, f"Uncertain: {p.reasons}", "QUESTION")
            for m in p.members:
                if m.uncertain:
                    wrapped(box, context, f"{m.name}: {m.uncertain}", "QUESTION")
            if p.evidence:
                wrapped(box, context, p.evidence, "INFO")
        col = layout.column(align=True)
        col.operator("island.proposal_from_selection", text="Edit from Selection",
                     icon="RESTRICT_SELECT_OFF")
        col.operator("island.drop_proposal", text="Drop", icon="X")
        layout.operator("island.rebuild_island", text="Build From Proposals",
                        icon="CHECKMARK").source = "PROPOSALS"


class ISLAND_PT_target_spec(_Tab, bpy.types.Panel):
    bl_label = "Target Spec"
    bl_parent_id = "ISLAND_PT_main"
    bl_options = {"DEFAULT_CLOSED"}

    FIELDS = (("anchor_role", "Role"), ("member_count", "Members"), ("pattern", "Pattern"),
              ("facing", "Facing"), ("spacing", "Spacing"), ("clearance_m", "Clearance"),
              ("free_note", "Note"))

    def draw(self, context):
        spec = state(context).target_spec
        col = self.layout.column(align=True)
        for key, label in self.FIELDS:
            split = col.split(factor=0.42, align=True)
            split.label(text=label)
            split.prop(spec, key, text="")
        col.separator()
        col.operator("island.save_target_spec", text="Save", icon="FILE_TICK")


class ISLAND_PT_iterations(_Tab, bpy.types.Panel):
    bl_label = "Iterations"
    bl_parent_id = "ISLAND_PT_main"

    def draw(self, context):
        st = state(context)
        layout = self.layout
        col = layout.column(align=True)
        col.operator("island.init_iter0", icon="FILE_NEW")
        col.operator("island.solver_step", icon="PLAY")
        col.operator("island.step_from_viewport", icon="OBJECT_ORIGIN")
        col.operator("island.apply_delta", text="Step from File…", icon="IMPORT")
        row = layout.row(align=True)
        row.label(text="Iteration")
        row.prop(st, "iteration", text="")
        row = layout.row(align=True)
        row.operator("island.load_iteration", text="Load").latest = False
        row.operator("island.load_iteration", text="Latest").latest = True
        row = layout.row(align=True)
        row.operator("island.render", icon="RENDER_STILL")
        row.operator("island.member_geometry", icon="DRIVER_DISTANCE")
        row = layout.row()
        row.prop(st, "auto_load")
        row.prop(st, "show_arrows", text="Arrows")
        self.draw_renders(context, layout, st)
        if st.review_line:   # the one verdict (island_tools.review), never a count of ours
            icon = {"pass": "CHECKMARK", "fail": "ERROR", "uncertain": "QUESTION"}.get(
                st.review_verdict, "INFO")
            wrapped(layout, context, f"iter_{st.review_iter} {st.review_line}", icon)
        if len(st.members):
            layout.label(text=f"iter_{st.members_iter}: facing, clearance (m)")
            layout.template_list("ISLAND_UL_members", "", st, "members", st, "member_index",
                                 rows=min(len(st.members), 6))

    @staticmethod
    def draw_renders(context, layout, st) -> None:
        group = st.active_group()
        images = ops.group_images(group.name) if group is not None else []
        if not images:
            return
        box = layout.box()
        box.label(text=str(images[0].get("island_label", "renders")), icon="IMAGE_DATA")
        row = box.row()
        for image in images:
            col = row.column(align=True)
            preview = getattr(image, "preview", None)
            if preview is not None and preview.icon_id:
                col.template_icon(icon_value=preview.icon_id, scale=5.0)
            view = "bev" if image.name.endswith("bev") else "persp"
            col.operator("island.view_render", text="Top" if view == "bev" else "Persp",
                         icon="ZOOM_IN").view = view


class ISLAND_PT_merge(_Tab, bpy.types.Panel):
    bl_label = "Merge Back"
    bl_parent_id = "ISLAND_PT_main"

    def draw(self, context):
        layout = self.layout
        group = state(context).active_group()
        if group is not None and group.latest_iter >= 0:
            try:
                n, why = ops.merge_choice(Path(group.path))
                ops_text = f"Selected: {group.name} iter_{n} ({why})"
            except Exception as exc:  # noqa: BLE001 - the panel never raises
                ops_text = ops.people(getattr(exc, "reason", str(exc)))
            wrapped(layout, context, ops_text)
        col = layout.column(align=True)
        col.operator("island.merge_back", text="Merge Selected", icon="IMPORT").scope = \
            "SELECTED"
        col.operator("island.merge_back", text="Merge All (latest)").scope = "ALL"
        layout.operator("island.remove_islands", text="Remove Island Scenes", icon="TRASH")


CLASSES = (ISLAND_UL_groups, ISLAND_UL_proposals, ISLAND_UL_members, ISLAND_PT_main,
           ISLAND_PT_build, ISLAND_PT_target_spec, ISLAND_PT_iterations, ISLAND_PT_merge)
