#pragma once
// The one non-cryptographic hash: 64-bit FNV-1a (Fowler, Noll and Vo,
// http://www.isthe.com/chongo/tech/comp/fnv/), fed piece by piece, with the FNV prime but the
// offset 1469598103934665603: the published offset basis, 14695981039346656037, short of its last
// digit, as every copy of this hash in the code had it. Fingerprints stored in trace files, job
// ids of generated traces, stems of temporary files and colours of names were made with it, so
// the offset stays; the values are not the published test vectors'.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace mhc {

class Fnv1a {
public:
    Fnv1a& add(std::string_view bytes) {
        for (unsigned char byte : bytes) add_byte(byte);
        return *this;
    }
    // A string and then the byte 0xff, which no UTF-8 text holds: a list of strings hashed this
    // way cannot collide with another list of the same bytes cut elsewhere.
    Fnv1a& add_field(std::string_view text) {
        add(text);
        add_byte(0xff);
        return *this;
    }
    uint64_t value() const { return h_; }
    // The value in 16 lower-case hex digits.
    std::string hex() const {
        char buf[17];
        std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h_));
        return buf;
    }

private:
    void add_byte(unsigned char byte) { h_ = (h_ ^ byte) * 1099511628211ull; }
    uint64_t h_ = 1469598103934665603ull;
};

}  // namespace mhc
