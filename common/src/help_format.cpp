#include "mhc/common/help_format.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <sstream>

namespace mhc {

int help_width() {
    winsize ws{};
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return std::max<int>(40, ws.ws_col);
    return 80;
}

namespace {

std::string upper(std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

// The value's name as users read it: CLI11's type without its validators' descriptions
// ("INT:INT in [1 - 4096]" -> N).
std::string value_name(const CLI::Option* opt) {
    std::string t = opt->get_type_name();
    t = t.substr(0, t.find(':'));
    if (t == "INT" || t == "UINT") return "N";
    if (t == "FLOAT") return "X";
    return t;
}

}  // namespace

HelpFormatter::HelpFormatter(int width) : width_(width) {
    column_width(std::min(30, width / 3));
    // The words of docs/cli.md: a command and its arguments (CLI11: subcommand, positionals).
    label("SUBCOMMAND", "COMMAND");
    label("Positionals", "Arguments");
}

std::string HelpFormatter::two_columns(const std::string& left, const std::string& right) const {
    const int col = static_cast<int>(get_column_width());
    std::string head = "  " + left;
    if (right.empty()) return head + "\n";
    if (static_cast<int>(head.size()) + 1 > col) return head + "\n" + wrap(right, width_, col, col);
    head.resize(static_cast<size_t>(col), ' ');
    return head + wrap(right, width_, col, col).substr(static_cast<size_t>(col));
}

std::string HelpFormatter::make_option(const CLI::Option* opt, bool is_positional) const {
    return two_columns(make_option_name(opt, is_positional) + make_option_opts(opt), make_option_desc(opt));
}

std::string HelpFormatter::make_option_name(const CLI::Option* opt, bool is_positional) const {
    if (is_positional) return upper(opt->get_name(true, false));
    // Every name once, without CLI11's "{false}" after a negated flag: "--zero1, --no-zero1".
    std::string names;
    for (const auto& s : opt->get_snames()) names += (names.empty() ? "-" : ", -") + s;
    for (const auto& l : opt->get_lnames()) names += (names.empty() ? "--" : ", --") + l;
    return names;
}

std::string HelpFormatter::make_option_opts(const CLI::Option* opt) const {
    if (opt->get_positional() || opt->get_type_size() == 0 || value_name(opt).empty()) return "";
    std::string out = " " + value_name(opt);
    if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
    return out;
}

std::string HelpFormatter::make_option_desc(const CLI::Option* opt) const {
    std::string desc = opt->get_description();
    if (opt->get_required()) desc += " [required]";
    if (!opt->get_default_str().empty()) desc += " [default: " + opt->get_default_str() + "]";
    return desc;
}

std::string HelpFormatter::make_subcommand(const CLI::App* sub) const {
    return two_columns(sub->get_display_name(true), sub->get_description());
}

std::string HelpFormatter::make_description(const CLI::App* app) const {
    const std::string& d = app->get_description();
    return d.empty() ? std::string() : wrap(d, width_) + "\n";
}

std::string HelpFormatter::make_usage(const CLI::App* app, std::string name) const {
    std::string usage = CLI::Formatter::make_usage(app, std::move(name));
    usage.pop_back();   // its line break
    return wrap(usage, width_, 7);   // continued under the name, past "Usage: "
}

// CLI11's make_groups, but a blank line only between groups shown: CLI11 put one after a group
// followed by a hidden one (group "": an option's old name, still read), an empty last line.
std::string HelpFormatter::option_groups(const CLI::App* app, CLI::AppFormatMode mode) const {
    std::string out;
    for (const std::string& group : app->get_groups()) {
        if (group.empty()) continue;
        const auto opts = app->get_options([&](const CLI::Option* opt) {
            return opt->get_group() == group && opt->nonpositional() &&
                   (mode != CLI::AppFormatMode::Sub || (app->get_help_ptr() != opt && app->get_help_all_ptr() != opt));
        });
        if (!opts.empty()) out += (out.empty() ? "" : "\n") + make_group(group, false, opts);
    }
    return out;
}

std::string HelpFormatter::make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const {
    if (mode == CLI::AppFormatMode::Sub) return make_expanded(app);
    return make_description(app) + make_usage(app, std::move(name)) + make_positionals(app) + option_groups(app, mode) +
           make_subcommands(app, mode) + "\n" + make_footer(app);
}

std::string HelpFormatter::make_footer(const CLI::App* app) const {
    const std::string& f = app->get_footer();
    return f.empty() ? std::string() : wrap(f, width_);
}

}  // namespace mhc
