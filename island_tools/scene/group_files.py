"""Files of one group that several stages read and write: the poses of a round
(``rounds/round_<k>/poses.json``) and ``forward_axes.json``."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..files import atomic
from ..files.jsonio import read_object
from ..measure import frames, meshcache
from ..measure.forward_axis import forward_axes_document
from ..schemas import load_metadata
from .errors import IntegrityError
from .paths import GroupPaths


def poses_doc(poses: Mapping[str, np.ndarray]) -> dict[str, Any]:
    return {"frame": "canonical", "poses": {n: frames.to_list(m) for n, m in poses.items()}}


def load_poses(path: Path) -> dict[str, np.ndarray]:
    doc = read_object(path, IntegrityError, path.name, "rerun the group")
    return {n: frames.as_matrix(m) for n, m in doc["poses"].items()}


def write_forward_axes(gp: GroupPaths) -> dict[str, Any]:
    """``forward_axes.json`` exactly as init_iter0 computes it (mesh-cache properties, then
    metadata overrides), so the group is complete for any policy before its loop starts."""
    meshes, props = meshcache.load_shared(gp.meshes)
    metadata = load_metadata(gp.metadata)
    overrides = {n: p["forward_axis"] for n, p in props.items() if "forward_axis" in p}
    overrides.update(metadata.forward_axis_overrides)
    doc = forward_axes_document({n: meshes[n] for n in metadata.members}, metadata.anchor_id,
                                overrides)
    atomic.write_json(gp.forward_axes, doc)
    return doc
