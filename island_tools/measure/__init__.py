"""Measures: what a pose, a footprint, a front or an obstacle is, in metres.

numpy-only modules the worker may import too (``frames``, ``meshcache``);
``geometry`` measures an island state (geometry.json), ``forward_axis`` finds
fronts and symmetry, ``layout`` the edges and slots of a pattern,
``obstacles`` walls and bystanders.
"""
