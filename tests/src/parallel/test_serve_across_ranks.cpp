// `mpirun -np 2 latte serve` (docs/scale-out.md): data-parallel attention behind one HTTP server.
// Rank 0 takes the requests and gives each to the rank with a free slot and the fewest active
// tokens; each rank evaluates its own slots' tokens with its own caches, and the MoE layers take
// every rank's. With --deterministic, four requests at once to two ranks of two slots must get the
// replies one process with four slots gives, token for token; both ranks' slots must have served
// (/slots lists all four, each having held a prompt), /metrics must count the four requests, and
// SIGTERM to rank 0 must drain the server and end the job cleanly. Built with MPI only
// (LATTE_MPIRUN).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "tests/src/server/server_process.h"

namespace test_serve_across_ranks {

using latte::testing::http_get;
using latte::testing::http_post;
using latte::testing::ServerProcess;

// The process of rank `rank` among the children of mpirun `launcher` (-1: none).
pid_t rank_pid(pid_t launcher, int rank) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string pid, comm, state;
    pid_t parent = 0;
    stat >> pid >> comm >> state >> parent;
    if (parent != launcher) continue;
    std::ifstream environ(entry.path() / "environ");
    const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
    for (std::string var; std::getline(environ, var, '\0');)
      if (var == want) return static_cast<pid_t>(std::stoi(name));
  }
  return -1;
}

// Four completions posted at once; their texts in request order.
std::vector<std::string> four_replies(const ServerProcess& server) {
  const char* prompts[] = {"Once upon a time", "The little dog", "Tom and Lily went to the park",
                           "One day, a big bird"};
  std::vector<std::future<std::string>> replies;
  for (const char* prompt : prompts)
    replies.push_back(std::async(std::launch::async, [&server, prompt] {
      httplib::Client c = server.client(120);
      const nlohmann::json body = {{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true}};
      const latte::testing::HttpReply r = http_post(c, "/v1/completions", body.dump());
      EXPECT_EQ(r.status, 200) << r.body;
      const nlohmann::json j = r.json();
      return j.contains("choices") ? j["choices"][0].value("text", "") : "(no reply: " + r.body + ")";
    }));
  std::vector<std::string> out;
  for (auto& r : replies) out.push_back(r.get());
  return out;
}

TEST(ServeAcrossRanks, TwoRanksReplyAsOneProcessDoes) {
  if (std::string(LATTE_MPIRUN).empty()) GTEST_SKIP() << "a build without MPI";
  ::setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
  ::setenv("OMP_WAIT_POLICY", "passive", 1);
  const std::vector<std::string> flags = {"-t", "1", "--deterministic"};

  std::vector<std::string> alone_flags = flags;
  alone_flags.insert(alone_flags.end(), {"-c", "1024", "--parallel", "4"});  // 256 tokens a slot
  std::vector<std::string> want;
  {
    ServerProcess alone(alone_flags);
    ASSERT_GT(alone.port(), 0) << alone.error();
    want = four_replies(alone);
  }
  for (const std::string& w : want) ASSERT_FALSE(w.empty());

  std::vector<std::string> ranked_flags = flags;
  ranked_flags.insert(ranked_flags.end(), {"-c", "512", "--parallel", "2"});  // on each rank
  ServerProcess ranks(ranked_flags, {LATTE_MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "2"});
  ASSERT_GT(ranks.port(), 0) << ranks.error();
  EXPECT_EQ(four_replies(ranks), want);

  httplib::Client c = ranks.client();
  const nlohmann::json slots = http_get(c, "/slots").json();
  ASSERT_TRUE(slots.is_array()) << slots.dump();
  ASSERT_EQ(slots.size(), 4u) << slots.dump();
  for (const nlohmann::json& s : slots) EXPECT_GT(s.value("n_past", 0), 0) << "a slot that served nothing: " << s;
  const std::string metrics = http_get(c, "/metrics").body;
  EXPECT_EQ(latte::testing::metric_value(metrics, "latte_requests_total"), 4) << metrics;
  EXPECT_EQ(latte::testing::metric_value(metrics, "latte_requests_processing"), 0) << metrics;

  // mpirun ends its job at once on a signal of its own; rank 0's process drains the server.
  const pid_t rank0 = rank_pid(ranks.pid(), 0);
  ASSERT_GT(rank0, 0);
  ::kill(rank0, SIGTERM);
  EXPECT_EQ(ranks.wait_exit(std::chrono::seconds(30)), 0) << "mpirun's exit after SIGTERM to rank 0";
}

}  // namespace test_serve_across_ranks
