// The harness's CPU tensors take their memory from a BlockCache (block_cache.hpp) instead of c10's default CPU
// allocator, so that every timed repetition of a layer reuses the blocks of the one before.
#pragma once

#include <cstddef>
#include <string>

namespace prenet::harness {

// Makes the cache LibTorch's CPU allocator for the rest of the process and says so.
std::string cache_cpu_tensor_blocks();

// Frees the blocks kept for the layer just timed and returns their bytes (between layers, whose sizes differ).
std::size_t release_cpu_tensor_blocks();

}  // namespace prenet::harness
