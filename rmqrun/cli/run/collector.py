"""The garbage collector's settings in the ``rmqrun run`` process (the supervisor).

CPython collects its youngest generation every 700 allocations of container
objects and the whole heap every hundred of those. The supervisor allocates a
few such objects per message (a POP consumer: a popped message, its entry, its
receipt), keeps them a few milliseconds, and drops them with reference counts,
so nearly every collection finds nothing, while each full one walks every
object of the process (its imported modules included). A 50k no-op POP drain
spent about 1 us of the supervisor's ~8 us per message in the collector, two
thirds of it in full collections (issue #32).

So, once the supervisor is built: what exists then (modules, classes, settings:
they live as long as the process) is moved out of the collector's sight
(``gc.freeze``), and the youngest generation is collected every
``GEN0_THRESHOLD`` allocations instead of 700. Cycles are still collected,
only in fewer, larger passes; memory held by uncollected cycles in between is
bounded by that count of young objects. A frozen object that later ends in a
cycle of garbage is never collected (reference counting still frees the rest):
that is at most what existed at startup, once.
"""

from __future__ import annotations

import gc

#: container allocations (net) between collections of the youngest generation (CPython's default: 700)
GEN0_THRESHOLD = 10_000


def settle() -> None:
    """Collect once, freeze what is left, and raise the youngest generation's threshold."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(max(GEN0_THRESHOLD, gc.get_threshold()[0]), gen1, gen2)
