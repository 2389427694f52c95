#include "mhc/common/text_table.hpp"

#include "mhc/common/wrap.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace mhc {

TextTable::TextTable(std::vector<TableColumn> columns) : columns_(std::move(columns)) {
    for (const TableColumn& column : columns_) {
        heading_lines_ = std::max(heading_lines_, column.heading.size());
        int width = column.min_width;
        for (const std::string& line : column.heading) width = std::max(width, static_cast<int>(line.size()));
        widths_.push_back(width);
    }
}

void TextTable::add_row(std::vector<std::string> cells) {
    cells.resize(columns_.size());
    for (size_t c = 0; c < cells.size(); ++c) widths_[c] = std::max(widths_[c], static_cast<int>(cells[c].size()));
    rows_.push_back(std::move(cells));
}

int TextTable::full_width() const {
    int total = 0;
    for (int width : widths_) total += width + (total > 0 ? 1 : 0);
    return total;
}

// `wrap_width` > 0: the last column's cells wrapped at that width, their further lines under its start.
std::string TextTable::block(const std::vector<size_t>& shown, int wrap_width) const {
    auto line = [&](const auto& text_of) {
        std::string out;
        for (size_t c : shown) {
            const std::string text = text_of(c);
            const size_t pad = static_cast<size_t>(widths_[c]) - std::min(text.size(), static_cast<size_t>(widths_[c]));
            if (!out.empty()) out += ' ';
            out += columns_[c].left ? text + std::string(pad, ' ') : std::string(pad, ' ') + text;
        }
        while (!out.empty() && out.back() == ' ') out.pop_back();
        return out + "\n";
    };
    std::string out;
    for (size_t l = 0; l < heading_lines_; ++l) {
        std::string heading = line([&](size_t c) {
            const auto& lines = columns_[c].heading;
            const size_t skip = heading_lines_ - lines.size();   // bottom-aligned
            return l < skip ? std::string() : lines[l - skip];
        });
        if (heading != "\n") out += heading;
    }
    for (const auto& row : rows_) {
        if (wrap_width <= 0) {
            out += line([&](size_t col) { return row[col]; });
            continue;
        }
        const size_t last = columns_.size() - 1;
        const std::string words = row[last].empty() ? "\n" : wrap(row[last], wrap_width);   // lines end in '\n'
        size_t from = 0;
        for (size_t to = words.find('\n'); to != std::string::npos; from = to + 1, to = words.find('\n', from)) {
            const std::string part = words.substr(from, to - from);
            out += line([&](size_t col) { return col == last ? part : from == 0 ? row[col] : std::string(); });
        }
    }
    return out;
}

std::string TextTable::render(int width) const {
    std::vector<size_t> keys, rest;
    int key_width = 0;
    for (size_t c = 0; c < columns_.size(); ++c) {
        if (columns_[c].key) {
            keys.push_back(c);
            key_width += widths_[c] + (key_width > 0 ? 1 : 0);
        } else {
            rest.push_back(c);
        }
    }
    std::vector<size_t> all(columns_.size());
    for (size_t c = 0; c < all.size(); ++c) all[c] = c;
    if (width <= 0 || full_width() <= width) return block(all);
    if (!columns_.empty() && columns_.back().wrap) {
        const int room = width - (full_width() - widths_.back());
        if (room >= 20) return block(all, room);
    }
    // The other columns in their order, as many a block as fit beside the keys (at least one); a
    // last column of words counts as 20 wide and wraps within what its block leaves it.
    const size_t last = columns_.size() - 1;
    auto counted = [&](size_t col) {
        return col == last && columns_[col].wrap ? std::min(widths_[col], 20) : widths_[col];
    };
    std::string out;
    size_t next = 0;
    while (next < rest.size()) {
        std::vector<size_t> shown = keys;
        int used = key_width;
        while (next < rest.size()) {
            const int more = counted(rest[next]) + (used > 0 ? 1 : 0);
            if (shown.size() > keys.size() && used + more > width) break;
            shown.push_back(rest[next++]);
            used += more;
        }
        std::sort(shown.begin(), shown.end());
        const int room = width - (used - counted(last));
        const bool wraps = shown.back() == last && columns_[last].wrap && widths_[last] > room && room >= 20;
        out += (out.empty() ? "" : "\n") + block(shown, wraps ? room : 0);
    }
    return out;
}

int table_width() {
    if (const char* columns = std::getenv("COLUMNS"); columns != nullptr && *columns != '\0') {
        char* end = nullptr;
        const long value = std::strtol(columns, &end, 10);
        if (*end == '\0' && value >= 20 && value <= 100000) return static_cast<int>(value);
    }
    winsize size{};
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
    return 0;
}

}   // namespace mhc
