// Self-checking Vitis HLS test bench (csim and cosim) of an onchip learner.
// Replays tb_data/stimulus.dat (first line N, then one sample per line: N_IN raw
// inputs, N_OUT raw targets and, with N_CHANNELS > 1, the sample's channel) through the top
// function and compares every prediction, decision and the final parameters with
// tb_data/expected.dat (N lines of N_OUT raw predictions and the decision, then one line of
// N_PARAM raw parameters per channel), written from the onchip golden model. Returns 0 when everything matches bit for bit.
#include <cstdio>
#include <vector>

#include "onchip_top.h"

static axis_word word(long long raw) {
    axis_word w;
    w.data = ap_int<64>(raw).range(31, 0);
    w.keep = -1;
    w.strb = -1;
    w.last = 0;
    return w;
}

int main() {
    FILE* fs = std::fopen("tb_data/stimulus.dat", "r");
    if (!fs) {
        std::printf("cannot open tb_data/stimulus.dat\n");
        return 2;
    }
    long long n = 0;
    if (std::fscanf(fs, "%lld", &n) != 1 || n < 1) return 2;
    hls::stream<axis_word> s_in, s_out;
    for (long long k = 0; k < n * (N_IN + N_OUT + (N_CHANNELS > 1)); k++) {
        long long v;
        if (std::fscanf(fs, "%lld", &v) != 1) return 2;
        s_in.write(word(v));
    }
    std::fclose(fs);

    ONCHIP_TOP(s_in, s_out, OP_RESET, 0);
    ONCHIP_TOP(s_in, s_out, OP_RUN, ap_uint<32>(n));
    std::vector<long long> got;
    for (long long k = 0; k < n; k++) {
        for (int j = 0; j < N_OUT; j++)
            got.push_back(onchip::raw_bits(onchip::from_word<out_t>(s_out.read().data)).to_int64());
        got.push_back(s_out.read().data.to_int64());  // the decision word
    }
    for (int c = 0; c < N_CHANNELS; c++) {  // the parameter port reads one channel's bank
        ONCHIP_TOP(s_in, s_out, OP_READ, ap_uint<32>(c));
        for (int p = 0; p < N_PARAM; p++)
            got.push_back(onchip::raw_bits(onchip::from_word<coef_t>(s_out.read().data)).to_int64());
    }

    FILE* fe = std::fopen("tb_data/expected.dat", "r");
    if (!fe) {
        std::printf("ran %lld samples; no tb_data/expected.dat to compare with\n", n);
        return 0;
    }
    long long mismatches = 0;
    for (size_t k = 0; k < got.size(); k++) {
        long long v;
        if (std::fscanf(fe, "%lld", &v) != 1) return 2;
        if (v != got[k]) {
            if (mismatches < 10)
                std::printf("mismatch at %s %lld: expected %lld, got %lld\n",
                            k < (size_t)(n * (N_OUT + 1)) ? "prediction word" : "parameter",
                            k < (size_t)(n * (N_OUT + 1)) ? (long long)k : (long long)(k - n * (N_OUT + 1)), v, got[k]);
            mismatches++;
        }
    }
    std::fclose(fe);
    std::printf("%lld samples, %d parameters: %lld mismatches\n", n, N_CHANNELS * N_PARAM, mismatches);
    return mismatches ? 1 : 0;
}
