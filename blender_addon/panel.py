"""The "Island" tab of the 3D viewport sidebar: groups, target spec, iterations, merge back."""
import bpy

from .ops import state


class ISLAND_UL_groups(bpy.types.UIList):
    def draw_item(self, context, layout, data, item, icon, active_data, active_propname,
                  index=0):
        row = layout.row(align=True)
        row.label(text=item.name, icon="GROUP")
        row.label(text=item.status)


class ISLAND_UL_members(bpy.types.UIList):
    def draw_item(self, context, layout, data, item, icon, active_data, active_propname,
                  index=0):
        row = layout.row(align=True)
        row.label(text=item.name)
        row.label(text=item.edge)
        row.label(text=f"{item.facing_error_deg:.1f}°" if item.has_facing else "sym.")
        row.label(text=f"{item.clearance_m:+.3f} m")
        row.label(text=str(item.penetrations) if item.penetrations else "",
                  icon="ERROR" if item.penetrations else "NONE")


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
        layout.prop(st, "scene_dir")
        row = layout.row()
        row.template_list("ISLAND_UL_groups", "", st, "groups", st, "group_index", rows=3)
        row.operator("island.refresh_groups", text="", icon="FILE_REFRESH")
        if st.last_message:
            layout.label(text=st.last_message, icon="INFO")


class ISLAND_PT_build(_Tab, bpy.types.Panel):
    bl_label = "Build Islands"
    bl_parent_id = "ISLAND_PT_main"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context):
        st = state(context)
        col = self.layout.column(align=True)
        col.prop(st, "new_group_id")
        col.operator("island.rebuild_island", text="From Selection (active = anchor)",
                     icon="RESTRICT_SELECT_OFF").source = "SELECTION"
        col.operator("island.rebuild_island", text="From relation_graph.json",
                     icon="OUTLINER").source = "RELATION_GRAPH"


class ISLAND_PT_target_spec(_Tab, bpy.types.Panel):
    bl_label = "Target Spec"
    bl_parent_id = "ISLAND_PT_main"

    def draw(self, context):
        spec = state(context).target_spec
        col = self.layout.column()
        col.use_property_split = True
        for key in ("anchor_role", "member_count", "pattern", "facing", "spacing",
                    "clearance_m", "free_note"):
            col.prop(spec, key)
        col.operator("island.save_target_spec", icon="FILE_TICK")


class ISLAND_PT_iterations(_Tab, bpy.types.Panel):
    bl_label = "Iterations"
    bl_parent_id = "ISLAND_PT_main"

    def draw(self, context):
        st = state(context)
        layout = self.layout
        col = layout.column(align=True)
        col.operator("island.init_iter0", icon="FILE_NEW")
        col.operator("island.solver_step", icon="PLAY")
        col.operator("island.apply_delta", icon="IMPORT")
        col.operator("island.step_from_viewport", icon="OBJECT_ORIGIN")
        row = layout.row(align=True)
        row.prop(st, "iteration")
        row.operator("island.load_iteration", text="Load", icon="FILE_BLEND").latest = False
        row.operator("island.load_iteration", text="Latest", icon="FF").latest = True
        row = layout.row(align=True)
        row.operator("island.render", icon="RENDER_STILL")
        row.operator("island.member_geometry", icon="DRIVER_DISTANCE")
        row = layout.row()
        row.prop(st, "auto_load")
        row.prop(st, "show_arrows")
        if len(st.members):
            layout.label(text=f"iter_{st.members_iter}: member, edge, facing, clearance")
            layout.template_list("ISLAND_UL_members", "", st, "members", st, "member_index",
                                 rows=min(len(st.members), 8))


class ISLAND_PT_merge(_Tab, bpy.types.Panel):
    bl_label = "Merge Back"
    bl_parent_id = "ISLAND_PT_main"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context):
        col = self.layout.column(align=True)
        col.operator("island.merge_back", text="Selected Group").scope = "SELECTED"
        col.operator("island.merge_back", text="All Groups (latest)").scope = "ALL"


CLASSES = (ISLAND_UL_groups, ISLAND_UL_members, ISLAND_PT_main, ISLAND_PT_build,
           ISLAND_PT_target_spec, ISLAND_PT_iterations, ISLAND_PT_merge)
