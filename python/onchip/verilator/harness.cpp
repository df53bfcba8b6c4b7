// Stream harness for a Verilated onchip learner (port contract: onchip.verilator.ports).
//
// Usage: sim IN_FILE OUT_FILE
//
// IN_FILE:  "ONCHIPS2", uint64 N, uint64 S_WORDS, uint64 L, uint64 RELOAD_EACH, then
//           L * PC_WORDS uint32: packed pc__payload write commands (the parameter load), then
//           N * S_WORDS uint32: the packed s__payload of every sample (little-end word first),
//           all prepared by Python.
// OUT_FILE: N * M_WORDS uint32 (the m__payload of every prediction, in order), then
//           N_PARAMS * CHANNELS * PR_WORDS uint32 (pr__payload of a read of every parameter address,
//           channel by channel).
// stdout:   "progress <samples>" lines while running, then one line
//           "done stream_cycles=<c> readback_cycles=<c> load_cycles=<c> seconds=<s> cpu_seconds=<s>"
//           (wall and process CPU time of the load, stream and read-back loops).
//
// Flow: after reset the L load commands go through the parameter port (the learner's own
// parameter write path: what a host does to set its parameters). Then s__valid stays high while
// samples remain and m__ready / pr__ready stay high, so the learner's own s__ready sets the pace
// (its initiation interval). With RELOAD_EACH the load is repeated before every sample and the
// next sample waits for the prediction: every prediction is made with the loaded parameters
// (inference on a learner that always learns). After the last prediction every parameter is read
// through the pc/pr port (the learner drains before answering).
// Port widths and word counts come from onchip_ports.h, written next to the Verilated model.

#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <type_traits>
#include <vector>

#include "Vtop.h"
#include "onchip_ports.h"
#include "verilated.h"

#ifndef ONCHIP_CHANNELS  // one learner: no channel field
#define ONCHIP_CHANNELS 1
#define ONCHIP_PC_CHANNEL_LSB 0
#endif

namespace {

// A port of <= 64 bits is a C integer in Verilator; a wider one is VlWide<words>.
template <int WORDS, typename T>
inline void put_words(T& port, const uint32_t* w) {
    static_assert(std::is_integral<T>::value, "narrow port expected");
    static_assert(WORDS == (sizeof(T) > 4 ? 2 : 1), "word count does not match the port type");
    if constexpr (sizeof(T) > 4) {
        port = static_cast<T>(w[0]) | (static_cast<T>(w[1]) << 32);
    } else {
        port = static_cast<T>(w[0]);
    }
}

template <int WORDS, std::size_t N>
inline void put_words(VlWide<N>& port, const uint32_t* w) {
    static_assert(WORDS == static_cast<int>(N), "word count does not match the port type");
    for (std::size_t i = 0; i < N; ++i) port[i] = w[i];
}

template <int WORDS, typename T>
inline void get_words(const T& port, uint32_t* w) {
    static_assert(std::is_integral<T>::value, "narrow port expected");
    static_assert(WORDS == (sizeof(T) > 4 ? 2 : 1), "word count does not match the port type");
    const uint64_t v = static_cast<uint64_t>(port);
    w[0] = static_cast<uint32_t>(v);
    if constexpr (sizeof(T) > 4) w[1] = static_cast<uint32_t>(v >> 32);
}

template <int WORDS, std::size_t N>
inline void get_words(const VlWide<N>& port, uint32_t* w) {
    static_assert(WORDS == static_cast<int>(N), "word count does not match the port type");
    for (std::size_t i = 0; i < N; ++i) w[i] = port[i];
}

[[noreturn]] void fail(const char* msg) {
    std::fprintf(stderr, "onchip harness: %s\n", msg);
    std::exit(2);
}

// Cycles without any handshake after which the learner is declared stuck.
constexpr uint64_t STALL_LIMIT = uint64_t(1) << 20;
constexpr uint64_t PROGRESS_EVERY = uint64_t(1) << 16;


class Harness {
public:
    Harness() : ctx_(std::make_unique<VerilatedContext>()), top_(std::make_unique<Vtop>(ctx_.get())) {}

