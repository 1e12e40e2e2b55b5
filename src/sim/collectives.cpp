// Alpha-beta collective costs; the formulas and their sources are in collectives.h.
#include "sim/collectives.h"

#include <algorithm>
#include <numeric>

#include "comm/ring_threshold.h"

namespace sparq::sim {

int ceil_log2(std::int64_t p) {
  int rounds = 0;
  while ((std::int64_t{1} << rounds) < p) ++rounds;
  return rounds;
}

double ring_allreduce_s(double n, int p, const Link& link) {
  if (p <= 1) return 0;
  return 2.0 * (p - 1) * link.alpha_s + 2.0 * (p - 1) / p * n * link.beta_s_per_byte;
}

namespace {
// The largest power of two <= p, and the cost of folding the other ranks in and out whole
// (collectives.h): one exchange of the whole vector before, one after.
int lower_power_of_two(int p) { return 1 << (ceil_log2(p) - ((p & (p - 1)) != 0 ? 1 : 0)); }
double fold_s(double n, int p, const Link& link) {
  return lower_power_of_two(p) == p ? 0.0 : 2.0 * (link.alpha_s + n * link.beta_s_per_byte);
}
}  // namespace

double recursive_doubling_allreduce_s(double n, int p, const Link& link) {
  if (p <= 1) return 0;
  const int q = lower_power_of_two(p);
  return ceil_log2(q) * (link.alpha_s + n * link.beta_s_per_byte) + fold_s(n, p, link);
}

double rabenseifner_allreduce_s(double n, int p, const Link& link) {
  if (p <= 1) return 0;
  const int q = lower_power_of_two(p);
  return 2.0 * ceil_log2(q) * link.alpha_s + 2.0 * (q - 1) / q * n * link.beta_s_per_byte +
         fold_s(n, p, link);
}

double tree_allreduce_s(double n, int p, const Link& link) {
  if (p <= 1) return 0;
  return 2.0 * ceil_log2(p) * (link.alpha_s + n * link.beta_s_per_byte);
}

double best_allreduce_s(double n, int p, const Link& link) {
  return std::min({ring_allreduce_s(n, p, link), recursive_doubling_allreduce_s(n, p, link),
                   rabenseifner_allreduce_s(n, p, link), tree_allreduce_s(n, p, link)});
}

double auto_allreduce_s(double n, int p, const Link& link) {
  return n >= static_cast<double>(comm::auto_ring_threshold_bytes(p))
             ? ring_allreduce_s(n, p, link)
             : best_allreduce_s(n, p, link);
}

double ring_allgatherv_s(const std::vector<double>& sizes, const Link& link) {
  const int p = static_cast<int>(sizes.size());
  if (p <= 1) return 0;
  // Every step of the ring forwards the largest block on some link, and a step ends when its
  // largest transfer does (the old (total - smallest) beta undercut that: review).
  const double largest = *std::max_element(sizes.begin(), sizes.end());
  return (p - 1) * (link.alpha_s + largest * link.beta_s_per_byte);
}

double ring_allgather_s(double m, int p, const Link& link) {
  if (p <= 1) return 0;
  return (p - 1) * (link.alpha_s + m * link.beta_s_per_byte);
}

double pairwise_alltoall_s(double block, int p, const Link& link) {
  if (p <= 1) return 0;
  return (p - 1) * (link.alpha_s + block * link.beta_s_per_byte);
}

double binomial_broadcast_s(double n, int p, const Link& link) {
  if (p <= 1) return 0;
  return ceil_log2(p) * (link.alpha_s + n * link.beta_s_per_byte);
}

double scatter_allgather_broadcast_s(const std::string& algorithm, double n, int p,
                                     const Link& link) {
  if (p <= 1) return 0;
  const double scatter = ceil_log2(p) * link.alpha_s + (p - 1.0) / p * n * link.beta_s_per_byte;
  return scatter + allgather_s(algorithm == "ring" ? "ring" : "best", n / p, p, link);
}

double broadcast_s(const std::string& algorithm, double n, int p, const Link& link) {
  return std::min(binomial_broadcast_s(n, p, link),
                  scatter_allgather_broadcast_s(algorithm, n, p, link));
}

double recursive_doubling_allgather_s(double m, int p, const Link& link) {
  if (p <= 1) return 0;
  return ceil_log2(p) * link.alpha_s + (p - 1) * m * link.beta_s_per_byte;
}

double bruck_alltoall_s(double block, int p, const Link& link) {
  if (p <= 1) return 0;
  const int rounds = ceil_log2(p);
  return rounds * link.alpha_s + rounds * (p * block / 2.0) * link.beta_s_per_byte;
}

double allgather_s(const std::string& algorithm, double m, int p, const Link& link) {
  const double ring = ring_allgather_s(m, p, link);
  return algorithm == "best" ? std::min(ring, recursive_doubling_allgather_s(m, p, link)) : ring;
}

double alltoall_s(const std::string& algorithm, double block, int p, const Link& link) {
  const double pairwise = pairwise_alltoall_s(block, p, link);
  return algorithm == "best" ? std::min(pairwise, bruck_alltoall_s(block, p, link)) : pairwise;
}

double two_phase_s(double region_message, double region_result, int p, const Link& link,
                   const std::string& algorithm) {
  return pairwise_alltoall_s(region_message, p, link) +
         allgather_s(algorithm, region_result, p, link);
}

double gtopk_tree_s(double message, double index_set, double k, int p, const Link& link,
                    const std::string& algorithm) {
  if (p <= 1) return 0;
  return ceil_log2(p) * (link.alpha_s + message * link.beta_s_per_byte) +
         broadcast_s(algorithm, index_set, p, link) + allreduce_s(algorithm, 4.0 * k, p, link);
}

Result<std::string> parse_algorithm(const std::string& name, const std::string& flag) {
  if (name == "ring" || name == "best") return name;
  return Status::error("{}: unknown algorithm '{}' (ring, best)", flag, name);
}

std::string config_allreduce_algorithm(const std::string& comm_allreduce) {
  if (comm_allreduce == "ring") return "ring";
  if (comm_allreduce == "mpi") return "best";
  return "auto";  // the config's default, "auto"
}

double allreduce_s(const std::string& algorithm, double n, int p, const Link& link) {
  if (algorithm == "best") return best_allreduce_s(n, p, link);
  if (algorithm == "auto") return auto_allreduce_s(n, p, link);
  return ring_allreduce_s(n, p, link);
}

}  // namespace sparq::sim
