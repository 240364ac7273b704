"""Build the installable add-on zip (stdlib only; no Blender needed).

    python blender_addon/build.py [--out build/addon]  ->  build/addon/island_refiner-<version>.zip

One zip serves both installs: its files sit in a single top-level folder ``island_refiner/``,
which Blender 4.2+ accepts as an extension (the manifest is found in that folder) and which
Blender 3.4's *Install add-on* unpacks as the legacy add-on ``island_refiner`` (``bl_info``).
"""
import argparse
import re
import sys
import zipfile
from pathlib import Path

ADDON_DIR = Path(__file__).resolve().parent
EXCLUDE = ("build.py",)


def manifest_field(name: str) -> str:
    text = (ADDON_DIR / "blender_manifest.toml").read_text(encoding="utf-8")
    match = re.search(rf'^{name}\s*=\s*"([^"]+)"', text, re.MULTILINE)
    if match is None:
        raise ValueError(f"blender_manifest.toml has no {name}")
    return match.group(1)


def addon_files() -> list[Path]:
    files = [p for p in sorted(ADDON_DIR.glob("*.py")) if p.name not in EXCLUDE]
    return files + [ADDON_DIR / "blender_manifest.toml"]


def build(out_dir: str | Path) -> Path:
    """Write the zip (reproducible: fixed timestamps, sorted entries) and return its path."""
    package = manifest_field("id")
    out = Path(out_dir) / f"{package}-{manifest_field('version')}.zip"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in addon_files():
            info = zipfile.ZipInfo(f"{package}/{path.name}", date_time=(2024, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())
    tmp.replace(out)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ADDON_DIR.parent / "build" / "addon"))
    print(build(p.parse_args(argv).out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
