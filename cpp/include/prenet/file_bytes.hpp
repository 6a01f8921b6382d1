// Whole-file reads and writes through the C library, not iostreams. A file stream consults the C++ locale (its
// codecvt facet), and on a GPU image whose compiler links libstdc++ statically that locale crashed the process
// inside the extension module (2026-11-26); the core keeps the C++ locale out of every path for that reason.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace prenet {

// The file's bytes, or nothing where it cannot be opened or read.
std::optional<std::string> try_read_file_bytes(const std::string& path);

// The file's bytes; throws std::runtime_error naming `what` and the path where it cannot be opened or read.
std::string read_file_bytes(const std::string& path, std::string_view what = "file");

// Writes `bytes` to `path`, replacing it; false where it cannot be written (a partial file is removed).
bool write_file_bytes(const std::string& path, std::string_view bytes);

}  // namespace prenet
