#include "request.hpp"

#include <sstream>
#include <stdexcept>

namespace prenet::harness {

Request Request::parse(const std::string& line) {
    Request request;
    std::istringstream tokens(line);
    for (std::string token; tokens >> token;) {
        const auto equals = token.find('=');
        if (equals == std::string::npos || equals == 0) {
            throw std::invalid_argument("request token '" + token + "' is not key=value");
        }
        if (!request.values_.emplace(token.substr(0, equals), token.substr(equals + 1)).second) {
            throw std::invalid_argument("request repeats key '" + token.substr(0, equals) + "'");
        }
    }
    return request;
}

const std::string& Request::text(const std::string& key) const {
    auto it = values_.find(key);
    if (it == values_.end()) throw std::invalid_argument("request lacks '" + key + "'");
    return it->second;
}

std::string Request::text(const std::string& key, const std::string& fallback) const {
    return has(key) ? text(key) : fallback;
}

std::int64_t Request::integer(const std::string& key) const {
    const std::string& value = text(key);
    std::size_t used = 0;
    std::int64_t number = 0;
    try {
        number = std::stoll(value, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != value.size() || value.empty()) {
        throw std::invalid_argument("'" + key + "=" + value + "' is not an integer");
    }
    return number;
}

std::int64_t Request::integer(const std::string& key, std::int64_t fallback) const {
    return has(key) ? integer(key) : fallback;
}

}  // namespace prenet::harness
