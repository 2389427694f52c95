// CSV tables: allocations.csv and kernels.csv, times in ns, names resolved.
#include <filesystem>

#include "mhc/common/error.hpp"
#include "mhc/trace/export/export.hpp"
#include "mhc/trace/store.hpp"
#include "output.hpp"

namespace mhc::trace::exporter {

int64_t export_csv(const std::string& trace_path, const std::string& dir, IfExists if_exists) {
    for (const char* name : {"/allocations.csv", "/kernels.csv"}) refuse_input_as_output(trace_path, dir + name);
    Reader reader(trace_path);
    auto strings = reader.strings();
    auto str = [&](int64_t id) -> std::string {
        return id >= 0 && static_cast<size_t>(id) < strings.size() ? csv_field(strings[id]) : std::string();
    };
    std::error_code ec;
    // A folder this export creates is removed again when the export fails (declared before the
    // files, so that it is removed after their temporary files are).
    struct MadeFolder {
        std::string dir;
        bool made = false, keep = false;
        ~MadeFolder() {
            std::error_code e;
            if (made && !keep) std::filesystem::remove(dir, e);   // only when empty
        }
    } folder{dir};
    folder.made = std::filesystem::create_directories(dir, ec);
    if (ec) throw Error(where(dir, "cannot create directory: " + ec.message()));
    int64_t rows = 0;
    // Both files are complete before either is renamed into place, and they appear together.
    Output a(dir + "/allocations.csv", false, if_exists), k(dir + "/kernels.csv", false, if_exists);
    a << "id,device,address,bytes,t_alloc_ns,t_free_ns,stream,category,label\n";
    reader.for_each([&](const Allocation& r) {
        std::string line = std::to_string(r.id) + "," + std::to_string(r.device) + "," + std::to_string(r.address) + "," +
                           std::to_string(r.bytes) + "," + std::to_string(r.t_alloc) + "," +
                           (r.t_free == kNoTime ? std::string() : std::to_string(r.t_free)) + "," +
                           std::to_string(r.stream) + "," + std::string(to_string(r.category)) + "," + str(r.label) + "\n";
        a << line;
        ++rows;
    });
    k << "id,device,stream,name,t_start_ns,t_end_ns,step,grid_x,grid_y,grid_z,block_x,block_y,block_z,shared_mem,registers,correlation\n";
    reader.for_each([&](const Kernel& r) {
        std::string line = std::to_string(r.id) + "," + std::to_string(r.device) + "," + std::to_string(r.stream) + "," +
                           str(r.name) + "," + std::to_string(r.t_start) + "," + std::to_string(r.t_end) + "," +
                           std::to_string(r.step);
        // Appended piecewise: g++ 12 gives a false -Wrestrict on "," + std::string here.
        for (int64_t v : {int64_t{r.grid[0]}, int64_t{r.grid[1]}, int64_t{r.grid[2]}, int64_t{r.block[0]},
                          int64_t{r.block[1]}, int64_t{r.block[2]}, int64_t{r.shared_mem}, int64_t{r.registers},
                          r.correlation}) {
            line += ',';
            line += std::to_string(v);
        }
        line += '\n';
        k << line;
        ++rows;
    });
    a.close();
    k.close();
    commit_together({&a.file(), &k.file()});
    folder.keep = true;
    return rows;
}

}  // namespace mhc::trace::exporter
