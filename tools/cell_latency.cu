// The latency of the DP's dependence chain on the GPU: one warp alone on the chip runs a chain
// of cells (stripes::cell, the cell of the CUDA sweeps), each waiting for the results of the step
// before (see chain). Printed per step, in SM cycles and nanoseconds, in a lane (the vertical and
// horizontal moves of a lane's own rows) and with a warp shuffle between the steps (a move from
// one lane to the next, as a stripe's rows cross lanes). Any schedule of this log-space cell takes
// at least (M + N - 1) such steps one after another for an (M, N) pair, the longest path through
// its dependences (a whole warp: its three exp2s issue 8 cycles apart on the special-function
// unit, 16 lanes an SM a clock, and that is part of the figure; another evaluation of the same
// recurrence, such as tools/scaled_cell_probe.cu's, has another chain).
//   nvcc -std=c++17 -O3 -arch=sm_90a -I ops tools/cell_latency.cu -o /tmp/cell_latency && /tmp/cell_latency
#include <cstdio>

#include "cuda/stripes.cuh"

using namespace softalign;

// The chain: one cell a step, its `up` the value of the step before and its `left` that value
// times `k` (one FFMA with the gap, in parallel: the cell's two late terms differ, as in the DP,
// where both come from the anti-diagonal just done), `diag` the value two steps before.
// kMinimal: the bare linear math instead of stripes::cell (no selects for t = 0, non-finite
// maxima or column 0; the exp2s summed as a tree): the least this math takes on this chip.
template <bool kAffine, bool kShuffle, bool kMinimal>
__global__ void chain(int steps, float t, float o, float e, float k, float s0, float* out,
                      long long* cycles, unsigned long long* ns) {
  constexpr int kStates = kAffine ? 3 : 1;
  dp::Config<float> c;
  c.temperature = t;
  c.local = true;
  const stripes::Temperature tp(t);
  float h[kStates], d[kStates];
  for (int st = 0; st < kStates; ++st) h[st] = d[st] = 0.1f * threadIdx.x + st;
  float s = s0 + 0.01f * threadIdx.x;
  __syncwarp();
  const long long c0 = clock64();
  unsigned long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (int q = 0; q < steps; ++q) {
    float next[kStates];
    if constexpr (kMinimal) {
      const float x0 = 0.f, x1 = d[0] + s, x2 = h[0] + o, x3 = fmaf(h[0], k, o);
      const float hi01 = fmaxf(x0, x1), hi23 = fmaxf(x2, x3), m = fmaxf(hi01, hi23);
      const float r0 = fminf(x0, x1), r1 = fminf(x2, x3), r2 = fminf(hi01, hi23);
      const float mc = m * tp.scale;
      const float e0 = dp::device::ex2(fmaf(r0, tp.scale, -mc));
      const float e1 = dp::device::ex2(fmaf(r1, tp.scale, -mc));
      const float e2 = dp::device::ex2(fmaf(r2, tp.scale, -mc));
      next[0] = fmaf(dp::device::lg2((1.f + e0) + (e1 + e2)), t * dp::device::kLn2, m);
    } else {
      float up[kStates];
      for (int st = 0; st < kStates; ++st) {
        up[st] = h[st];
        next[st] = h[st] * k;  // left
      }
      stripes::cell<kAffine>(false, s, o, e, c, tp, d, up, next);
    }
    for (int st = 0; st < kStates; ++st) {
      d[st] = h[st];
      h[st] = kShuffle ? __shfl_up_sync(stripes::kFullMask, next[st], 1) : next[st];
    }
    s = -s;  // no value repeats, nothing to hoist
  }
  unsigned long long t1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  const long long c1 = clock64();
  float sum = 0.f;
  for (int st = 0; st < kStates; ++st) sum += h[st];
  out[threadIdx.x] = sum;
  if (threadIdx.x == 0) {
    *cycles = c1 - c0;
    *ns = t1 - t0;
  }
}

template <bool kAffine, bool kShuffle, bool kMinimal = false>
void measure(const char* what) {
  float* out;
  long long* cycles;
  unsigned long long* ns;
  cudaMalloc(&out, 32 * sizeof(float));
  cudaMallocManaged(&cycles, sizeof(long long));
  cudaMallocManaged(&ns, sizeof(unsigned long long));
  const int cells = 1 << 16;
  double best_cycles = 1e30, best_ns = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    chain<kAffine, kShuffle, kMinimal><<<1, 32>>>(cells, 1.0f, -1.0f, -0.5f, 0.999f, 0.3f, out, cycles, ns);
    cudaDeviceSynchronize();
    best_cycles = std::min(best_cycles, double(*cycles) / cells);
    best_ns = std::min(best_ns, double(*ns) / cells);
  }
  printf("%-38s %6.1f cycles a step  %6.2f ns\n", what, best_cycles, best_ns);
  for (int mn : {2 * 1024, 2 * 4096})
    printf("    (M + N) = %5d: chain alone >= %7.1f us\n", mn, (mn - 1) * best_ns * 1e-3);
  cudaFree(out);
  cudaFree(cycles);
  cudaFree(ns);
}

int main() {
  measure<false, false>("linear, cell after cell in a lane");
  measure<false, true>("linear, a shuffle between cells");
  measure<true, false>("affine, cell after cell in a lane");
  measure<true, true>("affine, a shuffle between cells");
  measure<false, false, true>("bare linear math, in a lane");
  measure<false, true, true>("bare linear math, a shuffle between");
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    printf("CUDA error: %s\n", cudaGetErrorString(err));
    return 1;
  }
  return 0;
}
