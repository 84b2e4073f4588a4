// A probe, not the library: what the linear local soft recurrence would cost on the GPU if it
// were evaluated in probability space rather than in log space. SPEC's cell,
//   H = smax_t(0, H_diag + s, H_up + g, H_left + g),
// is, with Z = exp(H / t), E = exp(s / t) and G = exp(g / t), the linear recurrence
//   Z = 1 + E Z_diag + G (Z_up + Z_left):
// one exp2 a cell (E, off the dependence chain) and two FMAs on it, where the log-space cell
// takes 3 exp2 + 1 log2 and about 85 cycles of chain (tools/cell_latency.cu). Z leaves float's
// range within a few hundred cells, so each row keeps its values as float * 2^k with its own
// exponent k (stepped by 48 when a value passes 2^48 or falls below 2^-48); a value from the row
// above is brought to this row's exponent by one multiply by 2^(k_above - k).
//
// Both sweeps run the same data flow as the striped forward's (lane l owns R rows and takes lane
// l - 1's last row of the step before; the scores from shared memory), one warp alone
// (latency) and a chip full of warps (throughput), and the scaled sweep's scores are checked
// against the log-space one's: t ln 2 (log2 z + k) against H.
//   nvcc -std=c++17 -O3 -arch=sm_90a -I ops tools/scaled_cell_probe.cu -o /tmp/probe && /tmp/probe
#include <cmath>
#include <cstdio>
#include <vector>

#include "cuda/stripes.cuh"

using namespace softalign;

constexpr int kTable = 1024;

// One warp per stripe of 32 R rows (R a lane, as LaneRows), `steps` steps; out[lane]: the value
// of the lane's last row and the soft local end of its cells (log-sum-exp, H units);
// renorms[warp]: the exponent steps taken. Scaled: each row keeps its own exponent, fixed
// within a step (the rows' factors 2^(k_above - k) worked out at the step's start, off the
// chain) and stepped after it.
template <bool kScaled, int R>
__global__ void __launch_bounds__(128) sweep(const float* table, int steps, float t, float g,
                                             float* out, int* renorms) {
  __shared__ float scores[kTable];
  for (int q = threadIdx.x; q < kTable; q += blockDim.x) scores[q] = table[q];
  __syncthreads();
  const int l = threadIdx.x % 32;
  const int warp = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const float c = dp::device::kLog2e / t;  // exp(x / t) = exp2(x c)
  const int offset = (warp * 37) % kTable;
  const auto score = [&](int w, int r) { return scores[(offset + w + l * R + 7 * r) & (kTable - 1)]; };
  int steps_taken = 0;
  float last, soft_end;
  if constexpr (kScaled) {
    const float G = dp::device::ex2(g * c);
    // H = 0 at column 0 and above row 1: Z = 1. A row's soft end keeps an exponent of its own
    // (ks: it only grows), its cells added times 2^(k - ks).
    float z[R], start[R], soft[R], to_soft[R], diag0 = 1.f;
    int k[R], ks[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      z[r] = start[r] = to_soft[r] = 1.f;
      soft[r] = 0.f;
      k[r] = ks[r] = 0;
    }
    const auto factor = [](int from, int to) {  // 2^(from - to), clamped to float's normal range
      return __int_as_float((min(max(from - to, -126), 127) + 127) << 23);
    };
    for (int w = 0; w < steps; ++w) {
      const float up_raw = __shfl_up_sync(stripes::kFullMask, z[R - 1], 1);
      const int k_up = __shfl_up_sync(stripes::kFullMask, k[R - 1], 1);
      float f[R];
      f[0] = factor(k_up, k[0]);
#pragma unroll
      for (int r = 1; r < R; ++r) f[r] = factor(k[r - 1], k[r]);
      float up = l == 0 ? start[0] : up_raw * f[0], diag = diag0;
      diag0 = up;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float E = dp::device::ex2(score(w, r) * c);
        const float old = z[r];
        z[r] = fmaf(G, up + old, fmaf(E, diag, start[r]));
        soft[r] = fmaf(z[r], to_soft[r], soft[r]);
        if (r + 1 < R) {
          up = z[r] * f[r + 1];
          diag = old * f[r + 1];
        }
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        // Rare: the row's values and its 1 (2^-k) move down by 2^48 when a value passes 2^48,
        // up by 2^48 when it falls below 2^-48 (a local alignment's values fall back towards
        // 0 after its end: Z towards 1, far below a row's 2^k by then). The rows of a lane grow
        // by up to 2^(R max(s) / t log2(e)) within a step before this (4 x 17.3 at |s| <= 3,
        // t = 0.25): a kernel has to bound that from the scores, or normalise every cell.
        const bool down = z[r] > 0x1p48f, up_step = z[r] < 0x1p-48f;
        const bool soft_down = soft[r] > 0x1p48f;
        if (down | up_step | soft_down) {
          const float by = down ? 0x1p-48f : up_step ? 0x1p48f : 1.f;
          z[r] *= by;
          if (r == 0) diag0 *= by;
          k[r] += down ? 48 : up_step ? -48 : 0;
          start[r] = factor(0, k[r]);  // 2^-k (at least 2^-126: nothing beside the row's values)
          if (soft_down) {
            soft[r] *= 0x1p-48f;
            ks[r] += 48;
          }
          to_soft[r] = factor(k[r], ks[r]);
          ++steps_taken;
        }
      }
    }
    const float ln2t = t * dp::device::kLn2;
    last = ln2t * (__log2f(z[R - 1]) + float(k[R - 1]));
    int top = ks[0];
#pragma unroll
    for (int r = 1; r < R; ++r) top = max(top, ks[r]);
    float sum = 0.f;
#pragma unroll
    for (int r = 0; r < R; ++r) sum += soft[r] * factor(ks[r], top);
    soft_end = ln2t * (__log2f(sum) + float(top));
  } else {
    dp::Config<float> cfg;
    cfg.temperature = t;
    cfg.local = true;
    const stripes::Temperature tp(t);
    float h[R], diag0 = 0.f, best = -INFINITY, sum = 0.f;
#pragma unroll
    for (int r = 0; r < R; ++r) h[r] = 0.f;
    for (int w = 0; w < steps; ++w) {
      const float up_raw = __shfl_up_sync(stripes::kFullMask, h[R - 1], 1);
      float u = l == 0 ? 0.f : up_raw, d = diag0;
      diag0 = u;
#pragma unroll
      for (int r = 0; r < R; ++r) {  // LaneRows::step
        float cur = h[r];
        stripes::cell<false>(false, score(w, r), g, g, cfg, tp, &d, &u, &cur);
        d = h[r];
        h[r] = u = cur;
        // the soft end: an online log-sum-exp (stripes::End::add's)
        if (cur > best) {
          sum = sum * dp::device::ex2((best - cur) * c) + 1.f;
          best = cur;
        } else {
          sum += dp::device::ex2((cur - best) * c);
        }
      }
    }
    last = h[R - 1];
    soft_end = best + t * dp::device::kLn2 * __log2f(sum);
  }
  out[2 * (warp * 32 + l)] = last;
  out[2 * (warp * 32 + l) + 1] = soft_end;
  const int warp_steps = __reduce_add_sync(stripes::kFullMask, steps_taken);  // the whole warp
  if (l == 0) renorms[warp] = warp_steps;
}

