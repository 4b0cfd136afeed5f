#include "src/cli/flags/sampling_flags.h"

#include "src/cli/flags/flag_checks.h"

#include <random>

#include "src/parallel/job.h"

namespace latte {

void add_sampling_flags(CLI::App& app, SamplingParams& params) {
  const char* group = "Sampling";
  app.add_option("--temp", params.temp, "temperature; 0 = greedy")
      ->capture_default_str()
      ->check(cli::real())
      ->group(group);
  app.add_option("--top-k", params.top_k, "keep only the k most likely tokens; 0 = off")
      ->capture_default_str()
      ->check(cli::integer())
      ->group(group);
  app.add_option("--top-p", params.top_p, "keep the most likely tokens up to this probability mass; 1 = off")
      ->capture_default_str()
      ->check(cli::real())
      ->group(group);
  app.add_option("--min-p", params.min_p, "drop tokens less likely than min-p x the most likely; 0 = off")
      ->capture_default_str()
      ->check(cli::real())
      ->group(group);
  app.add_option("--repeat-penalty", params.repeat_penalty,
                 "penalize tokens seen in the last --repeat-last-n tokens; 1 = off")
      ->capture_default_str()
      ->check(cli::real())
      ->group(group);
  app.add_option("--repeat-last-n", params.repeat_last_n, "tokens the repeat penalty looks back at; 0 = off, -1 = all")
      ->capture_default_str()
      ->check(cli::integer())
      ->group(group);
  app.add_option("-s,--seed", params.seed, "random seed; -1 = a random one (the summary shows the one used)")
      ->capture_default_str()
      ->check(cli::integer())
      ->group(group);
}

void share_seed_across_ranks(SamplingParams& params) {
  Job& job = Job::get();
  if (job.alone() || params.seed >= 0) return;
  params.seed = static_cast<int64_t>(job.from_rank0(std::random_device{}()));  // 32 bits, as Sampler draws
}

}  // namespace latte
