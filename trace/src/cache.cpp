// The columnar cache inside a trace file (cache.hpp; docs/trace-format.md "trace_cache").
#include "mhc/trace/cache.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sodium.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>

#include "mhc/common/environment.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/message_line.hpp"
#include "run_files.hpp"
#include "sqlite_util.hpp"

namespace mhc::trace {

namespace {

constexpr char kMagic[8] = {'M', 'H', 'C', 'C', 'A', 'C', 'H', 'E'};
constexpr uint64_t kPartBytes = uint64_t(256) << 20;   // a blob stays far below SQLite's 1 GB limit
constexpr uint64_t kChunk = uint64_t(1) << 20;         // read and hashed in steps that stay in cache
// How a column is stored. Narrow32: 64-bit values that all fit in 32 bits (ids, names, counts);
// Delta32: 64-bit values whose steps fit in 32 bits (times in order), the first value then the
// steps. Both halve the bytes read and decode at memory speed.
enum class Encoding : uint8_t { Raw = 0, Constant = 1, Arithmetic = 2, Narrow32 = 3, Delta32 = 4 };

// The trace tables whose rows an entry is derived from: a change to any of them clears the cache.
constexpr const char* kWatched[] = {"meta",   "strings", "allocations", "kernels",  "accesses",
                                    "copies", "markers", "segments",    "modules", "kernel_info", "saved_tensors"};

// A 64-bit hash of bytes, four independent multiply lanes (about a byte per cycle is too slow
// for hundreds of megabytes; this runs at several GB/s). Not cryptographic: it finds damage.
uint64_t hash_bytes(const unsigned char* p, uint64_t n, uint64_t seed) {
    constexpr uint64_t K = 0x9E3779B97F4A7C15ull;
    uint64_t h[4] = {seed ^ n, seed + K, seed * 3 + 1, ~seed};
    uint64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int l = 0; l < 4; ++l) {
            uint64_t w;
            std::memcpy(&w, p + i + 8 * l, 8);
            h[l] = (h[l] ^ w) * K;
            h[l] ^= h[l] >> 29;
        }
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        h[0] = (h[0] ^ w) * K;
        h[0] ^= h[0] >> 29;
    }
    uint64_t w = 0;
    std::memcpy(&w, p + i, n - i);
    h[1] = (h[1] ^ w) * K;
    uint64_t out = 0;
    for (int l = 0; l < 4; ++l) out = (out ^ h[l]) * K, out ^= out >> 31;
    return out;
}

// The header's tag under this user's secret key: libsodium's crypto_shorthash, SipHash-2-4 (a keyed
// PRF for short inputs: without the key no one can make a tag this user's mhc accepts).
uint64_t keyed_tag(const unsigned char (&key)[crypto_shorthash_KEYBYTES], const unsigned char* bytes, uint64_t size) {
    unsigned char out[crypto_shorthash_BYTES];
    crypto_shorthash(out, bytes, size, key);
    uint64_t tag = 0;
    std::memcpy(&tag, out, sizeof tag);   // little-endian, as the format is
    return tag;
}

// This user's secret key, which every entry's header is tagged with and every array's checksum
// seeded by: an entry another user or machine wrote (a trace from anyone, its cache forged with
// the checksums recomputed, or another trace's entry copied in) fails it and reads as no entry,
// so the arrays a command uses are the rows' own. 16 random bytes in trace-cache.key of the user's
// cache folder (mhc::user_cache_dir: ~/.cache/mhc, else /tmp/mhc-UID), mode 0600, made once; none
// to be had (no folder, a key file others can read): the cache is neither read nor written, and
// that is said once (it was off without a word: every command read every row again).
struct Secret {
    unsigned char key[crypto_shorthash_KEYBYTES] = {};
    // The arrays' checksums start from it: the key's two halves folded.
    uint64_t seed() const {
        uint64_t halves[2];
        std::memcpy(halves, key, sizeof halves);
        return halves[0] ^ halves[1];
    }
};
// Why the key cannot be had, said once a process (on standard error, as the program's note).
std::optional<Secret> no_key(const std::string& why) {
    mhc::say("%s: note: the trace cache is off (each command reads every row): %s\n",
                 program_invocation_short_name, printable(why).c_str());
    return std::nullopt;
}

