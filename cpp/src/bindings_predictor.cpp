// Python bindings of predictor inference (built with PRENET_BUILD_PREDICTOR).
#include <pybind11/eigen.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "prenet/layer_time.hpp"
#include "prenet/predictor_bundle.hpp"

namespace py = pybind11;

namespace {

std::vector<prenet::LayerConfig> configure_all(const std::string& kind,
                                               const std::vector<std::map<std::string, std::int64_t>>& configs) {
    const auto& spec = prenet::find_layer_kind(kind);
    std::vector<prenet::LayerConfig> configured;
    configured.reserve(configs.size());
    for (const auto& config : configs) configured.push_back(spec.configure(config));
    return configured;
}

}  // namespace

void bind_predictor(py::module_& m) {
    m.def("model_inputs",
          [](const std::vector<std::string>& names, const std::string& kind,
             const std::vector<std::map<std::string, std::int64_t>>& configs, const prenet::GpuCatalog& catalog,
             const std::string& gpu, const std::string& optimizer) {
              return prenet::model_inputs(names, configure_all(kind, configs), catalog.find(gpu), optimizer);
          },
          py::arg("names"), py::arg("kind"), py::arg("configs"), py::arg("catalog"), py::arg("gpu"),
          py::arg("optimizer") = "sgd",
          "Model input matrix (rows: configurations) built exactly as the native predictors build it");

    py::class_<prenet::PredictorBundle>(m, "PredictorBundle")
        .def(py::init(&prenet::PredictorBundle::load), py::arg("folder"), py::arg("cache_folder") = "",
             "The bundle in `folder`; with `cache_folder`, tree models through binary copies kept there")
        .def("available", &prenet::PredictorBundle::available)
        .def("manifest", &prenet::PredictorBundle::manifest_text)
        .def("predict",
             [](const prenet::PredictorBundle& b, const std::string& kind, const std::string& mode,
                const std::vector<std::map<std::string, std::int64_t>>& configs, const prenet::GpuCatalog& catalog,
                const std::string& gpu, const std::string& optimizer) {
                 return prenet::predict_mode_ms(b, mode, configure_all(kind, configs), catalog.find(gpu), optimizer);
             },
             py::arg("kind"), py::arg("mode"), py::arg("configs"), py::arg("catalog"), py::arg("gpu"),
             py::arg("optimizer") = "sgd",
             "Milliseconds per configuration by the (kind, mode) predictor alone (prenet/layer_time.hpp, "
             "predict_mode_ms: a predictor of time over its kernels' composition times that composition)")
        .def("has", &prenet::PredictorBundle::has, py::arg("kind"), py::arg("mode"))
        .def("estimate",
             [](const prenet::PredictorBundle& b, const std::string& kind,
                const std::vector<std::map<std::string, std::int64_t>>& configs, const prenet::GpuCatalog& catalog,
                const std::string& gpu, const std::string& optimizer, const std::string& precision,
                const prenet::IssueGaps& issue_gap_ms, bool with_cuda_core) {
                 const prenet::GpuSpec& spec = catalog.find(gpu);
                 const auto [times, cuda_core] = prenet::estimate_layer_times_with_cuda_core(
                     b, configure_all(kind, configs), spec, optimizer, prenet::parse_precision(precision),
                     issue_gap_ms, with_cuda_core, b.implicit_gemm_overhead(spec, catalog));
                 std::vector<py::dict> rows;
                 for (std::size_t i = 0; i < times.size(); ++i) {
                     const auto& t = times[i];
                     py::dict row;
                     row["forward_ms"] = t.forward_ms;
                     row["step_forward_ms"] = t.step_forward_ms;
                     row["backward_ms"] = t.backward_ms;
                     row["optimizer_ms"] = t.optimizer_ms;
                     row["forward_basis"] = prenet::to_string(t.forward_basis);
                     row["step_forward_basis"] = prenet::to_string(t.step_forward_basis);
                     row["backward_basis"] = prenet::to_string(t.backward_basis);
                     row["optimizer_basis"] = prenet::to_string(t.optimizer_basis);
                     if (with_cuda_core) {
                         row["cuda_core_forward_ms"] = cuda_core[i].forward_ms;
                         row["cuda_core_step_forward_ms"] = cuda_core[i].step_forward_ms;
                         row["cuda_core_backward_ms"] = cuda_core[i].backward_ms;
                         row["cuda_core_optimizer_ms"] = cuda_core[i].optimizer_ms;
                     }
                     rows.push_back(row);
                 }
                 return rows;
             },
             py::arg("kind"), py::arg("configs"), py::arg("catalog"), py::arg("gpu"), py::arg("optimizer") = "sgd",
             py::arg("precision") = "fp32", py::arg("issue_gap_ms") = prenet::IssueGaps{},
             py::arg("with_cuda_core") = false,
             "Forward (alone, and inside a training step: step_forward), backward and optimizer milliseconds per "
             "configuration, with how each was obtained "
             "(predicted, kernels, roofline); precision: fp32 (PyTorch's defaults: cuDNN convolutions on TF32 "
             "tensor cores where the GPU has them), fp32_strict, tf32 (matmuls on TF32 tensor cores too), bf16 or fp16 "
             "(kernels on 2-byte tensors); "
             "issue_gap_ms: {kernel kind: host time in every latency learned for it}, taken off each kernel of "
             "that kind (device time only); with_cuda_core: also cuda_core_forward_ms, _step_forward_ms, "
             "_backward_ms and _optimizer_ms, the times on CUDA cores (fp32_strict) of a layer the precision puts on "
             "tensor cores (else the same times), predicted in the same batch")
        .def("update_ms",
             [](const prenet::PredictorBundle& b, const std::vector<double>& elements,
                const prenet::GpuCatalog& catalog, const std::string& gpu, const std::string& optimizer,
                const prenet::IssueGaps& issue_gap_ms) {
                 std::vector<double> ms;
                 for (const auto& t : prenet::estimate_update_times(b, elements, catalog.find(gpu), optimizer,
                                                                    issue_gap_ms)) {
                     ms.push_back(t.optimizer_ms);
                 }
                 return ms;
             },
             py::arg("elements"), py::arg("catalog"), py::arg("gpu"), py::arg("optimizer") = "sgd",
             py::arg("issue_gap_ms") = prenet::IssueGaps{},
             "Milliseconds of the optimizer's update of each parameter tensor (element counts)");
}