    // Synchronous reset: the learner returns to its initial parameters.
    void reset() {
        top_->clk = 0;
        top_->rst = 1;
        top_->s___05Fvalid = 0;
        top_->m___05Fready = 1;
        top_->pc___05Fvalid = 0;
        top_->pr___05Fready = 1;
        top_->eval();
        for (int i = 0; i < 4; ++i) {
            tick();
            top_->eval();
        }
        top_->rst = 0;
    }

    // Commands through the parameter port, one response each (in order) into `resp` (may be null).
    // Returns the cycles spent.
    uint64_t commands(const uint32_t* cmds, uint64_t count, uint32_t* resp) {
        uint64_t issued = 0, got = 0, cycles = 0, idle = 0;
        while (got < count) {
            const bool have = issued < count;
            top_->pc___05Fvalid = have;
            if (have) put_words<ONCHIP_PC_WORDS>(top_->pc___05Fpayload, cmds + issued * ONCHIP_PC_WORDS);
            top_->eval();
            const bool c_fire = have && top_->pc___05Fready;
            const bool r_fire = top_->pr___05Fvalid;
            if (r_fire && resp) {
                get_words<ONCHIP_PR_WORDS>(top_->pr___05Fpayload, resp);
                resp += ONCHIP_PR_WORDS;
            }
            tick();
            ++cycles;
            issued += c_fire;
            got += r_fire;
            if (c_fire || r_fire) {
                idle = 0;
            } else if (++idle > STALL_LIMIT) {
                std::fprintf(stderr,
                             "onchip harness: parameter port silent for %" PRIu64 " cycles (%" PRIu64
                             " of %" PRIu64 " commands answered)\n",
                             idle, got, count);
                std::exit(3);
            }
        }
        top_->pc___05Fvalid = 0;
        return cycles;
    }

    // Stream `count` samples, test-then-train at the learner's pace; predictions into `pred`.
    // Returns the cycles from the first offered sample to the last prediction.
    uint64_t stream(const uint32_t* sample, uint64_t count, uint32_t* pred) {
        uint64_t sent = 0, recv = 0, cycles = 0, idle = 0;
        while (recv < count) {
            const bool have = sent < count;
            // Per cycle: drive inputs, evaluate the low phase, sample the handshakes that the
            // coming rising edge completes, then evaluate the edge.
            top_->s___05Fvalid = have;
            if (have) put_words<ONCHIP_S_WORDS>(top_->s___05Fpayload, sample);
            top_->eval();
            const bool s_fire = have && top_->s___05Fready;
            const bool m_fire = top_->m___05Fvalid;
            if (m_fire) {
                get_words<ONCHIP_M_WORDS>(top_->m___05Fpayload, pred);
                pred += ONCHIP_M_WORDS;
            }
            tick();
            ++cycles;
            if (s_fire) {
                ++sent;
                sample += ONCHIP_S_WORDS;
            }
            recv += m_fire;
            if (m_fire) report(1);
            if (s_fire || m_fire) {
                idle = 0;
            } else if (++idle > STALL_LIMIT) {
                std::fprintf(stderr,
                             "onchip harness: no handshake for %" PRIu64 " cycles (samples accepted %" PRIu64
                             ", predictions %" PRIu64 " of %" PRIu64 ")\n",
                             idle, sent, recv, count);
                std::exit(3);
            }
        }
        top_->s___05Fvalid = 0;
        return cycles;
    }

    void final() { top_->final(); }

private:
    void tick() {
        top_->clk = 1;
        top_->eval();
        top_->clk = 0;
    }

    void report(uint64_t more) {
        received_ += more;
        if (received_ >= next_report_) {
            std::printf("progress %" PRIu64 "\n", received_);
            std::fflush(stdout);
            next_report_ += PROGRESS_EVERY;
        }
    }