std::optional<Secret> load_secret() {
    namespace fs = std::filesystem;
    std::string why;
    const std::string folder = user_cache_dir(why);
    if (folder.empty()) return no_key("no cache folder for its key (" + why + ")");
    const fs::path dir = folder;
    const fs::path path = dir / "trace-cache.key";
    // The key when it is there and this user's alone; `problem` says what is wrong with one there.
    std::string problem;
    const auto read_key = [&]() -> std::optional<Secret> {
        const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) {
            if (errno != ENOENT) problem = std::strerror(errno);
            return std::nullopt;
        }
        struct stat st {};
        Secret found;
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) problem = "not a regular file";
        else if (st.st_uid != ::geteuid()) problem = "a file of another user's";
        else if ((st.st_mode & 077) != 0) problem = "others may read it (chmod 600 it, or remove it to make a new key)";
        else if (st.st_size != sizeof found.key ||
                 ::read(fd, found.key, sizeof found.key) != static_cast<ssize_t>(sizeof found.key))
            problem = "not 16 bytes (remove it to make a new key)";
        ::close(fd);
        if (!problem.empty()) return std::nullopt;
        return found;
    };
    if (auto found = read_key()) return found;
    if (!problem.empty()) return no_key(path.string() + ": " + problem);
    Secret made;
    if (sodium_init() < 0) return no_key("libsodium cannot start");
    randombytes_buf(made.key, sizeof made.key);
    // Written whole under a name of this process, then linked into place: two processes making it
    // at once both end with the one that was linked first.
    const fs::path tmp = dir / ("trace-cache.key." + std::to_string(::getpid()) + ".tmp");
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return no_key(tmp.string() + ": " + std::strerror(errno));
    const bool written = ::write(fd, made.key, sizeof made.key) == sizeof made.key && ::fsync(fd) == 0;
    const int written_errno = errno;
    ::close(fd);
    if (written) (void)::link(tmp.c_str(), path.c_str());
    ::unlink(tmp.c_str());
    if (!written) return no_key(tmp.string() + ": " + std::strerror(written_errno));
    if (auto found = read_key()) return found;
    return no_key(path.string() + ": " + (problem.empty() ? "not made" : problem));
}
const std::optional<Secret>& secret() {
    static const std::optional<Secret> loaded = load_secret();
    return loaded;
}

// Appends and reads the fixed-width fields of the header.
struct Bytes {
    std::string b;
    template <class T> void put(T v) { b.append(reinterpret_cast<const char*>(&v), sizeof v); }
    void put_text(const std::string& s) { put(static_cast<uint16_t>(s.size())); b += s; }
};
struct Cursor {
    const unsigned char* p;
    size_t n, at = 0;
    bool ok = true;
    template <class T> T get() {
        T v{};
        if (at + sizeof v > n) { ok = false; return v; }
        std::memcpy(&v, p + at, sizeof v);
        at += sizeof v;
        return v;
    }
    std::string text() {
        auto len = get<uint16_t>();
        if (!ok || at + len > n) { ok = false; return {}; }
        std::string s(reinterpret_cast<const char*>(p + at), len);
        at += len;
        return s;
    }
};

// What a column is stored as: its encoding and the bytes that stand for it.
struct Stored {
    Encoding encoding = Encoding::Raw;
    std::string small;                   // Constant: one value; Arithmetic: first and step (int64)
    const unsigned char* data = nullptr;  // what is written
    uint64_t bytes = 0;
};

int64_t as_int(const unsigned char* p, uint32_t width) {
    switch (width) {
        case 1: return static_cast<int8_t>(*p);
        case 2: { int16_t v; std::memcpy(&v, p, 2); return v; }
        case 4: { int32_t v; std::memcpy(&v, p, 4); return v; }
        default: { int64_t v; std::memcpy(&v, p, 8); return v; }
    }
}

bool fits32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

// b - a fits 32 bits (and the subtraction itself does not overflow 64).
bool step_fits32(int64_t a, int64_t b) {
    int64_t step = 0;
    return !__builtin_sub_overflow(b, a, &step) && fits32(step);
}

