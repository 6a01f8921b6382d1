// The forward-only JSON reader of model files: values read where they stand, the rest skipped, errors located.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "regressors/json_cursor.hpp"

namespace {

using prenet::regressors::JsonCursor;
using prenet::regressors::JsonError;

std::string error_of(const std::string& text, void (*read)(JsonCursor&)) {
    try {
        JsonCursor cursor(text);
        read(cursor);
    } catch (const JsonError& e) {
        return e.what();
    }
    return "";
}

TEST(JsonCursor, ReadsWhatItIsAskedForAndSkipsTheRest) {
    const std::string text = R"( {"skip": {"a": [1, {"b": null}, "x\"]"], "c": true, "d": -2.5e-3},
        "tree": {"ints": [1, -1, 2], "floats": [4.0, -1.5E+2, 0.25, 3], "flags": [true, false, 1],
                 "name": "gb\u0074ree \\ \/ \n"}} )";
    JsonCursor cursor(text);
    std::vector<std::int64_t> ints, flags;
    std::vector<double> floats;
    std::string name;
    std::vector<std::string> keys;
    cursor.object([&](const std::string& key) {
        keys.push_back(key);
        if (key != "tree") return cursor.skip();
        cursor.object([&](const std::string& inner) {
            if (inner == "ints") ints = cursor.integers();
            else if (inner == "floats") floats = cursor.numbers();
            else if (inner == "flags") flags = cursor.integers();
            else name = cursor.string();
        });
    });
    cursor.finish();
    EXPECT_EQ(keys, (std::vector<std::string>{"skip", "tree"}));
    EXPECT_EQ(ints, (std::vector<std::int64_t>{1, -1, 2}));
    EXPECT_EQ(floats, (std::vector<double>{4.0, -150.0, 0.25, 3.0}));
    EXPECT_EQ(flags, (std::vector<std::int64_t>{1, 0, 1}));
    EXPECT_EQ(name, "gbtree \\ / \n");
}

TEST(JsonCursor, NumbersAreTheNearestDoubleAsStrtodGivesThem) {
    const std::string text = "[0.1, 9.526, 1e308, -0, 123456789012345678, 5E-1]";
    JsonCursor cursor(text);
    const auto values = cursor.numbers();
    ASSERT_EQ(values.size(), 6u);
    EXPECT_EQ(values[0], std::strtod("0.1", nullptr));
    EXPECT_EQ(values[1], std::strtod("9.526", nullptr));
    EXPECT_EQ(values[2], 1e308);
    EXPECT_TRUE(std::signbit(values[3]));
    EXPECT_EQ(values[4], 123456789012345678.0);
    EXPECT_EQ(values[5], 0.5);
}

TEST(JsonCursor, MalformedTextIsAnErrorThatSaysWhere) {
    const auto read_integers = [](JsonCursor& c) { c.integers(); };
    const auto read_object = [](JsonCursor& c) { c.object([&](const std::string&) { c.skip(); }); c.finish(); };
    EXPECT_EQ(error_of("[1, 2", read_integers), "expected ']', found the end of the text at byte 5");
    EXPECT_EQ(error_of("[1, 2.5]", read_integers), "expected an integer at byte 5");
    EXPECT_EQ(error_of("[1, x]", read_integers), "expected a value at byte 4");
    EXPECT_EQ(error_of("[99999999999999999999]", read_integers), "integer out of range at byte 1");
    EXPECT_EQ(error_of("{\"a\" 1}", read_object), "expected ':', found '1' at byte 5");
    EXPECT_EQ(error_of("{\"a\": [1, {]}", read_object), "expected '\"', found ']' at byte 11");
    EXPECT_EQ(error_of("{\"a\": \"b}", read_object), "unterminated string at byte 9");
    EXPECT_EQ(error_of("{\"a\": \"\\q\"}", read_object), "unknown escape \\q at byte 8");
    EXPECT_EQ(error_of("{\"a\": tru}", read_object), "expected a value at byte 6");
    EXPECT_EQ(error_of("{} {}", read_object), "unexpected text after the document at byte 3");
    EXPECT_EQ(error_of("{\"a\": 1}", read_object), "");
}

}  // namespace
