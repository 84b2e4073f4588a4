// The SIMD sweep (sweep_lanes.h) for AVX2 + FMA: 8 float32 lanes. Built with -mavx2 -mfma;
// everything it compiles lives in namespace softalign::avx2 or takes its Pack types.
#define SOFTALIGN_PACK_NAMESPACE avx2
#include "../views.h"
#include "pack.h"
#include "lanes.h"
#include "sweep_lanes.h"
#include "sweep_band.h"

namespace softalign {
namespace cpu {

const LanesKernels* lanes_kernels_avx2() {
  static const LanesKernels kernels{16, &avx2::forward_lanes<16>, &avx2::forward_backward_lanes<16>,
                                          16, &avx2::band_job<16>};
  return &kernels;
}

}  // namespace cpu
}  // namespace softalign
