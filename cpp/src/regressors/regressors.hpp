// Loaders of the regressor families (one file each); load_regressor in regressor.cpp dispatches to them.
#pragma once

#include <memory>
#include <string>

#include "prenet/regressor.hpp"

namespace prenet::regressors {

std::unique_ptr<Regressor> load_dense(const std::string& path, std::size_t inputs);
std::unique_ptr<Regressor> load_tree_ensemble(const std::string& path, std::size_t inputs);  // xgboost JSON

}  // namespace prenet::regressors