    std::unique_ptr<VerilatedContext> ctx_;
    std::unique_ptr<Vtop> top_;
    uint64_t received_ = 0, next_report_ = PROGRESS_EVERY;
};

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) fail("usage: sim IN_FILE OUT_FILE");

    FILE* fin = std::fopen(argv[1], "rb");
    if (!fin) fail("cannot open the input file");
    char magic[8];
    uint64_t n = 0, s_words = 0, n_load = 0, reload_each = 0;
    if (std::fread(magic, 1, 8, fin) != 8 || std::memcmp(magic, "ONCHIPS2", 8) != 0)
        fail("input file does not start with ONCHIPS2");
    if (std::fread(&n, 8, 1, fin) != 1 || std::fread(&s_words, 8, 1, fin) != 1 ||
        std::fread(&n_load, 8, 1, fin) != 1 || std::fread(&reload_each, 8, 1, fin) != 1)
        fail("input file header is truncated");
    if (s_words != ONCHIP_S_WORDS) fail("input file was packed for another payload width");
    std::vector<uint32_t> load(n_load * ONCHIP_PC_WORDS + 1);
    std::vector<uint32_t> samples(n * ONCHIP_S_WORDS + 1);
    if (n_load && std::fread(load.data(), 4, n_load * ONCHIP_PC_WORDS, fin) != n_load * ONCHIP_PC_WORDS)
        fail("input file is truncated (parameter load)");
    if (n && std::fread(samples.data(), 4, n * ONCHIP_S_WORDS, fin) != n * ONCHIP_S_WORDS)
        fail("input file is truncated");
    std::fclose(fin);

    std::vector<uint32_t> preds(n * ONCHIP_M_WORDS + 1);
    const uint64_t n_reads = uint64_t(ONCHIP_N_PARAMS) * ONCHIP_CHANNELS;
    std::vector<uint32_t> params(n_reads * ONCHIP_PR_WORDS + 1);
    // read commands {write = 0, addr, data = 0 (, channel)}, one per parameter address of every channel
    std::vector<uint32_t> reads(n_reads * ONCHIP_PC_WORDS + 1, 0);
    for (uint64_t a = 0; a < n_reads; ++a) {
        uint64_t cmd = (a % uint64_t(ONCHIP_N_PARAMS)) << ONCHIP_COEF_WIDTH;
        if (ONCHIP_CHANNELS > 1) cmd |= (a / uint64_t(ONCHIP_N_PARAMS)) << ONCHIP_PC_CHANNEL_LSB;
        reads[a * ONCHIP_PC_WORDS] = static_cast<uint32_t>(cmd);
        if (ONCHIP_PC_WORDS > 1) reads[a * ONCHIP_PC_WORDS + 1] = static_cast<uint32_t>(cmd >> 32);
    }

    Harness h;
    h.reset();
    const auto t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    uint64_t stream_cycles = 0, load_cycles = 0;
    if (reload_each) {
        for (uint64_t i = 0; i < n; ++i) {
            load_cycles += h.commands(load.data(), n_load, nullptr);
            stream_cycles += h.stream(samples.data() + i * ONCHIP_S_WORDS, 1, preds.data() + i * ONCHIP_M_WORDS);
        }
    } else {
        load_cycles = h.commands(load.data(), n_load, nullptr);
        stream_cycles = h.stream(samples.data(), n, preds.data());
    }
    const uint64_t readback_cycles = h.commands(reads.data(), n_reads, params.data());
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu_seconds = double(std::clock() - c0) / CLOCKS_PER_SEC;
    h.final();

    FILE* fout = std::fopen(argv[2], "wb");
    if (!fout) fail("cannot open the output file");
    const size_t n_pred = n * ONCHIP_M_WORDS;
    const size_t n_param = size_t(n_reads) * ONCHIP_PR_WORDS;
    if (std::fwrite(preds.data(), 4, n_pred, fout) != n_pred ||
        std::fwrite(params.data(), 4, n_param, fout) != n_param || std::fclose(fout) != 0)
        fail("cannot write the output file");
    std::printf("done stream_cycles=%" PRIu64 " readback_cycles=%" PRIu64 " load_cycles=%" PRIu64
                " seconds=%.9f cpu_seconds=%.9f\n",
                stream_cycles, readback_cycles, load_cycles, seconds, cpu_seconds);
    return 0;
}
