#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "prenet/gpu_catalog.hpp"

namespace {

const std::string kCatalog = std::string(PRENET_DATA_DIR) + "/gpus.csv";
const std::string kHeader =
    "name,aliases,vendor,architecture,year,sm_count,cuda_cores,boost_clock_mhz,fp32_tflops,tf32_tflops,fp16_tflops,"
    "bf16_tflops,memory_gb,memory_type,memory_bandwidth_gbs,l2_cache_mb,bus,source\n";

std::string write_temp(const std::string& text) {
    const std::string path = ::testing::TempDir() + "catalog_" +
                             ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".csv";
    std::ofstream(path) << text;
    return path;
}

std::string load_error(const std::string& text) {
    try {
        prenet::GpuCatalog::load_csv(write_temp(text));
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "";
}

TEST(GpuCatalog, HasTheRequiredAccelerators) {
    const auto catalog = prenet::GpuCatalog::load_csv(kCatalog);
    EXPECT_GE(catalog.gpus().size(), 25u);
    for (const char* name : {"P4", "P100", "RTXA4000", "T4", "V100", "L4", "RTX4090", "V100 SXM2", "V100 PCIe",
                             "A100 40GB", "A100 80GB", "A10", "A30", "L4", "L40S", "RTX 3090", "RTX 4090",
                             "RTX A6000", "H100 SXM", "H100 PCIe", "H200", "B200"}) {
        EXPECT_NO_THROW(catalog.find(name)) << name;
    }
}

TEST(GpuCatalog, LookupTakesTorchNamesAndAliasesInAnyCase) {
    const auto catalog = prenet::GpuCatalog::load_csv(kCatalog);
    EXPECT_EQ(catalog.find("NVIDIA H100 80GB HBM3").name, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(catalog.find("h100").name, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(catalog.find("Tesla V100-PCIE-32GB").memory_gb, 32);
    EXPECT_EQ(catalog.find("v100").memory_gb, 16);
    EXPECT_EQ(catalog.find("NVIDIA GeForce RTX 4090").name, catalog.find("rtx4090").name);
    EXPECT_EQ(catalog.find("nvidia a100-pcie-40gb").sm_count, 108);
    EXPECT_EQ(catalog.find("NVIDIA A100 80GB PCIe").memory_bandwidth_gbs, 1935);
    // The paper's Table 2 figures are kept for its seven GPUs.
    EXPECT_DOUBLE_EQ(catalog.find("P4").fp32_tflops, 5.7);
    EXPECT_DOUBLE_EQ(catalog.find("RTX4090").fp32_tflops, 82.58);
    EXPECT_FALSE(catalog.find("T4").bf16_tflops.has_value());
    EXPECT_DOUBLE_EQ(*catalog.find("H100").bf16_tflops, 989.4);
}

TEST(GpuCatalog, UnknownNameListsTheClosest) {
    const auto catalog = prenet::GpuCatalog::load_csv(kCatalog);
    try {
        catalog.find("H1000");
        FAIL() << "no exception";
    } catch (const std::invalid_argument& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("unknown GPU 'H1000'"), std::string::npos) << msg;
        EXPECT_NE(msg.find("H100"), std::string::npos) << msg;
    }
    EXPECT_EQ(catalog.closest("A100 40G", 1).front(), "NVIDIA A100-PCIE-40GB");
    // a typo of a model name: its variants (SXM, NVL, PCIe) before other models one letter away (P100)
    for (const auto& gpu : catalog.closest("H1000", 3)) EXPECT_NE(gpu.find("H100"), std::string::npos) << gpu;
    EXPECT_EQ(catalog.closest("H100", 1).front(), "NVIDIA H100 80GB HBM3");  // a name itself first
}

TEST(GpuCatalog, NormalisationDropsVendorWordsAndPunctuation) {
    EXPECT_EQ(prenet::normalise_gpu_name("NVIDIA GeForce RTX 4090"), "rtx4090");
    EXPECT_EQ(prenet::normalise_gpu_name("Tesla V100-PCIE-32GB"), "v100pcie32gb");
    EXPECT_EQ(prenet::normalise_gpu_name("  h100  "), "h100");
}

TEST(GpuCatalog, SpecDistanceIsTheRootMeanSquareLogRatio) {
    const auto catalog = prenet::GpuCatalog::load_csv(kCatalog);
    const auto& v100 = catalog.find("V100 PCIe");
    EXPECT_DOUBLE_EQ(prenet::spec_distance(v100, v100), 0.0);
    prenet::GpuSpec doubled = v100;  // every distance specification twice as large
    doubled.fp32_tflops *= 2;
    doubled.memory_bandwidth_gbs *= 2;
    doubled.sm_count *= 2;
    doubled.l2_cache_mb *= 2;
    EXPECT_NEAR(prenet::spec_distance(v100, doubled), std::log(2.0), 1e-12);
    prenet::GpuSpec wider = v100;  // one of the four specifications 4x: sqrt(log(4)^2 / 4) = log(2)
    wider.sm_count *= 4;
    EXPECT_NEAR(prenet::spec_distance(wider, v100), std::log(2.0), 1e-12);
    EXPECT_LT(prenet::spec_distance(catalog.find("H100"), catalog.find("A100 80GB PCIe")),
              prenet::spec_distance(catalog.find("H100"), catalog.find("T4")));
}

TEST(GpuCatalog, NearestIsTheCandidateLeastDistantInSpecifications) {
    const auto catalog = prenet::GpuCatalog::load_csv(kCatalog);
    const auto& h100 = catalog.find("H100");
    const std::vector<std::string> fitted = {"T4", "A100 80GB PCIe", "V100"};
    EXPECT_EQ(catalog.nearest(h100, fitted), std::optional<std::size_t>(1));
    EXPECT_EQ(catalog.nearest(catalog.find("T4"), fitted), std::optional<std::size_t>(0));  // itself, distance 0
    EXPECT_EQ(catalog.nearest(h100, {"V100 PCIe", "V100 PCIe"}), std::optional<std::size_t>(0));  // the first of equals
    EXPECT_FALSE(catalog.nearest(h100, {}).has_value());
    EXPECT_THROW(catalog.nearest(h100, {"T4", "no such gpu"}), std::invalid_argument);
}

TEST(GpuCatalog, CorruptFilesGiveClearErrors) {
    EXPECT_NE(load_error("").find("empty file"), std::string::npos);
    auto msg = load_error(kHeader + "X,,NVIDIA,A,2020,10,100,1000,1.0,,,,16,HBM,100,1,PCIe\n");
    EXPECT_NE(msg.find("line 2 has 17 fields, the header has 18"), std::string::npos) << msg;
    msg = load_error(kHeader + "X,,NVIDIA,A,2020,10,100,1000,fast,,,,16,HBM,100,1,PCIe,src\n");
    EXPECT_NE(msg.find("line 2, column 'fp32_tflops' = 'fast' is not a non-negative number"), std::string::npos) << msg;
    msg = load_error("name,aliases\nX,\n");
    EXPECT_NE(msg.find("missing column 'vendor'"), std::string::npos) << msg;
    msg = load_error(kHeader + "X,A1;A2,NVIDIA,A,2020,10,100,1000,1,,,,16,HBM,100,1,PCIe,src\n"
                               "Y,a1,NVIDIA,A,2020,10,100,1000,1,,,,16,HBM,100,1,PCIe,src\n");
    EXPECT_NE(msg.find("the name 'a1' of Y is also a name of X"), std::string::npos) << msg;
    msg = load_error(kHeader + "X,,NVIDIA,A,2020,0,100,1000,1,,,,16,HBM,100,1,PCIe,src\n");
    EXPECT_NE(msg.find("needs positive"), std::string::npos) << msg;
    EXPECT_THROW(prenet::GpuCatalog::load_csv("/nonexistent/gpus.csv"), std::runtime_error);
}

}  // namespace
