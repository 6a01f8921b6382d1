// Built instead of xgboost_model.cpp where xgboost is missing (e.g. a GPU machine that only collects timings).
#include <stdexcept>

#include "regressors.hpp"

namespace prenet::regressors {

std::unique_ptr<Regressor> load_xgboost(const std::string& path, std::size_t) {
    throw std::runtime_error(path + ": this build of prenet has no xgboost, so it cannot evaluate tree models; "
                             "rebuild with libxgboost-dev installed");
}

}  // namespace prenet::regressors
