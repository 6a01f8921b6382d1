// Freed host memory kept for reuse in the harness process. glibc's malloc serves large blocks by mmap and trims
// its heap's free top, so a layer timed again and again can fault in fresh pages on every repetition; where a
// fresh page is costly (11 us in this project's virtual machine, 2026-11-26; bench/cpu_page_faults.py) that
// inflated 4 of 120 CPU rows drawn from data/cpu, those with large tensors, 5-9 times (data/README.md). PyTorch's
// CUDA caching allocator keeps device memory the same way. Tensors' own blocks are kept by block_cache.hpp, which
// glibc's settings alone do not ensure.
#pragma once

#include <string>

namespace prenet::harness {

// Blocks up to this size come from the heap, reused after a free, instead of their own mmap.
constexpr int kKeptBlockBytes = 1 << 30;

// Makes the C library keep freed memory (glibc: mmap threshold kKeptBlockBytes, no trimming) for the rest of the
// process and says so; on another C library nothing changes and the text says that.
std::string keep_freed_memory();

}  // namespace prenet::harness
