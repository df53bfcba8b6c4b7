// C simulation program: the top function driven through its AXI4-Stream ports,
// compiled with g++ into an executable that onchip.hls.backend runs as a child
// process, so that a failure inside the simulation (an ap_types assertion, a
// signal) ends this process and not the caller.
//
// Protocol (native-endian int64 words; stdin: commands, stdout: answers):
//   on start        out: N_IN, N_OUT, N_PARAM, STALENESS, N_CHANNELS (a sanity check)
//   0 RESET         back to the compiled-in initial parameters, nothing pending
//   1 RUN n learn   in: n samples of N_IN inputs, then for learn == 1 N_OUT targets, for
//                   learn == 2 one kind word and N_OUT y words (OP_RUN_KINDS), then with
//                   N_CHANNELS > 1 the sample's channel;
//                   out: n * (N_OUT predictions, one decision), then one status word (0,
//                   or -1 if the top did not answer every sample). learn == 0 is inference.
//   2 READ          flush, out: N_CHANNELS x N_PARAM parameters, channel by channel
//   3 LOAD          flush, in: N_CHANNELS x N_PARAM parameters (the parameter port, a bank per channel)
// End of input ends the program with status 0; a malformed command, status 3.
#include <stdint.h>
#include <stdio.h>

#include <vector>

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

static bool read_words(int64_t* dst, size_t n) { return fread(dst, sizeof(int64_t), n, stdin) == n; }

static void write_words(const int64_t* src, size_t n) { fwrite(src, sizeof(int64_t), n, stdout); }

int main() {
    const int64_t sizes[5] = {N_IN, N_OUT, N_PARAM, STALENESS, N_CHANNELS};
    write_words(sizes, 5);
    fflush(stdout);
    std::vector<int64_t> buf, out;
    int64_t op;
    while (read_words(&op, 1)) {
        hls::stream<axis_word> s_in, s_out;
        if (op == 0) {
            ONCHIP_TOP(s_in, s_out, OP_RESET, 0);
        } else if (op == 1) {
            int64_t head[2];
            if (!read_words(head, 2) || head[0] < 0) return 3;
            const int64_t n = head[0];
            const int64_t learn = head[1];
            if (learn < 0 || learn > 2) return 3;
            const int64_t per = N_IN + (learn == 1 ? N_OUT : learn == 2 ? N_OUT + 1 : 0) + (N_CHANNELS > 1);
            buf.resize((size_t)(n * per));
            if (!read_words(buf.data(), buf.size())) return 3;
            for (size_t k = 0; k < buf.size(); k++) push(s_in, buf[k]);
            ONCHIP_TOP(s_in, s_out, learn == 2 ? OP_RUN_KINDS : learn ? OP_RUN : OP_PREDICT, ap_uint<32>(n));
            int64_t status = (s_out.size() == (size_t)(n * (N_OUT + 1)) && s_in.empty()) ? 0 : -1;
            out.assign((size_t)(n * (N_OUT + 1)), 0);
            for (size_t k = 0; status == 0 && k < out.size(); k++) {
                ap_int<32> w = s_out.read().data;
                out[k] = (k % (N_OUT + 1) == N_OUT) ? w.to_int64()
                                                    : onchip::raw_bits(onchip::from_word<out_t>(w)).to_int64();
            }
            write_words(out.data(), out.size());
            write_words(&status, 1);
        } else if (op == 2) {
            out.assign((size_t)N_CHANNELS * N_PARAM, 0);
            for (int c = 0; c < N_CHANNELS; c++) {  // the parameter port reads one channel's bank
                ONCHIP_TOP(s_in, s_out, OP_READ, ap_uint<32>(c));
                for (int p = 0; p < N_PARAM; p++)
                    out[(size_t)c * N_PARAM + p] =
                        onchip::raw_bits(onchip::from_word<coef_t>(s_out.read().data)).to_int64();
            }
            write_words(out.data(), out.size());
        } else if (op == 3) {
            buf.resize((size_t)N_CHANNELS * N_PARAM);
            if (!read_words(buf.data(), buf.size())) return 3;
            for (int c = 0; c < N_CHANNELS; c++) {
                for (int p = 0; p < N_PARAM; p++) push(s_in, buf[(size_t)c * N_PARAM + p]);
                ONCHIP_TOP(s_in, s_out, OP_LOAD, ap_uint<32>(c));
            }
        } else {
            return 3;
        }
        fflush(stdout);
    }
    return 0;
}