// A 64-bit integer column as Narrow32 or Delta32 when one of them applies (into `out`).
Encoding pack64(const int64_t* v, uint64_t n, std::string& out) {
    bool narrow = true, delta = true;
    for (uint64_t i = 0; i < n && (narrow || delta); ++i) {
        narrow = narrow && fits32(v[i]);
        delta = delta && (i == 0 || step_fits32(v[i - 1], v[i]));
    }
    if (!narrow && !delta) return Encoding::Raw;
    out.resize(narrow ? 4 * n : 8 + 4 * (n - 1));
    char* o = out.data();
    if (narrow) {
        for (uint64_t i = 0; i < n; ++i) { const auto x = static_cast<int32_t>(v[i]); std::memcpy(o + 4 * i, &x, 4); }
        return Encoding::Narrow32;
    }
    std::memcpy(o, v, 8);
    for (uint64_t i = 1; i < n; ++i) { const auto d = static_cast<int32_t>(v[i] - v[i - 1]); std::memcpy(o + 8 + 4 * (i - 1), &d, 4); }
    return Encoding::Delta32;
}

Stored encode(const CacheWriter::Column& c) {
    Stored s;
    const auto* p = static_cast<const unsigned char*>(c.data);
    const uint64_t w = c.width;
    s.data = p;
    s.bytes = c.count * w;
    if (c.count < 2) return s;
    bool constant = true;
    for (uint64_t i = 1; i < c.count && constant; ++i) constant = std::memcmp(p, p + i * w, w) == 0;
    if (constant) {
        s.encoding = Encoding::Constant;
        s.small.assign(reinterpret_cast<const char*>(p), w);
    } else if (c.integer && (w == 1 || w == 2 || w == 4 || w == 8)) {
        // A step or a term past int64 (a column holding INT64_MIN, as an unlimited capacity does) is
        // no arithmetic column: computed without overflow (it was signed overflow, UBSan's finding).
        const int64_t first = as_int(p, c.width);
        int64_t step = 0;
        bool arithmetic = !__builtin_sub_overflow(as_int(p + w, c.width), first, &step);
        for (uint64_t i = 2; i < c.count && arithmetic; ++i) {
            int64_t term = 0;
            arithmetic = !__builtin_mul_overflow(static_cast<int64_t>(i), step, &term) &&
                         !__builtin_add_overflow(first, term, &term) && as_int(p + i * w, c.width) == term;
        }
        if (arithmetic) {
            s.encoding = Encoding::Arithmetic;
            s.small.append(reinterpret_cast<const char*>(&first), 8).append(reinterpret_cast<const char*>(&step), 8);
        } else if (w == 8) {
            s.encoding = pack64(reinterpret_cast<const int64_t*>(p), c.count, s.small);
            if (s.encoding == Encoding::Raw) return s;
        } else {
            return s;
        }
    } else {
        return s;
    }
    s.data = reinterpret_cast<const unsigned char*>(s.small.data());
    s.bytes = s.small.size();
    return s;
}

uint64_t hash_stored(const unsigned char* bytes, uint64_t n, uint64_t seed) {
    uint64_t sum = seed;
    for (uint64_t at = 0; at < n; at += kChunk) sum = hash_bytes(bytes + at, std::min(kChunk, n - at), sum);
    return sum;
}

}  // namespace

void CacheWriter::add(const std::string& name, size_t width, size_t count, const void* data, bool integer) {
    columns_.push_back({name, static_cast<uint32_t>(width), count, data, integer});
}

struct CacheReader::Column {
    std::string name;
    uint32_t width = 0;
    Encoding encoding = Encoding::Raw;
    uint64_t count = 0, bytes = 0, hash = 0;
    uint32_t first_part = 0, parts = 0;
};

struct CacheReader::Impl {
    sqlite3* db = nullptr;
    bool own = false;
    std::vector<Column> columns;
    std::map<int64_t, int64_t> rowid_of_part;
    sqlite3_blob* blob = nullptr;
    uint64_t seed = 0;   // the arrays' checksums start from it (the user's secret)
    bool ok = true;
    ~Impl() {
        if (blob) sqlite3_blob_close(blob);
        if (own) sqlite3_close(db);
    }
};

CacheReader::CacheReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CacheReader::~CacheReader() = default;

const CacheReader::Column* CacheReader::find(const std::string& name, size_t width) {
    for (const Column& c : impl_->columns)
        if (c.name == name) {
            if (c.width != width) break;
            return &c;
        }
    impl_->ok = false;
    return nullptr;
}

int64_t CacheReader::count(const std::string& name, size_t width) {
    const Column* c = find(name, width);
    return c ? static_cast<int64_t>(c->count) : -1;
}

