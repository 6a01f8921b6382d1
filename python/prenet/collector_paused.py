"""Python's cyclic garbage collector held off while a function runs (`collector_paused`).

A predict makes tens of thousands of short-lived objects (an Op per traced operator, its shapes, meta tensors,
autograd nodes); refcounting frees nearly all of them when the predict ends. With the collector on, the objects
alive at each of its young-generation passes (every 700 allocations) are promoted, and every few predicts the
promotions add up to a full collection, which walks every object the process holds (PyTorch's and the user's: about
48 ms here beside a ResNet-50, about 4 ms per predict on average: bench/collector_pause.py). Paused, no pass runs,
nothing is promoted, and what the predict freed leaves no debt behind. The collector is process-wide: another
thread's reference cycles wait for the predict to end.
"""
import functools
import gc


def collector_paused(function):
    """`function` with the collector paused while it runs, and turned back on after (also when it raises), unless
    it was already off."""
    @functools.wraps(function)
    def paused(*args, **kwargs):
        enabled = gc.isenabled()
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()
    return paused
