// An xgboost model as the native walker holds it once read (from xgboost's JSON, or from a binary copy of an earlier
// read: tree_cache.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace prenet::regressors {

// One node in 8 bytes (eight to a cache line: a walk's cost is mostly its reads of trees not in cache): the split
// condition (at a leaf: the leaf value), the input it splits on, and in `right` where the right child is, as the
// number of nodes after this one (kRightMask; 0 at a leaf, whose walk stays on it), and where a missing value goes
// (kDefaultLeft). The left child is the next node.
struct Node {
    float threshold;
    std::uint16_t feature;
    std::uint16_t right;

    static constexpr std::uint16_t kRightMask = 0x7fff;
    static constexpr std::uint16_t kDefaultLeft = 0x8000;
    std::int32_t right_offset() const { return right & kRightMask; }
    bool default_left() const { return (right & kDefaultLeft) != 0; }
};
static_assert(sizeof(Node) == 8, "eight nodes to a cache line");

// A tree's nodes in depth-first order, left subtree first (a left child sits right after its parent, often in
// the same cache line), and its depth (the most splits on a path from the root to a leaf); at most
// Node::kRightMask + 1 nodes.
struct Tree {
    std::vector<Node> nodes;
    int depth = 0;
};

// What an xgboost JSON model holds for the ensemble, read in one pass over its text; the rest is skipped.
struct XgboostModel {
    std::string objective, num_feature, num_class, base_score, booster;
    std::vector<Tree> trees;
    std::vector<std::int64_t> tree_info;  // the margin (class) each tree adds to; absent from older regressors' files
    bool has_trees = false;
};

}  // namespace prenet::regressors
