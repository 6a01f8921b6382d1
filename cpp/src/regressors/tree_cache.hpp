// A binary copy of each tree model read from a bundle, kept in the user's cache folder: inflating and parsing the
// gzip-compressed JSON of a bundle takes most of a second for the CPU bundle's 105 MB; its trees in binary load in
// a fraction of that. A copy is used only while its model file has the path, size and modification time it was made
// from, and only if it reads back whole and every node points inside its tree and its inputs; anything else is read
// from the JSON again and the copy rewritten (a failed write costs speed only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "xgboost_model.hpp"

namespace prenet::regressors {

// What a copy is checked against: the model file's full path (a hash of it), size and modification time.
struct SourceStamp {
    std::uint64_t path = 0;
    std::uint64_t size = 0;
    std::int64_t modified = 0;
};

// The stamp of the file at `path`; std::nullopt if it cannot be read.
std::optional<SourceStamp> source_stamp(const std::string& path);

// Where the copy of the model file at `path` lives in `cache_folder`: named by its folder and file names (bundles hold
// files of the same names in folders of different names), so that a bundle's copies are replaced, not added to,
// when it is installed elsewhere (a copy made from another path is passed over and remade).
std::string tree_cache_file(const std::string& cache_folder, const std::string& path);

// The model in `cache_file` if it was made from a file with `stamp` and is sound for `inputs` inputs.
std::optional<XgboostModel> read_tree_cache(const std::string& cache_file, const SourceStamp& stamp,
                                            std::size_t inputs);

// Writes `model`, read from a file with `stamp`, to `cache_file` (through a temporary file and a rename, so that a
// reader never sees half of it); returns false where it could not.
bool write_tree_cache(const std::string& cache_file, const SourceStamp& stamp, const XgboostModel& model);

}  // namespace prenet::regressors
