// An xgboost model as the native walker holds it once read (from xgboost's JSON, or from a binary copy of an earlier
// read: tree_cache.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace prenet::regressors {

// One node in 16 bytes (four to a cache line): the child to go to when the split says right (0) or left (1),
// the split condition (at a leaf: the leaf value), the input it splits on, and where a missing value goes. A
// leaf's children are the leaf itself, so a walk may run past it without a branch.
struct Node {
    std::int32_t child[2];
    float threshold;
    std::uint16_t feature;
    bool default_left;
};
static_assert(sizeof(Node) == 16, "four nodes to a cache line");

// A tree's nodes in depth-first order, left subtree first (a left child sits right after its parent, often in
// the same cache line), and its depth (the most splits on a path from the root to a leaf).
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
