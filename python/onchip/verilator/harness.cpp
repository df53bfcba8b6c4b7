// Stream harness for a Verilated onchip learner (port contract: onchip.verilator.ports).
//
// Usage: sim IN_FILE OUT_FILE
//
// IN_FILE:  "ONCHIPS1", uint64 N, uint64 S_WORDS, then N * S_WORDS uint32: the packed
//           s__payload of every sample (little-end word first), prepared by Python.
// OUT_FILE: N * M_WORDS uint32 (the m__payload of every prediction, in order), then
//           N_PARAMS * PR_WORDS uint32 (pr__payload of a read of every parameter address).
// stdout:   "progress <samples>" lines while running, then one line
//           "done stream_cycles=<c> readback_cycles=<c> seconds=<s> cpu_seconds=<s>" (wall and
//           process CPU time of the stream and read-back loops).
//
// Flow: s__valid stays high while samples remain and m__ready / pr__ready stay high, so the
// learner's own s__ready sets the pace (its initiation interval). After the last prediction
// every parameter is read through the pc/pr port (the learner drains before answering).
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

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) fail("usage: sim IN_FILE OUT_FILE");

    FILE* fin = std::fopen(argv[1], "rb");
    if (!fin) fail("cannot open the input file");
    char magic[8];
    uint64_t n = 0, s_words = 0;
    if (std::fread(magic, 1, 8, fin) != 8 || std::memcmp(magic, "ONCHIPS1", 8) != 0)
        fail("input file does not start with ONCHIPS1");
    if (std::fread(&n, 8, 1, fin) != 1 || std::fread(&s_words, 8, 1, fin) != 1)
        fail("input file header is truncated");
    if (s_words != ONCHIP_S_WORDS) fail("input file was packed for another payload width");
    std::vector<uint32_t> samples(n * ONCHIP_S_WORDS);
    if (n && std::fread(samples.data(), 4, samples.size(), fin) != samples.size())
        fail("input file is truncated");
    std::fclose(fin);

    std::vector<uint32_t> preds(n * ONCHIP_M_WORDS + 1);
    std::vector<uint32_t> params(uint64_t(ONCHIP_N_PARAMS) * ONCHIP_PR_WORDS + 1);

    auto ctx = std::make_unique<VerilatedContext>();
    auto top = std::make_unique<Vtop>(ctx.get());

    auto tick = [&]() {
        top->clk = 1;
        top->eval();
        top->clk = 0;
    };

    // Synchronous reset: the learner returns to its initial parameters.
    top->clk = 0;
    top->rst = 1;
    top->s___05Fvalid = 0;
    top->m___05Fready = 1;
    top->pc___05Fvalid = 0;
    top->pr___05Fready = 1;
    top->eval();
    for (int i = 0; i < 4; ++i) {
        tick();
        top->eval();
    }
    top->rst = 0;

    const auto t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();

    // Sample stream. Per cycle: drive inputs, evaluate the low phase, sample the handshakes
    // that the coming rising edge completes, then evaluate the edge.
    uint64_t sent = 0, recv = 0, stream_cycles = 0, idle = 0, next_report = PROGRESS_EVERY;
    const uint32_t* sample = samples.data();
    uint32_t* pred = preds.data();
    while (recv < n) {
        const bool have = sent < n;
        top->s___05Fvalid = have;
        if (have) put_words<ONCHIP_S_WORDS>(top->s___05Fpayload, sample);
        top->eval();
        const bool s_fire = have && top->s___05Fready;
        const bool m_fire = top->m___05Fvalid;
        if (m_fire) {
            get_words<ONCHIP_M_WORDS>(top->m___05Fpayload, pred);
            pred += ONCHIP_M_WORDS;
        }
        tick();
        ++stream_cycles;
        if (s_fire) {
            ++sent;
            sample += ONCHIP_S_WORDS;
        }
        if (m_fire) {
            ++recv;
            if (recv == next_report) {
                std::printf("progress %" PRIu64 "\n", recv);
                std::fflush(stdout);
                next_report += PROGRESS_EVERY;
            }
        }
        if (s_fire || m_fire) {
            idle = 0;
        } else if (++idle > STALL_LIMIT) {
            std::fprintf(stderr,
                         "onchip harness: no handshake for %" PRIu64 " cycles (samples accepted %" PRIu64
                         ", predictions %" PRIu64 " of %" PRIu64 ")\n",
                         idle, sent, recv, n);
            return 3;
        }
    }
    top->s___05Fvalid = 0;

    // Parameter read-back: one read command per address, responses arrive in order.
    uint64_t issued = 0, got = 0, readback_cycles = 0;
    idle = 0;
    uint32_t* param = params.data();
    while (got < uint64_t(ONCHIP_N_PARAMS)) {
        const bool have = issued < uint64_t(ONCHIP_N_PARAMS);
        top->pc___05Fvalid = have;
        if (have) {
            // {write = 0, addr, data = 0}
            const uint64_t cmd = issued << ONCHIP_COEF_WIDTH;
            const uint32_t w[2] = {static_cast<uint32_t>(cmd), static_cast<uint32_t>(cmd >> 32)};
            put_words<ONCHIP_PC_WORDS>(top->pc___05Fpayload, w);
        }
        top->eval();
        const bool c_fire = have && top->pc___05Fready;
        const bool r_fire = top->pr___05Fvalid;
        if (r_fire) {
            get_words<ONCHIP_PR_WORDS>(top->pr___05Fpayload, param);
            param += ONCHIP_PR_WORDS;
        }
        tick();
        ++readback_cycles;
        issued += c_fire;
        got += r_fire;
        if (c_fire || r_fire) {
            idle = 0;
        } else if (++idle > STALL_LIMIT) {
            std::fprintf(stderr,
                         "onchip harness: parameter port silent for %" PRIu64 " cycles (%" PRIu64
                         " of %d reads answered)\n",
                         idle, got, ONCHIP_N_PARAMS);
            return 3;
        }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu_seconds = double(std::clock() - c0) / CLOCKS_PER_SEC;
    top->final();

    FILE* fout = std::fopen(argv[2], "wb");
    if (!fout) fail("cannot open the output file");
    const size_t n_pred = n * ONCHIP_M_WORDS;
    const size_t n_param = size_t(ONCHIP_N_PARAMS) * ONCHIP_PR_WORDS;
    if (std::fwrite(preds.data(), 4, n_pred, fout) != n_pred ||
        std::fwrite(params.data(), 4, n_param, fout) != n_param || std::fclose(fout) != 0)
        fail("cannot write the output file");
    std::printf("done stream_cycles=%" PRIu64 " readback_cycles=%" PRIu64 " seconds=%.9f cpu_seconds=%.9f\n",
                stream_cycles, readback_cycles, seconds, cpu_seconds);
    return 0;
}
