// prenet-harness: times single layers with LibTorch on the CPU or a CUDA GPU.
// Reads one request per line on stdin (key=value pairs, see request.hpp); writes one JSON object per line on
// stdout: first the environment, then one result per request, flushed as each completes.
#include <torch/cuda.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <climits>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "cpu_tensor_blocks.hpp"
#include "cuda_driver.hpp"
#include "freed_memory.hpp"
#include "json_line.hpp"
#include "layer_bench.hpp"
#include "phase_clock.hpp"
#include "repeat_timer.hpp"
#include "request.hpp"
#include "speed_reference.hpp"

namespace {

using namespace prenet::harness;

struct Options {
    std::string device = "cpu";
    int threads = 0;  // 0: all hardware threads
    std::string dtype = "float32";
    RepeatPolicy policy;
};

const char* kUsage =
    "usage: prenet-harness [--device cpu|cuda|cuda:N] [--threads N] [--dtype float32|bfloat16|float16]\n"
    "                      [--warmup-ms MS] [--min-reps N] [--max-reps N] [--max-ms MS] [--target-spread F]\n"
    "                      [--list-kinds]\n"
    "Requests on stdin, one per line: id=ID kind=KIND optimizer=NAME key=value ...\n";

[[noreturn]] void usage_error(const std::string& message) {
    std::cerr << "prenet-harness: " << message << "\n" << kUsage;
    std::exit(2);
}

Options parse_options(int argc, char** argv) {
    Options options;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--list-kinds") {
            for (const auto& kind : harness_kinds()) std::cout << kind << "\n";
            std::exit(0);
        }
        if (flag == "--help" || flag == "-h") {
            std::cout << kUsage;
            std::exit(0);
        }
        if (i + 1 >= argc) usage_error("missing value after " + flag);
        const std::string value = argv[++i];
        try {
            if (flag == "--device") options.device = value;
            else if (flag == "--threads") options.threads = std::stoi(value);
            else if (flag == "--dtype") options.dtype = value;
            else if (flag == "--warmup-ms") options.policy.warmup_ms = std::stod(value);
            else if (flag == "--min-reps") options.policy.min_reps = std::stoi(value);
            else if (flag == "--max-reps") options.policy.max_reps = std::stoi(value);
            else if (flag == "--max-ms") options.policy.max_ms = std::stod(value);
            else if (flag == "--target-spread") options.policy.target_spread = std::stod(value);
            else usage_error("unknown option " + flag);
        } catch (const std::logic_error&) {
            usage_error("bad value '" + value + "' for " + flag);
        }
    }
    return options;
}

torch::Dtype parse_dtype(const std::string& name) {
    if (name == "float32") return torch::kFloat32;
    if (name == "bfloat16") return torch::kBFloat16;
    if (name == "float16") return torch::kFloat16;
    usage_error("unknown dtype '" + name + "'; accepted: float32 bfloat16 float16");
}

// The CPU as prenet.host_cost.cpu_model names it: the model name, and the CPUID family and model where
// /proc/cpuinfo gives them (a virtual machine's name can be generic, shared by CPUs of several generations).
std::string host_cpu_model() {
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string name, family, model;
    for (std::string line; std::getline(cpuinfo, line) && !line.empty();) {  // the first processor's block
        const auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        const auto key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
        const auto value = colon + 2 <= line.size() ? line.substr(colon + 2) : std::string();
        if (key == "model name" && name.empty()) name = value;
        if (key == "cpu family" && family.empty()) family = value;
        if (key == "model" && model.empty()) model = value;
    }
    if (name.empty()) name = "unknown";
    return family.empty() || model.empty() ? name : name + " (family " + family + " model " + model + ")";
}

// The BLAS library the process loaded (Debian switches it through alternatives), from /proc/self/maps.
std::string loaded_blas() {
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) {
        const auto slash = line.find('/');
        if (slash == std::string::npos) continue;
        const std::string path = line.substr(slash);
        const std::string file = path.substr(path.rfind('/') + 1);
        if (file.find("blas") != std::string::npos || file.find("libmkl") != std::string::npos) {
            char resolved[4096];
            return realpath(path.c_str(), resolved) ? resolved : path;
        }
    }
    return "none";
}

// Resolves the device, refusing CUDA with a reason where it cannot work.
torch::Device resolve_device(const std::string& name) {
    torch::Device device(torch::kCPU);
    try {
        device = torch::Device(name);
    } catch (const c10::Error&) {
        usage_error("unknown device '" + name + "'; accepted: cpu, cuda, cuda:N");
    }
    if (device.is_cuda()) {
        if (!torch::cuda::is_available()) {
            std::cerr << "prenet-harness: CUDA was requested but is not available: this LibTorch has no CUDA "
                         "support or sees no GPU. On a GPU machine, build against the LibTorch inside a CUDA torch "
                         "wheel (see docs/harness_and_data.md, \"Collecting on a GPU\").\n";
            std::exit(3);
        }
        if (!CudaDriver::instance().available()) {
            std::cerr << "prenet-harness: CUDA is available to LibTorch but device timing cannot start: "
                      << CudaDriver::instance().why_unavailable() << "\n";
            std::exit(3);
        }
        if (!device.has_index()) device = torch::Device(torch::kCUDA, 0);
    }
    return device;
}

