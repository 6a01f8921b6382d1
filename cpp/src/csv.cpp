#include "prenet/csv.hpp"

#include <stdexcept>

#include "prenet/file_bytes.hpp"

namespace prenet {

namespace {

// Reads one record from text[at...]; returns false at end of input. Counts newlines into `line`.
bool read_record(std::string_view text, std::size_t& at, std::vector<std::string>& fields, std::size_t& line,
                 const std::string& source) {
    fields.clear();
    if (at >= text.size()) return false;
    std::string field;
    bool quoted = false;
    const std::size_t start_line = line;
    for (; at < text.size(); ++at) {
        const char c = text[at];
        if (quoted) {
            if (c == '"') {
                if (at + 1 < text.size() && text[at + 1] == '"') {
                    field.push_back('"');
                    ++at;
                } else {
                    quoted = false;
                }
            } else {
                if (c == '\n') ++line;
                field.push_back(c);
            }
        } else if (c == '"') {
            quoted = true;
        } else if (c == ',') {
            fields.push_back(field);
            field.clear();
        } else if (c == '\n') {
            ++at;
            ++line;
            fields.push_back(field);
            return true;
        } else if (c != '\r') {
            field.push_back(c);
        }
    }
    if (quoted) {
        throw std::runtime_error(source + ": unterminated quoted field starting on line " + std::to_string(start_line));
    }
    fields.push_back(field);
    return true;
}

}  // namespace

CsvTable CsvTable::parse(std::string_view text, const std::string& source) {
    CsvTable table;
    table.source_ = source;
    std::size_t line = 1, at = 0;
    if (!read_record(text, at, table.header_, line, source) || table.header_.empty() ||
        (table.header_.size() == 1 && table.header_[0].empty())) {
        throw std::runtime_error(source + ": empty file, expected a header row");
    }
    for (std::size_t i = 0; i < table.header_.size(); ++i) table.column_index_[table.header_[i]] = i;
    std::vector<std::string> fields;
    for (std::size_t start = line; read_record(text, at, fields, line, source); start = line) {
        if (fields.size() == 1 && fields[0].empty()) continue;  // blank line
        if (fields.size() != table.header_.size()) {
            throw std::runtime_error(source + ": line " + std::to_string(start) + " has " +
                                     std::to_string(fields.size()) + " fields, the header has " +
                                     std::to_string(table.header_.size()));
        }
        table.rows_.push_back(fields);
        table.lines_.push_back(start);
    }
    return table;
}

CsvTable CsvTable::read_file(const std::string& path) { return parse(read_file_bytes(path), path); }

const std::string& CsvTable::at(std::size_t row, const std::string& column) const {
    auto it = column_index_.find(column);
    if (it == column_index_.end()) throw std::runtime_error(source_ + ": missing column '" + column + "'");
    return rows_.at(row)[it->second];
}

}  // namespace prenet
