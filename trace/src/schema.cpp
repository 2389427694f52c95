#include "schema.hpp"

#include <map>
#include <stdexcept>
#include <string>
#include <string_view>

#include "schema_sql.hpp"

namespace mhc::trace::schema {

namespace {

// The parts of trace/schema.sql by name: each "-- section: NAME" line starts one, which runs to
// the next such line (python/mhc_torch/store.py splits the file by the same rule).
const std::map<std::string, std::string, std::less<>>& sections() {
    static const std::map<std::string, std::string, std::less<>> parts = [] {
        constexpr std::string_view kMark = "\n-- section: ";
        std::map<std::string, std::string, std::less<>> out;
        const std::string_view sql = kSchemaSql;
        for (size_t at = sql.find(kMark); at != std::string_view::npos;) {
            const size_t name_start = at + kMark.size();
            const size_t name_end = sql.find('\n', name_start);
            const size_t next = sql.find(kMark, name_end);
            out[std::string(sql.substr(name_start, name_end - name_start))] =
                std::string(sql.substr(name_end, next == std::string_view::npos ? next : next - name_end));
            at = next;
        }
        return out;
    }();
    return parts;
}

const char* section(std::string_view name) {
    auto it = sections().find(name);
    // A section the code names and the file lacks is a build mistake, not bad input.
    if (it == sections().end()) throw std::logic_error("trace/schema.sql has no section " + std::string(name));
    return it->second.c_str();
}

}  // namespace

const char* const kTraceTables = section("trace_tables");
const char* const kRunTables = section("run_tables");
const char* const kRunsDbTables = section("runs_db_tables");
const char* const kLookups = section("lookups");
const char* const kIndexes = section("trace_indexes");
const char* const kRunIndexes = section("run_indexes");
const char* const kRunEventRows = section("run_event_rows");
const char* const kContentDigestTriggers = section("content_digest_triggers");

const char* const kRequiredTables[] = {"meta", "strings", "allocations", "kernels", "accesses",
                                       "copies", "markers", "runs", "run_config", "run_metrics",
                                       "run_events", "run_kernels", "run_memory", nullptr};

const char* const kRunTableNames[] = {"runs", "run_config", "run_metrics", "run_events",
                                      "run_kernels", "run_memory", nullptr};

}  // namespace mhc::trace::schema
