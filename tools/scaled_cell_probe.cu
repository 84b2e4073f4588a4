// A probe, not the library: what the linear local soft recurrence would cost on the GPU if it
// were evaluated in probability space rather than in log space. SPEC's cell,
//   H = smax_t(0, H_diag + s, H_up + g, H_left + g),
// is, with Z = exp(H / t), E = exp(s / t) and G = exp(g / t), the linear recurrence
//   Z = 1 + E Z_diag + G (Z_up + Z_left):
// one exp2 a cell (E, off the dependence chain) and two FMAs on it, where the log-space cell
// takes 3 exp2 + 1 log2 and about 85 cycles of chain (tools/cell_latency.cu). Z leaves float's
// range within a few hundred cells, so each lane keeps its values as float * 2^k with its own
// exponent k (stepped by 64 when a value passes 2^64); a value shuffled down from the lane
// above is brought to this lane's exponent by one multiply by 2^(k_above - k).
//
// Both sweeps run the same data flow as the striped forward's one-row-a-lane shape (lane l
// takes lane l - 1's value of the step before; the scores from shared memory), one warp alone
// (latency) and a chip full of warps (throughput), and the scaled sweep's scores are checked
// against the log-space one's: t ln 2 (log2 z + k) against H.
//   nvcc -std=c++17 -O3 -arch=sm_90a -I ops tools/scaled_cell_probe.cu -o /tmp/probe && /tmp/probe
#include <cmath>
#include <cstdio>
#include <vector>

#include "cuda/stripes.cuh"

using namespace softalign;

constexpr int kTable = 1024;

// One warp per stripe of 32 rows, `steps` steps; out[lane]: the lane's last value (H) and its
// soft local end (log-sum-exp of its cells, H units); renorms[warp]: exponent steps taken.
template <bool kScaled>
__global__ void __launch_bounds__(128) sweep(const float* table, int steps, float t, float g,
                                             float* out, int* renorms) {
  __shared__ float scores[kTable];
  for (int q = threadIdx.x; q < kTable; q += blockDim.x) scores[q] = table[q];
  __syncthreads();
  const int l = threadIdx.x % 32;
  const int warp = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const float c = dp::device::kLog2e / t;  // exp(x / t) = exp2(x c)
  const int offset = (warp * 37) % kTable;
  int steps_taken = 0;
  if constexpr (kScaled) {
    const float G = dp::device::ex2(g * c);
    float z_left = 1.f, z_diag = 1.f, z = 1.f, start = 1.f, soft = 0.f;  // H = 0: Z = 1
    int k = 0;
    for (int w = 0; w < steps; ++w) {
      const float E = dp::device::ex2(scores[(offset + w + l) & (kTable - 1)] * c);
      const float up_raw = __shfl_up_sync(stripes::kFullMask, z, 1);
      const int k_up = __shfl_up_sync(stripes::kFullMask, k, 1);
      // 2^(k_up - k), exponents clamped to float's normal range
      const int shift = min(max(k_up - k, -126), 127);
      const float up = l == 0 ? start : up_raw * __int_as_float((shift + 127) << 23);
      z = fmaf(G, up + z_left, fmaf(E, z_diag, start));
      z_diag = up;
      z_left = z;
      soft += z;
      if (z > 0x1p64f) {  // rare: the lane's values, its end and its 1 move down by 2^64
        z *= 0x1p-64f;
        z_left = z;
        z_diag *= 0x1p-64f;
        soft *= 0x1p-64f;
        start *= 0x1p-64f;  // 2^-k: 0 once k passes 149, where 1 no longer counts
        k += 64;
        ++steps_taken;
      }
    }
    const float ln2t = t * dp::device::kLn2;
    out[2 * (warp * 32 + l)] = ln2t * (__log2f(z) + float(k));
    out[2 * (warp * 32 + l) + 1] = ln2t * (__log2f(soft) + float(k));
  } else {
    dp::Config<float> cfg;
    cfg.temperature = t;
    cfg.local = true;
    const stripes::Temperature tp(t);
    float h = 0.f, diag = 0.f, best = -INFINITY, sum = 0.f;
    for (int w = 0; w < steps; ++w) {
      const float s = scores[(offset + w + l) & (kTable - 1)];
      const float up_raw = __shfl_up_sync(stripes::kFullMask, h, 1);
      float up = l == 0 ? 0.f : up_raw;
      float left = h;
      stripes::cell<false>(false, s, g, g, cfg, tp, &diag, &up, &left);
      diag = up;
      h = left;
      // the soft end: an online log-sum-exp (stripes::End::add's)
      if (h > best) {
        sum = sum * dp::device::ex2((best - h) * c) + 1.f;
        best = h;
      } else {
        sum += dp::device::ex2((h - best) * c);
      }
    }
    out[2 * (warp * 32 + l)] = h;
    out[2 * (warp * 32 + l) + 1] = best + t * dp::device::kLn2 * __log2f(sum);
  }
  const int warp_steps = __reduce_add_sync(stripes::kFullMask, steps_taken);  // the whole warp
  if (l == 0) renorms[warp] = warp_steps;
}

struct Run {
  float ms;
  std::vector<float> out;
  long renorms;
};

template <bool kScaled>
Run run(const float* table, int blocks, int threads, int steps, float t, float g) {
  const int warps = blocks * threads / 32;
  float* out;
  int* renorms;
  cudaMalloc(&out, size_t(warps) * 32 * 2 * sizeof(float));
  cudaMalloc(&renorms, size_t(warps) * sizeof(int));
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  sweep<kScaled><<<blocks, threads>>>(table, steps, t, g, out, renorms);  // warm-up
  float best = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    cudaEventRecord(start);
    sweep<kScaled><<<blocks, threads>>>(table, steps, t, g, out, renorms);
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
  const float g = -1.f;
  for (float t : {1.f, 0.25f}) {
    printf("t = %g, g = %g, scores uniform in [-3, 3]\n", t, g);
    for (int blocks : {1, sms * 8}) {
      const int steps = blocks == 1 ? 1 << 16 : 1 << 13, threads = blocks == 1 ? 32 : 128;
      const Run log_space = run<false>(table, blocks, threads, steps, t, g);
      const Run scaled = run<true>(table, blocks, threads, steps, t, g);
      double err = 0, err_soft = 0, top = 0;
      for (size_t q = 0; q < log_space.out.size(); q += 2) {
        err = std::max(err, double(std::fabs(scaled.out[q] - log_space.out[q])));
        err_soft = std::max(err_soft, double(std::fabs(scaled.out[q + 1] - log_space.out[q + 1])));
        top = std::max(top, double(std::fabs(log_space.out[q + 1])));
      }
      const double cells = double(blocks) * threads * steps;
      const char* what = blocks == 1 ? "one warp (latency)" : "8 blocks of 4 warps an SM";
      printf("  %-26s log space %8.3f ms %7.1f GCUPS %6.1f ns a step | scaled %8.3f ms %7.1f GCUPS "
             "%6.1f ns a step (%ld exponent steps)\n",
             what, log_space.ms, cells / log_space.ms / 1e6, log_space.ms * 1e6 / steps, scaled.ms,
             cells / scaled.ms / 1e6, scaled.ms * 1e6 / steps, scaled.renorms);
      printf("  %-26s max |scaled - log space|: last value %.3g, soft end %.3g (ends up to %.4g)\n",
             "", err, err_soft, top);
    }
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    printf("CUDA error: %s\n", cudaGetErrorString(err));
    return 1;
  }
  return 0;
}
