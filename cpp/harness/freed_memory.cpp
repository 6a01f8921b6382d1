#include "freed_memory.hpp"

#include <climits>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace prenet::harness {

std::string keep_freed_memory() {
#if defined(__GLIBC__)
    if (mallopt(M_MMAP_THRESHOLD, kKeptBlockBytes) == 1 && mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1)
        return "kept (glibc mallopt: mmap threshold " + std::to_string(kKeptBlockBytes >> 20) + " MiB, no trim)";
    return "the C library's default (glibc refused mallopt)";
#else
    return "the C library's default (not glibc)";
#endif
}

}  // namespace prenet::harness
