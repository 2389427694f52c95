#pragma once
// mhc::Error: bad input or environment problems, thrown at library boundaries.
// Front-ends catch it, print what() on one line and exit with exit_code().
#include <stdexcept>
#include <string>

namespace mhc {

class Error : public std::runtime_error {
public:
    // kind decides the exit status of a front-end: bad input (2) or internal (1).
    enum class Kind { BadInput, Internal };

    explicit Error(std::string message, Kind kind = Kind::BadInput)
        : std::runtime_error(std::move(message)), kind_(kind) {}

    Kind kind() const { return kind_; }
    int exit_code() const { return kind_ == Kind::BadInput ? 2 : 1; }

private:
    Kind kind_;
};

// "file: message", "file: table row 12: message", "file: field 'x': message".
std::string where(const std::string& file, const std::string& message);
std::string where_row(const std::string& file, const std::string& table, long long row,
                      const std::string& message);

}  // namespace mhc
