#pragma once
// A table of text for a terminal: columns with headings of one or two lines, figures right-aligned,
// and a terminal narrower than the table handled without cutting a figure: the columns that do not
// fit go to a block of their own under the first, the columns that name a row (a key) repeated in
// each block. mhc's tables (sweep, info's runs, simulate --ranks, advise) are printed with it.
#include <string>
#include <vector>

namespace mhc {

struct TableColumn {
    // Top to bottom; a shorter heading sits on the bottom line ("peak" beside "peak / reduction").
    std::vector<std::string> heading;
    bool left = false;   // names: left-aligned (figures are right-aligned)
    bool key = false;    // names the row: repeated in every block when the table is split
    int min_width = 0;   // at least this wide (lines under the table aligned with it)
    // Words (the last column, left-aligned): on a terminal narrower than the table they wrap under
    // the column's start, where the others fit beside 20 columns of them, instead of the table
    // splitting into blocks.
    bool wrap = false;
};

class TextTable {
public:
    explicit TextTable(std::vector<TableColumn> columns);
    // A row's cells, one a column (missing ones empty).
    void add_row(std::vector<std::string> cells);
    // The table within `width` columns (0: no limit), each line ending in '\n': one block when it
    // fits, else as many blocks as it takes (a blank line between them), each column whole in one
    // of them. Cells are never cut: a column wider than the room alone gets a block of its own.
    // A last column of words (`wrap`) wraps instead, where 20 columns are left for it.
    std::string render(int width) const;
    int full_width() const;   // the table's width in one block

private:
    std::vector<TableColumn> columns_;
    std::vector<std::vector<std::string>> rows_;
    std::vector<int> widths_;
    size_t heading_lines_ = 1;
    std::string block(const std::vector<size_t>& shown, int wrap_width = 0) const;
};

// The width tables and notes are laid out for: COLUMNS when it is set to a number (at least 20),
// else the terminal's when standard output is one, else 0 (no limit: a file or a pipe gets the
// table whole).
int table_width();

}   // namespace mhc
