"""Tier 1: the PyYAML-free reader of flat DIRECTORYS.yaml files agrees with yaml.safe_load.

``island_tools.config.flat_yaml`` either returns exactly what ``yaml.safe_load`` returns or
None (the caller then uses PyYAML), for every document of a generated corpus of tricky
scalars, keys and layouts.
"""
from __future__ import annotations

import itertools
import math
import random
from pathlib import Path

import pytest
import yaml

from island_tools.config import DEFAULT_CONFIG, flat_yaml, load_settings

VALUES = ["", "~", "null", "NULL", "Null", "nil", "true", "True", "TRUE", "tRue", "false",
          "yes", "No", "on", "OFF", "y", "n", "0", "1", "-1", "+5", "007", "012", "0x1F",
          "0o17", "1_000", "1.5", "-0.25", "1.", ".5", "1e5", "1.0e+5", "1.5E-3", ".inf",
          "-.inf", ".nan", "2001-12-14", "12:30", "1:20:30", '""', "''", '"a b"', "'a b'",
          '"a\\"b"', '"a\\nb"', "'it''s'", "\"'\"", "bpy", "workbench", "/usr/bin/blender",
          "~/bin/blender", "C:/x", "a b", "a: b", "a #c", "a#c", "[1, 2]", "{a: 1}", "&x 1",
          "*x", "!!str 5", "- 1", "|", ">", "@x", "`x`", "%x", "a,b", "~x", "_x", "-x",
          "x-y.z_1", "=", "?", "? x", "!x", '"', "'", "Yes", "ON"]
KEYS = ["samples", "engine", "true", "null", "yes", "On", "_k", "k2", "1", "a b", "K"]
LAYOUTS = ["{k}: {v}\n", "{k}:{v}\n", "{k}:  {v}  \n", "  {k}: {v}\n", "{k}: {v} # c\n",
           "# c\n{k}: {v}\n", "---\n{k}: {v}\n", "{k}: {v}\n...\n", "\n\n{k}: {v}\n\n",
           "{k}:\n  {v}\n", "{k}: {v}\r\n", "{k}:\t{v}\n"]


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def _check(text: str) -> bool:
    """True if flat_yaml answered (and agreed), False if it deferred to PyYAML."""
    flat = flat_yaml(text)
    if flat is None:
        return False
    try:
        full = yaml.safe_load(text)
    except yaml.YAMLError:
        pytest.fail(f"flat_yaml read {text!r} that PyYAML rejects: {flat!r}")
    assert isinstance(full, dict) and list(flat) == [str(k) for k in full], (text, flat, full)
    for (k, v), (fk, fv) in zip(flat.items(), full.items()):
        assert isinstance(fk, str) and k == fk and _same(v, fv), (text, flat, full)
    return True


def test_every_scalar_key_and_layout() -> None:
    answered = sum(_check(layout.format(k=k, v=v))
                   for layout, k, v in itertools.product(LAYOUTS, KEYS, VALUES))
    assert answered > 300  # the fast path is really taken for the plain cases


def test_random_multi_line_documents() -> None:
    rng = random.Random(7)
    answered = 0
    for _ in range(3000):
        lines = [rng.choice(LAYOUTS[:3] + LAYOUTS[5:6] + ["\n"]).format(
            k=rng.choice(KEYS), v=rng.choice(VALUES)) for _ in range(rng.randint(1, 6))]
        answered += _check("".join(lines))
    assert answered > 50  # multi-line documents of only plain scalars


def test_bundled_config_takes_the_fast_path_with_the_same_settings(tmp_path) -> None:
    text = Path(DEFAULT_CONFIG).read_text(encoding="utf-8")
    assert flat_yaml(text) == yaml.safe_load(text)
    nested = tmp_path / "nested.yaml"  # anything else still goes through PyYAML
    kept = "".join(ln for ln in text.splitlines(keepends=True) if not ln.startswith("samples:"))
    nested.write_text(kept + "samples: 256  # trailing comment\n")   # (a key given twice
    # is refused: test_faults.py)
    assert flat_yaml(nested.read_text()) is None
    assert load_settings(nested).samples == 256
