"""The long-lived processes' start-up heap, frozen: the cyclic collector leaves it alone.

Python's cyclic collector runs a full collection whenever the objects that survived the younger
collections have grown by a quarter since the last one, and a full collection scans every
object the process tracks. After start-up Daphne tracks some 170,000 (Django, Channels, the
MCP SDK and pydantic's schemas, the models, the settings): one full collection took 0.1 to 0.3 s
of the event loop, during which every turn and frame of the process waited (docs/benchmarks.md,
*The turn's start, profiled*). Nearly all of those objects live as long as the process, so
:func:`freeze_start_up` collects once, before any traffic, and moves the survivors to the
permanent generation (``gc.freeze``) that collections skip. What is built afterwards (sessions,
turns, listings) is collected as before; the young generation's threshold is raised from 700
allocations to :data:`YOUNG_THRESHOLD`, so a turn's short-lived objects mostly die before a
collection would promote them.

Called by the processes that serve: ``boocode.asgi`` (Daphne) once the application is built,
and ``manage.py hub_worker`` before it serves. Not by management commands that end.
"""

from __future__ import annotations

import gc

# Allocations (minus deallocations) of tracked objects between two young collections. A turn
# allocates tens of thousands; at 700 the collector ran about twice per turn and promoted what
# a turn still held to the older generations, whose collections then scanned it again.
YOUNG_THRESHOLD = 10_000


def freeze_start_up() -> int:
    """Collect once, freeze what survives, raise the young threshold; the number of objects frozen."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
    return gc.get_freeze_count()