std::string environment_json(const torch::Device& device, const Options& options, const std::string& freed_memory) {
    JsonLine env;
    env.add("type", "environment").add("device", device.str()).add("dtype", options.dtype);
    env.add("freed_memory", freed_memory);
    if (device.is_cuda()) {
        const auto& driver = CudaDriver::instance();
        env.add("device_name", driver.device_name(device.index()))
            .add("device_units", driver.multiprocessor_count(device.index()))
            .add("device_units_kind", "SMs")
            .add("cuda_driver", driver.driver_version());
    } else {
        env.add("device_name", host_cpu_model())
            .add("device_units", static_cast<std::int64_t>(std::thread::hardware_concurrency()))
            .add("device_units_kind", "hardware threads");
    }
    env.add("host_cpu", host_cpu_model())
        .add("threads", static_cast<std::int64_t>(torch::get_num_threads()))
        .add("blas", loaded_blas())
        .add("torch_version", TORCH_VERSION);
    return env.str();
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::string& name, std::vector<torch::Tensor> params) {
    constexpr double lr = 1e-3;
    if (name == "sgd") return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(lr));
    if (name == "sgd_momentum")
        return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(lr).momentum(0.9));
    if (name == "adam") return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(lr));
    if (name == "adamw") return std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(lr));
    if (name == "rmsprop") return std::make_unique<torch::optim::RMSprop>(params, torch::optim::RMSpropOptions(lr));
    if (name == "adagrad") return std::make_unique<torch::optim::Adagrad>(params, torch::optim::AdagradOptions(lr));
    throw std::invalid_argument("unknown optimizer '" + name +
                                "'; accepted: sgd sgd_momentum adam adamw rmsprop adagrad");
}

void add_stats(JsonLine& out, const std::string& prefix, const PhaseStats& s) {
    out.add(prefix + "_ms", s.median)
        .add(prefix + "_p25_ms", s.p25)
        .add(prefix + "_p75_ms", s.p75)
        .add(prefix + "_min_ms", s.min)
        .add(prefix + "_max_ms", s.max);
}

// Drops the gradients of parameters and inputs between iterations (untimed), as zero_grad(set_to_none) does.
void clear_gradients(const std::vector<torch::Tensor>& tensors) {
    for (auto tensor : tensors) {
        if (tensor.grad().defined()) tensor.mutable_grad() = torch::Tensor();
    }
}

// One request's result; with `probe` (on the CPU), the host's speed timed right after it (speed_reference.hpp).
std::string time_request(const Request& request, const torch::TensorOptions& tensor_options, PhaseClock& clock,
                         const RepeatPolicy& policy, SpeedProbe* probe) {
    const auto started = std::chrono::steady_clock::now();
    JsonLine out;
    out.add("type", "result").add("id", request.text("id"));
    LayerBench bench = build_layer(request, tensor_options);
    const std::string optimizer_name = request.text("optimizer", "sgd");
    auto optimizer = bench.parameters.empty() ? nullptr : make_optimizer(optimizer_name, bench.parameters);

    Measurement forward;
    {
        torch::NoGradGuard no_grad;
        forward = measure([&](PhaseClock& c) {
            c.mark();
            bench.forward();
            c.mark();
        }, clock, policy);
    }
    torch::Tensor grad_output = torch::ones_like(bench.forward().detach());
    std::vector<torch::Tensor> leaves = bench.parameters;
    Measurement train = measure([&](PhaseClock& c) {
        clear_gradients(leaves);
        c.mark();
        torch::Tensor output = bench.forward();
        c.mark();
        output.backward(grad_output);
        c.mark();
        if (optimizer) {
            optimizer->step();
            c.mark();
        }
    }, clock, policy);

    out.add("status", "ok");
    add_stats(out, "forward", forward.phases[0]);
    out.add("forward_reps", forward.reps).add("forward_converged", static_cast<int>(forward.converged));
    add_stats(out, "train_forward", train.phases[0]);
    add_stats(out, "train_backward", train.phases[1]);
    if (optimizer) add_stats(out, "train_optimizer", train.phases[2]);
    add_stats(out, "train_step", train.total);
    out.add("train_reps", train.reps).add("train_converged", static_cast<int>(train.converged));
    out.add("measure_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    if (probe) {
        const SpeedReference speed = probe->time();
        out.add("reference_matmul_ms", speed.matmul_ms).add("reference_copy_ms", speed.copy_ms);
    }
    return out.str();
}

}  // namespace

int main(int argc, char** argv) {
    // first, so that every timed allocation is kept
    const std::string freed_memory = keep_freed_memory() + "; " + cache_cpu_tensor_blocks();
    const Options options = parse_options(argc, argv);
    const torch::Device device = resolve_device(options.device);
    torch::set_num_threads(options.threads > 0 ? options.threads
                                               : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    const auto tensor_options = torch::TensorOptions().dtype(parse_dtype(options.dtype)).device(device);
    if (device.is_cuda()) torch::ones({1}, tensor_options).sum().item<float>();  // creates the CUDA context
    auto clock = make_clock(device.is_cuda());
    std::unique_ptr<SpeedProbe> probe = device.is_cuda() ? nullptr : std::make_unique<SpeedProbe>();
    std::cout << environment_json(device, options, freed_memory) << std::endl;

    for (std::string line; std::getline(std::cin, line);) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        std::string id = "?";
        try {
            const Request request = Request::parse(line);
            id = request.text("id");
            std::cout << time_request(request, tensor_options, *clock, options.policy, probe.get()) << std::endl;
        } catch (const std::exception& error) {
            // Invalid configurations and out-of-memory errors (c10::Error) are results too.
            std::string message = error.what();
            message = message.substr(0, message.find('\n'));
            std::cout << JsonLine().add("type", "result").add("id", id).add("status", "failed")
                             .add("error", message).str() << std::endl;
            if (device.is_cuda()) clock = make_clock(true);  // a failure may leave events recorded
        }
        release_cpu_tensor_blocks();
    }
    return 0;
}
