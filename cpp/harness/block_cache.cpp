#include "block_cache.hpp"

#include <cstdlib>
#include <new>

namespace prenet::harness {

BlockCache::~BlockCache() { release(); }

void* BlockCache::take(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    const std::size_t size = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    std::lock_guard<std::mutex> lock(mutex_);
    void* block = nullptr;
    auto kept = kept_.find(size);
    if (kept != kept_.end() && !kept->second.empty()) {
        block = kept->second.back();
        kept->second.pop_back();
        kept_bytes_ -= size;
    } else if (posix_memalign(&block, kAlignment, size) != 0) {
        throw std::bad_alloc();
    }
    out_.emplace(block, size);
    return block;
}

void BlockCache::give_back(void* block) noexcept {
    if (block == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto out = out_.find(block);
    if (out == out_.end()) {
        std::free(block);
        return;
    }
    try {
        kept_[out->second].push_back(block);
        kept_bytes_ += out->second;
    } catch (const std::bad_alloc&) {  // no room to remember it: freed instead
        std::free(block);
    }
    out_.erase(out);
}

std::size_t BlockCache::release() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, blocks] : kept_) {
        for (void* block : blocks) std::free(block);
    }
    kept_.clear();
    const std::size_t freed = kept_bytes_;
    kept_bytes_ = 0;
    return freed;
}

std::size_t BlockCache::kept_bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return kept_bytes_;
}

std::size_t BlockCache::blocks_out() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return out_.size();
}

}  // namespace prenet::harness
