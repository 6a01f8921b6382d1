#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>

#include "prenet/layer_kind.hpp"

namespace {

using prenet::find_layer_kind;

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "";
}

TEST(LayerKinds, TableHasThePapersSixKindsWithUniqueNames) {
    std::set<std::string> names, papers;
    for (const auto& kind : prenet::layer_kinds()) {
        EXPECT_TRUE(names.insert(kind.name).second) << kind.name;
        papers.insert(kind.paper_name);
        EXPECT_TRUE(kind.cost) << kind.name;
        EXPECT_EQ(kind.parameters.front().name, "batch") << kind.name;
    }
    for (const char* paper : {"Dense", "Convolution", "RNN", "LSTM", "GRU", "Attention", "Embedding", "LayerNorm"}) {
        EXPECT_TRUE(papers.count(paper)) << paper;
    }
}

TEST(LayerKinds, LookupIsCaseInsensitiveAndUnknownKindsAreNamed) {
    EXPECT_EQ(find_layer_kind("Conv2D").name, "conv2d");
    const auto msg = error_of([] { find_layer_kind("conv3d"); });
    EXPECT_NE(msg.find("unknown layer kind 'conv3d'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("layer_norm"), std::string::npos) << msg;
}

TEST(LayerKinds, ConfigureFillsDefaults) {
    const auto& kind = find_layer_kind("conv2d");
    const auto c = kind.configure({{"batch", 4}, {"in_channels", 3}, {"out_channels", 8}, {"kernel_size", 3},
                                   {"height", 32}, {"width", 32}});
    EXPECT_EQ(c["stride"], 1);
    EXPECT_EQ(c["padding"], 0);
    EXPECT_EQ(c["groups"], 1);
    EXPECT_EQ(c["bias"], 1);
}

TEST(LayerKinds, BadConfigurationsNameTheProblem) {
    const auto& linear = find_layer_kind("linear");
    auto msg =
        error_of([&] { linear.configure({{"batch", 1}, {"in_features", 3}, {"out_features", 4}, {"widht", 2}}); });
    EXPECT_NE(msg.find("unknown key 'widht'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("in_features"), std::string::npos) << msg;
    msg = error_of([&] { linear.configure({{"batch", 1}, {"in_features", 3}}); });
    EXPECT_NE(msg.find("needs 'out_features'"), std::string::npos) << msg;
    msg = error_of([&] { linear.configure({{"batch", -2}, {"in_features", 3}, {"out_features", 4}}); });
    EXPECT_NE(msg.find("batch = -2 is out of range"), std::string::npos) << msg;
    msg = error_of([&] { linear.configure({{"batch", 0}, {"in_features", 3}, {"out_features", 4}}); });
    EXPECT_NE(msg.find("batch = 0"), std::string::npos) << msg;
    msg = error_of([&] { find_layer_kind("lstm").configure({{"batch", 1}, {"seq_len", 1}, {"input_size", 1},
                                                           {"hidden_size", 1}, {"bidirectional", 2}}); });
    EXPECT_NE(msg.find("bidirectional = 2"), std::string::npos) << msg;
}

TEST(LayerKinds, RelationsBetweenParametersAreChecked) {
    auto msg = error_of([] {
        find_layer_kind("conv2d").configure({{"batch", 1}, {"in_channels", 1}, {"out_channels", 1},
                                             {"kernel_size", 7}, {"padding", 1}, {"height", 4}, {"width", 9}});
    });
    EXPECT_NE(msg.find("kernel_size 7 is larger than the padded height 6"), std::string::npos) << msg;
    msg = error_of([] {
        find_layer_kind("conv2d").configure({{"batch", 1}, {"in_channels", 6}, {"out_channels", 4},
                                             {"kernel_size", 1}, {"height", 4}, {"width", 4}, {"groups", 4}});
    });
    EXPECT_NE(msg.find("groups 4 must divide"), std::string::npos) << msg;
    msg = error_of([] {
        find_layer_kind("multihead_attention")
            .configure({{"batch", 1}, {"seq_len", 4}, {"embed_dim", 10}, {"num_heads", 3}});
    });
    EXPECT_NE(msg.find("num_heads 3 does not divide embed_dim 10"), std::string::npos) << msg;
}

}  // namespace
