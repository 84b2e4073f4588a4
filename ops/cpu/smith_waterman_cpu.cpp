// CPU backend: items spread over threads with at::parallel_for. float32 batches go through the
// SIMD sweep (lanes.h: W items per group, in lockstep); the rest, each item's DP swept in
// row-major order by sweep.h.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "../kernels.h"
#include "lanes.h"

namespace softalign {
namespace cpu {

#if defined(SOFTALIGN_LANES_AVX2)
const LanesKernels* lanes_kernels_avx2();
#endif

const LanesKernels* lanes_kernels() {
  static const LanesKernels* const kernels = []() -> const LanesKernels* {
    const char* off = std::getenv("SOFTALIGN_CPU_LANES");  // "0": the per-item sweep only
    if (off && std::strcmp(off, "0") == 0) return nullptr;
#if defined(SOFTALIGN_LANES_AVX2)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      return lanes_kernels_avx2();
    }
#endif
    return nullptr;
  }();
  return kernels;
}

}  // namespace cpu

namespace {

// Batches of fewer items than a group's lanes: each item of at least two bands of rows and
// kBandMinColumns columns is swept in bands (sweep_band.h), by every thread when there are fewer
// such items than threads; the rest in groups of items (sweep_lanes.h). Larger batches fill the
// groups, whose backward keeps every DP value instead of recomputing bands, and is faster.
// The choice depends on the batch's size, never on the threads (docs/spec.md, "Dtypes and
// devices").
constexpr int kBandMinColumns = 64;
bool bands_allowed(const ProblemView<float>& v, int64_t batch, const cpu::LanesKernels& k) {
  static const bool off = [] {
    const char* e = std::getenv("SOFTALIGN_CPU_BANDS");  // "0": groups of items only
    return e && std::strcmp(e, "0") == 0;
  }();
  // A penalty that varies along j but not i: its rows' gradients would meet in one entry from
  // bands on different threads.
  const bool rows_share = (v.open_si == 0 && v.open_sj != 0) ||
                          (v.extend && v.extend_si == 0 && v.extend_sj != 0);
  return !off && !rows_share && batch < k.width;
}

// The items of a float32 call split between the two SIMD schedules.
struct LanesPlan {
  std::vector<int64_t> banded;  // items swept in bands
  std::vector<int64_t> groups;  // the rest, in groups of `width` lanes, -1 filling the last group
};

// Items of similar lengths share a group (sorted by block, largest first), so a group sweeps
// little outside its blocks.
LanesPlan plan_lanes(const ProblemView<float>& v, int64_t batch, const cpu::LanesKernels& k) {
  LanesPlan plan;
  const bool bands = bands_allowed(v, batch, k);
  for (int64_t b = 0; b < batch; ++b) {
    const bool banded = bands && v.m_of(b) >= 2 * k.band_rows && v.n_of(b) >= kBandMinColumns;
    (banded ? plan.banded : plan.groups).push_back(b);
  }
  if (v.lengths_a || v.lengths_b) {
    auto block = [&](int64_t b) { return std::make_pair(v.m_of(b), v.n_of(b)); };
    std::stable_sort(plan.groups.begin(), plan.groups.end(),
                     [&](int64_t x, int64_t y) { return block(x) > block(y); });
  }
  const size_t padded = (plan.groups.size() + k.width - 1) / k.width * k.width;
  plan.groups.resize(padded, -1);
  return plan;
}

// Runs `sweeps(b, job, on_threads)` for each banded item: whole items a thread when they are at
// least as many as the threads, else one item after the other with every thread on its bands.
// `on_threads(f)` runs f on every thread of the item (f takes bands until none is left).
template <typename Sweeps>
void run_banded(const ProblemView<float>& v, bool affine, const std::vector<int64_t>& items,
                const cpu::LanesKernels& k, Sweeps sweeps) {
  const int64_t count = int64_t(items.size());
  if (count == 0) return;
  auto make = [&](int64_t b) { return std::unique_ptr<cpu::BandJob>(k.band_job(v, affine, b)); };
  if (count >= at::get_num_threads()) {
    at::parallel_for(0, count, 1, [&](int64_t begin, int64_t end) {
      for (int64_t q = begin; q < end; ++q) {
        auto job = make(items[q]);
        sweeps(items[q], *job, [](auto&& f) { f(); });
      }
    });
    return;
  }
  auto on_threads = [](auto&& f) {
    at::parallel_for(0, at::get_num_threads(), 1, [&](int64_t begin, int64_t end) {
      for (int64_t q = begin; q < end; ++q) f();
    });
  };
  for (int64_t b : items) {
    auto job = make(b);
    sweeps(b, *job, on_threads);
  }
}

// The SIMD sweep takes every float32 call where the CPU has the ISA, a batch of one included:
// an item's bits must not depend on the batch around it (the lanes' exp/log are not libm's).
template <typename T>
bool lanes_apply(const Problem& p) {
  return std::is_same_v<T, float> && p.batch() >= 1 && cpu::lanes_kernels() != nullptr;
}

void forward_lanes(const Problem& p, at::Tensor& score) {
  const cpu::LanesKernels* k = cpu::lanes_kernels();
  const ProblemView<float> v = view_of<float>(p);
  const LanesPlan plan = plan_lanes(v, p.batch(), *k);
  float* out = score.data_ptr<float>();
  const bool affine = p.affine();
  at::parallel_for(0, int64_t(plan.groups.size()) / k->width, 1, [&](int64_t begin, int64_t end) {
    for (int64_t gi = begin; gi < end; ++gi) k->forward(v, affine, &plan.groups[gi * k->width], out);
  });
  run_banded(v, affine, plan.banded, *k, [&](int64_t b, cpu::BandJob& job, auto&& on_threads) {
    on_threads([&] { job.forward(); });
    out[b] = job.score();
  });
}

void forward_backward_lanes(const Problem& p, const at::Tensor& grad, ProblemGrads& out) {
  const cpu::LanesKernels* k = cpu::lanes_kernels();
  const ProblemView<float> v = view_of<float>(p);
  const GradsView<float> gv = view_of<float>(out);
  const LanesPlan plan = plan_lanes(v, p.batch(), *k);
  const float* grad_of = grad.data_ptr<float>();
  float* score = out.score.data_ptr<float>();
  const bool affine = p.affine();
  at::parallel_for(0, int64_t(plan.groups.size()) / k->width, 1, [&](int64_t begin, int64_t end) {
    for (int64_t gi = begin; gi < end; ++gi)
      k->forward_backward(v, affine, &plan.groups[gi * k->width], grad_of, score, gv);
  });
  run_banded(v, affine, plan.banded, *k, [&](int64_t b, cpu::BandJob& job, auto&& on_threads) {
    on_threads([&] { job.forward(); });
    score[b] = job.score();
    on_threads([&] { job.backward(grad_of[b], gv); });
    job.finish_backward(gv);
  });
}

template <typename T, bool kAffine>
void forward_items(const Problem& p, at::Tensor& score) {
  if (lanes_apply<T>(p)) return forward_lanes(p, score);
  using Model = dp::Model<T, kAffine>;
  const ProblemView<T> v = view_of<T>(p);
  T* out = score.data_ptr<T>();
  at::parallel_for(0, p.batch(), 1, [&](int64_t begin, int64_t end) {
    std::vector<T> rows;  // two rows per state: a forward without grad keeps O(N)
    for (int64_t b = begin; b < end; ++b) {
      const dp::Item<T> it = v.item(b);
      rows.resize(Model::Tab::size(2, it.n + 1));
      const typename Model::Tab table{rows.data(), 2, it.n + 1};
      dp::LocalEnd<T> local_end;
      out[b] = Model::forward(it, v.config, table, local_end);
    }
  });
}

template <typename T, bool kAffine>
void forward_backward_items(const Problem& p, const at::Tensor& grad, ProblemGrads& out) {
  if (lanes_apply<T>(p)) return forward_backward_lanes(p, grad, out);
  using Model = dp::Model<T, kAffine>;
  const ProblemView<T> v = view_of<T>(p);
  const GradsView<T> gv = view_of<T>(out);
  const T* grad_of = grad.data_ptr<T>();
  T* score = out.score.data_ptr<T>();
  at::parallel_for(0, p.batch(), 1, [&](int64_t begin, int64_t end) {
    std::vector<T> values, adjoint;  // all DP values of one item; two rows of adjoints
    for (int64_t b = begin; b < end; ++b) {
      const dp::Item<T> it = v.item(b);
      values.resize(Model::Tab::size(it.m + 1, it.n + 1));
      adjoint.resize(Model::Tab::size(2, it.n + 1));
      const typename Model::Tab V{values.data(), it.m + 1, it.n + 1};
      const typename Model::Tab E{adjoint.data(), 2, it.n + 1};
      dp::LocalEnd<T> local_end;
      score[b] = Model::forward(it, v.config, V, local_end);
      Model::backward(it, v.config, V, local_end, grad_of[b], E, gv.item(b));
    }
  });
}

struct CpuBackend {
  static at::Tensor forward(const Problem& p) {
    at::Tensor score = at::empty({p.batch()}, p.scores.options());
    AT_DISPATCH_FLOATING_TYPES(p.scores.scalar_type(), "smith_waterman_cpu", [&] {
      if (p.affine()) {
        forward_items<scalar_t, true>(p, score);
      } else {
        forward_items<scalar_t, false>(p, score);
      }
    });
    return score;
  }

  // The sweeps add into d scores (and leave the cells outside an item's lengths alone).
  static bool writes_every_cell(const Problem&) { return false; }

  static void forward_backward(const Problem& p, const at::Tensor& grad, ProblemGrads& out) {
    AT_DISPATCH_FLOATING_TYPES(p.scores.scalar_type(), "smith_waterman_backward_cpu", [&] {
      if (p.affine()) {
        forward_backward_items<scalar_t, true>(p, grad, out);
      } else {
        forward_backward_items<scalar_t, false>(p, grad, out);
      }
    });
  }
};

}  // namespace

SOFTALIGN_LIBRARY_IMPL(CPU, m) {
  SOFTALIGN_REGISTER_BACKEND(m, CpuBackend);
}

}  // namespace softalign
