"""Largest class and largest file of a package directory, and its import circles.

    python tools/package_map.py island_tools/scene

Relative imports only (``from .x import``, ``from . import x``), one level, as the scene
director's modules import each other. Used for the closing note of the stage split (issue
17): before it, ``git archive 14e8a17 island_tools/scene | tar -x -C /tmp/before`` and run
this on ``/tmp/before/island_tools/scene``.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path


def scan(root: Path) -> tuple[tuple[int, str, int], tuple[str, int], list[tuple[str, ...]]]:
    classes: list[tuple[int, str, int]] = []
    sizes: dict[str, int] = {}
    graph: dict[str, set[str]] = {}
    for path in sorted(root.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        sizes[path.name] = len(text.splitlines())
        deps: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                methods = sum(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef))
                              for b in node.body)
                end = node.end_lineno or node.lineno
                classes.append((end - node.lineno + 1, f"{path.stem}.{node.name}", methods))
            elif isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    deps.add(node.module.split(".")[0])
                else:
                    deps.update(alias.name for alias in node.names)
        graph[path.stem] = {d for d in deps if (root / f"{d}.py").is_file()}
    circles: set[tuple[str, ...]] = set()

    def walk(module: str, path: list[str], seen: set[tuple[str, str]]) -> None:
        for dep in sorted(graph.get(module, ())):
            if dep in path:
                cycle = path[path.index(dep):]
                k = cycle.index(min(cycle))
                circles.add(tuple(cycle[k:] + cycle[:k]))
            elif (module, dep) not in seen:
                seen.add((module, dep))
                walk(dep, [*path, dep], seen)

    for module in graph:
        walk(module, [module], set())
    largest_file = max(sizes.items(), key=lambda kv: kv[1])
    return max(classes), largest_file, sorted(circles)


def main() -> int:
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        print("usage: python tools/package_map.py <package directory>", file=sys.stderr)
        return 2
    (lines, name, methods), (fname, flines), circles = scan(Path(sys.argv[1]))
    print(f"largest class: {name}, {lines} lines / {methods} methods")
    print(f"largest file: {fname}, {flines} lines")
    print(f"import circles: {len(circles)} {circles}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
