#include "prenet/file_bytes.hpp"

#include <cstdio>
#include <memory>
#include <stdexcept>

namespace prenet {

namespace {

struct FileCloser {
    void operator()(std::FILE* file) const { std::fclose(file); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

}  // namespace

std::optional<std::string> try_read_file_bytes(const std::string& path) {
    File file(std::fopen(path.c_str(), "rb"));
    if (!file) return std::nullopt;
    std::string bytes;
    char chunk[1 << 16];
    for (std::size_t read; (read = std::fread(chunk, 1, sizeof chunk, file.get())) > 0;) bytes.append(chunk, read);
    if (std::ferror(file.get())) return std::nullopt;
    return bytes;
}

std::string read_file_bytes(const std::string& path, std::string_view what) {
    auto bytes = try_read_file_bytes(path);
    if (!bytes) throw std::runtime_error("cannot open " + std::string(what) + " '" + path + "'");
    return std::move(*bytes);
}

bool write_file_bytes(const std::string& path, std::string_view bytes) {
    File file(std::fopen(path.c_str(), "wb"));
    if (!file) return false;
    const bool written = std::fwrite(bytes.data(), 1, bytes.size(), file.get()) == bytes.size();
    const bool closed = std::fclose(file.release()) == 0;
    if (written && closed) return true;
    std::remove(path.c_str());
    return false;
}

}  // namespace prenet
