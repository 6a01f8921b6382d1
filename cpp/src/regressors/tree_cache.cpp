#include "tree_cache.hpp"

#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <system_error>
#include <thread>
#include <type_traits>

#include "prenet/file_bytes.hpp"

namespace prenet::regressors {

namespace {

namespace fs = std::filesystem;

// The layout: kMagic, kVersion, the stamp (path hash, size, time), the five strings of XgboostModel (a 32-bit
// length, then the bytes), has_trees, tree_info (a 64-bit count, then the values), the trees (a 64-bit count; per
// tree its depth, its node count and its nodes as in memory). Numbers in this machine's byte order: a copy is this
// machine's alone.
constexpr char kMagic[8] = {'P', 'R', 'E', 'N', 'E', 'T', 'T', 'C'};
constexpr std::uint32_t kVersion = 2;

class Writer {
public:
    template <typename T>
    void value(const T& v) {
        static_assert(std::is_trivially_copyable_v<T>);
        bytes(&v, sizeof v);
    }
    void bytes(const void* data, std::size_t size) { out_.append(static_cast<const char*>(data), size); }
    void text(const std::string& s) {
        value(static_cast<std::uint32_t>(s.size()));
        bytes(s.data(), s.size());
    }
    const std::string& str() const { return out_; }

private:
    std::string out_;
};

// Reads from a buffer; every read past its end fails the whole read.
class Reader {
public:
    explicit Reader(const std::string& data) : data_(data) {}
    template <typename T>
    bool value(T& v) {
        static_assert(std::is_trivially_copyable_v<T>);
        return bytes(&v, sizeof v);
    }
    bool bytes(void* out, std::size_t size) {
        if (size > data_.size() - at_) return false;
        std::memcpy(out, data_.data() + at_, size);
        at_ += size;
        return true;
    }
    bool text(std::string& s) {
        std::uint32_t size = 0;
        if (!value(size) || size > data_.size() - at_) return false;
        s.assign(data_.data() + at_, size);
        at_ += size;
        return true;
    }
    // Whether `count` items of `size` bytes can still be read (guards a corrupt count before allocating for it).
    bool fits(std::uint64_t count, std::size_t size) const { return count <= (data_.size() - at_) / size; }
    bool done() const { return at_ == data_.size(); }

private:
    const std::string& data_;
    std::size_t at_ = 0;
};

bool sound(const Tree& tree, std::size_t inputs) {
    const auto nodes = static_cast<std::int64_t>(tree.nodes.size());
    if (nodes == 0 || tree.depth < 0 || tree.depth >= nodes) return false;
    for (std::int64_t i = 0; i < nodes; ++i) {
        const Node& node = tree.nodes[static_cast<std::size_t>(i)];
        const auto right = node.right_offset();
        // an inner node's left child (the next node) and right child lie after it, in the tree
        if ((right != 0 && (right < 2 || i + right >= nodes)) || node.feature >= inputs) return false;
    }
    return true;
}

}  // namespace

std::optional<SourceStamp> source_stamp(const std::string& path) {
    std::error_code error;
    const auto size = fs::file_size(path, error);
    if (error) return std::nullopt;
    const auto modified = fs::last_write_time(path, error);
    if (error) return std::nullopt;
    auto full = fs::weakly_canonical(path, error);
    if (error) full = fs::absolute(path);
    return SourceStamp{std::hash<std::string>{}(full.string()), size,
                       static_cast<std::int64_t>(modified.time_since_epoch().count())};
}

std::string tree_cache_file(const std::string& cache_folder, const std::string& path) {
    const fs::path model(path);
    return (fs::path(cache_folder) / (model.parent_path().filename().string() + "-" + model.filename().string() +
                                      ".trees")).string();
}

std::optional<XgboostModel> read_tree_cache(const std::string& cache_file, const SourceStamp& stamp,
                                            std::size_t inputs) {
    const auto data = try_read_file_bytes(cache_file);
    if (!data) return std::nullopt;
    Reader r(*data);
    char magic[sizeof kMagic] = {};
    std::uint32_t version = 0;
    SourceStamp made_from;
    if (!r.bytes(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof kMagic) != 0 || !r.value(version) ||
        version != kVersion || !r.value(made_from.path) || !r.value(made_from.size) || !r.value(made_from.modified) ||
        made_from.path != stamp.path || made_from.size != stamp.size || made_from.modified != stamp.modified) {
        return std::nullopt;
    }
    XgboostModel m;
    std::uint8_t has_trees = 0;
    std::uint64_t count = 0;
    if (!r.text(m.objective) || !r.text(m.num_feature) || !r.text(m.num_class) || !r.text(m.base_score) ||
        !r.text(m.booster) || !r.value(has_trees) || !r.value(count) || !r.fits(count, sizeof(std::int64_t))) {
        return std::nullopt;
    }
    m.has_trees = has_trees != 0;
    m.tree_info.resize(count);
    if (!r.bytes(m.tree_info.data(), count * sizeof(std::int64_t)) || !r.value(count) ||
        !r.fits(count, sizeof(std::int32_t) + sizeof(std::uint64_t))) {
        return std::nullopt;
    }
    m.trees.resize(count);
    for (Tree& tree : m.trees) {
        std::int32_t depth = 0;
        std::uint64_t nodes = 0;
        if (!r.value(depth) || !r.value(nodes) || !r.fits(nodes, sizeof(Node))) return std::nullopt;
        tree.depth = depth;
        tree.nodes.resize(nodes);
        if (!r.bytes(tree.nodes.data(), nodes * sizeof(Node)) || !sound(tree, inputs)) return std::nullopt;
    }
    if (!r.done()) return std::nullopt;
    return m;
}

bool write_tree_cache(const std::string& cache_file, const SourceStamp& stamp, const XgboostModel& model) {
    Writer w;
    w.bytes(kMagic, sizeof kMagic);
    w.value(kVersion);
    w.value(stamp.path);
    w.value(stamp.size);
    w.value(stamp.modified);
    for (const auto* s : {&model.objective, &model.num_feature, &model.num_class, &model.base_score, &model.booster}) {
        w.text(*s);
    }
    w.value(static_cast<std::uint8_t>(model.has_trees));
    w.value(static_cast<std::uint64_t>(model.tree_info.size()));
    w.bytes(model.tree_info.data(), model.tree_info.size() * sizeof(std::int64_t));
    w.value(static_cast<std::uint64_t>(model.trees.size()));
    for (const Tree& tree : model.trees) {
        w.value(static_cast<std::int32_t>(tree.depth));
        w.value(static_cast<std::uint64_t>(tree.nodes.size()));
        w.bytes(tree.nodes.data(), tree.nodes.size() * sizeof(Node));
    }
    std::error_code error;
    fs::create_directories(fs::path(cache_file).parent_path(), error);
    // unique to this writer: processes and threads may write the same copy at once
    const std::string temporary = cache_file + ".tmp-" +
                                  std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id())) + "-" +
                                  std::to_string(std::random_device{}());
    if (!write_file_bytes(temporary, w.str())) return false;
    fs::rename(temporary, cache_file, error);
    if (!error) return true;
    fs::remove(temporary, error);
    return false;
}

}  // namespace prenet::regressors
