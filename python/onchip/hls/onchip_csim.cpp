// C entry points of the C simulation: the top function driven through its
// AXI4-Stream ports, compiled with g++ into a shared library (loaded by
// onchip.hls.backend with ctypes). Raw values travel as int64.
#include <stdint.h>

#include "onchip_top.h"

static ap_int<32> word_of(int64_t raw) { return ap_int<64>(raw).range(31, 0); }

static void push(hls::stream<axis_word>& s, int64_t raw) {
    axis_word w;
    w.data = word_of(raw);
    w.keep = -1;
    w.strb = -1;
    w.last = 0;
    s.write(w);
}

extern "C" {

// Sizes compiled into the library: N_IN, N_OUT, N_PARAM, STALENESS (for a sanity check).
void onchip_sizes(int64_t out[4]) {
    out[0] = N_IN;
    out[1] = N_OUT;
    out[2] = N_PARAM;
    out[3] = STALENESS;
}

// Back to the compiled-in initial parameters, nothing pending.
void onchip_reset(void) {
    hls::stream<axis_word> s_in, s_out;
    ONCHIP_TOP(s_in, s_out, OP_RESET, 0);
}

// Replace the parameters (flushes first): theta raw (N_PARAM,) in the coef format.
void onchip_load(const int64_t* theta) {
    hls::stream<axis_word> s_in, s_out;
    for (int p = 0; p < N_PARAM; p++) push(s_in, theta[p]);
    ONCHIP_TOP(s_in, s_out, OP_LOAD, 0);
}

// n samples: x raw (n, N_IN), y raw (n, N_OUT) -> preds raw (n, N_OUT).
// learn != 0: test-then-train (OP_RUN); learn == 0: inference only (OP_PREDICT, y unused).
// Returns 0, or -1 if the top did not answer every sample.
int onchip_run(const int64_t* x, const int64_t* y, int64_t n, int64_t* preds, int learn) {
    hls::stream<axis_word> s_in, s_out;
    for (int64_t s = 0; s < n; s++) {
        for (int i = 0; i < N_IN; i++) push(s_in, x[s * N_IN + i]);
        if (learn)
            for (int j = 0; j < N_OUT; j++) push(s_in, y[s * N_OUT + j]);
    }
    ONCHIP_TOP(s_in, s_out, learn ? OP_RUN : OP_PREDICT, ap_uint<32>(n));
    if (s_out.size() != (size_t)(n * N_OUT) || !s_in.empty()) return -1;
    for (int64_t k = 0; k < n * N_OUT; k++)
        preds[k] = onchip::raw_bits(onchip::from_word<act_t>(s_out.read().data)).to_int64();
    return 0;
}

// Flush pending updates, then read the parameters: theta raw (N_PARAM,).
void onchip_read(int64_t* theta) {
    hls::stream<axis_word> s_in, s_out;
    ONCHIP_TOP(s_in, s_out, OP_READ, 0);
    for (int p = 0; p < N_PARAM; p++)
        theta[p] = onchip::raw_bits(onchip::from_word<coef_t>(s_out.read().data)).to_int64();
}

}  // extern "C"