namespace {

// Large arrays in 2 MiB pages: a tenth of the page faults a 4 KiB page costs per byte read.
void advise_huge(void* p, size_t bytes) {
    constexpr uintptr_t kHuge = uintptr_t(2) << 20;
    if (bytes < 4 * kHuge) return;
    const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
    const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
    if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_HUGEPAGE);
}

// Decodes `n` stored bytes beginning at stored offset `at` of a Narrow32/Delta32 column.
void widen(Encoding e, const unsigned char* in, uint64_t n, uint64_t at, int64_t* out, int64_t& last) {
    uint64_t i = 0;
    if (e == Encoding::Delta32 && at == 0) {   // the first value, whole
        std::memcpy(&last, in, 8);
        *out++ = last;
        i = 8;
    }
    for (; i + 4 <= n; i += 4) {
        int32_t x;
        std::memcpy(&x, in + i, 4);
        last = e == Encoding::Narrow32 ? x : static_cast<int64_t>(static_cast<uint64_t>(last) + static_cast<uint64_t>(int64_t{x}));
        *out++ = last;
    }
}

}  // namespace

void CacheReader::prepare_buffer(void* p, size_t bytes) { advise_huge(p, bytes); }

bool CacheReader::fill(const std::string& name, void* out) {
    const Column* found = nullptr;
    for (const Column& col : impl_->columns)
        if (col.name == name) found = &col;
    if (!found) return impl_->ok = false;
    const Column& c = *found;
    auto* dst = static_cast<unsigned char*>(out);
    Impl& m = *impl_;
    const bool packed = c.encoding == Encoding::Narrow32 || c.encoding == Encoding::Delta32;
    uint64_t expect = c.count * c.width;
    if (c.encoding == Encoding::Constant) expect = c.width;
    if (c.encoding == Encoding::Arithmetic) expect = 16;
    if (packed) expect = c.width != 8 || c.count == 0 ? UINT64_MAX : c.encoding == Encoding::Narrow32 ? 4 * c.count : 8 + 4 * (c.count - 1);
    if (c.bytes != expect) return m.ok = false;
    // Raw: straight into the caller's array; the others through a small buffer.
    std::string small(c.encoding == Encoding::Raw ? 0 : std::min<uint64_t>(c.bytes, kChunk), '\0');
    auto* buf = reinterpret_cast<unsigned char*>(small.data());
    uint64_t at = 0, sum = m.seed;
    int64_t last = 0;
    auto* wide = reinterpret_cast<int64_t*>(dst);
    for (uint32_t part = 0; part < c.parts; ++part) {
        auto it = m.rowid_of_part.find(c.first_part + part);
        if (it == m.rowid_of_part.end()) return m.ok = false;
        if (m.blob ? sqlite3_blob_reopen(m.blob, it->second) != SQLITE_OK
                   : sqlite3_blob_open(m.db, "main", "trace_cache", "data", it->second, 0, &m.blob) != SQLITE_OK)
            return m.ok = false;
        const auto n = static_cast<uint64_t>(sqlite3_blob_bytes(m.blob));
        if (at + n > c.bytes || (part + 1 < c.parts && n != kPartBytes)) return m.ok = false;
        for (uint64_t off = 0; off < n; off += kChunk) {
            const uint64_t len = std::min(kChunk, n - off);
            unsigned char* to = c.encoding == Encoding::Raw ? dst + at + off : buf;
            if (sqlite3_blob_read(m.blob, to, static_cast<int>(len), static_cast<int>(off)) != SQLITE_OK)
                return m.ok = false;
            sum = hash_bytes(to, len, sum);
            if (packed) {   // chunks hold whole values: kChunk and 8 are multiples of 4
                int64_t* w = wide + (c.encoding == Encoding::Narrow32 ? (at + off) / 4 : at + off == 0 ? 0 : 1 + (at + off - 8) / 4);
                widen(c.encoding, to, len, at + off, w, last);
            }
        }
        at += n;
    }
    if (!(m.ok && at == c.bytes && sum == c.hash)) return m.ok = false;
    if (c.encoding == Encoding::Constant) {
        for (uint64_t i = 0; i < c.count; ++i) std::memcpy(dst + i * c.width, buf, c.width);
    } else if (c.encoding == Encoding::Arithmetic) {
        int64_t first, step;
        std::memcpy(&first, buf, 8);
        std::memcpy(&step, buf + 8, 8);
        for (uint64_t i = 0; i < c.count; ++i) {
            // Modulo 2^64: a cache file written otherwise (damaged, or made by hand) is no signed overflow.
            const auto value = static_cast<int64_t>(static_cast<uint64_t>(first) + i * static_cast<uint64_t>(step));
            std::memcpy(dst + i * c.width, &value, c.width);   // little-endian: the low bytes
        }
    }
    return true;
}

