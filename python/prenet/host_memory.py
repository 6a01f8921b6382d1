"""Host memory on a CPU training step: what touching fresh pages costs here, and keeping freed memory for reuse.

PyTorch allocates CPU tensors with the C library's malloc. glibc serves large blocks by mmap and gives freed memory
back to the kernel (it trims the heap's top), so a training step's activations land on fresh pages, each faulted
in on first touch. On bare metal that costs about 0.1-0.3 us a page; in a virtual machine whose host reclaims idle
memory it costs far more (11.5 us a page on this project's machine on 2026-11-26: `bench/cpu_page_faults.py`),
and a convolutional network's CPU step then takes twice as long as its kernels. The GPU has no such cost: PyTorch's
CUDA caching allocator keeps freed blocks. `keep_freed_memory` makes glibc do the same for the rest of the
process: blocks of up to 1 GiB from the heap, whose top is never trimmed. Not always: a tensor's aligned block
(posix_memalign) can leave a hole one alignment too small for the next request of its size, so the heap grows onto
fresh pages; the layer harness keeps its tensors' blocks itself for that (cpp/harness/block_cache.hpp), while the
CPU validation's models fault no page per step with this setting (2026-11-26, counted with getrusage).
"""
import ctypes
import mmap
import time

# mallopt parameters (glibc's malloc.h)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
# Blocks up to this size come from the heap (reused after a free) instead of their own mmap (faulted in afresh).
KEPT_BLOCK_BYTES = 2 ** 30
# The heap's free top is given back to the kernel above this: never, in practice (mallopt takes an int).
NO_TRIM_BYTES = 2 ** 31 - 1
DEFAULT = "the C library's default"
# A fresh page costlier than this (ten times bare metal's) is worth telling a user of CPU predictions about.
COSTLY_PAGE_US = 2.0
KEPT = f"freed memory kept (glibc mallopt: mmap threshold {KEPT_BLOCK_BYTES // 2 ** 20} MiB, no trim)"
_kept = False  # whether this process keeps freed memory (set once, never undone)


def first_touch_us_per_page(megabytes=16, repeats=3):
    """Microseconds to fault in one fresh page of anonymous memory on this machine (the least of `repeats`
    trials of `megabytes` each, one byte written per page); None where anonymous mappings are not offered (Windows)."""
    import numpy as np

    if not hasattr(mmap, "MAP_ANONYMOUS"):
        return None
    size = megabytes * 2 ** 20
    best = float("inf")
    for _ in range(repeats):
        region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        try:
            pages = np.frombuffer(region, dtype=np.uint8)
            started = time.perf_counter()
            pages[::mmap.PAGESIZE] = 1
            best = min(best, time.perf_counter() - started)
            del pages
        finally:
            region.close()
    return 1e6 * best / (size // mmap.PAGESIZE)


def keep_freed_memory():
    """Makes the C library keep freed memory for reuse (KEPT), for the rest of this process: glibc's mallopt
    cannot restore its default, adaptive thresholds. Raises RuntimeError where the C library is not glibc."""
    try:
        mallopt = getattr(ctypes.CDLL(None), "mallopt", None)  # the process's own C library
    except (OSError, TypeError):  # no such handle (Windows)
        mallopt = None
    if mallopt is None:
        raise RuntimeError("keeping freed memory needs glibc's malloc (mallopt), which this process's C library "
                           "lacks; measure without keep_memory")
    if not (mallopt(M_MMAP_THRESHOLD, ctypes.c_int(KEPT_BLOCK_BYTES))
            and mallopt(M_TRIM_THRESHOLD, ctypes.c_int(NO_TRIM_BYTES))):
        raise RuntimeError("the C library refused the mallopt settings that keep freed memory")
    global _kept
    _kept = True
    return KEPT


def allocator():
    """How this process's C library treats freed memory: KEPT once keep_freed_memory ran, else DEFAULT."""
    return KEPT if _kept else DEFAULT


def costly_pages(first_touch_us):
    """Whether faulting in a fresh page at `first_touch_us` (None: unknown) is worth telling a user about."""
    return first_touch_us is not None and first_touch_us >= COSTLY_PAGE_US


def costly_pages_note(first_touch_us):
    """What a CPU estimate should add where faulting in a fresh page costs `first_touch_us` (None: unknown): "" for a
    cheap one, else how that shows in measurements and how to avoid it."""
    if not costly_pages(first_touch_us):
        return ""
    return (f"; faulting in a fresh page costs {first_touch_us:.1f} us here (bare metal: about 0.1-0.3 us), so a "
            "step whose tensors land on fresh pages measures slower than predicted unless freed memory is kept "
            "(prenet.measure(keep_memory=True))")
