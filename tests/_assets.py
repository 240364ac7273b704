"""Locate the CC0 furniture assets in the repository and load them in Blender's frame.

Tests read the repository's own ``assets/`` folder (never a sibling checkout), with its
manifest's true fronts as the oracle; this loader is trimesh's, not the project's.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
ASSETS_DIR = REPO_ROOT / "assets"
MANIFEST = ASSETS_DIR / "MANIFEST.tsv"

# glTF is Y-up with +Z toward the viewer; Blender's importer maps (x, y, z) -> (x, -z, y).
GLTF_TO_BLENDER = np.array([[1.0, 0.0, 0.0],
                            [0.0, 0.0, -1.0],
                            [0.0, 1.0, 0.0]])


@dataclass(frozen=True)
class AssetRow:
    file: str
    category: str
    front_axis: str

    @property
    def path(self) -> Path:
        return ASSETS_DIR / self.file

    @property
    def symmetric(self) -> bool:
        return self.front_axis.strip().lower().startswith("none")

    @property
    def front(self) -> np.ndarray | None:
        """The true front in Blender's frame after glTF import (the manifest's own words:
        ``+X`` ... or the shared kit's ``"+Z (native file frame, Y-up) / -Y (Blender after
        import)"``), parsed here independently of ``fixtures.assets``."""
        if self.symmetric:
            return None
        word = self.front_axis.split("/")[-1].split()[0]
        return {"+X": np.array([1.0, 0.0]), "-X": np.array([-1.0, 0.0]),
                "+Y": np.array([0.0, 1.0]), "-Y": np.array([0.0, -1.0])}[word]


def assets_available() -> bool:
    return MANIFEST.is_file()


def manifest_rows() -> list[AssetRow]:
    """The shared kit's manifest and every source folder's own (the generated corpus)."""
    rows = []
    for manifest in [MANIFEST, *sorted(ASSETS_DIR.glob("*/MANIFEST.tsv"))]:
        with manifest.open(newline="", encoding="utf-8") as fh:
            rows += [AssetRow(file=r["file"], category=r["category"], front_axis=r["front_axis"])
                     for r in csv.DictReader(fh, delimiter="\t")]
    return rows


def load_blender_mesh(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(vertices (n,3) float64, faces (m,3) int64) with node transforms baked, Blender Z-up."""
    import trimesh

    mesh = trimesh.load(str(path), force="scene").to_geometry()
    verts = np.asarray(mesh.vertices, dtype=np.float64) @ GLTF_TO_BLENDER.T
    return verts, np.asarray(mesh.faces, dtype=np.int64)
