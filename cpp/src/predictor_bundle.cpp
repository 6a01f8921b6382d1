#include "prenet/predictor_bundle.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "prenet/features.hpp"
#include "prenet/file_bytes.hpp"

namespace prenet {

namespace {

// Model files are read on up to this many threads, one file at a time each: the files are independent, and a
// bundle of 66 predictors takes most of a second on one core.
constexpr unsigned kMaxLoadThreads = 8;

// Runs each of `loads` (one model file each); where several fail, the first one's error in their order.
void load_models(const std::vector<std::function<void()>>& loads) {
    std::vector<std::exception_ptr> errors(loads.size());
    std::atomic<std::size_t> next{0};
    const auto work = [&] {
        for (std::size_t i = next++; i < loads.size(); i = next++) {
            try {
                loads[i]();
            } catch (...) {
                errors[i] = std::current_exception();
            }
        }
    };
    const unsigned threads = std::min({static_cast<unsigned>(loads.size()), kMaxLoadThreads,
                                       std::max(1u, std::thread::hardware_concurrency())});
    std::vector<std::thread> helpers;
    for (unsigned t = 1; t < threads; ++t) {
        try {
            helpers.emplace_back(work);
        } catch (const std::system_error&) {  // no thread to be had: the others, this one included, do the rest
            break;
        }
    }
    work();
    for (auto& helper : helpers) helper.join();
    for (const auto& error : errors) {
        if (error) std::rethrow_exception(error);
    }
}

// A manifest entry's "target_range" ([least, largest]) for a predictor of `target`; throws std::invalid_argument
// where it is not two ordered finite numbers or the target is not a ratio over a bound.
std::pair<double, double> target_range(const nlohmann::json& range, const std::string& target) {
    if (target.rfind(kLogOver, 0) != 0) {
        throw std::invalid_argument("target_range is given for target '" + target + "', which is no ratio");
    }
    if (!range.is_array() || range.size() != 2 || !range.at(0).is_number() || !range.at(1).is_number() ||
        !std::isfinite(range.at(0).get<double>()) || !std::isfinite(range.at(1).get<double>()) ||
        range.at(0).get<double>() > range.at(1).get<double>()) {
        throw std::invalid_argument("target_range is " + range.dump() + ", not [least, largest]");
    }
    return {range.at(0).get<double>(), range.at(1).get<double>()};
}

// The kernel classifier of a manifest entry's "kernel_classifier" ({"file", "features", "classes"}) for predictor
// `p`, its model not yet read; throws std::invalid_argument where it does not fit the predictor's inputs.
std::unique_ptr<KernelClassifier> kernel_classifier(const nlohmann::json& entry, const Predictor& p) {
    auto k = std::make_unique<KernelClassifier>();
    k->classes = entry.at("classes").get<std::vector<std::string>>();
    if (k->classes.size() < 2) throw std::invalid_argument("a kernel classifier needs at least two classes");
    for (const auto& name : entry.at("features").get<std::vector<std::string>>()) {
        const auto at = std::find(p.features.begin(), p.features.end(), name);
        if (at == p.features.end() || name.rfind("kernel=", 0) == 0) {
            throw std::invalid_argument("the kernel classifier's input '" + name +
                                        "' is not an input of the predictor");
        }
        k->columns.push_back(at - p.features.begin());
    }
    for (std::size_t col = 0; col < p.features.size(); ++col) {
        if (p.sources[col].key != "kernel") continue;
        const auto at = std::find(k->classes.begin(), k->classes.end(), p.sources[col].value);
        if (at == k->classes.end()) {
            throw std::invalid_argument("input '" + p.features[col] + "' names no class of the kernel classifier");
        }
        k->indicators.emplace_back(static_cast<Eigen::Index>(col), static_cast<std::size_t>(at - k->classes.begin()));
    }
    return k;
}

// Sets the "kernel=" columns of `inputs` (rows: configurations) to the kernel `p`'s classifier picks for each.
void mark_predicted_kernels(const Predictor& p, FeatureMatrix& inputs) {
    const KernelClassifier& k = *p.kernel;
    FeatureMatrix chooser_inputs(inputs.rows(), static_cast<Eigen::Index>(k.columns.size()));
    for (std::size_t c = 0; c < k.columns.size(); ++c) {
        chooser_inputs.col(static_cast<Eigen::Index>(c)) = inputs.col(k.columns[c]);
    }
    const std::vector<std::size_t> chosen = k.model->predict_class(chooser_inputs);
    for (const auto& [column, kernel] : k.indicators) {
        for (Eigen::Index row = 0; row < inputs.rows(); ++row) {
            inputs(row, column) = chosen[static_cast<std::size_t>(row)] == kernel ? 1.0 : 0.0;
        }
    }
}

}  // namespace

std::vector<InputSource> resolve_inputs(const std::vector<std::string>& names, const LayerKind& kind) {
    const auto native = feature_names(kind);
    std::vector<InputSource> sources;
    for (const auto& name : names) {
        InputSource source;
        const auto equals = name.find('=');
        if (equals != std::string::npos) {
            source.key = name.substr(0, equals);
            source.value = name.substr(equals + 1);
            if (source.key != "gpu" && source.key != "optimizer" && source.key != "kernel") {
                throw std::invalid_argument("input '" + name +
                                            "': indicators are gpu=<name>, optimizer=<name> or kernel=<name>");
            }
        } else {
            auto it = std::find(native.begin(), native.end(), name);
            if (it == native.end()) {
                throw std::invalid_argument("input '" + name + "' is not a feature of layer kind '" + kind.name + "'");
            }
            source.feature = static_cast<int>(it - native.begin());
        }
        sources.push_back(source);
    }
    return sources;
}

FeatureMatrix model_inputs(const std::vector<std::string>& names, const std::vector<LayerConfig>& configs,
                           const GpuSpec& gpu, const std::string& optimizer) {
    if (configs.empty()) return FeatureMatrix(0, static_cast<Eigen::Index>(names.size()));
    return model_inputs(resolve_inputs(names, configs.front().kind()), configs, gpu, optimizer);
}

FeatureMatrix model_inputs(const std::vector<InputSource>& sources, const std::vector<LayerConfig>& configs,
                           const GpuSpec& gpu, const std::string& optimizer) {
    FeatureMatrix inputs(static_cast<Eigen::Index>(configs.size()), static_cast<Eigen::Index>(sources.size()));
    if (configs.empty()) return inputs;
    for (std::size_t row = 0; row < configs.size(); ++row) {
        if (&configs[row].kind() != &configs.front().kind()) {
            throw std::invalid_argument("model_inputs: configurations of different kinds in one call");
        }
        const auto features = layer_feature_values(configs[row], gpu);
        for (std::size_t col = 0; col < sources.size(); ++col) {
            const auto& s = sources[col];
            const double value = s.feature >= 0      ? features[s.feature]
                                 : s.key == "gpu"       ? static_cast<double>(s.value == gpu.name)
                                 : s.key == "optimizer" ? static_cast<double>(s.value == optimizer)
                                                        : 0.0;  // a kernel: set by predict_ms
            inputs(static_cast<Eigen::Index>(row), static_cast<Eigen::Index>(col)) = value;
        }
    }
    return inputs;
}

PredictorBundle PredictorBundle::load(const std::string& folder, const std::string& cache_folder) {
    const std::string manifest_path = folder + "/manifest.json";
    PredictorBundle bundle;
    bundle.manifest_text_ = read_file_bytes(manifest_path);
    nlohmann::json manifest;
    try {
        manifest = nlohmann::json::parse(bundle.manifest_text_);
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(manifest_path + " is not valid JSON: " + e.what());
    }
    try {
        if (manifest.at("format") != "prenet-predictors") {
            throw std::runtime_error(manifest_path + " is not a prenet predictor bundle");
        }
        if (manifest.at("version").get<int>() != kBundleFormatVersion) {
            throw std::runtime_error(manifest_path + " has format version " + manifest.at("version").dump() +
                                     "; this build reads version " + std::to_string(kBundleFormatVersion));
        }
        std::vector<std::function<void()>> loads;  // each model file of the manifest, read into its predictor
        for (const auto& entry : manifest.at("predictors")) {
            Predictor p;
            p.kind = entry.at("kind").get<std::string>();
            p.mode = entry.at("mode").get<std::string>();
            p.family = entry.at("family").get<std::string>();
            p.features = entry.at("features").get<std::vector<std::string>>();
            p.target = entry.at("target").get<std::string>();
            const std::string where = manifest_path + " (" + p.kind + ", " + p.mode + ")";
            try {
                auto names = p.features;
                if (p.over_feature()) {  // the feature divided by, read beside the inputs
                    names.push_back(p.target.substr(std::string(kLogOver).size()));
                } else if (p.target != "log_ms" && !p.over_kernels()) {
                    throw std::invalid_argument("unknown target '" + p.target + "'");
                }
                if (entry.contains("target_range")) p.target_range = target_range(entry.at("target_range"), p.target);
                p.sources = resolve_inputs(names, find_layer_kind(p.kind));
                if (entry.contains("kernel_classifier")) p.kernel = kernel_classifier(entry.at("kernel_classifier"), p);
            } catch (const std::invalid_argument& e) {
                throw std::runtime_error(where + " does not match this build: " + e.what());
            }
            const auto has_kernel_input = std::any_of(p.sources.begin(), p.sources.end(),
                                                      [](const InputSource& s) { return s.key == "kernel"; });
            if (has_kernel_input && !p.kernel) {
                throw std::runtime_error(where + " has kernel=<name> inputs but no kernel_classifier");
            }
            auto key = std::make_pair(p.kind, p.mode);
            const auto [at, added] = bundle.predictors_.emplace(std::move(key), std::move(p));
            if (!added) throw std::runtime_error(where + " is listed twice");
            Predictor* loaded = &at->second;
            const std::string file = folder + "/" + entry.at("file").get<std::string>();
            loads.emplace_back([loaded, file, cache_folder] {
                loaded->model = load_regressor(loaded->family, file, loaded->features.size(), cache_folder);
            });
            if (loaded->kernel) {
                const std::string chooser = folder + "/" + entry.at("kernel_classifier").at("file").get<std::string>();
                loads.emplace_back([loaded, chooser, cache_folder] {
                    KernelClassifier& k = *loaded->kernel;
                    k.model = load_classifier(chooser, k.columns.size(), k.classes.size(), cache_folder);
                });
            }
        }
        load_models(loads);
        if (manifest.contains("fitted_on") && manifest.at("fitted_on").contains("ranges")) {
            for (const auto& [kind, ranges] : manifest.at("fitted_on").at("ranges").items()) {
                for (const auto& [name, range] : ranges.items()) {
                    const std::pair<std::int64_t, std::int64_t> bounds{range.at(0).get<std::int64_t>(),
                                                                       range.at(1).get<std::int64_t>()};
                    if (range.size() != 2 || bounds.first > bounds.second) {
                        throw std::runtime_error(manifest_path + ": fitted_on.ranges of " + kind + ", " + name +
                                                 " is " + range.dump() + ", not [smallest, largest]");
                    }
                    bundle.fitted_ranges_[kind][name] = bounds;
                }
            }
        }
        if (manifest.contains("implicit_gemm_overhead")) {
            for (const auto& [gpu, ratio] : manifest.at("implicit_gemm_overhead").at("per_gpu").items()) {
                const double value = ratio.get<double>();
                if (!(value > 0) || !std::isfinite(value)) {
                    throw std::runtime_error(manifest_path + ": implicit_gemm_overhead of " + gpu + " is " +
                                             ratio.dump() + ", not a positive ratio");
                }
                bundle.implicit_gemm_overhead_[gpu] = value;
            }
        }
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(manifest_path + " is missing or has malformed fields: " + e.what());
    }
    return bundle;
}

double PredictorBundle::implicit_gemm_overhead(const GpuSpec& gpu, const GpuCatalog& catalog) const {
    if (const auto own = implicit_gemm_overhead_.find(gpu.name); own != implicit_gemm_overhead_.end()) {
        return own->second;
    }
    std::vector<std::string> fitted;
    std::vector<double> overheads;
    for (const auto& [name, ratio] : implicit_gemm_overhead_) {
        fitted.push_back(name);
        overheads.push_back(ratio);
    }
    try {
        const auto nearest = catalog.nearest(gpu, fitted);
        return nearest ? overheads[*nearest] : 1.0;
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument("the bundle's implicit_gemm_overhead names a GPU the catalog lacks: " +
                                    std::string(e.what()));
    }
}

const Predictor* PredictorBundle::find(const std::string& kind, const std::string& mode) const {
    const auto it = predictors_.find({kind, mode});
    return it == predictors_.end() ? nullptr : &it->second;
}

const Predictor& PredictorBundle::predictor(const std::string& kind, const std::string& mode) const {
    const Predictor* found = find(kind, mode);
    if (!found) {
        std::string known;
        for (const auto& [key, p] : predictors_) known += " " + key.first + "/" + key.second;
        throw std::invalid_argument("no predictor for layer kind '" + kind + "' in mode '" + mode +
                                    "'; this bundle has:" + known);
    }
    return *found;
}

std::vector<double> PredictorBundle::predict_ms(const std::string& kind, const std::string& mode,
                                                const std::vector<LayerConfig>& configs, const GpuSpec& gpu,
                                                const std::string& optimizer) const {
    const Predictor& p = predictor(kind, mode);
    if (p.over_kernels()) {
        throw std::invalid_argument("the predictor of layer kind '" + kind + "' in mode '" + mode +
                                    "' gives time over its kernels' composition, which layer timing composes "
                                    "(predict_mode_ms, estimate_layer_times)");
    }
    return predicted(p, configs, gpu, optimizer, true);
}

std::vector<double> PredictorBundle::predict_ratio(const std::string& kind, const std::string& mode,
                                                   const std::vector<LayerConfig>& configs, const GpuSpec& gpu,
                                                   const std::string& optimizer) const {
    return predicted(predictor(kind, mode), configs, gpu, optimizer, false);
}

std::vector<double> PredictorBundle::predicted(const Predictor& p, const std::vector<LayerConfig>& configs,
                                               const GpuSpec& gpu, const std::string& optimizer,
                                               bool times_feature) const {
    const ParameterRanges& ranges = fitted_ranges(p.kind);
    std::vector<LayerConfig> placed;
    if (!ranges.empty()) {
        placed.reserve(configs.size());
        for (const auto& config : configs) placed.push_back(within_fitted_rows(config, ranges));
    }
    // One pass over the features: the model's inputs, then (for a target over a feature) the feature it divides by.
    FeatureMatrix inputs = model_inputs(p.sources, ranges.empty() ? configs : placed, gpu, optimizer);
    if (p.kernel) mark_predicted_kernels(p, inputs);
    const auto columns = static_cast<Eigen::Index>(p.features.size());
    const Eigen::VectorXd raw = p.model->predict(inputs.leftCols(columns));
    std::vector<double> ms(configs.size());
    for (std::size_t i = 0; i < configs.size(); ++i) {
        const auto row = static_cast<Eigen::Index>(i);
        const double target = p.target_range ? std::clamp(raw[row], p.target_range->first, p.target_range->second)
                                             : raw[row];
        // undo the target's log transform, then its division
        ms[i] = std::exp(target) * (p.over_feature() && times_feature ? inputs(row, columns) : 1.0);
    }
    return ms;
}

const ParameterRanges& PredictorBundle::fitted_ranges(const std::string& kind) const {
    static const ParameterRanges none;
    const auto it = fitted_ranges_.find(kind);
    return it == fitted_ranges_.end() ? none : it->second;
}

std::vector<std::pair<std::string, std::string>> PredictorBundle::available() const {
    std::vector<std::pair<std::string, std::string>> keys;
    for (const auto& entry : predictors_) keys.push_back(entry.first);
    return keys;
}

}  // namespace prenet
