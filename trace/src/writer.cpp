// Writer: bulk insertion into a temporary file, then indexes, version and rename.
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "mhc/trace/store.hpp"
#include "schema.hpp"
#include "sqlite_util.hpp"

namespace mhc::trace {

namespace {
// Rows per transaction: large enough that commits cost nothing, small enough that the
// page cache, not the journal, holds the batch.
constexpr int64_t kRowsPerTransaction = 200000;
}  // namespace

struct Writer::Statements {
    sql::Stmt string, allocation, kernel, access, copy, marker, set_free, segment, module, kernel_info, saved;
};

Writer::Writer(std::string path, mhc::IfExists if_exists) : path_(std::move(path)) {
    out_ = std::make_unique<OutputFile>(path_, if_exists);
    tmp_path_ = out_->temp_path();
    if (sqlite3_open_v2(tmp_path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        nullptr) != SQLITE_OK) {
        std::string m = db_ ? sqlite3_errmsg(db_) : "cannot open";
        sqlite3_close(db_);
        db_ = nullptr;
        throw Error(path_ + ": cannot create: " + m);
    }
    // One connection per thread: NOMUTEX saves a lock per call (10% of the time at 1M rows/s).
    // The temporary file is thrown away on any failure, so durability pragmas buy nothing.
    sql::exec(db_, path_, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; "
                          "PRAGMA page_size=16384; PRAGMA cache_size=-65536; "
                          "PRAGMA locking_mode=EXCLUSIVE;");
    sql::exec(db_, path_, schema::kTraceTables);
    sql::exec(db_, path_, schema::kRunTables);
    sql::exec(db_, path_, schema::kLookups);
    st_ = std::make_unique<Statements>();
    st_->string = sql::Stmt(db_, path_, "INSERT INTO strings VALUES (?,?)");
    st_->allocation =
        sql::Stmt(db_, path_, "INSERT INTO allocations VALUES (?,?,?,?,?,?,?,?,?,?)");
    st_->kernel = sql::Stmt(db_, path_,
                            "INSERT INTO kernels VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    st_->access = sql::Stmt(db_, path_,
                          // A kernel that touches an allocation twice has one access with the union of the modes.
                          "INSERT INTO accesses VALUES (?,?,?) ON CONFLICT DO UPDATE "
                          "SET mode = mode | excluded.mode");
    st_->copy = sql::Stmt(db_, path_, "INSERT INTO copies VALUES (?,?,?,?,?,?,?)");
    st_->marker = sql::Stmt(db_, path_, "INSERT INTO markers VALUES (?,?,?,?,?,?)");
    st_->set_free = sql::Stmt(db_, path_, "UPDATE allocations SET t_free=? WHERE id=?");
    st_->segment = sql::Stmt(db_, path_, "INSERT INTO segments VALUES (?,?,?,?,?,?,?,?,?)");
    st_->module = sql::Stmt(db_, path_, "INSERT INTO modules VALUES (?,?,?,?)");
    st_->kernel_info = sql::Stmt(db_, path_, "INSERT INTO kernel_info VALUES (?,?,?,?,?)");
    st_->saved = sql::Stmt(db_, path_, "INSERT OR IGNORE INTO saved_tensors VALUES (?,?,?)");
    sql::exec(db_, path_, "BEGIN");
    strings_.emplace("", kNoString);
}

Writer::~Writer() {
    if (!finished_) {
        st_.reset();
        sqlite3_close(db_);   // then out_ removes the temporary file
    }
}

void Writer::row_done() {
    ++rows_;
    if (++rows_in_txn_ >= kRowsPerTransaction) {
        sql::exec(db_, path_, "COMMIT; BEGIN");
        rows_in_txn_ = 0;
    }
}

int64_t Writer::intern(std::string_view text) {
    auto it = strings_.find(std::string(text));
    if (it != strings_.end()) return it->second;
    int64_t id = static_cast<int64_t>(strings_.size());  // "" holds id 0
    strings_.emplace(std::string(text), id);
    auto& s = st_->string;
    s.bind(1, id);
    sqlite3_bind_text(s.get(), 2, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    s.run();
    row_done();
    return id;
}

void Writer::set_meta(const std::string& key, const std::string& value) { meta_[key] = value; }

void Writer::add(const Allocation& a) {
    auto& s = st_->allocation;
    s.bind(1, a.id);
    s.bind(2, static_cast<int64_t>(a.device));
    s.bind(3, a.address);
    s.bind(4, a.bytes);
    s.bind(5, a.t_alloc);
    if (a.t_free == kNoTime) s.bind_null(6);
    else s.bind(6, a.t_free);
    s.bind(7, a.stream);
    s.bind(8, static_cast<int64_t>(a.category));
    s.bind(9, a.label);
    if (a.requested_bytes == kNoBytes) s.bind_null(10);
    else s.bind(10, a.requested_bytes);
    s.run();
    row_done();
}

void Writer::add(const Kernel& k) {
    auto& s = st_->kernel;
    s.bind(1, k.id);
    s.bind(2, static_cast<int64_t>(k.device));
    s.bind(3, k.stream);
    s.bind(4, k.name);
    s.bind(5, k.t_start);
    s.bind(6, k.t_end);
    s.bind(7, static_cast<int64_t>(k.step));
    for (int i = 0; i < 3; ++i) s.bind(8 + i, static_cast<int64_t>(k.grid[i]));
    for (int i = 0; i < 3; ++i) s.bind(11 + i, static_cast<int64_t>(k.block[i]));
    s.bind(14, static_cast<int64_t>(k.shared_mem));
    s.bind(15, static_cast<int64_t>(k.registers));
    s.bind(16, k.correlation);
    s.run();
    row_done();
}

void Writer::add(const Access& a) {
    auto& s = st_->access;
    s.bind(1, a.kernel);
    s.bind(2, a.allocation);
    s.bind(3, static_cast<int64_t>(a.mode));
    s.run();
    row_done();
}

void Writer::add(const Copy& c) {
    auto& s = st_->copy;
    s.bind(1, c.id);
    s.bind(2, static_cast<int64_t>(c.device));
    s.bind(3, c.stream);
    s.bind(4, static_cast<int64_t>(c.kind));
    s.bind(5, c.bytes);
    s.bind(6, c.t_start);
    s.bind(7, c.t_end);
    s.run();
    row_done();
}

void Writer::add(const Marker& m) {
    auto& s = st_->marker;
    s.bind(1, m.id);
    s.bind(2, m.name);
    s.bind(3, m.t_start);
    s.bind(4, m.t_end);
    s.bind(5, static_cast<int64_t>(m.kind));
    s.bind(6, static_cast<int64_t>(m.index));
    s.run();
    row_done();
}

void Writer::add(const Segment& g) {
    auto& s = st_->segment;
    s.bind(1, g.id);
    s.bind(2, static_cast<int64_t>(g.device));
    s.bind(3, g.stream);
    s.bind(4, g.address);
    s.bind(5, g.bytes);
    s.bind(6, g.t_alloc);
    if (g.t_free == kNoTime) s.bind_null(7);
    else s.bind(7, g.t_free);
    s.bind(8, static_cast<int64_t>(g.expandable ? 1 : 0));
    s.bind(9, static_cast<int64_t>(g.reconstructed ? 1 : 0));
    s.run();
    row_done();
}

void Writer::add(const Module& m) {
    auto& s = st_->module;
    s.bind(1, m.id);
    s.bind(2, m.name);
    s.bind(3, m.parent);
    s.bind(4, m.type);
    s.run();
    row_done();
}

void Writer::add(const KernelInfo& k) {
    auto& s = st_->kernel_info;
    s.bind(1, k.kernel);
    s.bind(2, k.module);
    s.bind(3, static_cast<int64_t>(k.phase));
    s.bind(4, k.flops);
    s.bind(5, k.bytes);
    s.run();
    row_done();
}

void Writer::add(const SavedTensor& t) {
    auto& s = st_->saved;
    s.bind(1, t.allocation);
    s.bind(2, t.kernel);
    s.bind(3, static_cast<int64_t>(t.packs));
    s.run();
    row_done();
}

void Writer::set_free_time(int64_t allocation_id, int64_t t_free) {
    auto& s = st_->set_free;
    if (t_free == kNoTime) s.bind_null(1);
    else s.bind(1, t_free);
    s.bind(2, allocation_id);
    s.run();
}

void Writer::close(const std::function<void(const std::string&)>& verify) {
    if (closed_) return;
    meta_["format"] = kFormatName;
    meta_["schema_version"] = std::to_string(kSchemaVersion);
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
