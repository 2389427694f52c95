// The GPU table, datasets/gpus.tsv (its columns and sources are in the file), read into GpuSpecs (the
// generator's rows) and GpuRows (every row, for mhc advise).
#include "gpu_table.hpp"

#include <charconv>
#include <map>
#include <stdexcept>
#include <string>

#include "gpus_tsv.hpp"
#include "mhc/datasets/gpu_table.hpp"

namespace mhc::datasets {

namespace {
std::vector<std::string_view> fields(std::string_view line) {
    std::vector<std::string_view> out;
    for (size_t start = 0;;) {
        const size_t tab = line.find('\t', start);
        out.push_back(line.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start));
        if (tab == std::string_view::npos) return out;
        start = tab + 1;
    }
}

// One data row by the header's column names; a figure that is not a number names its line and column.
class Row {
public:
    Row(const std::map<std::string, size_t, std::less<>>& columns, std::string_view line, int line_number)
        : columns_(columns), fields_(fields(line)), line_number_(line_number) {
        if (fields_.size() != columns_.size()) fail("", std::to_string(fields_.size()) + " fields, the header has " +
                                                            std::to_string(columns_.size()));
    }
    std::string text(std::string_view column) const { return std::string(field(column)); }
    template <class T>
    T number(std::string_view column) const {
        const std::string_view text = field(column);
        T value{};
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (text.empty() || error != std::errc() || end != text.data() + text.size())
            fail(column, "'" + std::string(text) + "' is no number");
        return value;
    }

private:
    std::string_view field(std::string_view column) const {
        const auto it = columns_.find(column);
        if (it == columns_.end()) fail(column, "no such column in the header");
        return fields_[it->second];
    }
    [[noreturn]] void fail(std::string_view column, const std::string& why) const {
        throw std::logic_error("datasets/gpus.tsv:" + std::to_string(line_number_) + ": " +
                               (column.empty() ? "" : "column " + std::string(column) + ": ") + why);
    }
    const std::map<std::string, size_t, std::less<>>& columns_;
    std::vector<std::string_view> fields_;
    int line_number_;
};

// Calls each(row) for every data row of the table, in its order: the first line that is neither
// empty nor a '#' comment is the header, naming the columns.
template <class Each> void for_each_row(std::string_view tsv, Each each) {
    std::map<std::string, size_t, std::less<>> columns;
    int line_number = 0;
    for (size_t start = 0; start < tsv.size();) {
        const size_t newline = std::min(tsv.find('\n', start), tsv.size());
        const std::string_view line = tsv.substr(start, newline - start);
        start = newline + 1;
        ++line_number;
        if (line.empty() || line.front() == '#') continue;
        if (columns.empty()) {
            for (const std::string_view name : fields(line)) columns.emplace(std::string(name), columns.size());
            continue;
        }
        each(Row(columns, line, line_number));
    }
}
}   // namespace

std::vector<GpuSpec> read_gpu_table(std::string_view tsv) {
    std::vector<GpuSpec> gpus;
    for_each_row(tsv, [&](const Row& row) {
        if (row.text("generate") == "-") return;
        GpuSpec gpu;
        gpu.name = row.text("generate");
        gpu.device_name = row.text("device_name");
        gpu.memory_bytes = row.number<int64_t>("memory_bytes");
        gpu.matmul_flops = row.number<double>("bf16_flops");
        gpu.tf32_flops = row.number<double>("tf32_flops");
        gpu.fp32_flops = row.number<double>("fp32_flops");
        gpu.mem_bw = row.number<double>("hbm_bw");
        gpu.nvlink_bw = row.number<double>("nvlink_bw");
        gpu.net_bw = row.number<double>("net_bw");
        gpus.push_back(gpu);
    });
    return gpus;
}

std::vector<GpuRow> read_gpu_rows(std::string_view tsv) {
    std::vector<GpuRow> rows;
    for_each_row(tsv, [&](const Row& row) {
        rows.push_back(GpuRow{row.text("name"), row.text("device_name"), row.number<int64_t>("memory_bytes"),
                              row.number<double>("ring_bus_bw"), row.text("ring_link")});
    });
    return rows;
}

const std::vector<GpuSpec>& generator_gpus() {
    static const std::vector<GpuSpec> table = read_gpu_table(kGpusTsv);
    return table;
}

const std::vector<GpuRow>& gpu_rows() {
    static const std::vector<GpuRow> rows = read_gpu_rows(kGpusTsv);
    return rows;
}

}  // namespace mhc::datasets
