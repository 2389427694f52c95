#pragma once
// Help that fits a terminal, for mhc and mhc-view alike: every --help and `mhc help TOPIC` is
// wrapped at the terminal's width (80 columns when stdout is not a terminal), options show their
// value as users write it (`--capacity SIZE|SHARE`) and their default as users write it
// (`default: auto`, `256MiB`).
// Long explanations live in help topics (docs/cli.md), not in option lines.
#include <CLI/CLI.hpp>

#include <string>

#include "mhc/common/wrap.hpp"

namespace mhc {

// Columns to wrap help at: the terminal's width when stdout is one (at least 40), else 80.
int help_width();

// CLI11's formatter, wrapping at help_width(). An option's default is what default_str() says
// (set it to the text users write: "auto", "256MiB"); options without one show none.
class HelpFormatter : public CLI::Formatter {
public:
    explicit HelpFormatter(int width);
    std::string make_option(const CLI::Option* opt, bool is_positional) const override;
    std::string make_option_name(const CLI::Option* opt, bool is_positional) const override;
    std::string make_option_opts(const CLI::Option* opt) const override;
    std::string make_option_desc(const CLI::Option* opt) const override;
    std::string make_subcommand(const CLI::App* sub) const override;
    std::string make_description(const CLI::App* app) const override;
    std::string make_usage(const CLI::App* app, std::string name) const override;
    std::string make_footer(const CLI::App* app) const override;
    std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override;

private:
    std::string two_columns(const std::string& left, const std::string& right) const;
    std::string option_groups(const CLI::App* app, CLI::AppFormatMode mode) const;
    int width_;
};

}  // namespace mhc
