// Writer: bulk insertion into a temporary file, then indexes, version and rename.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "mhc/trace/store.hpp"
#include "bulk_insert.hpp"
#include "content_digest.hpp"
#include "schema.hpp"
#include "sqlite_util.hpp"
#include "trace_tables.hpp"

namespace mhc::trace {

namespace {
// Rows per transaction: large enough that commits cost nothing, small enough that the
// page cache, not the journal, holds the batch.
constexpr int64_t kRowsPerTransaction = 200000;
}  // namespace

// The trace's tables are written in bulk (bulk_insert.hpp); strings, rare, one at a time. The
// content digest (content_digest.hpp) is summed as the rows go in: each bulk table counts its rows
// when it inserts them, and the statements that change a row already counted (an access's second
// mode, a saved tensor's repeat, a free time learnt late) correct the sum through the digest's
// functions, from the value the row holds.
struct Writer::Statements {
    Statements(sqlite3* db, const std::string& path)
        : functions(db, path, &sum), string(db, path, "INSERT INTO strings VALUES (?,?)"),
          set_free(db, path,
                   ("UPDATE allocations SET t_free = mhc_digest_set(" + std::to_string(digest::kAllocations) +
                    ", 5, id, 0, t_free, ?1) WHERE id = ?2")
                       .c_str()),
          allocation(db, path, "INSERT INTO allocations", 10, "", {{5, kNoTime}, {9, kNoBytes}}),
          kernel(db, path, "INSERT INTO kernels", 16),
          // A kernel that touches an allocation twice has one access with the union of the modes.
          access(db, path, "INSERT INTO accesses", 3,
                 "ON CONFLICT DO UPDATE SET mode = mhc_digest_conflict(" + std::to_string(digest::kAccesses) +
                     ", 2, mode, mode | excluded.mode, "
                     "excluded.kernel, excluded.allocation, excluded.mode)"),
          copy(db, path, "INSERT INTO copies", 7), marker(db, path, "INSERT INTO markers", 6),
          segment(db, path, "INSERT INTO segments", 9, "", {{6, kNoTime}}), module(db, path, "INSERT INTO modules", 4),
          kernel_info(db, path, "INSERT INTO kernel_info", 5),
          // A saved tensor given twice keeps its first row (the second is only taken out of the sum).
          saved(db, path, "INSERT INTO saved_tensors", 3,
                "ON CONFLICT DO UPDATE SET packs = mhc_digest_conflict(" + std::to_string(digest::kSavedTensors) +
                    ", 2, packs, packs, "
                    "excluded.allocation, excluded.kernel, excluded.packs)") {
        allocation.count_into(&sum, digest::kAllocations);
        kernel.count_into(&sum, digest::kKernels);
        access.count_into(&sum, digest::kAccesses);
        copy.count_into(&sum, digest::kCopies);
        marker.count_into(&sum, digest::kMarkers);
        segment.count_into(&sum, digest::kSegments);
        module.count_into(&sum, digest::kModules);
        kernel_info.count_into(&sum, digest::kKernelInfo);
        saved.count_into(&sum, digest::kSavedTensors);
    }
    // Everything buffered into the file (before a commit, an update, the indexes).
    void flush() {
        for (sql::BulkInsert* bulk : {&allocation, &kernel, &access, &copy, &marker, &segment, &module, &kernel_info, &saved})
            bulk->flush();
    }
    // The statements' functions are registered before they are prepared.
    struct Functions {
        Functions(sqlite3* db, const std::string& path, digest::Sum* sum) { digest::register_functions(db, path, sum); }
    };
    digest::Sum sum;   // the content digest of every row written so far
    Functions functions;
    sql::Stmt string, set_free;
    sql::BulkInsert allocation, kernel, access, copy, marker, segment, module, kernel_info, saved;
};

Writer::Writer(std::string path, mhc::IfExists if_exists) : path_(std::move(path)) {
    out_ = std::make_unique<OutputFile>(path_, if_exists);
    tmp_path_ = out_->temp_path();
    if (sqlite3_open_v2(tmp_path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        nullptr) != SQLITE_OK) {
        std::string message = sql::open_failure(db_, path_, tmp_path_, "cannot create");
        sqlite3_close(db_);
        db_ = nullptr;
        throw Error(message);
    }
    // One connection per thread: NOMUTEX saves a lock per call (10% of the time at 1M rows/s).
    // The temporary file is thrown away on any failure, so durability pragmas buy nothing.
    sql::exec(db_, path_, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; "
                          "PRAGMA page_size=16384; PRAGMA cache_size=-65536; "
                          "PRAGMA locking_mode=EXCLUSIVE;");
    sql::exec(db_, path_, schema::kTraceTables);
    sql::exec(db_, path_, schema::kRunTables);
    sql::exec(db_, path_, schema::kLookups);
    st_ = std::make_unique<Statements>(db_, path_);
    sql::exec(db_, path_, "BEGIN");
    strings_.emplace("", kNoString);
}

Writer::Writer(CountOnly) : counting_(true) { strings_.emplace("", kNoString); }

Writer::~Writer() {
    if (!finished_) {
        st_.reset();
        sqlite3_close(db_);   // then out_ removes the temporary file
    }
}

void Writer::row_done() {
    ++rows_;
    if (counting_) return;
    if (++rows_in_txn_ >= kRowsPerTransaction) {
        st_->flush();
        sql::exec(db_, path_, "COMMIT; BEGIN");
        rows_in_txn_ = 0;
    }
}

int64_t Writer::intern(std::string_view text) {
    auto it = strings_.find(std::string(text));
    if (it != strings_.end()) return it->second;
    int64_t id = static_cast<int64_t>(strings_.size());  // "" holds id 0
    strings_.emplace(std::string(text), id);
    ++counts_.strings;
    if (counting_) {
        row_done();
        return id;
    }
    auto& s = st_->string;
    s.bind(1, id);
    sqlite3_bind_text(s.get(), 2, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    s.run();
    const digest::RowKey key = digest::row_key(digest::kStrings, static_cast<uint64_t>(id), 0);
    st_->sum.cell(key, 0, SQLITE_INTEGER, static_cast<uint64_t>(id));
    st_->sum.cell(key, 1, SQLITE_TEXT,
                  digest::bytes_word(reinterpret_cast<const unsigned char*>(text.data()), text.size()));
    row_done();
    return id;
}

void Writer::set_meta(const std::string& key, const std::string& value) { meta_[key] = value; }

void Writer::add(const Allocation& a) {
    ++counts_.allocations;
    if (counting_) return row_done();
    int64_t* row = st_->allocation.add();
    row[0] = a.id; row[1] = a.device; row[2] = a.address; row[3] = a.bytes; row[4] = a.t_alloc;
    row[5] = a.t_free; row[6] = a.stream; row[7] = static_cast<int64_t>(a.category); row[8] = a.label;
    row[9] = a.requested_bytes;
    row_done();
}

void Writer::add(const Kernel& k) {
    ++counts_.kernels;
    if (counting_) return row_done();
    int64_t* row = st_->kernel.add();
    row[0] = k.id; row[1] = k.device; row[2] = k.stream; row[3] = k.name; row[4] = k.t_start; row[5] = k.t_end;
    row[6] = k.step;
    for (int i = 0; i < 3; ++i) row[7 + i] = k.grid[i];
    for (int i = 0; i < 3; ++i) row[10 + i] = k.block[i];
    row[13] = k.shared_mem; row[14] = k.registers; row[15] = k.correlation;
    row_done();
}

void Writer::add(const Access& a) {
    ++counts_.accesses;
    if (counting_) return row_done();
    int64_t* row = st_->access.add();
    row[0] = a.kernel; row[1] = a.allocation; row[2] = static_cast<int64_t>(a.mode);
    row_done();
}

void Writer::add(const Copy& c) {
    ++counts_.copies;
    if (counting_) return row_done();
    int64_t* row = st_->copy.add();
    row[0] = c.id; row[1] = c.device; row[2] = c.stream; row[3] = static_cast<int64_t>(c.kind); row[4] = c.bytes;
    row[5] = c.t_start; row[6] = c.t_end;
    row_done();
}

void Writer::add(const Marker& m) {
    ++counts_.markers;
    if (counting_) return row_done();
    int64_t* row = st_->marker.add();
    row[0] = m.id; row[1] = m.name; row[2] = m.t_start; row[3] = m.t_end; row[4] = static_cast<int64_t>(m.kind);
    row[5] = m.index;
    row_done();
}

void Writer::add(const Segment& g) {
    if (counting_) return row_done();
    int64_t* row = st_->segment.add();
    row[0] = g.id; row[1] = g.device; row[2] = g.stream; row[3] = g.address; row[4] = g.bytes; row[5] = g.t_alloc;
    row[6] = g.t_free; row[7] = g.expandable ? 1 : 0; row[8] = g.reconstructed ? 1 : 0;
    row_done();
}

void Writer::add(const Module& m) {
    if (counting_) return row_done();
    int64_t* row = st_->module.add();
    row[0] = m.id; row[1] = m.name; row[2] = m.parent; row[3] = m.type;
    row_done();
}

void Writer::add(const KernelInfo& k) {
    if (counting_) return row_done();
    int64_t* row = st_->kernel_info.add();
    row[0] = k.kernel; row[1] = k.module; row[2] = static_cast<int64_t>(k.phase); row[3] = k.flops; row[4] = k.bytes;
    row_done();
}

void Writer::add(const SavedTensor& t) {
    if (counting_) return row_done();
    int64_t* row = st_->saved.add();
    row[0] = t.allocation; row[1] = t.kernel; row[2] = t.packs;
    row_done();
}

void Writer::set_free_time(int64_t allocation_id, int64_t t_free) {
    if (counting_) return;
    st_->allocation.flush();   // the allocation may still wait in the buffer
    auto& s = st_->set_free;
    if (t_free == kNoTime) s.bind_null(1);
    else s.bind(1, t_free);
    s.bind(2, allocation_id);
    s.run();
}

void Writer::close(const std::function<void(const std::string&)>& verify) {
    if (closed_) return;
    if (counting_) throw std::logic_error("Writer: a counting writer has no file to close");
    st_->flush();
    meta_["format"] = kFormatName;
    meta_["schema_version"] = std::to_string(kSchemaVersion);
    // The rows' own identity, in the fingerprint with the meta (a copy's old digest is replaced):
    // a trace that differs by one value is another trace to the runs stored for it. Summed as the
    // rows were written: no second scan (`mhc check` makes one).
    meta_[kContentDigestKey] = st_->sum.hex();
    sql::exec(db_, path_, schema::kContentDigestTriggers);
    {
        sql::Stmt m(db_, path_, "INSERT OR REPLACE INTO meta VALUES (?,?)");
        for (auto& [k, v] : meta_) {
            m.bind(1, k);
            m.bind(2, v);
            m.run();
        }
    }
    sql::exec(db_, path_, "COMMIT");
    sql::exec(db_, path_, schema::kIndexes);
    sql::exec(db_, path_, schema::kRunIndexes);
    sql::exec(db_, path_, schema::kRunEventRows);
    sql::exec(db_, path_, ("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str());
    st_.reset();
    if (sqlite3_close(db_) != SQLITE_OK) throw Error(path_ + ": cannot close the new trace");
    db_ = nullptr;
    strings_ = {};   // a closed writer waiting for its job's other files holds nothing else
    if (verify) verify(tmp_path_);
    closed_ = true;
}

void Writer::finish(const std::function<void(const std::string&)>& verify) {
    if (finished_) return;
    close(verify);
    out_->commit();
    finished_ = true;
}

int64_t estimated_file_bytes(const TableCounts& rows) {
    // Measured on generated traces (dbstat's pages per table over rows, 2026-12-03): a table's
    // rows with its indexes; the empty tables of the schema take a 16 KiB page each.
    constexpr double kEmptyFile = 26 * 16384;
    const double bytes = kEmptyFile + 43.0 * rows.allocations + 48.0 * rows.kernels + 15.0 * rows.accesses +
                         34.0 * (rows.markers + rows.copies) + 60.0 * rows.strings;
    return static_cast<int64_t>(std::min(bytes, 4e18));   // row counts near 2^63 stay below it
}

void finish_together(const std::vector<Writer*>& writers) {
    std::vector<OutputFile*> files;
    for (Writer* w : writers) {
        w->close();
        files.push_back(w->out_.get());
    }
    commit_together(files);
    for (Writer* w : writers) w->finished_ = true;
}

}  // namespace mhc::trace
