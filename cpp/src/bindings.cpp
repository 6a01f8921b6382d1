// Python bindings (module prenet._core): conversions only, the work stays in the core library.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "prenet/features.hpp"
#include "prenet/gpu_catalog.hpp"
#include "prenet/layer_kind.hpp"
#include "prenet/optimizer.hpp"
#include "prenet/precision.hpp"

namespace py = pybind11;

#ifdef PRENET_WITH_PREDICTOR
void bind_predictor(py::module_& m);  // bindings_predictor.cpp
#endif

namespace {

py::dict gpu_to_dict(const prenet::GpuSpec& g) {
    py::dict d;
    d["name"] = g.name;
    d["aliases"] = g.aliases;
    d["vendor"] = g.vendor;
    d["architecture"] = g.architecture;
    d["year"] = g.year;
    d["sm_count"] = g.sm_count;
    d["cuda_cores"] = g.cuda_cores;
    d["boost_clock_mhz"] = g.boost_clock_mhz;
    d["fp32_tflops"] = g.fp32_tflops;
    d["tf32_tflops"] = g.tf32_tflops;
    d["fp16_tflops"] = g.fp16_tflops;
    d["bf16_tflops"] = g.bf16_tflops;
    d["memory_gb"] = g.memory_gb;
    d["memory_type"] = g.memory_type;
    d["memory_bandwidth_gbs"] = g.memory_bandwidth_gbs;
    d["l2_cache_mb"] = g.l2_cache_mb;
    d["bus"] = g.bus;
    d["source"] = g.source;
    return d;
}

py::dict kind_to_dict(const prenet::LayerKind& kind) {
    py::list parameters;
    for (const auto& p : kind.parameters) {
        py::dict d;
        d["name"] = p.name;
        d["min"] = p.min_value;
        d["max"] = p.max_value;
        d["default"] = p.default_value;
        d["description"] = p.description;
        parameters.append(d);
    }
    py::dict d;
    d["name"] = kind.name;
    d["paper_name"] = kind.paper_name;
    d["description"] = kind.description;
    d["parameters"] = parameters;
    d["derived_features"] = kind.derived_names;
    d["features"] = prenet::feature_names(kind);
    d["gemm_features"] = prenet::gemm_feature_names(kind);
    d["simd_features"] = prenet::simd_feature_names(kind);
    d["row_parameters"] = kind.row_parameters ? py::make_tuple(kind.row_parameters->first, kind.row_parameters->second)
                                              : py::object(py::none());
    d["gpu_bias_kernels"] = static_cast<bool>(kind.gpu_bias_kernels);
    d["forward_kernels"] = static_cast<bool>(kind.forward_kernels);  // composed of them where it has no predictor
    return d;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
    m.doc() = "prenet native core: layer kinds, features and the GPU catalog";

    py::class_<prenet::GpuCatalog>(m, "GpuCatalog")
        .def(py::init(&prenet::GpuCatalog::load_csv), py::arg("path"), "Load a catalog CSV")
        .def("find", [](const prenet::GpuCatalog& c, const std::string& name) { return gpu_to_dict(c.find(name)); },
             py::arg("name"))
        .def("closest", &prenet::GpuCatalog::closest, py::arg("name"), py::arg("count") = 3)
        .def("spec_distance",
             [](const prenet::GpuCatalog& c, const std::string& a, const std::string& b) {
                 return prenet::spec_distance(c.find(a), c.find(b));
             },
             py::arg("a"), py::arg("b"),
             "Root-mean-square log ratio of the two GPUs' distance_specs (0: alike; 0.69: each off by a factor 2)")
        .def("nearest",
             [](const prenet::GpuCatalog& c, const std::string& name, const std::vector<std::string>& candidates) {
                 const auto index = c.nearest(c.find(name), candidates);
                 return index ? py::object(py::str(candidates[*index])) : py::object(py::none());
             },
             py::arg("name"), py::arg("candidates"),
             "Which of the candidates is nearest the GPU by spec_distance (the first of equals); None if none")
        .def("rows", [](const prenet::GpuCatalog& c) {
            py::list rows;
            for (const auto& g : c.gpus()) rows.append(gpu_to_dict(g));
            return rows;
        });

    std::vector<std::string> distance_specs;
    for (const auto& spec : prenet::kDistanceSpecs) distance_specs.emplace_back(spec.name);
    m.attr("distance_specs") = distance_specs;

    m.def("layer_kinds", [] {
        py::list kinds;
        for (const auto& kind : prenet::layer_kinds()) kinds.append(kind_to_dict(kind));
        return kinds;
    }, "The table of layer kinds with their parameters and feature names");

    m.def("optimizers", [] {
        py::list out;
        for (const auto& o : prenet::optimizers()) {
            py::dict d;
            d["name"] = o.name;
            d["description"] = o.description;
            d["element_passes"] = o.element_passes;
            d["kernels_per_tensor"] = o.kernels_per_tensor;
            out.append(d);
        }
        return out;
    }, "The optimizers of a training step with the traffic of their update");

    m.def("matrix_tflops",
          [](const std::string& kind, const prenet::GpuCatalog& catalog, const std::string& gpu,
             const std::string& precision) {
              return prenet::matrix_tflops(prenet::find_layer_kind(kind), catalog.find(gpu),
                                           prenet::parse_precision(precision));
          },
          py::arg("kind"), py::arg("catalog"), py::arg("gpu"), py::arg("precision"),
          "Dense matrix rate (TFLOPS) a kind runs at on the GPU in the precision; ValueError where the catalog "
          "has no rate for the precision's type on that GPU");

    m.def("tensor_core_factor",
          [](const std::string& kind, const std::map<std::string, std::int64_t>& config,
             const prenet::GpuCatalog& catalog, const std::string& gpu, const std::string& precision) {
              return prenet::tensor_core_factor(prenet::find_layer_kind(kind).configure(config), catalog.find(gpu),
                                                prenet::parse_precision(precision));
          },
          py::arg("kind"), py::arg("config"), py::arg("catalog"), py::arg("gpu"), py::arg("precision"),
          "A layer's time in the precision over its fp32 CUDA-core time, as the estimate scales it (1 for kinds "
          "without tensor cores)");

    m.def("gpu_bias_kernel_count",
          [](const std::string& kind, const std::map<std::string, std::int64_t>& config) {
              const auto configured = prenet::find_layer_kind(kind).configure(config);
              return configured.kind().gpu_bias_kernels ? configured.kind().gpu_bias_kernels(configured).size()
                                                        : std::size_t{0};
          },
          py::arg("kind"), py::arg("config"),
          "Kernels a GPU runs after the layer's own to add its bias (a cuDNN convolution's output.add_(bias))");

    m.def("layer_features",
          [](const std::string& kind, const std::map<std::string, std::int64_t>& config,
             const prenet::GpuCatalog& catalog, const std::string& gpu, double bytes_per_element) {
              const auto& spec = catalog.find(gpu);
              const auto configured = prenet::find_layer_kind(kind).configure(config);
              py::dict features;
              for (const auto& [name, value] : prenet::layer_features(configured, spec, bytes_per_element)) {
                  features[py::str(name)] = value;
              }
              return features;
          },
          py::arg("kind"), py::arg("config"), py::arg("catalog"), py::arg("gpu"),
          py::arg("bytes_per_element") = prenet::kFp32Bytes);

#ifdef PRENET_WITH_PREDICTOR
    bind_predictor(m);
#endif
}
