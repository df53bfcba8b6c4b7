// Bit-level helpers for the onchip HLS learners (ap_fixed, Xilinx UG1399).
//
// ap_fixed assignment already rounds then saturates/wraps exactly as the
// golden model's requant does; these helpers only cover what assignment
// cannot say: scaling by a power of two without dropping bits, and moving
// raw two's-complement bits in and out of 32-bit stream words.
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
