// A forward-only reader of JSON text, for model files of millions of numbers: the caller walks the document it
// expects, each number is converted where it stands (std::from_chars), and what the caller does not ask for is
// skipped without being built. nlohmann::json builds every value of the document first, 5-6 times slower on a
// tree ensemble (ECMA-404 grammar; strings are read for keys and short values, with their escapes).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace prenet::regressors {

// Malformed JSON, or a value of another type than asked for; the message gives the byte offset.
class JsonError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class JsonCursor {
public:
    explicit JsonCursor(std::string_view text) : text_(text) {}

    // Calls on_member(key) for each member of the object at the cursor, with the cursor at the member's value,
    // which on_member reads or skips.
    template <typename OnMember>
    void object(OnMember on_member) {
        expect('{');
        if (consume('}')) return;
        do {
            const std::string key = string();
            expect(':');
            on_member(key);
        } while (consume(','));
        expect('}');
    }

    // Calls on_element() for each element of the array at the cursor, the cursor at the element.
    template <typename OnElement>
    void array(OnElement on_element) {
        expect('[');
        if (consume(']')) return;
        do {
            on_element();
        } while (consume(','));
        expect(']');
    }

    std::string string();
    double number();               // a JSON number, or true / false as 1 / 0
    std::int64_t integer();        // a number without fraction or exponent, or true / false as 1 / 0
    std::vector<double> numbers();  // an array of number()
    std::vector<std::int64_t> integers();  // an array of integer()
    void skip();  // any value
    void finish();  // nothing but whitespace may follow

private:
    [[noreturn]] void fail(const std::string& what) const;
    void whitespace();
    void expect(char c);
    bool consume(char c);  // the next non-blank character, taken if it is `c`
    bool literal(std::string_view word);  // true, false or null at the cursor, taken
    int boolean_or_number();  // true / false at the cursor taken as 1 / 0; -1 where a number stands
    std::string_view number_text();  // the characters of the number at the cursor, taken

    std::string_view text_;
    std::size_t at_ = 0;
};

}  // namespace prenet::regressors
