// Host memory blocks kept by size for reuse, as PyTorch's CUDA caching allocator keeps device memory: a layer timed
// again and again gets back the very blocks its previous repetition freed, so no timed repetition faults in fresh
// pages. glibc alone does not guarantee that even with freed memory kept (freed_memory.hpp): a tensor's 64-byte
// aligned block comes from posix_memalign, which asks the heap for the size plus the alignment and gives the spare
// ends back, so a freed block is one alignment too small for the next request of the same size wherever small
// allocations took its neighbours, and the heap grows onto fresh pages instead (a softmax backward on 939x3698
// floats: 41 ms a repetition against 2 ms, 2026-11-26).
#pragma once

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace prenet::harness {

class BlockCache {
public:
    static constexpr std::size_t kAlignment = 64;  // c10's CPU allocator aligns tensors' data to 64 bytes

    BlockCache() = default;
    BlockCache(const BlockCache&) = delete;
    BlockCache& operator=(const BlockCache&) = delete;
    ~BlockCache();  // frees the kept blocks; blocks still out must not be given back afterwards

    // A block of at least `bytes` (a multiple of kAlignment), kAlignment-aligned: a kept one of that size where
    // there is one, else a new one. nullptr for 0 bytes; std::bad_alloc when the system has no memory left.
    void* take(std::size_t bytes);
    // Keeps a block from take() for the next request of its size; nullptr is ignored. A pointer this cache did
    // not hand out is passed to std::free.
    void give_back(void* block) noexcept;
    // Frees every kept block and returns their bytes (between layers, whose sizes differ).
    std::size_t release();

    std::size_t kept_bytes() const;
    std::size_t blocks_out() const;

private:
    mutable std::mutex mutex_;
    std::unordered_map<std::size_t, std::vector<void*>> kept_;  // size -> free blocks of that size
    std::unordered_map<void*, std::size_t> out_;                // block handed out -> its size
    std::size_t kept_bytes_ = 0;
};

}  // namespace prenet::harness
