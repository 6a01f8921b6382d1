// Loaders of the regressor families (one file each); load_regressor in regressor.cpp dispatches to them.
#pragma once

#include <memory>
#include <string>

#include "prenet/regressor.hpp"

namespace prenet::regressors {

// The text of a model file; a name ending in ".gz" is gzip-compressed (read with zlib). Throws
// std::runtime_error naming the file if it is missing or corrupt.
std::string read_model_file(const std::string& path);

std::unique_ptr<Regressor> load_dense(const std::string& path, std::size_t inputs);
// xgboost JSON models; with a `cache_folder`, through binary copies of earlier reads kept there (tree_cache.hpp)
std::unique_ptr<Regressor> load_tree_ensemble(const std::string& path, std::size_t inputs,
                                              const std::string& cache_folder);
std::unique_ptr<Classifier> load_tree_classifier(const std::string& path, std::size_t inputs, std::size_t classes,
                                                 const std::string& cache_folder);

}  // namespace prenet::regressors
