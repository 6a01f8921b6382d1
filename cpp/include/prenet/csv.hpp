// A small reader for RFC 4180 CSV files (quoted fields, doubled quotes), keyed by header names.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace prenet {

class CsvTable {
public:
    // Throws std::runtime_error naming `source` and the line of a ragged row or an unterminated quote.
    static CsvTable parse(std::string_view text, const std::string& source);
    static CsvTable read_file(const std::string& path);

    const std::vector<std::string>& header() const { return header_; }
    std::size_t rows() const { return rows_.size(); }
    // The field of `row` under `column`; throws std::runtime_error if the column is missing.
    const std::string& at(std::size_t row, const std::string& column) const;
    // 1-based line in the source where `row` starts, for error messages.
    std::size_t line_of(std::size_t row) const { return lines_[row]; }
    const std::string& source() const { return source_; }

private:
    std::string source_;
    std::vector<std::string> header_;
    std::map<std::string, std::size_t> column_index_;
    std::vector<std::vector<std::string>> rows_;
    std::vector<std::size_t> lines_;
};

}  // namespace prenet
