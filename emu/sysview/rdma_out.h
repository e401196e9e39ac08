// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// iproute2's output for the rdma tool's answers (rdma_tool.cpp, rdma_reports.cpp): rows of
// fields, printed as text lines or as iproute2's JSON (-j, -p).
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace uroce::rdmatool {

struct Field {
    std::string key, value;
    bool number;
};
using Row = std::vector<Field>;

inline std::string json_string(const std::string& s) {
    std::string o = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\';
        o += c;
    }
    return o + "\"";
}

// One row and its text line built together: each field goes to both as "key value".
struct Line {
    Row row;
    std::string text;
    void add(const char* key, const std::string& value, bool number) {
        row.push_back({key, value, number});
        text += (text.empty() || text.back() == ' ' ? "" : " ") + std::string(key) + " " + value;
    }
    void num(const char* key, const std::string& value) { add(key, value, true); }
    void str(const char* key, const std::string& value) { add(key, value, false); }
};

struct Out {
    bool json = false, pretty = false, details = false;
    std::vector<Row> rows;
    std::vector<std::string> lines;  // the text form, one per row

    void push(Line l) {
        rows.push_back(std::move(l.row));
        lines.push_back(std::move(l.text));
    }

    void print() const {
        if (!json) {
            for (const std::string& l : lines) std::printf("%s\n", l.c_str());
            return;
        }
        // iproute2's JSON writer: an array of objects; -p indents by four.
        std::string s = pretty ? "[ " : "[";
        for (size_t r = 0; r < rows.size(); ++r) {
            if (r)
                s += pretty ? ",{\n" : ",{";
            else
                s += pretty ? "{\n" : "{";
            for (size_t i = 0; i < rows[r].size(); ++i) {
                const Field& f = rows[r][i];
                if (pretty) s += "        ";
                s += json_string(f.key) + (pretty ? ": " : ":") +
                     (f.number ? f.value : json_string(f.value));
                if (i + 1 < rows[r].size()) s += ",";
                if (pretty) s += "\n";
            }
            s += pretty ? "    }" : "}";
        }
        s += pretty ? " ]" : "]";
        std::printf("%s\n", s.c_str());
    }
};

}  // namespace uroce::rdmatool
