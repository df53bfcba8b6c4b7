// Bit-level helpers for the onchip HLS learners (ap_fixed, Xilinx UG1399).
//
// ap_fixed assignment already rounds then saturates/wraps exactly as the
// golden model's requant does; these helpers cover what assignment cannot
// say: scaling by a power of two without dropping bits, an assignment valid
// for every pair of formats (convert, zero), and moving raw two's-complement
// bits in and out of 32-bit stream words.
#ifndef ONCHIP_FIXED_H
#define ONCHIP_FIXED_H

#include "ap_fixed.h"
#include "ap_int.h"

namespace onchip {

// x * 2^-S, exact: the same bits with the binary point S places further left
// (S < 0 moves it right). ap_fixed's own >> keeps the type and drops bits.
template <int S, int W, int I, ap_q_mode Q, ap_o_mode O, int N>
inline ap_fixed<W, I - S> scale_pow2(const ap_fixed<W, I, Q, O, N>& x) {
#pragma HLS INLINE
    ap_fixed<W, I - S> y;
    y.range(W - 1, 0) = x.range(W - 1, 0);
    return y;
}

template <int S, int W, int I, ap_q_mode Q, ap_o_mode O, int N>
inline ap_ufixed<W, I - S> scale_pow2(const ap_ufixed<W, I, Q, O, N>& x) {
#pragma HLS INLINE
    ap_ufixed<W, I - S> y;
    y.range(W - 1, 0) = x.range(W - 1, 0);
    return y;
}

// T(x), the ap_fixed assignment (round with T's mode, then saturate/wrap), written so
// that it is valid for every pair of formats. Where the assignment drops more bits
// than x holds (F_x - F_T > W_x) with a rounding mode other than TRN, the ap_types
// headers read a bit beyond x's MSB (an assertion in C simulation; Vitis HLS uses
// the same headers). There |x| < 2^(W_x - F_x) <= 2^-(F_T + 1), less than half an
// LSB of T and never a tie, so every such mode (to nearest, toward zero) gives
// exactly 0, which every format holds: the result is spelled out instead (the value
// onchip.fixed.requant computes). TRN (floor) takes the headers' own path.
template <class T>
inline T zero() {
#pragma HLS INLINE
    T y;
    y.range(T::width - 1, 0) = 0;
    return y;
}

template <class T, int W, int I, ap_q_mode Q, ap_o_mode O, int N>
inline T convert(const ap_fixed<W, I, Q, O, N>& x) {
#pragma HLS INLINE
    enum { DROPPED = (W - I) - (T::width - T::iwidth) };
    if (DROPPED > W && T::qmode != AP_TRN) return zero<T>();
    return T(x);
}

template <class T, int W, int I, ap_q_mode Q, ap_o_mode O, int N>
inline T convert(const ap_ufixed<W, I, Q, O, N>& x) {
#pragma HLS INLINE
    enum { DROPPED = (W - I) - (T::width - T::iwidth) };
    if (DROPPED > W && T::qmode != AP_TRN) return zero<T>();
    return T(x);
}

// The raw integer of a fixed-point value (value = raw * 2^-F).
template <int W, int I, ap_q_mode Q, ap_o_mode O, int N>
inline ap_int<W> raw_bits(const ap_fixed<W, I, Q, O, N>& x) {
#pragma HLS INLINE
    ap_int<W> r;
    r.range(W - 1, 0) = x.range(W - 1, 0);
    return r;
}

template <int W, int I, ap_q_mode Q, ap_o_mode O, int N>
inline ap_uint<W> raw_bits(const ap_ufixed<W, I, Q, O, N>& x) {
#pragma HLS INLINE
    ap_uint<W> r;
    r.range(W - 1, 0) = x.range(W - 1, 0);
    return r;
}

// A stream word (32 bits) -> a value of type T whose raw bits are the word's low bits.
template <class T>
inline T from_word(const ap_int<32>& w) {
#pragma HLS INLINE
    T x;
    x.range(T::width - 1, 0) = w.range(T::width - 1, 0);
    return x;
}

// A value -> a 32-bit stream word holding its raw integer (sign- or zero-extended).
template <class T>
inline ap_int<32> to_word(const T& x) {
#pragma HLS INLINE
    return ap_int<32>(raw_bits(x));
}

}  // namespace onchip

#endif
