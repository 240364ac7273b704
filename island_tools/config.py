"""DIRECTORYS.yaml: defaults for the Blender backend, the renders and the warm worker.

CLI flags override it (``--no-daemon`` sets ``daemon: false``).

``samples`` empty / ``null`` (``Settings.samples is None``) means the engine's default,
``DEFAULT_SAMPLES``: Workbench anti-aliasing 5 (0.25 s for the two 512 px views against
0.70 s at 16, visually the same), Cycles 16 (no denoiser, so fewer is too noisy).
``Settings.render_samples`` resolves it; ``render_job()`` always carries the resolved int.

Lookup: ``--config PATH``, else ``$ISLAND_REFINER_CONFIG``, else ``DIRECTORYS.yaml`` at the
repository root. A missing default file means built-in defaults; a malformed one is a
one-line UsageError naming the key.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from .files.configfile import (  # noqa: F401 - re-exported
    DEFAULT_CONFIG,
    DEFAULT_SAMPLES,
    DEFAULTS,
    ENGINES,
    KEYS,
    REPO_ROOT,
    check,
    flat_yaml,
    read_config,
)


@dataclass(frozen=True)
class Settings:
    """DIRECTORYS.yaml's keys (defaults: ``configfile.DEFAULTS``)."""

    blender_bin: str | None = DEFAULTS["blender_bin"]
    engine: str = DEFAULTS["engine"]
    resolution: int = DEFAULTS["resolution"]
    samples: int | None = DEFAULTS["samples"]  # None = DEFAULT_SAMPLES[engine]
    reuse_renders: bool = DEFAULTS["reuse_renders"]
    daemon: bool = DEFAULTS["daemon"]
    daemon_idle_s: float = DEFAULTS["daemon_idle_s"]
    daemon_max_jobs: int = DEFAULTS["daemon_max_jobs"]
    daemon_max_rss_mb: int = DEFAULTS["daemon_max_rss_mb"]
    decision_budget_s: float = DEFAULTS["decision_budget_s"]

    @property
    def render_samples(self) -> int:
        """``samples``, or the engine's default when it is None."""
        return DEFAULT_SAMPLES[self.engine] if self.samples is None else self.samples

    def render_job(self) -> dict[str, Any]:
        return {"engine": self.engine, "resolution": self.resolution,
                "samples": self.render_samples}


def load_settings(path: str | os.PathLike[str] | None = None) -> Settings:
    return Settings(**read_config(path))


def with_overrides(settings: Settings, **flags: Any) -> Settings:
    """CLI flags (None = not given) override the file's values, validated the same way."""
    given = {k: check(k, v, "command line") for k, v in flags.items() if v is not None}
    return replace(settings, **given)
