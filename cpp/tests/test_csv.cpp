#include <gtest/gtest.h>

#include <stdexcept>

#include "prenet/csv.hpp"

namespace {

prenet::CsvTable parse(const std::string& text) { return prenet::CsvTable::parse(text, "test.csv"); }

TEST(Csv, QuotedFieldsWithCommasQuotesAndNewlines) {
    const auto t = parse("a,b\r\n\"x, y\",\"say \"\"hi\"\"\"\n\"two\nlines\",2\n\n");
    ASSERT_EQ(t.rows(), 2u);
    EXPECT_EQ(t.at(0, "a"), "x, y");
    EXPECT_EQ(t.at(0, "b"), "say \"hi\"");
    EXPECT_EQ(t.at(1, "a"), "two\nlines");
    EXPECT_EQ(t.line_of(1), 3u);
}

TEST(Csv, LastLineWithoutNewline) {
    const auto t = parse("a,b\n1,2");
    ASSERT_EQ(t.rows(), 1u);
    EXPECT_EQ(t.at(0, "b"), "2");
}

TEST(Csv, Errors) {
    EXPECT_THROW(parse("a,b\n\"open,2\n"), std::runtime_error);
    EXPECT_THROW(parse("a,b\n1,2,3\n"), std::runtime_error);
    EXPECT_THROW(parse("a\n1\n").at(0, "missing"), std::runtime_error);
}

}  // namespace
