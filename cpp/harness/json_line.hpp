// Writes one flat JSON object on one line (the harness's reply format).
#pragma once

#include <cmath>
#include <limits>
#include <cstdint>
#include <sstream>
#include <string>

namespace prenet::harness {

class JsonLine {
public:
    JsonLine& add(const std::string& key, const std::string& value) {
        key_(key);
        quote(value);
        return *this;
    }
    JsonLine& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
    JsonLine& add(const std::string& key, double value) {
        key_(key);
        if (std::isfinite(value)) {
            out_.precision(9);
            out_ << value;
        } else {
            out_ << "null";
        }
        return *this;
    }
    JsonLine& add(const std::string& key, std::int64_t value) {
        key_(key);
        out_ << value;
        return *this;
    }
    JsonLine& add(const std::string& key, int value) { return add(key, static_cast<std::int64_t>(value)); }
    std::string str() const { return "{" + out_.str() + "}"; }

private:
    void key_(const std::string& key) {
        if (!first_) out_ << ',';
        first_ = false;
        quote(key);
        out_ << ':';
    }
    void quote(const std::string& text) {
        out_ << '"';
        for (unsigned char c : text) {
            if (c == '"' || c == '\\') {
                out_ << '\\' << c;
            } else if (c < 0x20) {
                out_ << "\\u00" << "0123456789abcdef"[c >> 4] << "0123456789abcdef"[c & 15];
            } else {
                out_ << c;
            }
        }
        out_ << '"';
    }
    std::ostringstream out_;
    bool first_ = true;
};

}  // namespace prenet::harness
