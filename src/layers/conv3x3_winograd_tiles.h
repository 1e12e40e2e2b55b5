// The one-dimensional transforms of Winograd's minimal filtering F(m, 3), for the two tile
// sizes of conv3x3_winograd.cpp. Each 2-D transform there is its 1-D transform applied down
// the columns of a tile, then along the rows; the adjoints serve the weight gradient.
//
// For F(m, 3) with a = m + 2 interpolation points, a 1-D output of m values is
//   y = A^T [ (G g) (.) (B^T d) ],   g: 3 filter taps, d: a input values,
// and the five functions below are B^T (input), G (weights), A^T (output) and the
// transposes A (output_adjoint, dY -> dM) and G^T (weights_adjoint, dU -> dW). Each is written
// out with its zeros dropped and common sums shared: a compiler may not fold a float product
// with a zero constant away, so plain 6x6 matrix products would do about three times the
// arithmetic in the transforms, which already take a third of a VGG step.
//
// F(2, 3): points 0, 1, -1 and infinity (16 products per 2x2 output tile).
// F(4, 3): points 0, 1, -1, 2, -2 and infinity (36 products per 4x4 output tile, 2.25 per
// output instead of 4): 1.8x fewer GEMM multiply-adds than F(2, 3), at the price of larger
// transform constants and so ~10x the rounding error (still ~1e-5 relative in float, the
// tests bound it).
#pragma once

namespace sparq::cpu::winograd {

struct F2 {
  static constexpr int m = 2, a = 4;
  template <typename T>
  static void input(const T* d, T* v) {
    v[0] = d[0] - d[2];
    v[1] = d[1] + d[2];
    v[2] = d[2] - d[1];
    v[3] = d[1] - d[3];
  }
  template <typename T>
  static void weights(const T* g, T* u) {
    const T half(0.5);
    u[0] = g[0];
    u[1] = half * (g[0] + g[1] + g[2]);
    u[2] = half * (g[0] - g[1] + g[2]);
    u[3] = g[2];
  }
  template <typename T>
  static void output(const T* x, T* y) {
    y[0] = x[0] + x[1] + x[2];
    y[1] = x[1] - x[2] - x[3];
  }
  template <typename T>
  static void output_adjoint(const T* dy, T* dx) {
    dx[0] = dy[0];
    dx[1] = dy[0] + dy[1];
    dx[2] = dy[0] - dy[1];
    dx[3] = -dy[1];
  }
  template <typename T>
  static void weights_adjoint(const T* du, T* dg) {
    const T half(0.5);
    dg[0] = du[0] + half * (du[1] + du[2]);
    dg[1] = half * (du[1] - du[2]);
    dg[2] = half * (du[1] + du[2]) + du[3];
  }
};

struct F4 {
  static constexpr int m = 4, a = 6;
  template <typename T>
  static void input(const T* d, T* v) {
    const T four(4), five(5), two(2);
    v[0] = four * d[0] - five * d[2] + d[4];
    v[1] = (d[3] + d[4]) - four * (d[1] + d[2]);
    v[2] = (d[4] - d[3]) + four * (d[1] - d[2]);
    v[3] = (d[4] - d[2]) + two * (d[3] - d[1]);
    v[4] = (d[4] - d[2]) - two * (d[3] - d[1]);
    v[5] = four * d[1] - five * d[3] + d[5];
  }
  template <typename T>
  static void weights(const T* g, T* u) {
    const T sixth = T(1) / T(6), twelfth = T(1) / T(12), fourth(0.25);
    const T even = g[0] + g[2], even4 = fourth * g[0] + g[2];
    u[0] = fourth * g[0];
    u[1] = -sixth * (even + g[1]);
    u[2] = -sixth * (even - g[1]);
    u[3] = sixth * even4 + twelfth * g[1];
    u[4] = sixth * even4 - twelfth * g[1];
    u[5] = g[2];
  }
  template <typename T>
  static void output(const T* x, T* y) {
    const T two(2), four(4), eight(8);
    const T s12 = x[1] + x[2], d12 = x[1] - x[2], s34 = x[3] + x[4], d34 = x[3] - x[4];
    y[0] = x[0] + s12 + s34;
    y[1] = d12 + two * d34;
    y[2] = s12 + four * s34;
    y[3] = d12 + eight * d34 + x[5];
  }
  template <typename T>
  static void output_adjoint(const T* dy, T* dx) {
    const T two(2), four(4), eight(8);
    const T even = dy[0] + dy[2], odd = dy[1] + dy[3];
    const T even4 = dy[0] + four * dy[2], odd4 = two * dy[1] + eight * dy[3];
    dx[0] = dy[0];
    dx[1] = even + odd;
    dx[2] = even - odd;
    dx[3] = even4 + odd4;
    dx[4] = even4 - odd4;
    dx[5] = dy[3];
  }
  template <typename T>
  static void weights_adjoint(const T* du, T* dg) {
    const T sixth = T(1) / T(6), twelfth = T(1) / T(12), fourth(0.25);
    const T s12 = du[1] + du[2], d12 = du[1] - du[2], s34 = du[3] + du[4], d34 = du[3] - du[4];
    dg[0] = fourth * du[0] - sixth * s12 + fourth * sixth * s34;
    dg[1] = twelfth * d34 - sixth * d12;
    dg[2] = sixth * (s34 - s12) + du[5];
  }
};

}  // namespace sparq::cpu::winograd
