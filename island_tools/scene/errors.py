"""Exit codes the scene pipeline adds to ``island_tools.errors`` (0-8 keep their meaning; 9 is
the agent adapter's). A separate range so a farm can tell scene-level outcomes apart.

====  ==========================================================================
20    inputs/relation_graph.json invalid: malformed, unknown object names, an object
      in two groups, the anchor listed as a member, an empty group, an unsafe group id
21    the run finished but at least one group is in ``islands_failed`` (every other
      output, the merged scene included, was still written)
22    integrity: the input scene changed during the run, or the merged scene read back
      from disk does not hold the poses that were written (the earlier merged scene, or
      none, is left in place)
23    refused up front: a group's furniture unit cannot be refined as it is (keyframed,
      driven or constrained transform, a parent with non-uniform scale or shear, linked
      from a library, excluded from the view layer, tilted, no geometry); the message names
      the member, the object, the cause and the fix. By default a refused unit costs its
      own group only (exit 24 below); with ``--strict`` the whole scene is refused and
      nothing was written
24    partial: the run finished and every other group was refined and merged, but at
      least one group was refused (its objects are left as the input scene has them;
      ``metrics.json``, ``state.json::islands_refused`` and the ledger name each refused
      group with its one-line cause and fix); or a group ``propose`` marked uncertain was
      refined with its membership doubt open (``state.json::islands_uncertain``; its
      verdict is ``uncertain``, never ``pass``). 21 wins when a group also failed
====  ==========================================================================
"""
from __future__ import annotations

from ..errors import GroupInputError, IslandError

EXIT_RELATION_GRAPH = 20
EXIT_GROUPS_FAILED = 21
EXIT_INTEGRITY = 22
EXIT_REFUSED = 23
EXIT_PARTIAL = 24


class RelationGraphError(GroupInputError):
    exit_code = EXIT_RELATION_GRAPH


class IntegrityError(IslandError):
    exit_code = EXIT_INTEGRITY


class SceneRefusedError(GroupInputError):
    """A unit of the relation graph cannot be refined as the scene holds it (exit 23)."""

    exit_code = EXIT_REFUSED
