#include "mhc/common/wrap.hpp"

#include <sstream>

namespace mhc {

std::string wrap(const std::string& text, int width, int indent, int first_indent) {
    std::string out;
    std::istringstream paragraphs(text);
    bool first_line = true;
    for (std::string para; std::getline(paragraphs, para);) {
        std::istringstream words(para);
        std::string line(static_cast<size_t>(first_line ? first_indent : indent), ' ');
        size_t start = line.size();
        for (std::string w; words >> w;) {
            if (line.size() > start && line.size() + 1 + w.size() > static_cast<size_t>(width)) {
                out += line + "\n";
                line = std::string(static_cast<size_t>(indent), ' ');
                start = line.size();
            }
            line += (line.size() > start ? " " : "") + w;
        }
        out += line + "\n";
        first_line = false;
    }
    return out;
}

}  // namespace mhc
