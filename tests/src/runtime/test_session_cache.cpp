// The cache behind `latte chat`: saving and loading it (exact, sized as the latent rows plus a
// small header, refused for the wrong model, cache type or tokens), and dropping tokens from the
// middle with a position shift, checked against recomputing the kept tokens at their new
// positions.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "ggml-like/core/error.h"
#include "ggml-like/gguf/gguf.h"
#include "src/cli/default_model.h"
#include "src/runtime/cache_io.h"
#include "src/runtime/cache_shift.h"
#include "src/runtime/session.h"
#include "tests/support/logit_metrics.h"
#include "tests/support/test_support.h"

namespace test_session_cache {

namespace fs = std::filesystem;
namespace lt = latte::testing;
using latte::Session;

// A directory for this process's files, removed at exit.
struct TempDir {
  fs::path path = fs::temp_directory_path() / ("latte-chat-cache-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};
fs::path temp_dir() {
  static const TempDir dir;
  return dir.path;
}

std::vector<int32_t> slice(const std::vector<int32_t>& v, size_t begin, size_t end) {
  return {v.begin() + static_cast<std::ptrdiff_t>(begin), v.begin() + static_cast<std::ptrdiff_t>(end)};
}
std::vector<int32_t> join(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  std::vector<int32_t> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

// A copy of a model keeping only its first layer: there, a cached row depends only on its token
// and position, so a shifted cache must equal a recomputed one.
fs::path first_layer_only(const fs::path& src) {
  const fs::path dst = temp_dir() / ("1layer-" + src.filename().string());
  if (fs::exists(dst)) return dst;
  const ggl::GgufFile in(src.string());
  ggl::GgufWriter w(static_cast<uint32_t>(in.alignment()));
  const std::string arch = in.metadata().get<std::string>("general.architecture");
  for (const auto& [key, value] : in.metadata().entries()) {
    ggl::Value v = value;
    if (key == arch + ".block_count")
      std::visit(
          [](auto& x) {
            if constexpr (std::is_integral_v<std::decay_t<decltype(x)>>) x = 1;
          },
          v.data);
    w.metadata().set(key, v);
  }
  for (const ggl::TensorInfo& t : in.tensors()) {
    if (t.name.starts_with("blk.") && !t.name.starts_with("blk.0.")) continue;
    w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data);
  }
  w.write(dst.string());
  return dst;
}

fs::path story_model() { return latte::cli::default_model_path(); }
std::vector<int32_t> story_tokens() {
  return lt::read_token_file(lt::shared_dir() / "models/tiny-mla-stories.tokens.txt");
}

// Evaluates prefix + dropped + kept, removes `dropped` from the cache, evaluates `next`: the
// logits after `next`, and those of a fresh session fed prefix + kept + next.
struct ShiftResult {
  std::vector<float> shifted, recomputed;
  int64_t n_past_after_shift = 0;
};
ShiftResult shift_against_recompute(const latte::Model& model, const std::vector<int32_t>& tokens, size_t prefix,
                                    size_t dropped, size_t kept, ggl::Type cache = ggl::Type::F32) {
  const latte::SessionOptions o{.n_ctx = 256, .cache_type = cache, .n_threads = 1};
  const std::vector<int32_t> p = slice(tokens, 0, prefix), d = slice(tokens, prefix, prefix + dropped),
                             k = slice(tokens, prefix + dropped, prefix + dropped + kept);
  const int32_t next = tokens[prefix + dropped + kept];
  ShiftResult r;
  Session a(model, o);
  a.eval(join(join(p, d), k));
  latte::remove_cached_tokens(a, static_cast<int64_t>(prefix), static_cast<int64_t>(prefix + dropped));
  r.n_past_after_shift = a.n_past();
  r.shifted = a.eval({&next, 1}, latte::Logits::kLast);
  Session b(model, o);
  b.eval(join(p, k));
  r.recomputed = b.eval({&next, 1}, latte::Logits::kLast);
  return r;
}

TEST(CacheShift, SingleLayerMlaEqualsRecomputation) {
  LATTE_REQUIRE_SHARED("models/tiny-mla-stories.tokens.txt");
  const latte::Model model(first_layer_only(story_model()).string());
  ASSERT_EQ(model.hparams().n_layer, 1);
  const ShiftResult r = shift_against_recompute(model, story_tokens(), 5, 40, 30);
  EXPECT_EQ(r.n_past_after_shift, 35);
  const auto m = lt::compare_logits(r.recomputed, r.shifted, static_cast<size_t>(model.hparams().n_vocab));
  EXPECT_LE(m.nrmse, 1e-6);
  EXPECT_EQ(m.top1, 1.0);
}

TEST(CacheShift, SingleLayerMlaWithYarnEqualsRecomputation) {
  // YaRN with an original context of 64: positions past it use the blended frequencies.
  LATTE_REQUIRE_SHARED("fixtures/ds2-v2-tiny-f32.gguf");
  const latte::Model model(first_layer_only(lt::shared_dir() / "fixtures/ds2-v2-tiny-f32.gguf").string());
  const std::vector<int32_t> tokens = lt::read_token_file(lt::shared_dir() / "fixtures/ds2-v2-tiny-f32.tokens.txt");
  const ShiftResult r = shift_against_recompute(model, tokens, 3, 50, 40);
  const auto m = lt::compare_logits(r.recomputed, r.shifted, static_cast<size_t>(model.hparams().n_vocab));
  EXPECT_LE(m.nrmse, 1e-6);
  EXPECT_EQ(m.top1, 1.0);
}

TEST(CacheShift, SingleLayerLlamaEqualsRecomputation) {
  LATTE_REQUIRE_SHARED("fixtures/llama-gqa-tiny-f32.gguf");
  const latte::Model model(first_layer_only(lt::shared_dir() / "fixtures/llama-gqa-tiny-f32.gguf").string());
  const std::vector<int32_t> tokens = lt::read_token_file(lt::shared_dir() / "fixtures/llama-gqa-tiny-f32.tokens.txt");
  const ShiftResult r = shift_against_recompute(model, tokens, 4, 33, 45);
  const auto m = lt::compare_logits(r.recomputed, r.shifted, static_cast<size_t>(model.hparams().n_vocab));
  EXPECT_LE(m.nrmse, 1e-6);
  EXPECT_EQ(m.top1, 1.0);
}

TEST(CacheShift, WithoutTheRotationTheResultWouldDiffer) {
  // Guards the test above against passing vacuously: recomputing the kept tokens at their OLD
  // positions (a plain row move) gives visibly different logits.
  LATTE_REQUIRE_SHARED("models/tiny-mla-stories.tokens.txt");
  const latte::Model model(first_layer_only(story_model()).string());
  const std::vector<int32_t> t = story_tokens();
  const latte::SessionOptions o{.n_ctx = 256, .cache_type = ggl::Type::F32, .n_threads = 1};
  const ShiftResult r = shift_against_recompute(model, t, 5, 40, 30);
  // Same tokens, but the kept ones evaluated 40 positions later (as if rows had only been moved).
  Session c(model, o);
  std::vector<int32_t> padded = slice(t, 0, 75);
  c.eval(padded);
  const int32_t next = t[75];
  const std::vector<float> unrotated = c.eval({&next, 1}, latte::Logits::kLast);
  const auto m = lt::compare_logits(r.recomputed, unrotated, static_cast<size_t>(model.hparams().n_vocab));
  EXPECT_GT(m.nrmse, 1e-3);
}

TEST(CacheShift, DeepModelLayerZeroRowsMatchAndTheRestIsApproximate) {
  LATTE_REQUIRE_SHARED("models/tiny-mla-stories.tokens.txt");
  const latte::Model model(story_model().string());
  const std::vector<int32_t> t = story_tokens();
  const latte::SessionOptions o{.n_ctx = 256, .cache_type = ggl::Type::F32, .n_threads = 1};
  Session a(model, o), b(model, o);
  a.eval(slice(t, 0, 80));
  latte::remove_cached_tokens(a, 5, 45);
  b.eval(join(slice(t, 0, 5), slice(t, 45, 80)));
  ASSERT_EQ(a.n_past(), b.n_past());
  // Layer 0: every value of every row equals the recomputation.
  const size_t width = static_cast<size_t>(a.cache().layout().width[0]);
  const auto* ra = reinterpret_cast<const float*>(a.cache().data(0, 0));
  const auto* rb = reinterpret_cast<const float*>(b.cache().data(0, 0));
  float worst = 0;
  for (size_t i = 0; i < width * static_cast<size_t>(a.n_past()); ++i) worst = std::max(worst, std::abs(ra[i] - rb[i]));
  EXPECT_LE(worst, 1e-5);
  // Deeper layers remember the dropped tokens: the next-token distribution is close, not equal.
  const int32_t next = t[80];
  const auto m = lt::compare_logits(b.eval({&next, 1}, latte::Logits::kLast), a.eval({&next, 1}, latte::Logits::kLast),
                                    static_cast<size_t>(model.hparams().n_vocab));
  std::printf("5-layer story model, 40 of 80 tokens dropped: shifted vs recomputed logits nrmse %.4f, KL %.5f\n",
              m.nrmse, m.max_kl);
  EXPECT_GT(m.nrmse, 0.0);
}

TEST(CacheShift, Q8CacheIsRequantizedCloseToRecomputation) {
  LATTE_REQUIRE_SHARED("models/tiny-mla-stories.tokens.txt");
  const latte::Model model(first_layer_only(story_model()).string());
  const ShiftResult r = shift_against_recompute(model, story_tokens(), 5, 40, 30, ggl::Type::Q8_0);
  const auto m = lt::compare_logits(r.recomputed, r.shifted, static_cast<size_t>(model.hparams().n_vocab));
  EXPECT_LE(m.nrmse, 1e-3);  // one more rounding of the rotated blocks
  EXPECT_LE(m.max_kl, 1e-3);
}

TEST(CacheShift, EdgesAndErrors) {
  const latte::Model model(story_model().string());
  Session s(model, {.n_ctx = 64, .cache_type = ggl::Type::F32, .n_threads = 1});
  const std::vector<int32_t> t = {1, 403, 407, 261, 378, 1, 403};
  s.eval(t);
  latte::remove_cached_tokens(s, 3, 3);  // nothing
  EXPECT_EQ(s.n_past(), 7);
  latte::remove_cached_tokens(s, 5, 7);  // at the end: a plain truncation
  EXPECT_EQ(s.n_past(), 5);
  EXPECT_THROW(latte::remove_cached_tokens(s, 4, 6), ggl::Error);
  EXPECT_THROW(latte::remove_cached_tokens(s, 3, 2), ggl::Error);
  EXPECT_THROW(latte::remove_cached_tokens(s, -1, 2), ggl::Error);
  EXPECT_EQ(s.n_past(), 5);
}

// --- save / load ---

bool rows_equal(const Session& a, const Session& b, int64_t n) {
  for (int64_t il = 0; il < a.cache().n_layer(); ++il)
    for (int s = 0; s < a.cache().layout().streams; ++s)
      if (std::memcmp(a.cache().data(il, s), b.cache().data(il, s), a.cache().row_bytes(s) * static_cast<size_t>(n)))
        return false;
  return true;
}

void check_round_trip(const latte::Model& model, const std::vector<int32_t>& tokens, ggl::Type type, size_t n) {
  const latte::SessionOptions o{.n_ctx = 128, .cache_type = type, .n_threads = 1};
  Session a(model, o), b(model, o);
  const std::vector<int32_t> held = slice(tokens, 0, n);
  a.eval(held);
  const std::string path = (temp_dir() / "round-trip.cache").string();
  const size_t bytes = latte::save_cache(a, held, path);
  // The file is the rows of the n tokens (the latent for MLA) plus the header, nothing else.
  EXPECT_EQ(bytes, latte::kCacheFileHeaderBytes + n * latte::cache_bytes_per_token(model.hparams(), type));
  EXPECT_EQ(fs::file_size(path), bytes);
  EXPECT_EQ(latte::load_cache(b, held, path), bytes);
  EXPECT_EQ(b.n_past(), static_cast<int64_t>(n));
  EXPECT_TRUE(rows_equal(a, b, static_cast<int64_t>(n)));
  // Exact: the next logits are bit-identical.
  const int32_t next = tokens[n];
  EXPECT_EQ(a.eval({&next, 1}, latte::Logits::kLast), b.eval({&next, 1}, latte::Logits::kLast));
}

TEST(CacheFile, RoundTripIsExactAndSizedAsTheLatentRows) {
  LATTE_REQUIRE_SHARED("models/tiny-mla-stories.tokens.txt");
  const latte::Model model(story_model().string());
  for (ggl::Type t : {ggl::Type::F16, ggl::Type::F32, ggl::Type::Q8_0}) {
    SCOPED_TRACE(ggl::type_name(t));
    check_round_trip(model, story_tokens(), t, 60);
  }
  // MLA: 5 layers x (512 latent + 64 rope) f16 values per token.
  EXPECT_EQ(latte::cache_bytes_per_token(model.hparams(), ggl::Type::F16), 5u * 576u * 2u);
}

TEST(CacheFile, RoundTripLlamaKeysAndValues) {
  LATTE_REQUIRE_SHARED("fixtures/llama-gqa-tiny-f32.gguf");
  const latte::Model model((lt::shared_dir() / "fixtures/llama-gqa-tiny-f32.gguf").string());
  check_round_trip(model, lt::read_token_file(lt::shared_dir() / "fixtures/llama-gqa-tiny-f32.tokens.txt"),
                   ggl::Type::F16, 50);
}

std::string load_error(Session& s, const std::vector<int32_t>& tokens, const std::string& path) {
  const int64_t before = s.n_past();
  try {
    latte::load_cache(s, tokens, path);
  } catch (const ggl::Error& e) {
    EXPECT_EQ(s.n_past(), before) << "a refused load changed the session";
    return e.what();
  }
  return "no error";
}

TEST(CacheFile, RefusesTheWrongModelTypeTokensOrADamagedFile) {
  LATTE_REQUIRE_SHARED("models/stories260K.gguf");
  const latte::Model model(story_model().string());
  const std::vector<int32_t> t = {1, 403, 407, 261, 378, 1, 403, 407};
  Session a(model, {.n_ctx = 64, .n_threads = 1});
  a.eval(t);
  const std::string path = (temp_dir() / "refuse.cache").string();
  latte::save_cache(a, t, path);

  Session q8(model, {.n_ctx = 64, .cache_type = ggl::Type::Q8_0, .n_threads = 1});
  EXPECT_NE(load_error(q8, t, path).find("--cache-type"), std::string::npos) << load_error(q8, t, path);
  Session ok(model, {.n_ctx = 64, .n_threads = 1});
  std::vector<int32_t> other = t;
  other[3] = 300;
  EXPECT_NE(load_error(ok, other, path).find("other token ids"), std::string::npos);
  EXPECT_NE(load_error(ok, slice(t, 0, 7), path).find("holds 8 tokens"), std::string::npos);
  const latte::Model llama((lt::shared_dir() / "models/stories260K.gguf").string());
  Session l(llama, {.n_ctx = 64, .n_threads = 1});
  EXPECT_NE(load_error(l, t, path).find("another model"), std::string::npos);
  Session small(model, {.n_ctx = 4, .n_threads = 1});
  EXPECT_NE(load_error(small, t, path).find("more than the context"), std::string::npos);

  const std::string cut = (temp_dir() / "cut.cache").string();
  fs::copy_file(path, cut, fs::copy_options::overwrite_existing);
  fs::resize_file(cut, fs::file_size(path) - 10);
  EXPECT_NE(load_error(ok, t, cut).find("truncated"), std::string::npos);
  const std::string junk = (temp_dir() / "junk.cache").string();
  std::ofstream(junk) << std::string(200, 'x');
  EXPECT_NE(load_error(ok, t, junk).find("not a latte cache"), std::string::npos);
  EXPECT_NE(load_error(ok, t, (temp_dir() / "missing.cache").string()).find("cannot open"), std::string::npos);
  EXPECT_THROW(latte::save_cache(a, t, "/nonexistent-dir/x.cache"), ggl::Error);
  EXPECT_EQ(ok.n_past(), 0);
}

}  // namespace test_session_cache
