"""Per-scene state of the Island tab (``Scene.island_refiner``); removed on unregister."""
from pathlib import Path

import bpy
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    EnumProperty,
    FloatProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)

from . import compat

PATTERNS = ("ring", "row", "2+2+1", "2+2+1+1", "L", "T", "cluster", "free")
FACINGS = ("toward_anchor", "away_from_anchor", "parallel_to_anchor_long_axis", "mixed")
SPACINGS = ("even_along_each_edge", "even_around_anchor", "tight", "loose", "as_laid_out")


PATH_OPTIONS = compat.path_options()


def _items(values):
    return tuple((v, v, "") for v in values)


class ISLAND_PG_group(bpy.types.PropertyGroup):
    # ``name`` (the group id) comes from PropertyGroup
    path: StringProperty(name="Path", subtype="DIR_PATH")
    status: StringProperty(name="Status")
    latest_iter: IntProperty(name="Latest iteration", default=-1)


class ISLAND_PG_member(bpy.types.PropertyGroup):
    edge: StringProperty(name="Edge")
    has_facing: BoolProperty(name="Facing applies")
    facing_error_deg: FloatProperty(name="Facing error", unit="ROTATION", subtype="NONE")
    clearance_m: FloatProperty(name="Clearance", unit="LENGTH")
    penetrations: IntProperty(name="Penetrations")


class ISLAND_PG_proposal_member(bpy.types.PropertyGroup):
    # ``name`` (the object) comes from PropertyGroup
    confidence: FloatProperty(name="Confidence", min=0.0, max=1.0)
    uncertain: StringProperty(name="Uncertain", description="Why this member is in doubt")


def _proposal_changed(self, context) -> None:
    from . import ops
    ops.tag_redraw_views()


class ISLAND_PG_proposal(bpy.types.PropertyGroup):
    """One group *Find Groups* proposed (``name`` is its id)."""

    anchor: StringProperty(name="Anchor")
    members: CollectionProperty(type=ISLAND_PG_proposal_member)
    status: StringProperty(name="Status", description="confident / uncertain (the proposer's)")
    confidence: FloatProperty(name="Confidence", min=0.0, max=1.0)
    reasons: StringProperty(name="Reasons", description="Why it is uncertain")
    evidence: StringProperty(name="Evidence")
    accepted: BoolProperty(name="Accept", default=False, update=_proposal_changed,
                           description="Build this group (confident ones start accepted; "
                                       "an uncertain one only when you tick it)")
    edited: BoolProperty(name="Edited", description="Anchor or members set by the artist")
    source: StringProperty(name="Proposal", description="The proposer's group as JSON")

    def member_names(self) -> list[str]:
        return [m.name for m in self.members]


class ISLAND_PG_target_spec(bpy.types.PropertyGroup):
    anchor_role: StringProperty(name="Anchor role", default="long_table")
    member_count: IntProperty(name="Member count", default=1, min=1)
    pattern: EnumProperty(name="Pattern", items=_items(PATTERNS))
    facing: EnumProperty(name="Facing", items=_items(FACINGS))
    spacing: EnumProperty(name="Spacing", items=_items(SPACINGS))
    # negative: a member pushed in under the anchor (island_tools.schemas.MIN_CLEARANCE_M)
    clearance_m: FloatProperty(name="Clearance", default=0.1, min=-1.0, unit="LENGTH",
                               precision=3)
    free_note: StringProperty(name="Note",
                              description="Required when pattern is free or facing is mixed")
    loaded_from: StringProperty(name="Loaded from", description="target_spec.json shown")

    def to_doc(self) -> dict:
        doc = {"anchor_role": self.anchor_role, "member_count": self.member_count,
               "pattern": self.pattern, "facing": self.facing, "spacing": self.spacing,
               "clearance_m": round(self.clearance_m, 6)}
        if self.free_note.strip():
            doc["free_note"] = self.free_note
        return doc

    def fill(self, doc: dict | None, member_count: int, source: str) -> None:
        doc = doc or {}
        self.anchor_role = str(doc.get("anchor_role", self.anchor_role))
        count = doc.get("member_count", member_count)
        self.member_count = count if isinstance(count, int) and count >= 1 else member_count
        for key, allowed in (("pattern", PATTERNS), ("facing", FACINGS),
                             ("spacing", SPACINGS)):
            if doc.get(key) in allowed:
                setattr(self, key, doc[key])
        if isinstance(doc.get("clearance_m"), (int, float)):
            self.clearance_m = float(doc["clearance_m"])
        self.free_note = str(doc.get("free_note") or "")
        self.loaded_from = source


