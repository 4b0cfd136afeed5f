#include "src/cli/flags/parse_flags.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <vector>

#include "ggml-like/core/error.h"
#include "src/cli/flags/llama_spellings.h"

namespace latte::cli {
namespace {

// What each option was called on the command line, for the messages about it. Holds the last
// parse only (a process parses one command line; tests parse several, one after another).
std::map<const CLI::Option*, std::string>& typed_names() {
  static std::map<const CLI::Option*, std::string> names;
  return names;
}

// "-1", "-0.5": a value (a negative number), not a flag.
bool is_negative_number(const std::string& a) {
  return a.size() >= 2 && a[0] == '-' && (std::isdigit(static_cast<unsigned char>(a[1])) || a[1] == '.');
}

bool takes_value(const CLI::Option* opt) { return opt->get_items_expected_max() > 0; }

// The arguments for CLI11 with every flag checked and llama.cpp's spellings replaced by latte's.
// Only flags are looked at: the token after an option that takes a value is its value, whatever
// it looks like ("-p -x", "-n -1").
std::vector<std::string> normalize(CLI::App& app, int argc, char** argv) {
  typed_names().clear();
  std::vector<std::string> out;
  bool only_positionals = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (only_positionals || a.size() < 2 || a[0] != '-' || is_negative_number(a)) {
      out.push_back(a);
      continue;
    }
    if (a == "--") {
      only_positionals = true;
      out.push_back(a);
      continue;
    }
    // --name=value keeps its value; a single-dash name longer than one letter is a whole name
    // (-ngl), never a short flag with its value attached.
    const size_t eq = a.starts_with("--") ? a.find('=') : std::string::npos;
    const std::string typed = a.substr(0, eq);
    const LlamaSpelling* spelling = find_llama_spelling(typed);
    const std::string name = spelling ? std::string(spelling->latte) : typed;
    CLI::Option* opt = app.get_option_no_throw(name);
    if (!opt) ggl::fail("unknown flag '{}' (see --help)", typed);
    typed_names()[opt] = typed;
    if (eq != std::string::npos) {
      out.push_back(name + a.substr(eq));
      continue;
    }
    out.push_back(name);
    if (!takes_value(opt)) continue;
    const bool value_follows = i + 1 < argc && !(argv[i + 1][0] == '-' && argv[i + 1][1] != '\0');
    if (spelling && !spelling->bare_value.empty() && !value_follows) {
      out.emplace_back(spelling->bare_value);
    } else if (i + 1 < argc) {
      out.push_back(argv[++i]);
    }
  }
  return out;
}

// CLI11's message with each option called what the user typed: "--ctx-size: must be >= 1 (got 0)"
// becomes "-c must be >= 1 (got 0)", "--ctx-size: 1 required INT missing" "-c needs a value".
std::string with_typed_names(std::string message) {
  for (const auto& [opt, typed] : typed_names()) {
    const std::regex name("(^|[ '])" + std::regex_replace(opt->get_name(), std::regex("[-]"), "\\-") + "(?=$|[ :,'])");
    message = std::regex_replace(message, name, "$1" + typed);
  }
  message = std::regex_replace(message, std::regex("^(\\S+): must be"), "$1 must be");
  message = std::regex_replace(message, std::regex("^(\\S+): \\d+ required .* missing$"), "$1 needs a value");
  return message;
}

}  // namespace

std::optional<int> parse_flags(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args = normalize(app, argc, argv);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  try {
    app.parse(args);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ExtrasError&) {
    const std::vector<std::string> extra = app.remaining();
    ggl::fail("unexpected argument '{}' (see --help)", extra.empty() ? "" : extra.front());
  } catch (const CLI::ParseError& e) {
    ggl::fail("{}", with_typed_names(e.what()));
  }
  return std::nullopt;
}

std::string typed_flag(const CLI::App& app, std::string_view name) {
  const CLI::Option* opt = app.get_option_no_throw(std::string(name));
  if (!opt) return std::string(name);
  const auto it = typed_names().find(opt);
  return it != typed_names().end() ? it->second : std::string(name);
}

}  // namespace latte::cli
