// The harness's LibTorch-free parts: the request protocol, statistics, the repeat loop, the CUDA refusal and
// keeping freed memory.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "block_cache.hpp"
#include "cuda_driver.hpp"
#include "freed_memory.hpp"
#include "json_line.hpp"
#include "phase_clock.hpp"
#include "repeat_timer.hpp"
#include "request.hpp"

namespace {

using namespace prenet::harness;

TEST(Request, ParsesKeyValuePairs) {
    const auto r = Request::parse("id=7 kind=conv2d batch=4  optimizer=adam");
    EXPECT_EQ(r.text("id"), "7");
    EXPECT_EQ(r.integer("batch"), 4);
    EXPECT_EQ(r.integer("padding", 1), 1);
    EXPECT_EQ(r.text("activation", "none"), "none");
}

TEST(Request, RejectsMalformedInput) {
    EXPECT_THROW(Request::parse("id=1 broken"), std::invalid_argument);
    EXPECT_THROW(Request::parse("id=1 id=2"), std::invalid_argument);
    EXPECT_THROW(Request::parse("=3"), std::invalid_argument);
    const auto r = Request::parse("batch=4x size=");
    EXPECT_THROW(r.integer("batch"), std::invalid_argument);
    EXPECT_THROW(r.integer("size"), std::invalid_argument);
    EXPECT_THROW(r.text("missing"), std::invalid_argument);
}

TEST(JsonLine, EscapesAndWritesNullForNonFinite) {
    const auto line = JsonLine().add("a", "say \"hi\"\n").add("b", 1.5).add("c", std::int64_t{3})
                          .add("d", std::numeric_limits<double>::quiet_NaN()).str();
    EXPECT_EQ(line, R"({"a":"say \"hi\"\u000a","b":1.5,"c":3,"d":null})");
}

TEST(Statistics, QuantilesInterpolate) {
    EXPECT_DOUBLE_EQ(quantile({4, 1, 3, 2}, 0.5), 2.5);
    EXPECT_DOUBLE_EQ(quantile({1, 2, 3, 4, 5}, 0.25), 2);
    EXPECT_DOUBLE_EQ(quantile({7}, 0.75), 7);
    EXPECT_THROW(quantile({}, 0.5), std::invalid_argument);
    const auto s = summarise({5, 1, 3});
    EXPECT_DOUBLE_EQ(s.median, 3);
    EXPECT_DOUBLE_EQ(s.min, 1);
    EXPECT_DOUBLE_EQ(s.max, 5);
}

// A clock that reports scripted durations, to test the repeat loop's stopping rules.
class ScriptedClock : public PhaseClock {
public:
    explicit ScriptedClock(std::vector<double> per_iteration) : durations_(std::move(per_iteration)) {}
    void mark() override { ++marks_; }
    std::vector<double> finish() override {
        std::vector<double> phases(marks_ - 1, durations_[next_ % durations_.size()] / (marks_ - 1));
        ++next_;
        marks_ = 0;
        return phases;
    }
    std::size_t finished() const { return next_; }

private:
    std::vector<double> durations_;
    std::size_t next_ = 0;
    int marks_ = 0;
};

void two_phases(PhaseClock& c) {
    c.mark();
    c.mark();
    c.mark();
}

TEST(RepeatTimer, StopsAtMinRepsWhenStable) {
    ScriptedClock clock({2.0});
    RepeatPolicy policy;
    policy.warmup_ms = 0;
    const auto m = measure(two_phases, clock, policy);
    EXPECT_TRUE(m.converged);
    EXPECT_EQ(m.reps, policy.min_reps);
    EXPECT_EQ(clock.finished(), static_cast<std::size_t>(policy.warmup_iterations + policy.min_reps));
    ASSERT_EQ(m.phases.size(), 2u);
    EXPECT_DOUBLE_EQ(m.phases[0].median, 1.0);
    EXPECT_DOUBLE_EQ(m.total.median, 2.0);
}

TEST(RepeatTimer, NoisyIterationsStopAtTheRepCap) {
    ScriptedClock clock({1.0, 3.0, 1.0, 5.0});
    RepeatPolicy policy;
    policy.warmup_ms = 0;
    policy.max_reps = 12;
    policy.max_ms = 1e9;
    const auto m = measure(two_phases, clock, policy);
    EXPECT_FALSE(m.converged);
    EXPECT_EQ(m.reps, 12);
    EXPECT_DOUBLE_EQ(m.total.max, 5.0);
}

TEST(CudaTiming, RefusesClearlyWithoutADriver) {
    const auto& driver = CudaDriver::instance();
    if (driver.available()) GTEST_SKIP() << "a CUDA driver is present";
    EXPECT_NE(driver.why_unavailable().find("libcuda.so.1"), std::string::npos) << driver.why_unavailable();
    EXPECT_THROW(make_clock(true), std::runtime_error);
    EXPECT_NO_THROW(make_clock(false));
}

TEST(HostClock, MeasuresNonNegativeDurations) {
    HostClock clock;
    clock.mark();
    clock.mark();
    const auto d = clock.finish();
    ASSERT_EQ(d.size(), 1u);
    EXPECT_GE(d[0], 0.0);
    EXPECT_TRUE(clock.finish().empty());
}

TEST(BlockCache, HandsAFreedBlockBackForItsSize) {
    BlockCache cache;
    EXPECT_EQ(cache.take(0), nullptr);
    void* first = cache.take(1000);
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(first) % BlockCache::kAlignment, 0u);
    std::memset(first, 1, 1000);
    cache.give_back(first);
    EXPECT_EQ(cache.kept_bytes(), 1024u);  // rounded up to the alignment
    EXPECT_EQ(cache.take(1020), first);    // the same rounded size: the kept block
    EXPECT_EQ(cache.kept_bytes(), 0u);
    void* other = cache.take(2048);        // another size: a new block
    EXPECT_NE(other, first);
    EXPECT_EQ(cache.blocks_out(), 2u);
    cache.give_back(first);
    cache.give_back(other);
    cache.give_back(nullptr);
    EXPECT_EQ(cache.blocks_out(), 0u);
    EXPECT_EQ(cache.release(), 1024u + 2048u);
    EXPECT_EQ(cache.kept_bytes(), 0u);
}

TEST(BlockCache, FreesABlockItDidNotHandOut) {
    BlockCache cache;
    cache.give_back(std::malloc(64));  // std::free'd, not kept (a leak or double free shows under a sanitizer)
    EXPECT_EQ(cache.kept_bytes(), 0u);
    EXPECT_EQ(cache.blocks_out(), 0u);
}

TEST(BlockCache, RefusesASizeNoSystemHas) {
    BlockCache cache;
    EXPECT_THROW(cache.take(std::numeric_limits<std::size_t>::max() / 2), std::bad_alloc);
}

#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
TEST(FreedMemory, StaysInTheHeapAfterAFree) {
    // glibc's default maps a 64 MiB block on its own and unmaps it when freed; kept, it comes from the heap and
    // stays there for the next allocation
    EXPECT_EQ(keep_freed_memory().rfind("kept", 0), 0u);
    const std::size_t block = std::size_t{64} << 20;
    void* memory = std::malloc(block);
    ASSERT_NE(memory, nullptr);
    std::memset(memory, 1, block);
    std::free(memory);
    EXPECT_GE(mallinfo2().arena, block);
}
#endif

}  // namespace