bool CacheReader::finish() {
    if (impl_->blob) sqlite3_blob_close(impl_->blob);
    impl_->blob = nullptr;
    return impl_->ok;
}

bool cache_enabled() { return env_switch("MHC_TRACE_CACHE", true); }

int64_t change_counter(sqlite3* db) {
    sqlite3_file* file = nullptr;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file) != SQLITE_OK || !file || !file->pMethods)
        return -1;
    unsigned char header[4];
    if (file->pMethods->xRead(file, header, 4, 24) != SQLITE_OK) return -1;
    return int64_t{header[0]} << 24 | int64_t{header[1]} << 16 | int64_t{header[2]} << 8 | int64_t{header[3]};
}

std::unique_ptr<CacheReader> read_cache(sqlite3* db, const std::string& key, const std::string& fingerprint, bool own) {
    auto impl = std::make_unique<CacheReader::Impl>();
    impl->db = db;
    impl->own = own;
    if (!db || !cache_enabled() || !secret()) return nullptr;
    impl->seed = secret()->seed();
    sqlite3_stmt* s = nullptr;
    // Only part 0's data (the header): selecting every part's would copy the whole entry onto the heap.
    if (sqlite3_prepare_v2(db, "SELECT part, rowid, CASE WHEN part = 0 THEN data END FROM trace_cache WHERE key=?", -1,
                           &s, nullptr) != SQLITE_OK) {
        sqlite3_finalize(s);
        return nullptr;   // no cache table: nothing cached yet
    }
    sqlite3_bind_text(s, 1, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
    std::string header;
    while (sqlite3_step(s) == SQLITE_ROW) {
        const int64_t part = sqlite3_column_int64(s, 0);
        impl->rowid_of_part[part] = sqlite3_column_int64(s, 1);
        if (part == 0 && sqlite3_column_type(s, 2) == SQLITE_BLOB)
            header.assign(static_cast<const char*>(sqlite3_column_blob(s, 2)), static_cast<size_t>(sqlite3_column_bytes(s, 2)));
    }
    sqlite3_finalize(s);
    if (header.size() < sizeof kMagic + 8 || std::memcmp(header.data(), kMagic, sizeof kMagic) != 0) return nullptr;
    Cursor c{reinterpret_cast<const unsigned char*>(header.data()), header.size() - 8};
    c.at = sizeof kMagic;
    uint64_t stored_hash;
    std::memcpy(&stored_hash, header.data() + header.size() - 8, 8);
    if (keyed_tag(secret()->key, c.p, c.n) != stored_hash) return nullptr;   // not written by this user's mhc
    if (c.get<uint32_t>() != kCacheVersion || c.text() != fingerprint) return nullptr;
    const auto columns = c.get<uint32_t>();
    for (uint32_t i = 0; i < columns && c.ok; ++i) {
        CacheReader::Column col;
        col.name = c.text();
        col.width = c.get<uint32_t>();
        col.encoding = static_cast<Encoding>(c.get<uint8_t>());
        col.count = c.get<uint64_t>();
        col.bytes = c.get<uint64_t>();
        col.hash = c.get<uint64_t>();
        col.first_part = c.get<uint32_t>();
        col.parts = c.get<uint32_t>();
        if (col.width == 0 || static_cast<uint8_t>(col.encoding) > static_cast<uint8_t>(Encoding::Delta32) ||
            col.count > (uint64_t(1) << 40))
            c.ok = false;
        impl->columns.push_back(std::move(col));
    }
    if (!c.ok || c.at != c.n) return nullptr;
    return std::make_unique<CacheReader>(std::move(impl));
}

std::unique_ptr<CacheReader> read_cache(const std::string& path, const std::string& key, const std::string& fingerprint) {
    if (!cache_enabled()) return nullptr;
    std::string problem;
    sqlite3* db = sql::open_existing(path, false, problem);
    if (!db) return nullptr;
    sqlite3_exec(db, "PRAGMA mmap_size=2147418112", nullptr, nullptr, nullptr);   // blobs copied from the page cache
    return read_cache(db, key, fingerprint, true);   // closes db when it finds no entry
}

namespace {

void create_cache_table(sqlite3* db, const std::string& path) {
    sql::exec(db, path,
              "CREATE TABLE IF NOT EXISTS trace_cache (key TEXT NOT NULL, part INTEGER NOT NULL, "
              "data BLOB NOT NULL, PRIMARY KEY (key, part))");
    for (const char* table : kWatched) {
        sql::Stmt has(db, path, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?");
        has.bind(1, std::string(table));
        if (!has.step()) continue;
        for (const char* op : {"INSERT", "UPDATE", "DELETE"}) {
            std::string lower(op);
            std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
            const std::string sql = "CREATE TRIGGER IF NOT EXISTS trace_cache_" + lower + "_" + table + " AFTER " + op +
                                    " ON " + table + " BEGIN DELETE FROM trace_cache; END";
            sql::exec(db, path, sql.c_str());
        }
    }
}

// The entry's rows, in the caller's transaction.
void insert_entry(sqlite3* db, const std::string& path, const std::string& key, const std::string& fingerprint,
                  const CacheWriter& entry) {
    sql::Stmt del(db, path, "DELETE FROM trace_cache WHERE key=?");
    del.bind(1, key);
    del.run();
    sql::Stmt ins(db, path, "INSERT INTO trace_cache (key, part, data) VALUES (?, ?, ?)");
    Bytes h;
    h.b.assign(kMagic, sizeof kMagic);
    h.put(kCacheVersion);
    h.put_text(fingerprint);
    h.put(static_cast<uint32_t>(entry.columns().size()));
    uint32_t part = 1;
    for (const CacheWriter::Column& col : entry.columns()) {
        const Stored s = encode(col);
        const uint32_t parts = static_cast<uint32_t>(std::max<uint64_t>(1, (s.bytes + kPartBytes - 1) / kPartBytes));
        h.put_text(col.name);
        h.put(col.width);
        h.put(static_cast<uint8_t>(s.encoding));
        h.put(col.count);
        h.put(s.bytes);
        h.put(hash_stored(s.data, s.bytes, secret()->seed()));
        h.put(part);
        h.put(parts);
        for (uint32_t i = 0; i < parts; ++i, ++part) {
            const uint64_t at = i * kPartBytes, n = std::min(kPartBytes, s.bytes - std::min(s.bytes, at));
            ins.bind(1, key);
            ins.bind(2, static_cast<int64_t>(part));
            sqlite3_bind_blob64(ins.get(), 3, n ? s.data + at : reinterpret_cast<const unsigned char*>(""), n, SQLITE_STATIC);
            ins.run();
        }
    }
    h.put(keyed_tag(secret()->key, reinterpret_cast<const unsigned char*>(h.b.data()), h.b.size()));
    ins.bind(1, key);
    ins.bind(2, int64_t(0));
    sqlite3_bind_blob64(ins.get(), 3, h.b.data(), h.b.size(), SQLITE_STATIC);
    ins.run();
}

}  // namespace

bool write_cache(const std::string& path, const std::string& fingerprint, int64_t counter,
                 const std::vector<std::pair<std::string, const CacheWriter*>>& entries) {
    if (!cache_enabled() || !secret() || counter < 0) return false;
    std::string problem;
    sqlite3* db = nullptr;
    try {
        db = sql::open_existing(path, true, problem);
    } catch (...) {
        return false;
    }
    if (!db) return false;
    if (sqlite3_db_readonly(db, "main") != 0) {   // a 0444 file or a read-only folder: the slow path each time
        sqlite3_close(db);
        return false;
    }
    // A cache is worth no wait: a writer or a long reader elsewhere means another time.
    sqlite3_busy_timeout(db, 200);
    sql::no_triggers(db);
    bool written = false, began = false;
    try {
        sql::exec(db, path, "BEGIN IMMEDIATE");
        began = true;
        // Holding the write lock, nobody commits: a counter unchanged since the data were read
        // means they are the file's data.
        if (change_counter(db) == counter) {
            create_cache_table(db, path);
            for (const auto& [key, entry] : entries) insert_entry(db, path, key, fingerprint, *entry);
            sql::exec(db, path, "COMMIT");
            began = false;
            written = true;
        }
    } catch (...) {
    }
    if (began) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(db);
    // A commit that failed half-way (a full disk) may leave a hot journal: roll it back now.
    if (!written) runfiles::roll_back_hot_journal(path);
    return written;
}

}  // namespace mhc::trace
