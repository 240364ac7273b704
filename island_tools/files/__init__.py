"""Files: atomic writes, strict JSON, .blend headers, locks and DIRECTORYS.yaml.

stdlib-only modules the worker and the thin CLI client import too.
"""
