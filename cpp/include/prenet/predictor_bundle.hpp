// A predictor bundle: a folder with manifest.json and one model file per (layer kind, mode), fitted by
// prenet.training. The manifest records, for each predictor, its model family, the ordered feature names it was
// fitted on, the target transform, the data it was fitted on and its held-out scores.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "prenet/fitted_range.hpp"
#include "prenet/gpu_catalog.hpp"
#include "prenet/layer_kind.hpp"
#include "prenet/regressor.hpp"

namespace prenet {

// Version of the bundle format this build reads.
inline constexpr int kBundleFormatVersion = 1;
// The prefix of a target that is the log of time over something: a feature ("log_ms_over:<feature>") or kOverKernels.
inline constexpr const char* kLogOver = "log_ms_over:";
// The target of a predictor of time over the composition of its kind's kernels: the time layer timing gives the
// configuration where the bundle has no predictor of the kind (prenet/layer_time.hpp, predict_mode_ms).
inline constexpr const char* kOverKernels = "log_ms_over:kernels";

// Where one model input comes from: a column of the kind's native feature vector, or an indicator
// ("gpu=<catalog name>", "optimizer=<name>": 1 where it holds; "kernel=<name>": 1 where the predictor's kernel
// classifier picks that kernel).
struct InputSource {
    int feature = -1;  // index into layer_feature_values, or -1 for an indicator
    std::string key, value;
};

// The sources of `names` for `kind`; throws std::invalid_argument for a name it cannot make.
std::vector<InputSource> resolve_inputs(const std::vector<std::string>& names, const LayerKind& kind);

// The kernel a library runs for a configuration (cuBLAS picks among GEMM kernels by shape and GPU), predicted from
// some of a predictor's inputs; the predictor's "kernel=<class>" inputs are 1 for the predicted class
// (python/prenet/training.py, KernelChoiceModel).
struct KernelClassifier {
    std::vector<std::string> classes;
    std::vector<Eigen::Index> columns;  // the classifier's inputs, as columns of the predictor's inputs
    std::vector<std::pair<Eigen::Index, std::size_t>> indicators;  // each "kernel=" input's column and its class
    std::unique_ptr<Classifier> model;
};

struct Predictor {
    std::string kind;
    std::string mode;      // "forward", "backward", "optimizer" or "train" (the whole step)
    std::string family;
    std::vector<std::string> features;  // native feature names, or "gpu=<name>" / "optimizer=<name>" indicators
    // "log_ms", "log_ms_over:<feature>" (the log of time divided by that feature) or kOverKernels
    std::string target;
    // A log_ms_over target's least and largest value in the data it was fitted on (manifest "target_range"), which
    // its predictions are held within: no family extrapolates an efficiency beyond those it saw.
    std::optional<std::pair<double, double>> target_range;
    std::unique_ptr<Regressor> model;
    std::unique_ptr<KernelClassifier> kernel;  // where the inputs name kernels (manifest "kernel_classifier")
    // The features' sources, then (for a target over a feature) the divisor's: resolved once, at load.
    std::vector<InputSource> sources;
    bool over_kernels() const { return target == kOverKernels; }
    bool over_feature() const { return target.rfind(kLogOver, 0) == 0 && !over_kernels(); }
};

// The model inputs of `names` for each configuration: native features picked by name, plus indicators
// "gpu=<catalog name>" and "optimizer=<name>" ("kernel=<name>" are 0 here: PredictorBundle::predict_ms sets them
// from the predictor's kernel classifier). Throws std::invalid_argument for a name it cannot make.
FeatureMatrix model_inputs(const std::vector<std::string>& names, const std::vector<LayerConfig>& configs,
                           const GpuSpec& gpu, const std::string& optimizer);
FeatureMatrix model_inputs(const std::vector<InputSource>& sources, const std::vector<LayerConfig>& configs,
                           const GpuSpec& gpu, const std::string& optimizer);

class PredictorBundle {
public:
    // Throws std::runtime_error naming the file and what is wrong (missing, corrupt, other format version,
    // features this build does not compute). With a `cache_folder`, tree models are read through binary copies kept
    // there (load_regressor).
    static PredictorBundle load(const std::string& folder, const std::string& cache_folder = "");

    // Milliseconds per configuration, each with its rows placed within the kind's fitted ranges where the manifest
    // records them (within_fitted_rows); throws std::invalid_argument if no predictor covers (kind, mode), or if
    // that predictor's time is over its kernels' composition (kOverKernels: predict_mode_ms composes them).
    std::vector<double> predict_ms(const std::string& kind, const std::string& mode,
                                   const std::vector<LayerConfig>& configs, const GpuSpec& gpu,
                                   const std::string& optimizer) const;
    // The predictor's time over its divisor per configuration (its target undone: exp of the clipped prediction),
    // the time itself for a "log_ms" target.
    std::vector<double> predict_ratio(const std::string& kind, const std::string& mode,
                                      const std::vector<LayerConfig>& configs, const GpuSpec& gpu,
                                      const std::string& optimizer) const;
    std::vector<std::pair<std::string, std::string>> available() const;
    bool has(const std::string& kind, const std::string& mode) const { return find(kind, mode) != nullptr; }
    const Predictor& predictor(const std::string& kind, const std::string& mode) const;
    // The predictor of (kind, mode), nullptr where the bundle has none.
    const Predictor* find(const std::string& kind, const std::string& mode) const;
    const std::string& manifest_text() const { return manifest_text_; }
    // The parameter ranges of `kind`'s fitting data (empty where the manifest does not record them).
    const ParameterRanges& fitted_ranges(const std::string& kind) const;
    // cuDNN's implicit-GEMM convolution kernels' time over the matrix product of their shape as the bundle's linear
    // predictor times it (manifest "implicit_gemm_overhead", prenet/implicit_gemm.py) on `gpu`: the GPU's own where
    // its convolutions were fitted, else that of the fitted GPU nearest it in `catalog` (spec_distance); 1 where the
    // manifest records none. Throws std::invalid_argument where the manifest names a GPU `catalog` lacks.
    double implicit_gemm_overhead(const GpuSpec& gpu, const GpuCatalog& catalog) const;

private:
    // Per configuration, the predictor's target undone (time over its divisor), times the divisor where it is a
    // feature and `times_feature` holds.
    std::vector<double> predicted(const Predictor& p, const std::vector<LayerConfig>& configs, const GpuSpec& gpu,
                                  const std::string& optimizer, bool times_feature) const;
    std::map<std::pair<std::string, std::string>, Predictor> predictors_;
    std::string manifest_text_;
    std::map<std::string, ParameterRanges> fitted_ranges_;  // by kind, from fitted_on.ranges
    std::map<std::string, double> implicit_gemm_overhead_;  // by fitted GPU, from implicit_gemm_overhead.per_gpu
};

}  // namespace prenet