struct Run {
  float ms;
  std::vector<float> out;
  long renorms;
};

template <bool kScaled, int R>
Run run(const float* table, int blocks, int threads, int steps, float t, float g) {
  const int warps = blocks * threads / 32;
  float* out;
  int* renorms;
  cudaMalloc(&out, size_t(warps) * 32 * 2 * sizeof(float));
  cudaMalloc(&renorms, size_t(warps) * sizeof(int));
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  sweep<kScaled, R><<<blocks, threads>>>(table, steps, t, g, out, renorms);  // warm-up
  float best = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    cudaEventRecord(start);
    sweep<kScaled, R><<<blocks, threads>>>(table, steps, t, g, out, renorms);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms;
    cudaEventElapsedTime(&ms, start, stop);
    best = std::min(best, ms);
  }
  Run r{best, std::vector<float>(size_t(warps) * 64), 0};
  cudaMemcpy(r.out.data(), out, r.out.size() * sizeof(float), cudaMemcpyDeviceToHost);
  std::vector<int> n(warps);
  cudaMemcpy(n.data(), renorms, n.size() * sizeof(int), cudaMemcpyDeviceToHost);
  for (int x : n) r.renorms += x;
  cudaFree(out);
  cudaFree(renorms);
  return r;
}

template <int R>
void compare(const float* table, int sms, float t, float g) {
  printf("R = %d rows a lane, t = %g, g = %g, scores uniform in [-3, 3]\n", R, t, g);
  for (int blocks : {1, sms * 8}) {
    const int steps = blocks == 1 ? 1 << 16 : (1 << 13) / R, threads = blocks == 1 ? 32 : 128;
    const Run log_space = run<false, R>(table, blocks, threads, steps, t, g);
    const Run scaled = run<true, R>(table, blocks, threads, steps, t, g);
    double err = 0, err_soft = 0, top = 0;
    for (size_t q = 0; q < log_space.out.size(); q += 2) {
      err = std::max(err, double(std::fabs(scaled.out[q] - log_space.out[q])));
      err_soft = std::max(err_soft, double(std::fabs(scaled.out[q + 1] - log_space.out[q + 1])));
      top = std::max(top, double(std::fabs(log_space.out[q + 1])));
    }
    const double cells = double(blocks) * threads * steps * R;
    const char* what = blocks == 1 ? "one warp (latency)" : "8 blocks of 4 warps an SM";
    printf("  %-26s log space %8.3f ms %7.1f GCUPS %6.1f ns a step | scaled %8.3f ms %7.1f GCUPS "
           "%6.1f ns a step (%ld exponent steps)\n",
           what, log_space.ms, cells / log_space.ms / 1e6, log_space.ms * 1e6 / steps, scaled.ms,
           cells / scaled.ms / 1e6, scaled.ms * 1e6 / steps, scaled.renorms);
    printf("  %-26s max |scaled - log space|: last value %.3g, soft end %.3g (ends up to %.4g)\n",
           "", err, err_soft, top);
  }
}

int main() {
  std::vector<float> host(kTable);
  unsigned x = 12345;
  for (float& v : host) {  // uniform in [-3, 3]
    x = x * 1664525u + 1013904223u;
    v = -3.f + 6.f * float(x >> 8) / float(1 << 24);
  }
  float* table;
  cudaMalloc(&table, kTable * sizeof(float));
  cudaMemcpy(table, host.data(), kTable * sizeof(float), cudaMemcpyHostToDevice);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  for (float t : {1.f, 0.25f}) compare<1>(table, sms, t, -1.f);
  for (float t : {1.f, 0.25f}) compare<4>(table, sms, t, -1.f);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    printf("CUDA error: %s\n", cudaGetErrorString(err));
    return 1;
  }
  return 0;
}
