#include "cpu_tensor_blocks.hpp"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <cstdint>
#include <cstring>

#include "block_cache.hpp"

namespace prenet::harness {
namespace {

BlockCache& tensor_blocks() {
    static BlockCache* blocks = new BlockCache();  // never destroyed: a tensor may be freed during static teardown
    return *blocks;
}

void give_back(void* block) { tensor_blocks().give_back(block); }

c10::DataPtr cached_block(std::size_t bytes) {
    void* block = tensor_blocks().take(bytes);
    return {block, block, &give_back, c10::Device(c10::DeviceType::CPU)};
}

// c10::Allocator differs between LibTorch versions: allocate() is const before torch 2.3 and not since, and
// copy_data() is required since. Both forms of allocate() are declared, and copy_data(), without `override`: each
// overrides where the installed version declares it and is an unused overload elsewhere.
class CachedCpuAllocator final : public c10::Allocator {
public:
    c10::DataPtr allocate(std::size_t bytes) const { return cached_block(bytes); }
    c10::DataPtr allocate(std::size_t bytes) { return cached_block(bytes); }
    c10::DeleterFnPtr raw_deleter() const override { return &give_back; }
    void copy_data(void* destination, const void* source, std::size_t bytes) const {
        std::memcpy(destination, source, bytes);
    }
};

}  // namespace

std::string cache_cpu_tensor_blocks() {
    static CachedCpuAllocator allocator;
    c10::SetCPUAllocator(&allocator, UINT8_MAX);  // above the default's registration (priority 0)
    return "tensor blocks kept by size between repetitions, freed between layers";
}

std::size_t release_cpu_tensor_blocks() { return tensor_blocks().release(); }

}  // namespace prenet::harness
