"""Where Blender's Python API differs between the Blenders the add-on runs in (3.4 - 4.1 as
a legacy add-on, 4.2 LTS and 4.5 LTS, 5.x): one place, each difference a function of the
version tuple, so that ``tests/test_lts.py`` checks every branch without that Blender.

No ``bpy`` import at module level: ``build.py`` and the tests import this under a plain
Python.
"""
from __future__ import annotations

Version = tuple[int, ...]


def _version() -> Version:
    import bpy

    return tuple(bpy.app.version)


def blf_size_args(px: float, scale: float = 1.0, version: Version | None = None) -> tuple:
    """``blf.size(font_id, *args)``: 4.0 dropped the dpi argument (the size is in pixels)."""
    version = _version() if version is None else version
    if version >= (4, 0, 0):
        return (px * scale,)
    return (px, int(72 * scale))


def set_font_size(font_id: int, px: float, scale: float = 1.0) -> None:
    import blf

    blf.size(font_id, *blf_size_args(px, scale))


def uniform_color_shader_names(version: Version | None = None) -> tuple[str, ...]:
    """Built-in flat-colour shader names, the version's own first: 4.0 dropped the ``3D_``
    prefix (3.4 knows both)."""
    version = _version() if version is None else version
    if version >= (4, 0, 0):
        return ("UNIFORM_COLOR",)
    return ("3D_UNIFORM_COLOR", "UNIFORM_COLOR")


def uniform_color_shader():
    """The flat-colour shader, or None where there is no GPU (background mode)."""
    import gpu

    for name in uniform_color_shader_names():
        try:
            return gpu.shader.from_builtin(name)
        except (ValueError, TypeError, SystemError):
            continue
    return None


def path_options(version: Version | None = None) -> set[str]:
    """``options`` of a path property: 4.5 warns about ``//`` in a path property unless it
    says it supports it; older Blenders do not know the option (and accept ``//``)."""
    version = _version() if version is None else version
    return {"PATH_SUPPORTS_BLEND_RELATIVE"} if version >= (4, 5, 0) else set()
