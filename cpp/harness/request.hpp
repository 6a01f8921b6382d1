// One timing request of the harness protocol: a line of space-separated key=value pairs,
// e.g. "id=17 kind=conv2d optimizer=adam batch=4 in_channels=3 ...".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace prenet::harness {

class Request {
public:
    // Throws std::invalid_argument on a token without '=' or a repeated key.
    static Request parse(const std::string& line);

    const std::string& text(const std::string& key) const;  // throws std::invalid_argument if missing
    std::string text(const std::string& key, const std::string& fallback) const;
    std::int64_t integer(const std::string& key) const;     // throws if missing or not an integer
    std::int64_t integer(const std::string& key, std::int64_t fallback) const;
    bool has(const std::string& key) const { return values_.count(key) > 0; }
    const std::map<std::string, std::string>& values() const { return values_; }

private:
    std::map<std::string, std::string> values_;
};

}  // namespace prenet::harness
