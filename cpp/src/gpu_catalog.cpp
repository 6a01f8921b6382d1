#include "prenet/gpu_catalog.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <stdexcept>
#include <utility>

#include "prenet/csv.hpp"

namespace prenet {

namespace {

// Words that vendors and drivers put in front of a model name; a person usually leaves them out.
const std::set<std::string> kVendorWords = {"nvidia", "tesla", "geforce", "quadro", "amd", "instinct", "radeon"};

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    std::iota(row.begin(), row.end(), 0);
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

class RowReader {
public:
    RowReader(const CsvTable& table, std::size_t row) : table_(table), row_(row) {}

    const std::string& text(const std::string& column) const { return table_.at(row_, column); }

    double number(const std::string& column) const {
        auto value = optional_number(column);
        if (!value) fail(column, "is empty; a number is required");
        return *value;
    }

    std::optional<double> optional_number(const std::string& column) const {
        const std::string& field = text(column);
        if (field.empty()) return std::nullopt;
        double value = 0;
        auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
        if (error != std::errc() || end != field.data() + field.size() || !(value >= 0)) {
            fail(column, "= '" + field + "' is not a non-negative number");
        }
        return value;
    }

private:
    [[noreturn]] void fail(const std::string& column, const std::string& what) const {
        throw std::runtime_error(table_.source() + ": line " + std::to_string(table_.line_of(row_)) + ", column '" +
                                 column + "' " + what);
    }
    const CsvTable& table_;
    std::size_t row_;
};

std::vector<std::string> split_aliases(const std::string& field) {
    std::vector<std::string> aliases;
    for (std::size_t start = 0; start <= field.size();) {
        const std::size_t end = std::min(field.find(';', start), field.size());
        if (end > start) aliases.push_back(field.substr(start, end - start));
        start = end + 1;
    }
    return aliases;
}

}  // namespace

bool is_host_cpu(const GpuSpec& device) { return device.bus == "host"; }

std::string normalise_gpu_name(std::string_view name) {
    std::string result, word;
    auto flush = [&] {
        if (!kVendorWords.count(word)) result += word;
        word.clear();
    };
    for (char c : name) {
        if (std::isalnum(static_cast<unsigned char>(c))) {
            word.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
        } else {
            flush();
        }
    }
    flush();
    return result;
}

GpuCatalog::GpuCatalog(std::vector<GpuSpec> gpus) : gpus_(std::move(gpus)) {
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
        std::vector<std::string> names = gpus_[i].aliases;
        names.push_back(gpus_[i].name);
        for (const auto& name : names) {
            const auto [known, added] = keys_.emplace(normalise_gpu_name(name), i);
            if (!added && known->second != i) {
                throw std::runtime_error("GPU catalog: the name '" + name + "' of " + gpus_[i].name +
                                         " is also a name of " + gpus_[known->second].name);
            }
        }
    }
}

GpuCatalog GpuCatalog::load_csv(const std::string& path) {
    const CsvTable table = CsvTable::read_file(path);
    std::vector<GpuSpec> gpus;
    for (std::size_t row = 0; row < table.rows(); ++row) {
        const RowReader r(table, row);
        GpuSpec g;
        g.name = r.text("name");
        if (g.name.empty()) {
            throw std::runtime_error(path + ": line " + std::to_string(table.line_of(row)) + " has no name");
        }
        g.aliases = split_aliases(r.text("aliases"));
        g.vendor = r.text("vendor");
        g.architecture = r.text("architecture");
        g.year = static_cast<int>(r.number("year"));
        g.sm_count = static_cast<int>(r.number("sm_count"));
        g.cuda_cores = static_cast<int>(r.number("cuda_cores"));
        g.boost_clock_mhz = r.number("boost_clock_mhz");
        g.fp32_tflops = r.number("fp32_tflops");
        g.tf32_tflops = r.optional_number("tf32_tflops");
        g.fp16_tflops = r.optional_number("fp16_tflops");
        g.bf16_tflops = r.optional_number("bf16_tflops");
        g.memory_gb = r.number("memory_gb");
        g.memory_type = r.text("memory_type");
        g.memory_bandwidth_gbs = r.number("memory_bandwidth_gbs");
        g.l2_cache_mb = r.number("l2_cache_mb");
        g.bus = r.text("bus");
        g.source = r.text("source");
        if (g.fp32_tflops <= 0 || g.memory_bandwidth_gbs <= 0 || g.sm_count <= 0) {
            throw std::runtime_error(path + ": line " + std::to_string(table.line_of(row)) + " (" + g.name +
                                     ") needs positive fp32_tflops, memory_bandwidth_gbs and sm_count");
        }
        gpus.push_back(std::move(g));
    }
    if (gpus.empty()) throw std::runtime_error(path + ": the catalog has no GPU rows");
    return GpuCatalog(std::move(gpus));
}

const GpuSpec& GpuCatalog::find(std::string_view name) const {
    const auto known = keys_.find(normalise_gpu_name(name));
    if (known != keys_.end()) return gpus_[known->second];
    std::string msg = "unknown GPU '" + std::string(name) + "'; closest known:";
    const auto nearest = closest(name, 3);
    for (std::size_t i = 0; i < nearest.size(); ++i) msg += (i ? ", " : " ") + nearest[i];
    throw std::invalid_argument(msg + " (prenet.gpus() lists all " + std::to_string(gpus_.size()) + ")");
}

std::vector<std::string> GpuCatalog::closest(std::string_view name, std::size_t count) const {
    // Per GPU, over its names: how far `name` is from the beginning of a name (a person types the model and leaves
    // out the rest: "H100" for the H100 PCIe), then from the whole name, nearest first.
    const std::string key = normalise_gpu_name(name);
    using Distance = std::pair<std::size_t, std::size_t>;
    std::vector<Distance> best(gpus_.size(), {std::string::npos, std::string::npos});
    for (const auto& [known, index] : keys_) {
        const std::size_t whole = edit_distance(key, known);
        best[index] = std::min(best[index], Distance{std::min(whole, edit_distance(key, known.substr(0, key.size()))),
                                                     whole});
    }
    std::vector<std::size_t> order(gpus_.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return best[a] < best[b]; });
    std::vector<std::string> names;
    for (std::size_t i = 0; i < std::min(count, order.size()); ++i) names.push_back(gpus_[order[i]].name);
    return names;
}

std::optional<std::size_t> GpuCatalog::nearest(const GpuSpec& gpu, const std::vector<std::string>& candidates) const {
    std::optional<std::size_t> best;
    double best_distance = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < candidates.size(); ++i) {
        if (const double distance = spec_distance(gpu, find(candidates[i])); !best || distance < best_distance) {
            best = i;
            best_distance = distance;
        }
    }
    return best;
}

double spec_distance(const GpuSpec& a, const GpuSpec& b) {
    double sum = 0;
    for (const auto& spec : kDistanceSpecs) sum += std::pow(std::log(spec.value(a) / spec.value(b)), 2);
    return std::sqrt(sum / kDistanceSpecs.size());
}

}  // namespace prenet
