// The cell update and its adjoint in probability space
// (docs/design.md, "Probability space: the scaled cell" and "Probability space: the adjoint"):
// recurrence.h's cells with every value evaluated as Z = exp(V / t) instead of as V, compiled for
// the host and the device alike. The only exp is of the score (E = exp(s / t)), off the dependence
// chain; the penalties' weights are G = exp(g / t) (linear), O = exp(o / t) and F = exp(e / t)
// (affine). Where the values' exponents live (a float z and an int k a row, z 2^k), when an item is
// refused and swept in log space instead, and how the lanes hold the rows is the schedule's
// (ops/cuda/prob_space/): the functions below take every value already in the cell's own scale,
// except where a parameter says otherwise. Each keeps the order of its floating-point operations,
// which the kernels' results (and their refusal bounds) were measured with.
#pragma once

#include <cmath>

#include "recurrence.h"  // SOFTALIGN_HD

namespace softalign {
namespace dp {
namespace prob {

// ---------------------------------------------------------------------------- linear gap
// docs/spec.md, "Linear gap": H = smax_t(0 [local], H_diag + s, H_up + g, H_left + g), so
//   Z = 1 [local] + E Z_diag + G (Z_up + Z_left).

// The terms of Z that do not depend on the row above's new value: 1 [local] + E Z_diag, with
// `one` the 1 in the cell's scale (local only).
template <bool kLocal>
SOFTALIGN_HD float linear_match(float E, float z_diag, float one) {
  return kLocal ? fmaf(E, z_diag, one) : E * z_diag;
}

// Z from linear_match's `match`, Z_up and Z_left in the cell's scale: a lane's first row, whose
// row above arrives by shuffle already in its scale.
SOFTALIGN_HD float linear_cell(float match, float gap, float z_up, float z_left) {
  return fmaf(gap, z_up + z_left, match);
}

// Z with Z_up in the row above's scale, `gap_up` = G 2^(k_above - k): the row above's new value
// enters last, one FFMA a row on the step's dependence chain.
SOFTALIGN_HD float linear_cell_scaled_up(float match, float gap, float z_left, float gap_up,
                                         float z_up) {
  return fmaf(gap_up, z_up, fmaf(gap, z_left, match));
}

// The adjoint divided by Z, R = (d score / d H) / Z
// (docs/design.md, "Probability space: the adjoint"), from the cell's successors: R = G R_below + G
// R_right + E' R_diag + seed, with `gap_r_below` = G R(i + 1, j), `er_diag` = E(i + 1, j + 1) R(i +
// 1, j + 1), `r_right` = R(i, j + 1), each in the cell's scale. The score's gradient is then d
// score / d S(i - 1, j - 1) = Z_diag E R (the two sweeps' product).
SOFTALIGN_HD float linear_adjoint(float gap_r_below, float gap, float r_right, float er_diag,
                                  float seed) {
  return gap_r_below + fmaf(gap, r_right, er_diag + seed);
}

// The same with G R(i, j + 1) given (`gap_r_right`): the right successor brought from the chunk
// after, its factor and G applied there.
SOFTALIGN_HD float linear_adjoint_scaled_right(float gap_r_below, float gap_r_right,
                                               float er_diag, float seed) {
  return gap_r_below + (gap_r_right + (er_diag + seed));
}

// ---------------------------------------------------------------------------- affine gap
// docs/spec.md, "Affine gap": with A, X, Y the match, vertical-gap and horizontal-gap states,
//   A = E (1 [local] + A_diag + X_diag + Y_diag),   X = O A_up + F X_up,
//   Y = O (A_left + X_left) + F Y_left,
// and D = A + X + Y, the diagonal's sum that the next cell's A takes (and t ln D the global end).

// A from D_diag, with `one` the 1 in the cell's scale (local only).
template <bool kLocal>
SOFTALIGN_HD float affine_match(float E, float d_diag, float one) {
  return kLocal ? E * (one + d_diag) : E * d_diag;
}

// The cell's values for its successors, from its A and X (`a`, `x`) and its Y (`y`, the left
// neighbour's successor value): D, the X of the cell below (`below`, before its row's factor)
// and the Y of the cell to the right (`right`).
struct AffineOut {
  float d, below, right;
};
SOFTALIGN_HD AffineOut affine_cell(float a, float x, float y, float O, float F) {
  const float ax = a + x;
  AffineOut out;
  out.below = fmaf(O, a, F * x);
  out.d = ax + y;
  out.right = fmaf(O, ax, F * y);
  return out;
}

// The adjoints divided by Z of the three states (docs/design.md, "Probability space: the adjoint"),
// from the successors': `ea_diag` = E R_A of the diagonal successor, `ox_below`, `fx_below` = O
// R_X, F R_X of the cell below, `oy_right`, `fy_right` = O R_Y, F R_Y of the cell to the right,
// each in the cell's scale; `seed`: the reduction's seed of that state (local: on A only).
//   R_A = seed + E' R_A(diag) + O R_X(below) + O R_Y(right)
//   R_X = seed + E' R_A(diag) + F R_X(below) + O R_Y(right)
//   R_Y = seed + E' R_A(diag) + F R_Y(right)
// Expressions (macros, host and device alike), not functions: the fused affine kernel zeroes them
// outside an item (`inside ? R : 0`), and whether the compiler makes that a select or a branch,
// kernel by kernel, depends on the sum standing there inline (functions in their place changed
// the SASS of three of affine_adjoint.cuh's six kernels: nvcc 13, sm_90a).
#define SOFTALIGN_PROB_AFFINE_ADJOINT_A(seed, ea_diag, ox_below, oy_right) \
  ((((seed) + (ea_diag)) + (ox_below)) + (oy_right))
#define SOFTALIGN_PROB_AFFINE_ADJOINT_X(seed, ea_diag, fx_below, oy_right) \
  ((((seed) + (ea_diag)) + (fx_below)) + (oy_right))
#define SOFTALIGN_PROB_AFFINE_ADJOINT_Y(seed, ea_diag, fy_right) (((seed) + (ea_diag)) + (fy_right))

}  // namespace prob
}  // namespace dp
}  // namespace softalign
