#include "json_cursor.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>

namespace prenet::regressors {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// UTF-8 bytes of a code point (a \u escape in a string).
void append_utf8(std::string& out, std::uint32_t code) {
    if (code < 0x80) {
        out += static_cast<char>(code);
    } else if (code < 0x800) {
        out += static_cast<char>(0xC0 | (code >> 6));
        out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
        out += static_cast<char>(0xE0 | (code >> 12));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (code >> 18));
        out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (code & 0x3F));
    }
}

}  // namespace

void JsonCursor::fail(const std::string& what) const {
    throw JsonError(what + " at byte " + std::to_string(at_));
}

void JsonCursor::whitespace() {
    while (at_ < text_.size()) {
        const char c = text_[at_];
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return;
        ++at_;
    }
}

bool JsonCursor::consume(char c) {
    whitespace();
    if (at_ < text_.size() && text_[at_] == c) {
        ++at_;
        return true;
    }
    return false;
}

void JsonCursor::expect(char c) {
    if (!consume(c)) {
        fail(std::string("expected '") + c + "', found " +
             (at_ < text_.size() ? "'" + std::string(1, text_[at_]) + "'" : "the end of the text"));
    }
}

bool JsonCursor::literal(std::string_view word) {
    whitespace();
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
}

std::string JsonCursor::string() {
    expect('"');
    std::string out;
    while (true) {
        if (at_ >= text_.size()) fail("unterminated string");
        const char c = text_[at_++];
        if (c == '"') return out;
        if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
        if (c != '\\') {
            out += c;
            continue;
        }
        if (at_ >= text_.size()) fail("unterminated string");
        const char escaped = text_[at_++];
        switch (escaped) {
            case '"': case '\\': case '/': out += escaped; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'u': {
                std::uint32_t code = 0;
                const char* first = text_.data() + at_;
                const char* last = text_.data() + std::min(at_ + 4, text_.size());
                const auto [end, error] = std::from_chars(first, last, code, 16);
                if (error != std::errc() || end != first + 4) fail("malformed \\u escape");
                at_ += 4;
                append_utf8(out, code);  // a surrogate pair stays two code points: keys here are ASCII
                break;
            }
            default: --at_, fail(std::string("unknown escape \\") + escaped);  // located at the escaped character
        }
    }
}

std::string_view JsonCursor::number_text() {
    whitespace();
    const std::size_t start = at_;
    if (at_ < text_.size() && text_[at_] == '-') ++at_;
    const std::size_t digits = at_;
    while (at_ < text_.size() && is_digit(text_[at_])) ++at_;
    if (at_ == digits) fail("expected a value");
    if (at_ < text_.size() && text_[at_] == '.') {
        const std::size_t fraction = ++at_;
        while (at_ < text_.size() && is_digit(text_[at_])) ++at_;
        if (at_ == fraction) fail("malformed number");
    }
    if (at_ < text_.size() && (text_[at_] == 'e' || text_[at_] == 'E')) {
        ++at_;
        if (at_ < text_.size() && (text_[at_] == '+' || text_[at_] == '-')) ++at_;
        const std::size_t exponent = at_;
        while (at_ < text_.size() && is_digit(text_[at_])) ++at_;
        if (at_ == exponent) fail("malformed number");
    }
    return text_.substr(start, at_ - start);
}

int JsonCursor::boolean_or_number() {
    whitespace();
    if (at_ < text_.size() && (text_[at_] == 't' || text_[at_] == 'f')) {  // checked first: most values are numbers
        if (literal("true")) return 1;
        if (literal("false")) return 0;
        fail("expected a value");
    }
    return -1;
}

// Numbers are converted where they stand: std::from_chars reads as far as the number goes (it also takes forms
// JSON does not write, such as a leading zero, which are not rejected here).
double JsonCursor::number() {
    if (const int flag = boolean_or_number(); flag >= 0) return flag;
    double value = 0.0;
#if defined(__cpp_lib_to_chars) && __cpp_lib_to_chars >= 201611L
    const auto [end, error] = std::from_chars(text_.data() + at_, text_.data() + text_.size(), value);
    if (error != std::errc()) {
        fail(error == std::errc::result_out_of_range ? "number out of range" : "expected a value");
    }
    at_ = static_cast<std::size_t>(end - text_.data());
#else  // a standard library without floating-point from_chars (GCC before 11)
    const std::string digits(number_text());
    char* end = nullptr;
    value = std::strtod(digits.c_str(), &end);
    if (end != digits.c_str() + digits.size()) fail("number out of range");
#endif
    return value;
}

std::int64_t JsonCursor::integer() {
    if (const int flag = boolean_or_number(); flag >= 0) return flag;
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(text_.data() + at_, text_.data() + text_.size(), value);
    if (error != std::errc()) {
        fail(error == std::errc::result_out_of_range ? "integer out of range" : "expected a value");
    }
    at_ = static_cast<std::size_t>(end - text_.data());
    if (at_ < text_.size() && (text_[at_] == '.' || text_[at_] == 'e' || text_[at_] == 'E')) {
        fail("expected an integer");
    }
    return value;
}

std::vector<double> JsonCursor::numbers() {
    std::vector<double> out;
    array([&] { out.push_back(number()); });
    return out;
}

std::vector<std::int64_t> JsonCursor::integers() {
    std::vector<std::int64_t> out;
    array([&] { out.push_back(integer()); });
    return out;
}

void JsonCursor::skip() {
    whitespace();
    if (at_ >= text_.size()) fail("expected a value, found the end of the text");
    switch (text_[at_]) {
        case '{': object([&](const std::string&) { skip(); }); return;
        case '[': array([&] { skip(); }); return;
        case '"': string(); return;
        default:
            if (literal("true") || literal("false") || literal("null")) return;
            number_text();
    }
}

void JsonCursor::finish() {
    whitespace();
    if (at_ != text_.size()) fail("unexpected text after the document");
}

}  // namespace prenet::regressors
