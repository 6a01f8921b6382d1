#include "prenet/regressor.hpp"

#include <zlib.h>

#include <stdexcept>

#include "prenet/file_bytes.hpp"
#include "regressors/regressors.hpp"

namespace prenet {

namespace regressors {

std::string read_model_file(const std::string& path) {
    const bool gzipped = path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
    if (!gzipped) return read_file_bytes(path, "model file");
    gzFile file = gzopen(path.c_str(), "rb");
    if (file == nullptr) throw std::runtime_error("cannot open model file '" + path + "'");
    std::string text;
    char chunk[1 << 16];
    int read = 0;
    while ((read = gzread(file, chunk, sizeof chunk)) > 0) text.append(chunk, static_cast<std::size_t>(read));
    int status = Z_OK;
    const char* message = gzerror(file, &status);
    const std::string error = status == Z_OK || status == Z_STREAM_END ? "" : message;
    gzclose(file);
    if (read < 0 || !error.empty()) throw std::runtime_error(path + ": corrupt gzip data (" + error + ")");
    return text;
}

}  // namespace regressors

std::unique_ptr<Regressor> load_regressor(const std::string& family, const std::string& path, std::size_t inputs,
                                          const std::string& cache_folder) {
    if (family == "linear" || family == "mlp") return regressors::load_dense(path, inputs);
    if (family == "xgboost" || family == "random_forest" || family == "gradient_boosting") {
        return regressors::load_tree_ensemble(path, inputs, cache_folder);
    }
    throw std::runtime_error(path + ": unknown model family '" + family +
                             "'; known: linear mlp xgboost random_forest gradient_boosting");
}

std::unique_ptr<Classifier> load_classifier(const std::string& path, std::size_t inputs, std::size_t classes,
                                            const std::string& cache_folder) {
    return regressors::load_tree_classifier(path, inputs, classes, cache_folder);
}

}  // namespace prenet
