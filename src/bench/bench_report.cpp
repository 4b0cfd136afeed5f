#include "src/bench/bench_report.h"

#include "ggml-like/cpu/kernel_set.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>

namespace latte::bench {
namespace {

struct Column {
  const char* title;
  bool right;
  size_t min_width;
};

// llama-bench's columns and widths; model, mem and test widen to fit. mem (a --mem-budget sweep)
// and % roof (--roofline) are shown only when asked for, as llama-bench adds a column for a
// parameter given a value other than its default.
constexpr Column kColumns[] = {
    {"model", false, 30}, {"size", true, 10}, {"params", true, 10}, {"backend", false, 7}, {"threads", true, 7},
    {"mem", true, 5},     {"test", true, 15}, {"t/s", true, 20},    {"% roof", true, 6},
};
constexpr size_t kModelCol = 0, kMemCol = 5, kTestCol = 6, kRoofCol = 8;

// Decimal units, to match the GB/s of the bandwidth: "1.37 GB", "4.19 MB", "36 B".
std::string si_bytes(double bytes) {
  if (bytes >= 1e9) return fmt::format("{:.2f} GB", bytes / 1e9);
  if (bytes >= 1e6) return fmt::format("{:.2f} MB", bytes / 1e6);
  if (bytes >= 1e3) return fmt::format("{:.2f} kB", bytes / 1e3);
  return fmt::format("{:.0f} B", bytes);
}

std::string utc_now_iso8601() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// UTF-8 code points, so that "±" counts as one column.
size_t display_width(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// The expert_cache object of a result's JSON (null without an expert cache).
nlohmann::json expert_cache_json(const BenchResult& r) {
  if (!r.expert_cache) return nullptr;
  const ExpertPager::Stats& s = r.expert_cache->stats;
  // Without pre-gating no guess was made, and a 0% accuracy would read as every guess wrong.
  const nlohmann::json accuracy = s.predicted > 0 ? nlohmann::json(s.prefetch_accuracy()) : nlohmann::json(nullptr);
  return {
      {"hit_rate", s.hit_rate()},           {"bytes_per_token", r.expert_bytes_per_token()},
      {"read_mb_per_s", s.read_mb_per_s()}, {"wait_seconds", s.wait_seconds},
      {"prefetch_accuracy", accuracy},      {"slots", r.expert_cache->slots},
  };
}

}  // namespace

ModelSummary summarize_model(const Model& model, const std::string& filename) {
  ModelSummary m;
  m.filename = filename;
  m.name = model.file().metadata().get_or<std::string>("general.name", "");
  if (m.name.empty()) m.name = std::filesystem::path(filename).filename().string();
  std::map<ggl::Type, uint64_t> bytes_per_type;
  for (const ggl::TensorInfo& t : model.file().tensors()) {
    m.size_bytes += t.nbytes;
    m.n_params += t.n_elements();
    bytes_per_type[t.type] += t.nbytes;
  }
  auto most = std::max_element(bytes_per_type.begin(), bytes_per_type.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
  std::string type = most == bytes_per_type.end() ? "?" : std::string(ggl::type_name(most->first));
  std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return std::toupper(c); });
  m.type = model.hparams().arch_name + " " + type;
  return m;
}

double Roofline::bytes_per_token(const BenchTest& t) const {
  const double mean_ctx = static_cast<double>(t.n_depth) + static_cast<double>(t.n_gen) / 2.0;
  return static_cast<double>(weights.total()) + static_cast<double>(cache_bytes_per_position) * mean_ctx;
}

double Roofline::bound_ts(const BenchTest& t) const { return bandwidth.gb_per_s * 1e9 / bytes_per_token(t); }

std::string disk_reads_warning(const BenchResult& r) {
  return fmt::format(
      "{}: {} page faults read from disk during the timed runs: not all the weights stayed in memory (memory "
      "pressure, or a reclaim daemon paging out the mapped file), so this speed includes disk reads",
      r.test.name(), r.major_faults);
}

std::string roofline_summary(const Roofline& r, int64_t n_expert_used, int64_t n_expert, std::string_view cache_type) {
  const DecodeTraffic& w = r.weights;
  const double bound = r.bandwidth.gb_per_s * 1e9 / static_cast<double>(w.total());
  std::string routed =
      n_expert > 0 ? fmt::format(", routed experts ({}/{}) {}", n_expert_used, n_expert, si_bytes(w.routed_experts))
                   : "";
  return fmt::format(
      "DRAM read bandwidth: {:.1f} GB/s (best of {} passes over {}, {} threads)\n"
      "weights read per generated token: {} = attention {}, dense FFN + norms {}, router {}, shared experts {}{}, "
      "output head {}, embedding row {}\n"
      "cache read per token: {} per cached position ({}); tg bound at depth 0: {:.2f} t/s "
      "(% roof uses weights + the cache at depth + n/2)\n",
      r.bandwidth.gb_per_s, r.bandwidth.passes, format_size(r.bandwidth.buffer_bytes), r.bandwidth.threads,
      si_bytes(static_cast<double>(w.total())), si_bytes(w.attention), si_bytes(w.dense_ffn), si_bytes(w.router),
      si_bytes(w.shared_experts), routed, si_bytes(w.output), si_bytes(w.embedding_row),
      si_bytes(r.cache_bytes_per_position), cache_type, bound);
}

std::string format_size(uint64_t bytes) {
  const double gib = static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
  if (gib >= 1.0) return fmt::format("{:.2f} GiB", gib);
  return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

std::string format_params(int64_t n) {
  if (n >= 1'000'000'000) return fmt::format("{:.2f} B", static_cast<double>(n) / 1e9);
  return fmt::format("{:.2f} M", static_cast<double>(n) / 1e6);
}

MarkdownTable::MarkdownTable(const ModelSummary& model, const std::vector<BenchTest>& tests, bool roofline,
                             const std::vector<std::string>& mem_budgets)
    : model_(model), roofline_(roofline) {
  for (size_t c = 0; c < std::size(kColumns); ++c) {
    widths_.push_back(kColumns[c].min_width);
    if ((c != kMemCol || !mem_budgets.empty()) && (c != kRoofCol || roofline)) shown_.push_back(c);
  }
  widths_[kModelCol] = std::max(widths_[kModelCol], display_width(model.name));
  for (const std::string& m : mem_budgets) widths_[kMemCol] = std::max(widths_[kMemCol], display_width(m));
  for (const BenchTest& t : tests) widths_[kTestCol] = std::max(widths_[kTestCol], t.name().size());
}

std::string MarkdownTable::line(const std::vector<std::string>& cells) const {
  std::string s = "|";
  for (const size_t c : shown_) {
    const std::string& v = cells[c];
    const size_t pad = widths_[c] > display_width(v) ? widths_[c] - display_width(v) : 0;
    s += ' ';
    if (kColumns[c].right) s.append(pad, ' ');
    s += v;
    if (!kColumns[c].right) s.append(pad, ' ');
    s += " |";
  }
  return s + "\n";
}

std::string MarkdownTable::header() const {
  std::vector<std::string> titles, rule;
  for (size_t c = 0; c < std::size(kColumns); ++c) {
    titles.emplace_back(kColumns[c].title);
    rule.push_back(kColumns[c].right ? std::string(widths_[c] - 1, '-') + ":" : std::string(widths_[c], '-'));
  }
  return line(titles) + line(rule);
}

// Every column's cell; line() leaves out those not shown.
std::vector<std::string> MarkdownTable::cells(const BenchResult& r, const Roofline* roof,
                                              const std::string& mem_budget) const {
  const bool roof_cell = roofline_ && roof && r.test.is_generation();
  return {model_.name,
          format_size(model_.size_bytes),
          format_params(model_.n_params),
          r.backend,
          std::to_string(r.test.threads),
          mem_budget,
          r.test.name(),
          fmt::format("{:.2f} ± {:.2f}", r.avg_ts(), r.stddev_ts()),
          roof_cell ? fmt::format("{:.1f}%", 100.0 * r.avg_ts() / roof->bound_ts(r.test)) : ""};
}

std::string MarkdownTable::row(const BenchResult& r, const Roofline* roof, const std::string& mem_budget) const {
  return line(cells(r, roof, mem_budget));
}

std::string expert_cache_note(const BenchResult& r) {
  if (!r.expert_cache) return "";
  return fmt::format("{}: {}; {} read per token (timed runs, warm-up excluded)", r.test.name(), r.expert_cache->summary,
                     si_bytes(r.expert_bytes_per_token()));
}

nlohmann::json result_json(const ModelSummary& model, const RunInfo& run, const BenchResult& r, const Roofline* roof) {
  std::vector<int64_t> samples_ns;
  for (double s : r.seconds) samples_ns.push_back(static_cast<int64_t>(s * 1e9));
  nlohmann::json j = {
      {"cpu_info", run.cpu_info},
      {"backends", r.backend},
      {"crossing_bytes_per_token", r.crossing_bytes_per_token},
      {"major_page_faults", r.major_faults},
      {"mem_budget", run.mem_budget ? nlohmann::json(*run.mem_budget) : nlohmann::json(nullptr)},
      {"expert_cache", expert_cache_json(r)},
      {"cpu_kernels", ggl::cpu_kernels().isa},
      {"model_filename", model.filename},
      {"model_name", model.name},
      {"model_type", model.type},
      {"model_size", model.size_bytes},
      {"model_n_params", model.n_params},
      {"n_batch", run.n_batch},
      {"n_ubatch", run.n_batch},
      {"n_threads", r.test.threads},
      {"type_k", run.cache_type},
      {"type_v", run.cache_type},
      {"n_prompt", r.test.n_prompt},
      {"n_gen", r.test.n_gen},
      {"n_depth", r.test.n_depth},
      {"test_time", utc_now_iso8601()},
      {"avg_ns", static_cast<int64_t>(r.avg_seconds() * 1e9)},
      {"stddev_ns", static_cast<int64_t>(r.stddev_seconds() * 1e9)},
      {"avg_ts", r.avg_ts()},
      {"stddev_ts", r.stddev_ts()},
      {"samples_ns", samples_ns},
      {"samples_ts", r.samples_ts()},
  };
  if (roof) {
    j["dram_read_gbs"] = roof->bandwidth.gb_per_s;
    j["weight_bytes_per_token"] = roof->weights.total();
    j["cache_bytes_per_position"] = roof->cache_bytes_per_position;
    if (r.test.is_generation()) {
      j["bytes_per_token"] = roof->bytes_per_token(r.test);
      j["roof_ts"] = roof->bound_ts(r.test);
      j["roof_pct"] = 100.0 * r.avg_ts() / roof->bound_ts(r.test);
    }
  }
  return j;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

}  // namespace latte::bench