def _group_selected(self, context) -> None:
    from . import ops
    ops.show_group(self)


def _scene_dir_changed(self, context) -> None:
    from . import ops
    ops.refresh_groups(self)


class ISLAND_PG_scene(bpy.types.PropertyGroup):
    scene_dir: StringProperty(
        name="Scene", subtype="DIR_PATH", update=_scene_dir_changed, options=PATH_OPTIONS,
        description="Scene folder (islands go to its relation_groups/), or one group folder")
    groups: CollectionProperty(type=ISLAND_PG_group)
    group_index: IntProperty(name="Group", default=0, update=_group_selected)
    iteration: IntProperty(name="Iteration", default=0, min=0,
                           description="Iteration the browser, render, geometry and merge use")
    new_group_id: StringProperty(name="Group id", default="G1",
                                 description="Directory name under relation_groups/")
    target_spec: PointerProperty(type=ISLAND_PG_target_spec)
    members: CollectionProperty(type=ISLAND_PG_member)
    member_index: IntProperty(default=0)
    members_iter: IntProperty(default=-1)
    review_iter: IntProperty(default=-1)
    review_verdict: StringProperty(name="Verdict",
                                   description="pass / fail / uncertain: the one review")
    review_line: StringProperty(name="Review", description="The review's sentence")
    show_arrows: BoolProperty(name="Forward arrows", default=True,
                              description="Draw each loaded member's forward axis")
    auto_load: BoolProperty(name="Load result", default=True,
                            description="Load each new iteration into the island scene")
    last_message: StringProperty(name="Last result")
    last_level: EnumProperty(name="Level", items=_items(("INFO", "WARNING", "ERROR")),
                             default="INFO")
    last_exit_code: IntProperty(name="Exit code", default=0,
                                description="The CLI exit code of the last failure (0: none)")
    proposals: CollectionProperty(type=ISLAND_PG_proposal)
    proposal_index: IntProperty(name="Proposal", default=0, update=_proposal_changed)
    proposal_doc: StringProperty(name="Proposed graph",
                                 description="The proposer's document (JSON) of Find Groups")
    show_proposals: BoolProperty(name="Proposals", default=True, update=_proposal_changed,
                                 description="Draw the proposals in the viewport")
    running: StringProperty(name="Running", description="The long operator running now")
    progress_line: StringProperty(name="Progress", description="Its last progress line")

    def active_proposal(self):
        if 0 <= self.proposal_index < len(self.proposals):
            return self.proposals[self.proposal_index]
        return None

    def active_group(self):
        if 0 <= self.group_index < len(self.groups):
            return self.groups[self.group_index]
        return None

    def scene_dir_problem(self) -> str | None:
        """Why ``scene_dir`` names no folder yet (None when it does)."""
        value = self.scene_dir.strip()
        if not value:
            return "choose a Scene folder"
        if value.startswith("//") and not bpy.data.filepath:
            return (f"'{value}' is relative to the .blend file, which is not saved yet: "
                    "choose a Scene folder (or save the file first)")
        if not value.startswith("//") and not Path(value).expanduser().is_absolute():
            return f"'{value}' is not an absolute folder: choose a Scene folder"
        return None

    def scene_path(self) -> Path | None:
        if self.scene_dir_problem() is not None:
            return None
        return Path(bpy.path.abspath(self.scene_dir)).expanduser().resolve()


CLASSES = (ISLAND_PG_group, ISLAND_PG_member, ISLAND_PG_proposal_member, ISLAND_PG_proposal,
           ISLAND_PG_target_spec, ISLAND_PG_scene)


def register_properties() -> None:
    bpy.types.Scene.island_refiner = PointerProperty(type=ISLAND_PG_scene)


def unregister_properties() -> None:
    del bpy.types.Scene.island_refiner
