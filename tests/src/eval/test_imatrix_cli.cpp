// `latte imatrix` through the binary on the real trained models of ../shared: the sums it writes
// against sums computed here (layer 0's inputs straight from the file's embeddings and norm; the
// routed experts' inputs and counts from the router's input and choices in the forward), the
// legacy .dat against the GGUF through convert/imatrix.h's reader, --in-file merging,
// --process-output, and one-line errors for bad input.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "convert/imatrix.h"
#include "ggml-like/gguf/gguf.h"
#include "ggml-like/graph/graph.h"
#include "src/model/graph_blocks.h"
#include "src/runtime/session.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/src/eval/story_text.h"
#include "tests/support/test_support.h"

namespace test_imatrix_cli {

namespace fs = std::filesystem;
using latte::testing::CommandResult;
using latte::testing::run_latte_apart;
using latte::testing::shell_quoted;

constexpr int64_t kCtx = 128;
constexpr int64_t kChunks = 3;
const char* const kStories = "models/stories260K.gguf";
const char* const kMla = "models/tiny-mla-stories-f32.gguf";

using test_eval_story::shared;
using test_eval_story::story;
std::vector<std::vector<int32_t>> chunks(const latte::Tokenizer& tok, int64_t n_chunks) {
  return test_eval_story::story_chunks(tok, kCtx, n_chunks);
}

// One entry of a GGUF importance matrix: sums [n_matrix][n_cols] and counts [n_matrix].
struct Entry {
  std::vector<float> sums, counts;
};

std::map<std::string, Entry> read_gguf(const fs::path& path) {
  const ggl::GgufFile f(path.string());
  std::map<std::string, Entry> out;
  for (const ggl::TensorInfo& t : f.tensors()) {
    const auto* v = reinterpret_cast<const float*>(t.data);
    const size_t dot = t.name.rfind('.');
    Entry& e = out[t.name.substr(0, dot)];
    (t.name.substr(dot) == ".in_sum2" ? e.sums : e.counts).assign(v, v + t.n_elements());
  }
  return out;
}

class ImatrixCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("latte-imatrix-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static CommandResult run(const std::string& args) { return run_latte_apart("imatrix " + args); }
  // imatrix over the story's first n chunks into dir_/out; must succeed.
  fs::path collect(const char* model, const std::string& out, int64_t n = kChunks, const std::string& extra = "") {
    const CommandResult r =
        run("-m " + shell_quoted(shared(model)) + " -f " + shell_quoted(story()) + " -c " + std::to_string(kCtx) +
            " --chunks " + std::to_string(n) + " -o " + shell_quoted(dir_ / out) + " " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return dir_ / out;
  }
  void expect_error(const std::string& args, const std::string& expected) {
    const CommandResult r = run(args);
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
  }
  fs::path dir_;
};

// Layer 0's attention products read rms_norm(embedding) * attn_norm: their sums from the file.
TEST_F(ImatrixCli, FirstLayerInputsMatchTheEmbeddings) {
  LATTE_REQUIRE_SHARED(kStories);
  const auto entries = read_gguf(collect(kStories, "a.gguf"));
  latte::Model model(shared(kStories));
  const ggl::GgufFile& f = model.file();
  const ggl::TensorInfo* embd = f.find_tensor("token_embd.weight");
  const ggl::TensorInfo* norm = f.find_tensor("blk.0.attn_norm.weight");
  ASSERT_TRUE(embd && norm && embd->type == ggl::Type::F32);
  const int64_t D = embd->ne[0];
  const auto* E = reinterpret_cast<const float*>(embd->data);
  const auto* g = reinterpret_cast<const float*>(norm->data);
  std::vector<double> want(static_cast<size_t>(D), 0.0);
  for (const auto& chunk : chunks(*latte::Tokenizer::from_gguf(f), kChunks)) {
    for (int32_t t : chunk) {
      const float* e = E + t * D;
      double ms = 0;
      for (int64_t j = 0; j < D; ++j) ms += double(e[j]) * e[j];
      const double r = 1.0 / std::sqrt(ms / D + model.hparams().rms_eps);
      for (int64_t j = 0; j < D; ++j) want[j] += std::pow(e[j] * r * g[j], 2);
    }
  }
  for (const char* name : {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"}) {
    ASSERT_TRUE(entries.count(name)) << name;
    const Entry& e = entries.at(name);
    ASSERT_EQ(e.sums.size(), static_cast<size_t>(D));
    ASSERT_EQ(e.counts, std::vector<float>{float(kChunks * kCtx)});
    for (int64_t j = 0; j < D; ++j) EXPECT_NEAR(e.sums[j], want[j], 1e-4 * want[j]) << name << " " << j;
  }
  // Every other dense product of the model is there, the output head not (no --process-output).
  EXPECT_EQ(entries.size(), 7u * model.hparams().n_layer);
  EXPECT_FALSE(entries.count("output.weight"));
}

// Routed experts: per expert, the squares of the router's input over the tokens routed to it, and
// how many; read here from the router's tensors in the forward (graph_blocks.h names them).
TEST_F(ImatrixCli, ExpertsMatchTheRouting) {
  LATTE_REQUIRE_SHARED(kMla);
  const auto entries = read_gguf(collect(kMla, "a.gguf"));
  latte::Model model(shared(kMla));
  const auto tok = latte::Tokenizer::from_gguf(model.file());
  const int64_t E = model.hparams().moe.n_expert, D = model.hparams().n_embd;
  std::map<std::string, std::vector<double>> sums, counts;  // by layer prefix "blk.L."
  latte::SessionOptions o{.n_ctx = kCtx, .cache_type = ggl::Type::F32, .mla_mode = latte::MlaMode::kNaive};
  o.on_graph_built = [](ggl::Graph& g) {
    for (ggl::Tensor* t : g.nodes()) {
      if (t->name == latte::kMoeRouterLogits) g.mark_output(t->src[1]);  // the router's input
      if (t->name == latte::kMoeChosenExperts) g.mark_output(t);
    }
  };
  o.on_graph_run = [&](const ggl::Graph& g, ggl::Backend& backend) {
    std::vector<float> x;
    std::string layer;
    for (const ggl::Tensor* t : g.nodes()) {
      if (t->name == latte::kMoeRouterLogits) {  // x = its second source, [D, T]
        x.resize(t->src[1]->n_elements());
        backend.read(*t->src[1], x.data(), 0, x.size() * 4);
        layer = t->src[0]->name.substr(0, t->src[0]->name.find("ffn_"));
      } else if (t->name == latte::kMoeChosenExperts) {
        std::vector<int32_t> ids(t->n_elements());
        backend.read(*t, ids.data(), 0, ids.size() * 4);
        auto& s = sums[layer];
        auto& c = counts[layer];
        s.resize(E * D), c.resize(E);
        for (size_t i = 0; i < ids.size(); ++i) {
          const int64_t tok_i = static_cast<int64_t>(i) / t->ne[0], ex = ids[i];
          for (int64_t j = 0; j < D; ++j) s[ex * D + j] += double(x[tok_i * D + j]) * x[tok_i * D + j];
          c[ex] += 1;
        }
      }
    }
  };
  latte::Session session(model, o);
  for (const auto& chunk : chunks(*tok, kChunks)) {
    session.clear();
    session.eval(chunk);
  }
  ASSERT_EQ(sums.size(), 4u);  // layers 1-4 are MoE
  for (const auto& [layer, want] : sums) {
    for (const char* kind : {"ffn_gate_exps.weight", "ffn_up_exps.weight"}) {
      const std::string name = layer + kind;
      ASSERT_TRUE(entries.count(name)) << name;
      const Entry& e = entries.at(name);
      ASSERT_EQ(e.counts.size(), static_cast<size_t>(E)) << name;
      for (int64_t ex = 0; ex < E; ++ex) EXPECT_EQ(e.counts[ex], counts[layer][ex]) << name << " expert " << ex;
      ASSERT_EQ(e.sums.size(), want.size());
      for (size_t j = 0; j < want.size(); ++j)
        EXPECT_NEAR(e.sums[j], want[j], 1e-4 * want[j] + 1e-6) << name << " " << j;
    }
    const Entry& down = entries.at(layer + "ffn_down_exps.weight");  // same routing, other inputs
    EXPECT_EQ(down.counts, entries.at(layer + "ffn_gate_exps.weight").counts);
  }
}

// Chunks evaluated in two graphs each: the second graph's naive MLA product multiplies every
// cached latent, of which only the graph's own tokens count, so attn_kv_b's sums and counts are
// those of one graph per chunk.
TEST_F(ImatrixCli, GraphsOfFewerTokensCountEachTokenOnce) {
  LATTE_REQUIRE_SHARED(kMla);
  const auto whole = read_gguf(collect(kMla, "a.gguf", kChunks, "--no-ppl"));
  const auto split = read_gguf(collect(kMla, "b.gguf", kChunks, "--no-ppl -b 64"));
  int checked = 0;
  for (const auto& [name, e] : whole) {
    if (name.find("attn_kv_b") == std::string::npos) continue;
    ++checked;
    ASSERT_TRUE(split.count(name)) << name;
    EXPECT_EQ(split.at(name).counts, std::vector<float>{float(kChunks * kCtx)}) << name;
    for (size_t i = 0; i < e.sums.size(); ++i) EXPECT_NEAR(split.at(name).sums[i], e.sums[i], 1e-4 * e.sums[i]) << name;
  }
  EXPECT_EQ(checked, 5);
}

// The legacy .dat and the GGUF give the same weights through convert/imatrix.h's reader.
TEST_F(ImatrixCli, LegacyAndGgufReadTheSame) {
  LATTE_REQUIRE_SHARED(kMla);
  const auto gguf = latte::convert::ImportanceMatrix::load(collect(kMla, "a.gguf").string());
  const auto dat = latte::convert::ImportanceMatrix::load(collect(kMla, "b.imatrix", kChunks, "--output-format dat"));
  EXPECT_EQ(gguf.chunks(), kChunks);
  EXPECT_EQ(dat.chunks(), kChunks);  // one graph per chunk: the calls are the chunks
  EXPECT_EQ(gguf.dataset(), story().string());
  EXPECT_EQ(dat.dataset(), story().string());
  ASSERT_EQ(gguf.entries().size(), dat.entries().size());
  for (const auto& [name, w] : gguf.entries()) {
    const std::vector<float>* v = dat.find(name);
    ASSERT_TRUE(v) << name;
    ASSERT_EQ(v->size(), w.size());
    for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR((*v)[i], w[i], 1e-5 * w[i] + 1e-12) << name << " " << i;
  }
}

// --in-file A --in-file B: the sums and counts of both, and their chunks.
TEST_F(ImatrixCli, InFilesMerge) {
  LATTE_REQUIRE_SHARED(kMla);
  const auto a = read_gguf(collect(kMla, "a.gguf", 1)), b = read_gguf(collect(kMla, "b.gguf", 2));
  const CommandResult r = run("--in-file " + shell_quoted(dir_ / "a.gguf") + " --in-file " +
                              shell_quoted(dir_ / "b.gguf") + " -o " + shell_quoted(dir_ / "m.gguf"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto m = read_gguf(dir_ / "m.gguf");
  ASSERT_EQ(m.size(), a.size());
  for (const auto& [name, e] : m) {
    for (size_t i = 0; i < e.sums.size(); ++i)
      EXPECT_NEAR(e.sums[i], a.at(name).sums[i] + b.at(name).sums[i], 1e-6 * e.sums[i]) << name;
    for (size_t i = 0; i < e.counts.size(); ++i) EXPECT_EQ(e.counts[i], a.at(name).counts[i] + b.at(name).counts[i]);
  }
  EXPECT_EQ(latte::convert::ImportanceMatrix::load((dir_ / "m.gguf").string()).chunks(), 3);
}

// --chunk K leaves the text's first K chunks out: the sums are additive over chunks, so chunks
// [0, 3) are chunk 0 plus chunks [1, 3).
TEST_F(ImatrixCli, ChunkStartsLater) {
  LATTE_REQUIRE_SHARED(kMla);
  const auto all = read_gguf(collect(kMla, "all.gguf", 3, "--no-ppl"));
  const auto first = read_gguf(collect(kMla, "first.gguf", 1, "--no-ppl"));
  const auto rest = read_gguf(collect(kMla, "rest.gguf", 2, "--no-ppl --chunk 1"));
  ASSERT_EQ(all.size(), rest.size());
  for (const auto& [name, e] : all) {
    for (size_t i = 0; i < e.sums.size(); ++i)
      EXPECT_NEAR(e.sums[i], first.at(name).sums[i] + rest.at(name).sums[i], 1e-5 * e.sums[i] + 1e-12) << name;
    for (size_t i = 0; i < e.counts.size(); ++i)
      EXPECT_EQ(e.counts[i], first.at(name).counts[i] + rest.at(name).counts[i]);
  }
  EXPECT_EQ(latte::convert::ImportanceMatrix::load((dir_ / "rest.gguf").string()).chunks(), 2);
}

// --save-frequency N keeps OUTPUT.at_<chunks> every N chunks, each the matrix of the chunks so far;
// --output-frequency writes OUTPUT on the way (and it ends as the whole run's).
TEST_F(ImatrixCli, SaveFrequencyKeepsCopies) {
  LATTE_REQUIRE_SHARED(kMla);
  const fs::path out = collect(kMla, "m.gguf", 3, "--no-ppl --output-frequency 1 --save-frequency 2");
  EXPECT_TRUE(fs::exists(dir_ / "m.gguf.at_2"));
  EXPECT_FALSE(fs::exists(dir_ / "m.gguf.at_1"));
  EXPECT_FALSE(fs::exists(dir_ / "m.gguf.at_3"));
  EXPECT_EQ(latte::convert::ImportanceMatrix::load(out.string()).chunks(), 3);
  const auto copy = read_gguf(dir_ / "m.gguf.at_2"), two = read_gguf(collect(kMla, "two.gguf", 2, "--no-ppl"));
  ASSERT_EQ(copy.size(), two.size());
  for (const auto& [name, e] : two) {
    EXPECT_EQ(copy.at(name).counts, e.counts) << name;
    for (size_t i = 0; i < e.sums.size(); ++i) EXPECT_NEAR(copy.at(name).sums[i], e.sums[i], 1e-6 * e.sums[i]) << name;
  }
}

TEST_F(ImatrixCli, ProcessOutputAddsTheHead) {
  LATTE_REQUIRE_SHARED(kStories);
  const auto e = read_gguf(collect(kStories, "a.gguf", 2, "--process-output --no-ppl"));
  ASSERT_TRUE(e.count("output.weight"));
  EXPECT_EQ(e.at("output.weight").counts, std::vector<float>{float(2 * kCtx)});
}

TEST_F(ImatrixCli, BadInputIsOneLine) {
  LATTE_REQUIRE_SHARED(kStories);
  const std::string m = "-m " + shell_quoted(shared(kStories));
  expect_error(m, "-f FILE");
  expect_error("-f " + shell_quoted(story()), "-m MODEL");
  std::ofstream(dir_ / "short.txt") << "Once upon a time, there was a cat.";
  expect_error(m + " -f " + shell_quoted(dir_ / "short.txt") + " -o " + shell_quoted(dir_ / "x.gguf"),
               "needs at least 1024");
  expect_error("--in-file " + shell_quoted(dir_ / "short.txt") + " -o " + shell_quoted(dir_ / "x.gguf"), "short.txt");
  expect_error(m + " -f " + shell_quoted(story()) + " --output-format xyz", "--output-format");
  expect_error(m + " -f " + shell_quoted(story()) + " -c 128 --chunk 1000 -o " + shell_quoted(dir_ / "x.gguf"),
               "--chunk 1000: the text has");
  expect_error(m + " -f " + shell_quoted(story()) + " --output-frequency 0", "--output-frequency");
  EXPECT_FALSE(fs::exists(dir_ / "x.gguf"));
}

}  // namespace test_imatrix_cli
