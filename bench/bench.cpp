// pushwire-bench: codec throughput beside same-run baselines (memcpy, zlib's crc32).
// Names: BM_encode_<Function>, BM_decode_<Function>, BM_decode_message, BM_memcpy/N, BM_zlib_crc32/N,
// BM_crc32/N, BM_crc32c/N (dispatched), BM_crc32_<path>/N, BM_crc32c_<path>/N (each path this CPU
// has, and BM_crc32_copy_<path>/N, BM_crc32c_copy_<path>/N, the fused copy), BM_isal_crc32/N,
// BM_isal_crc32c/N (Intel ISA-L, when built with it); --crc-crossover measures sse42_below;
// BM_roce_parse_verify/N (a RoCEv2 frame with an N-byte payload).
#include <algorithm>
#include <array>
#include <cstring>
#include <string_view>
#include <cstdlib>
#include <cstdio>
#include <chrono>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <pushwire/pp/endpoint.hpp>
#include <pushwire/rnic/connect.hpp>
#include <pushwire/rnic/fabric.hpp>
#include <pushwire/rnic/qpc.hpp>
#include <zlib.h>
#if PUSHWIRE_BENCH_ISAL
#include <isa-l/crc.h>
#endif

#include <pushwire/ib/roce.hpp>
#include <pushwire/pushwire.hpp>

namespace {

using namespace pushwire;
using namespace pushwire::msg;

// Representative messages: a few entries each, a 1 KiB SendData, 64-byte CfgUtil data.
const std::array<pool_descriptor, 4> pools{{
    {1, 64, 2048, 0x1000, 0x7f0000000000, 1}, {2, 64, 2048, 0x1001, 0x7f0000100000, 2},
    {3, 256, 512, 0x1002, 0x7f0000200000, 3}, {4, 16, 65536, 0x1003, 0x7f0000300000, 4}}};
const std::array<pool_update_entry, 8> updates{{{1, 0, 8}, {1, 8, 8}, {2, 0, 4}, {2, 4, 4},
                                                {3, 0, 64}, {3, 64, 64}, {4, 0, 1}, {4, 1, 1}}};
const std::array<std::uint32_t, 4> refs{1, 2, 3, 4};
const std::vector<std::byte> kib(1024, std::byte{0x5a});
const std::array<indication, 8> inds{{{300, 1, 1500}, {300, 2, 1500}, {300, 3, 9000}, {301, 0, 64},
                                      {301, 1, 64}, {302, 7, 70000}, {303, 0, 0}, {304, 9, 1}}};
const std::vector<std::byte> stats(64, std::byte{1});

template <class M>
M sample();
template <> buffer_recv_pool sample() { return {.header = {.transaction_context = 1}, .pools = pools}; }
template <> buffer_recv_pool_get sample() { return {.header = {.transaction_context = 2}, .element_size = 2048, .element_count = 64}; }
template <> buffer_recv_pool_update sample() { return {.header = {.transaction_context = 3}, .entries = updates}; }
template <> buffer_pool_flush_request sample() { return {.header = {.transaction_context = 4}, .pool_refs = refs}; }
template <> buffer_pool_flush_reply sample() { return {.header = {.transaction_context = 4}}; }
template <> send_data sample() { return {.header = {.transaction_context = 5}, .data = kib}; }
template <> buffer_rdma_indicate sample() { return {.header = {.transaction_context = 6}, .entries = inds}; }
template <> cfg_util_request sample() {
  return {.header = {.transaction_context = 7}, .request_code = cfg::request_code::get_statistics};
}
template <> cfg_util_reply sample() {
  return {.header = {.transaction_context = 7}, .request_code = cfg::request_code::get_statistics,
          .status = cfg::status::success, .data = stats};
}

template <class M>
void BM_encode(benchmark::State& state) {
  const M m = sample<M>();
  std::vector<std::byte> out(encoded_size(m));
  for (auto _ : state) {
    auto n = msg::encode(m, out);
    benchmark::DoNotOptimize(n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * out.size()));
}

template <class M>
void BM_decode(benchmark::State& state) {
  std::vector<std::byte> frame(encoded_size(sample<M>()));
  (void)msg::encode(sample<M>(), frame);
  for (auto _ : state) {
    benchmark::DoNotOptimize(frame.data());
    auto r = msg::decode<M>(frame);
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * frame.size()));
}

// Decoding a mix of all nine through the variant, as a receive loop would.
void BM_decode_message(benchmark::State& state) {
  std::vector<std::vector<std::byte>> frames;
  std::size_t bytes = 0;
  for_each_message_type([&]<class M>(std::type_identity<M>) {
    frames.emplace_back(encoded_size(sample<M>()));
    (void)msg::encode(sample<M>(), frames.back());
    bytes += frames.back().size();
  });
  for (auto _ : state) {
    for (const auto& f : frames) {
      benchmark::DoNotOptimize(f.data());
      auto r = msg::decode(std::span<const std::byte>(f));
      benchmark::DoNotOptimize(r);
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * frames.size()));
}
BENCHMARK(BM_decode_message);

void BM_memcpy(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<char> src(n, 'x'), dst(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

void BM_zlib_crc32(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<unsigned char> buf(n);
  for (std::size_t i = 0; i < n; ++i) buf[i] = static_cast<unsigned char>(i * 131);
  for (auto _ : state) {
    auto c = crc32(0L, buf.data(), static_cast<uInt>(n));
    benchmark::DoNotOptimize(c);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

// The same bytes for every CRC benchmark of a size.
std::vector<std::byte> crc_input(std::size_t n) {
  std::vector<std::byte> buf(n);
  for (std::size_t i = 0; i < n; ++i) buf[i] = static_cast<std::byte>(i * 131);
  return buf;
}

template <class F>
void crc_bench(benchmark::State& state, F f) {
  const auto buf = crc_input(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    benchmark::DoNotOptimize(buf.data());
    auto c = f(std::span<const std::byte>(buf));
    benchmark::DoNotOptimize(c);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * buf.size()));
}

void BM_crc32(benchmark::State& s) { crc_bench(s, [](auto b) { return wire::crc::crc32(b); }); }
void BM_crc32c(benchmark::State& s) { crc_bench(s, [](auto b) { return wire::crc::crc32c(b); }); }
#if PUSHWIRE_BENCH_ISAL
void BM_isal_crc32(benchmark::State& s) {
  crc_bench(s, [](auto b) {
    return crc32_gzip_refl(0, reinterpret_cast<const unsigned char*>(b.data()), b.size());
  });
}
void BM_isal_crc32c(benchmark::State& s) {
  crc_bench(s, [](auto b) {
    return crc32_iscsi(const_cast<unsigned char*>(reinterpret_cast<const unsigned char*>(b.data())),
                       static_cast<int>(b.size()), 0xFFFFFFFF);
  });
}
// ISA-L's own kernels for CPUs without AVX-512 (its dispatcher picks them there; the library
// exports them): BM_isal_crc32_by8_02 (AVX, 128-bit PCLMULQDQ) and BM_isal_crc32c_01 (crc32
// instruction, 3 streams, PCLMULQDQ merge): the same-run peers of the AVX2 path on this CPU.
extern "C" std::uint32_t crc32_gzip_refl_by8_02(std::uint32_t, const unsigned char*, std::uint64_t);
extern "C" unsigned int crc32_iscsi_01(unsigned char*, int, unsigned int);
void BM_isal_crc32_by8_02(benchmark::State& s) {
  crc_bench(s, [](auto b) { return crc32_gzip_refl_by8_02(0, reinterpret_cast<const unsigned char*>(b.data()), b.size()); });
}
void BM_isal_crc32c_01(benchmark::State& s) {
  crc_bench(s, [](auto b) {
    return crc32_iscsi_01(const_cast<unsigned char*>(reinterpret_cast<const unsigned char*>(b.data())),
                          static_cast<int>(b.size()), 0xFFFFFFFF);
  });
}
#endif

// With --benchmark_repetitions, also report the minimum: on a shared machine it is the least
// disturbed estimate.
double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
#define PUSHWIRE_BENCH_SIZES Arg(64)->Arg(1500)->Arg(4096)->Arg(65536)->Arg(1048576)->ComputeStatistics("min", min_of)
BENCHMARK(BM_memcpy)->PUSHWIRE_BENCH_SIZES;
BENCHMARK(BM_zlib_crc32)->PUSHWIRE_BENCH_SIZES;
BENCHMARK(BM_crc32)->PUSHWIRE_BENCH_SIZES;
BENCHMARK(BM_crc32c)->PUSHWIRE_BENCH_SIZES;

// 16 cells' CRC-32Cs: a 32-byte header and N data bytes each, the data copied out as it is
// checksummed. _batch: crc32c_batch; _each: crc32c then crc32c_copy, cell by cell. Bytes
// processed: the 16 cells' data.
void crc_cells(benchmark::State& state, bool batch) {
  const auto n = static_cast<std::size_t>(state.range(0));
  constexpr std::size_t cells = 16;
  const auto in = crc_input(cells * (n + 32));
  std::vector<std::byte> out(cells * n);
  std::array<wire::crc::crc32c_job, cells> jobs{};
  for (auto _ : state) {
    for (std::size_t i = 0; i < cells; ++i) {
      const auto head = std::span<const std::byte>(in).subspan(i * (n + 32), 32);
      jobs[i] = {head, std::span<const std::byte>(in).subspan(i * (n + 32) + 32, n), out.data() + i * n, 0};
    }
    if (batch) {
      wire::crc::crc32c_batch(jobs);
    } else {
      for (auto& j : jobs) j.crc = wire::crc::crc32c_copy({j.dst, j.src.size()}, j.src, wire::crc::crc32c(j.head));
    }
    benchmark::DoNotOptimize(jobs.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * cells * n));
}
void BM_crc32c_cells_batch(benchmark::State& s) { crc_cells(s, true); }
void BM_crc32c_cells_each(benchmark::State& s) { crc_cells(s, false); }
BENCHMARK(BM_crc32c_cells_batch)->Arg(64)->Arg(256)->Arg(512)->Arg(1000)->ComputeStatistics("min", min_of);
BENCHMARK(BM_crc32c_cells_each)->Arg(64)->Arg(256)->Arg(512)->Arg(1000)->ComputeStatistics("min", min_of);

#if PUSHWIRE_BENCH_ISAL
BENCHMARK(BM_isal_crc32)->PUSHWIRE_BENCH_SIZES;
BENCHMARK(BM_isal_crc32c)->PUSHWIRE_BENCH_SIZES;
BENCHMARK(BM_isal_crc32_by8_02)->PUSHWIRE_BENCH_SIZES;
BENCHMARK(BM_isal_crc32c_01)->PUSHWIRE_BENCH_SIZES;
#endif

// A whole RoCEv2 frame parse with ICRC verification: RC RDMA_WRITE_ONLY over IPv4 with an N-byte
// payload; bytes processed: the frame. BM_roce_parse_verify: ib::inspect (every layer validated,
// every header located, the ICRC checked; fields decode on access). BM_roce_parse_decode_verify:
// ib::decode_into, which also decodes every field of every header into a reused packet.
std::vector<std::byte> roce_frame(std::size_t payload_len) {
  static std::vector<std::byte> payload;
  payload = crc_input(payload_len);
  ib::roce_packet s;
  s.eth = {.dst = {2, 0, 0, 0, 0, 2}, .src = {2, 0, 0, 0, 0, 1}};
  s.ip4.src = {10, 0, 0, 1};
  s.ip4.dst = {10, 0, 0, 2};
  s.bth = {.opcode = ib::code(ib::opcode::rc_rdma_write_only), .p_key = 0xFFFF, .destqp = 0x11, .a = true, .psn = 7};
  s.payload = payload;
  s.ext.set<ib::ext::reth>({.va = 0x7f0000000000, .r_key = 0x1234, .dmalen = static_cast<std::uint32_t>(payload.size())});
  std::vector<std::byte> frame(*ib::frame_size(s));
  (void)ib::build(s, frame);
  return frame;
}

void BM_roce_parse_verify(benchmark::State& state) {
  const auto frame = roce_frame(static_cast<std::size_t>(state.range(0)));
  ib::roce_view v;
  for (auto _ : state) {
    benchmark::DoNotOptimize(frame.data());
    const auto e = ib::inspect(frame, v);
    if (e.code != wire::errc{} || v.icrc_state != ib::crc_status::good) state.SkipWithError("frame did not verify");
    benchmark::DoNotOptimize(v);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * frame.size()));
}

void BM_roce_parse_decode_verify(benchmark::State& state) {
  const auto frame = roce_frame(static_cast<std::size_t>(state.range(0)));
  ib::roce_packet p;  // reused, as a receive loop would
  for (auto _ : state) {
    benchmark::DoNotOptimize(frame.data());
    const auto e = ib::decode_into(frame, p);
    if (e.code != wire::errc{} || p.icrc_state != ib::crc_status::good) state.SkipWithError("frame did not verify");
    benchmark::DoNotOptimize(p);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * frame.size()));
}
BENCHMARK(BM_roce_parse_decode_verify)->Arg(64)->Arg(1024)->Arg(4096)->ComputeStatistics("min", min_of);
BENCHMARK(BM_roce_parse_verify)->Arg(64)->Arg(1024)->Arg(4096)->ComputeStatistics("min", min_of);

// Cell segmentation and reassembly of an N-byte RDMA write (the seed's 256-byte cells, idata in
// the last cell), in bursts of 16 cells as a port moves them: the segmenter writes 16 cells
// into reused buffers (segmenter::next(frames, sizes)) and the reassembler takes them at once
// (reassembler::push(frames, ...)), which verifies each cell CRC, places the data into a
// destination buffer and checks the packet CRC; both compute a burst's CRCs together.
// _percell: the same one cell at a time (next(), push()). Bytes processed: N (compare
// BM_memcpy/N).
void cell_sar(benchmark::State& state, std::size_t cell_payload, bool burst) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto payload = crc_input(n);
  constexpr std::size_t cells = 16;
  std::vector<std::byte> dest(n), bufs(cells * (cell_payload + 128));
  std::array<std::span<std::byte>, cells> outs{};
  std::array<std::span<const std::byte>, cells> ins{};
  std::array<std::size_t, cells> sizes{};
  for (std::size_t i = 0; i < cells; ++i) outs[i] = std::span(bufs).subspan(i * (cell_payload + 128), cell_payload + 128);
  const cell::packet_spec spec{.dst = {2, 0, 0, 0, 0, 2}, .src = {2, 0, 0, 0, 0, 1}, .dst_wqp = 0x22, .src_wqp = 0x11,
                               .type = cell::cell_type::rdma_write, .rdma = cell::vamh{.va = 0x7f0000000000, .mh = 0x1234},
                               .idata = 0x07050100};
  cell::reassembler r({.max_packets = 1, .max_packet_bytes = 0, .max_bytes = n, .max_cell_payload = cell_payload, .history = 1});
  std::uint32_t psn = 0;
  for (auto _ : state) {
    auto p = spec;
    p.psn = psn++ & 0xFFFFFF;
    auto seg = cell::segmenter::make(p, std::span<const std::byte>(payload), cell_payload).value();
    bool delivered = false, rejected = false;
    const auto take = [&](std::size_t, const cell::push_result& res) {
      delivered = res.status == cell::push_status::delivered;
      rejected |= res.status == cell::push_status::rejected;
    };
    while (!seg.done()) {
      if (burst) {
        const std::size_t k = seg.next(std::span<const std::span<std::byte>>(outs), sizes).value();
        for (std::size_t i = 0; i < k; ++i) ins[i] = outs[i].first(sizes[i]);
        r.push(std::span(ins).first(k), 0, dest, take);
      } else {
        const std::size_t len = seg.next(outs[0]).value();
        take(0, r.push(outs[0].first(len), 0, dest));
      }
    }
    if (rejected) state.SkipWithError("cell rejected");
    if (!delivered) state.SkipWithError("packet not delivered");
    benchmark::DoNotOptimize(dest.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n));
}
void BM_cell_sar(benchmark::State& s) { cell_sar(s, cell::default_cell_payload, true); }
void BM_cell_sar_percell(benchmark::State& s) { cell_sar(s, cell::default_cell_payload, false); }
void BM_cell_sar_jumbo(benchmark::State& s) { cell_sar(s, 8192, false); }
BENCHMARK(BM_cell_sar)->Arg(4096)->Arg(65536)->Arg(1048576)->ComputeStatistics("min", min_of);
BENCHMARK(BM_cell_sar_percell)->Arg(4096)->Arg(65536)->Arg(1048576)->ComputeStatistics("min", min_of);
// The same with 8 KiB cells (a 9000-byte jumbo frame), one at a time: per-cell costs amortised
// over 32x the data (a burst of 16 such cells, 133 KB, no longer fits the L1 cache between the
// segmenter and the reassembler).
BENCHMARK(BM_cell_sar_jumbo)->Arg(65536)->Arg(1048576)->ComputeStatistics("min", min_of);

// The reference RNIC (spec/rnic.md §11): two devices on a loopback fabric with no virtual rate
// or latency, one connected RC QP pair, registered buffers; every frame is built with its ICRC
// (or cell CRCs), crosses the fabric, is verified and placed.
struct rnic_bench {
  rnic::loopback_fabric fab;
  std::unique_ptr<rnic::device> a, b;
  rnic::cq_memory acq{4096}, bcq{4096};
  rnic::sq_memory asq{1024}, bsq{1024};
  rnic::rq_memory arq{1024}, brq{1024};
  std::vector<std::byte> abuf, bbuf;
  rnic::memory_region amr{}, bmr{};
  std::uint32_t qa = 0, qb = 0;
  std::vector<rnic::work_completion> wc = std::vector<rnic::work_completion>(256);
  explicit rnic_bench(std::size_t bytes, rnic::framing f = rnic::framing::roce) {
    auto port = [&](std::uint8_t n) {
      rnic::device_config c;
      c.ports[0].mac = {2, 0, 0, 0, 0, n};
      c.ports[0].gid = rnic::gid_v4(198, 18, 0, n);
      c.ports[0].framing = f;
      c.tx_queue = 1u << 16;
      return c;
    };
    a = std::make_unique<rnic::device>(port(1));
    b = std::make_unique<rnic::device>(port(2));
    (void)fab.link(*a, 0, *b, 0, {.rate = 0, .latency = 0, .mtu = 1u << 16, .queue_bytes = ~std::size_t{0}});
    abuf.assign(bytes, std::byte{0x5A});
    bbuf.assign(bytes, std::byte{0});
    const auto apd = *a->alloc_pd(), bpd = *b->alloc_pd();
    amr = *a->reg_mr(apd, abuf.data(), abuf.size(), rnic::all_access);
    bmr = *b->reg_mr(bpd, bbuf.data(), bbuf.size(), rnic::all_access);
    const auto ac = *a->create_cq(acq), bc = *b->create_cq(bcq);
    qa = *a->create_qp({.pd = apd, .send_cq = ac, .recv_cq = ac, .sq = &asq, .rq = &arq});
    qb = *b->create_qp({.pd = bpd, .send_cq = bc, .recv_cq = bc, .sq = &bsq, .rq = &brq});
    (void)rnic::bring_up(*a, qa, {.peer_qpn = qb, .av = rnic::address_of(*b), .mtu = 4096, .timeout = 14, .min_rnr_timer = 12, .remote = rnic::all_access});
    (void)rnic::bring_up(*b, qb, {.peer_qpn = qa, .av = rnic::address_of(*a), .mtu = 4096, .timeout = 14, .min_rnr_timer = 12, .remote = rnic::all_access});
  }
  /// Runs the fabric until `n` completions have been polled on a's CQ (and b's, for b_n).
  bool wait(std::size_t n, std::size_t b_n = 0) {
    std::size_t got = 0, got_b = 0;
    return fab.run([&] {
      got += acq.poll(wc);
      got_b += bcq.poll(wc);
      return got >= n && got_b >= b_n;
    }, fab.now() + 10'000'000'000ull);
  }
};

// An N-byte RDMA WRITE from a to b, completed: bytes processed N (compare BM_memcpy/N).
void rnic_write(benchmark::State& state, rnic::framing f) {
  const auto n = static_cast<std::size_t>(state.range(0));
  rnic_bench r(n, f);
  const rnic::sge s{r.amr.addr, static_cast<std::uint32_t>(n), r.amr.lkey};
  for (auto _ : state) {
    if (r.a->post_send(r.qa, {.opcode = rnic::wr_opcode::rdma_write, .sg_list = {&s, 1}, .remote_addr = r.bmr.addr, .rkey = r.bmr.rkey}) != rnic::errc{} ||
        !r.wait(1))
      state.SkipWithError("write did not complete");
  }
  if (r.bbuf[n - 1] != std::byte{0x5A}) state.SkipWithError("bytes not placed");
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n));
}
void BM_rnic_write(benchmark::State& s) { rnic_write(s, rnic::framing::roce); }
void BM_rnic_write_cell(benchmark::State& s) { rnic_write(s, rnic::framing::cell); }
BENCHMARK(BM_rnic_write)->Arg(4096)->Arg(65536)->Arg(1048576)->ComputeStatistics("min", min_of);
BENCHMARK(BM_rnic_write_cell)->Arg(4096)->Arg(65536)->Arg(1048576)->ComputeStatistics("min", min_of);

// N-byte SENDs, 64 posted at a time (each batch completed at both ends): messages as items.
void BM_rnic_send(benchmark::State& state) {
  const auto n = static_cast<std::uint32_t>(state.range(0));
  constexpr int batch = 64;
  rnic_bench r(std::size_t{n} * batch);
  const rnic::sge s{r.amr.addr, n, r.amr.lkey};
  for (auto _ : state) {
    for (int i = 0; i < batch; ++i) {
      const rnic::sge d{r.bmr.addr + std::uint64_t{n} * static_cast<std::uint64_t>(i), n, r.bmr.lkey};
      (void)r.b->post_recv(r.qb, {.sg_list = {&d, 1}});
      (void)r.a->post_send(r.qa, {.opcode = rnic::wr_opcode::send, .flags = 0, .sg_list = {&s, 1}});
    }
    // unsignaled sends: the receives say they arrived
    if (!r.wait(0, batch)) state.SkipWithError("sends did not arrive");
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch));
}
BENCHMARK(BM_rnic_send)->Arg(64)->ComputeStatistics("min", min_of);

// 64-byte signaled WRITEs across N RC QPs (spec/qos.md §7), posted as a program serving its
// connections in groups of 32 posts them: each group's QPs in turn, eight rounds, then the next
// group; 256 WRs per iteration. Arg 1: lookahead W (1: doorbell order; 0: no cache model); the
// sender holds 16 QP contexts, a miss costing 1 us of virtual time. Items: WRs (real time); counters: virtual ns
// per WR and context misses per WR.
void BM_rnic_send_qps(benchmark::State& state) {
  const auto qps = static_cast<std::size_t>(state.range(0));
  const auto lookahead = static_cast<std::size_t>(state.range(1));
  constexpr std::size_t per_iteration = 256, rounds = 8;
  const std::size_t group = std::min<std::size_t>(qps, 32);
  rnic::loopback_fabric fab;
  auto cfg = [](std::uint8_t n, std::size_t w) {
    rnic::device_config c;
    c.ports[0].mac = {2, 0, 0, 0, 0, n};
    c.ports[0].gid = rnic::gid_v4(198, 18, 0, n);
    c.tx_queue = 1u << 16;
    c.max_qps = 8192;
    if (w) c.contexts = {.entries = 16, .lookahead = w, .fetch = 1'000};
    return c;
  };
  rnic::device a(cfg(1, lookahead)), b(cfg(2, 0));
  (void)fab.link(a, 0, b, 0, {});
  std::vector<std::byte> abuf(qps * 64, std::byte{0x5A}), bbuf(qps * 64);
  const auto apd = *a.alloc_pd(), bpd = *b.alloc_pd();
  const auto amr = *a.reg_mr(apd, abuf.data(), abuf.size(), rnic::all_access), bmr = *b.reg_mr(bpd, bbuf.data(), bbuf.size(), rnic::all_access);
  rnic::cq_memory acq(8192), bcq(16);
  const auto ac = *a.create_cq(acq), bc = *b.create_cq(bcq);
  std::vector<std::unique_ptr<rnic::sq_memory>> sqs;
  std::vector<std::unique_ptr<rnic::rq_memory>> rqs;
  std::vector<std::uint32_t> qa(qps);
  for (std::size_t i = 0; i < qps; ++i) {
    const std::uint32_t depth = qps == 1 ? 256 : 32;  // the most one QP has posted at once
    for (int k = 0; k < 2; ++k) sqs.push_back(std::make_unique<rnic::sq_memory>(depth)), rqs.push_back(std::make_unique<rnic::rq_memory>(16));
    qa[i] = *a.create_qp({.pd = apd, .send_cq = ac, .recv_cq = ac, .sq = sqs[2 * i].get(), .rq = rqs[2 * i].get()});
    const auto qb = *b.create_qp({.pd = bpd, .send_cq = bc, .recv_cq = bc, .sq = sqs[2 * i + 1].get(), .rq = rqs[2 * i + 1].get()});
    (void)rnic::bring_up(a, qa[i], {.peer_qpn = qb, .av = rnic::address_of(b), .mtu = 1024, .timeout = 14, .remote = rnic::all_access});
    (void)rnic::bring_up(b, qb, {.peer_qpn = qa[i], .av = rnic::address_of(a), .mtu = 1024, .timeout = 14, .remote = rnic::all_access});
  }
  std::vector<rnic::work_completion> wc(512);
  std::size_t next = 0;  // position in the posting pattern
  const rnic::time_ns start = fab.now();
  for (auto _ : state) {
    for (std::size_t k = 0; k < per_iteration; ++k, ++next) {
      const std::size_t span = group * rounds, g = next / span % (qps / group), i = g * group + next % group;
      const rnic::sge s{amr.addr + i * 64, 64, amr.lkey};
      (void)a.post_send(qa[i], {.opcode = rnic::wr_opcode::rdma_write, .sg_list = {&s, 1}, .remote_addr = bmr.addr + i * 64, .rkey = bmr.rkey});
    }
    std::size_t got = 0;
    if (!fab.run([&] { return (got += acq.poll(wc)) >= per_iteration; }, fab.now() + 10'000'000'000ull)) state.SkipWithError("WRs did not complete");
  }
  const double wrs = static_cast<double>(state.iterations() * per_iteration);
  state.SetItemsProcessed(static_cast<std::int64_t>(wrs));
  state.counters["virtual_ns_per_wr"] = static_cast<double>(fab.now() - start) / wrs;
  state.counters["misses_per_wr"] = static_cast<double>(a.counters().context_misses) / wrs;
}
BENCHMARK(BM_rnic_send_qps)
    ->ArgsProduct({{1, 64, 512, 4096}, {0, 1, 64}})
    ->ArgNames({"qps", "lookahead"})
    ->ComputeStatistics("min", min_of);

// The real-time work of a context cache miss (spec/qos.md §7): decoding one packed QP context
// (rnic::qpc, 135 bytes) into a cache entry. Items: contexts.
void BM_qpc_decode(benchmark::State& state) {
  rnic::sq_memory sq(64);
  rnic::qp_attr a;
  a.av = a.alt_av = {.port = 0, .dmac = {2, 0, 0, 0, 0, 2}, .dgid = rnic::gid_v4(198, 18, 0, 2)};
  a.dest_qp_num = 0x123456;
  const rnic::packed_qpc p = rnic::pack_qpc(0x11, {.pd = 1, .send_cq = 1, .recv_cq = 1, .sq = &sq}, rnic::qp_state::rts, a);
  for (auto _ : state) {
    auto c = rnic::unpack_qpc(p);
    benchmark::DoNotOptimize(c);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_qpc_decode)->ComputeStatistics("min", min_of);

// One N-byte SEND from a to b and one back, each to a posted receive: time per round trip.
void BM_rnic_pingpong(benchmark::State& state) {
  const auto n = static_cast<std::uint32_t>(state.range(0));
  rnic_bench r(n);
  const rnic::sge sa{r.amr.addr, n, r.amr.lkey}, sb{r.bmr.addr, n, r.bmr.lkey};
  for (auto _ : state) {
    (void)r.b->post_recv(r.qb, {.sg_list = {&sb, 1}});
    (void)r.a->post_recv(r.qa, {.sg_list = {&sa, 1}});
    (void)r.a->post_send(r.qa, {.opcode = rnic::wr_opcode::send, .flags = 0, .sg_list = {&sa, 1}});
    if (!r.wait(0, 1)) state.SkipWithError("ping lost");
    (void)r.b->post_send(r.qb, {.opcode = rnic::wr_opcode::send, .flags = 0, .sg_list = {&sb, 1}});
    if (!r.wait(1)) state.SkipWithError("pong lost");
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_rnic_pingpong)->Arg(64)->ComputeStatistics("min", min_of);

// The push-push layer (spec/pp.md §2): N-byte packets from a host endpoint to an I/O-unit
// endpoint over two RNICs on the loopback fabric (no virtual rate or latency), each delivered to
// a callback that reads its first byte; the I/O unit returns credits as it polls. Items:
// packets. send_max picks the carrier: BM_pp_packet uses the default (SendData up to 256 bytes,
// WRITE with idata above), _send forces SendData and _write forces the write.
void pp_packet(benchmark::State& state, std::uint32_t send_max) {
  const auto n = static_cast<std::size_t>(state.range(0));
  rnic::loopback_fabric fab;
  auto port = [](std::uint8_t k) {
    rnic::device_config c;
    c.ports[0].mac = {2, 0, 0, 0, 0, k};
    c.ports[0].gid = rnic::gid_v4(198, 18, 0, k);
    c.tx_queue = 1u << 16;
    return c;
  };
  rnic::device hd(port(1)), id(port(2));
  (void)fab.link(hd, 0, id, 0, {.rate = 0, .latency = 0, .mtu = 1u << 16, .queue_bytes = ~std::size_t{0}});
  std::uint64_t got = 0, sum = 0;
  pp::endpoint host(hd, {.send_max = send_max});
  pp::endpoint iou(id, {.first_pool_ref = 0x81, .send_max = send_max}, {.packet = [&](std::span<const std::byte> b) { ++got, sum += std::to_integer<unsigned>(b[0]); }});
  (void)host.connect(iou.local());
  (void)iou.connect(host.local());
  const auto poll = [&] { host.poll(), iou.poll(); };
  fab.run([&] { return poll(), host.writable(n); }, fab.now() + 1'000'000'000);
  const std::vector<std::byte> pkt(n, std::byte{1});
  constexpr std::uint64_t batch = 64;
  for (auto _ : state) {
    const std::uint64_t want = got + batch;
    for (std::uint64_t i = 0; i < batch; ++i)
      if (!fab.run([&] { return host.send_packet(pkt) != pp::errc::would_block || (poll(), false); }, fab.now() + 1'000'000'000)) state.SkipWithError("no credit");
    if (!fab.run([&] { return poll(), got >= want; }, fab.now() + 1'000'000'000)) state.SkipWithError("packets lost");
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * batch * n));
}
void BM_pp_packet(benchmark::State& s) { pp_packet(s, 256); }
void BM_pp_packet_send(benchmark::State& s) { pp_packet(s, 2048); }
void BM_pp_packet_write(benchmark::State& s) { pp_packet(s, 0); }
BENCHMARK(BM_pp_packet)->Arg(64)->Arg(256)->Arg(1500)->ComputeStatistics("min", min_of);
BENCHMARK(BM_pp_packet_send)->Arg(64)->Arg(256)->Arg(512)->Arg(1024)->Arg(1500)->ComputeStatistics("min", min_of);
BENCHMARK(BM_pp_packet_write)->Arg(64)->Arg(256)->Arg(512)->Arg(1024)->Arg(1500)->ComputeStatistics("min", min_of);

// Every path this CPU has, by name: BM_crc32_<path>/N, BM_crc32c_<path>/N, and the fused copy
// BM_crc32_copy_<path>/N, BM_crc32c_copy_<path>/N (bytes copied and checksummed; memcpy is
// BM_memcpy/N).
template <class F>
void crc_copy_bench(benchmark::State& state, F f) {
  const auto src = crc_input(static_cast<std::size_t>(state.range(0)));
  std::vector<std::byte> dst(src.size());
  for (auto _ : state) {
    benchmark::DoNotOptimize(src.data());
    auto c = f(std::span<std::byte>(dst), std::span<const std::byte>(src));
    benchmark::DoNotOptimize(c);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * src.size()));
}
const int registered_crc_paths = [] {
  namespace crc = wire::crc;
  for (const auto& name : crc::path_names) {
    const auto p = static_cast<crc::path>(name.value);
    if (!crc::available(p)) continue;
    const std::string n{name.name};
    if (crc::implements(p, crc::crc32_poly)) {
      benchmark::RegisterBenchmark(("BM_crc32_" + n).c_str(), [p](benchmark::State& s) {
        crc_bench(s, [p](auto b) { return crc::crc32_with(p, b); });
      })->PUSHWIRE_BENCH_SIZES;
      benchmark::RegisterBenchmark(("BM_crc32_copy_" + n).c_str(), [p](benchmark::State& s) {
        crc_copy_bench(s, [p](auto d, auto b) { return crc::crc32_copy_with(p, d, b); });
      })->PUSHWIRE_BENCH_SIZES;
    }
    benchmark::RegisterBenchmark(("BM_crc32c_" + n).c_str(), [p](benchmark::State& s) {
      crc_bench(s, [p](auto b) { return crc::crc32c_with(p, b); });
    })->PUSHWIRE_BENCH_SIZES;
    benchmark::RegisterBenchmark(("BM_crc32c_copy_" + n).c_str(), [p](benchmark::State& s) {
      crc_copy_bench(s, [p](auto d, auto b) { return crc::crc32c_copy_with(p, d, b); });
    })->PUSHWIRE_BENCH_SIZES;
  }
  return 0;
}();

// BM_encode_<Function> and BM_decode_<Function> for every message type.
const int registered = [] {
  for_each_message_type([]<class M>(std::type_identity<M>) {
    const std::string n{name(code_of<M>)};
    benchmark::RegisterBenchmark(("BM_encode_" + n).c_str(), BM_encode<M>);
    benchmark::RegisterBenchmark(("BM_decode_" + n).c_str(), BM_decode<M>);
  });
  return 0;
}();

// --crc-crossover: for each folding path, the input size from which it computes CRC-32C faster
// than sse42 (wire::crc::sse42_below, spec/crc.md §2); then, for vpclmul_avx2 and
// vpclmul_avx512, folding alone against each crc32-stream setting (crc::streams) from 1 KiB to
// 64 KiB, with ISA-L's crc32_iscsi beside when built with it. Each size is timed as the median of
// 9 rounds of enough independent calls to take ~0.2 ms (throughput, as the benchmarks measure);
// "from" is the first size sampled from which the winner wins at every larger one.
int crc_crossover() {
  namespace crc = wire::crc;
  const auto buf = crc_input(65536 + 64);
  const auto time_ns = [&](std::size_t n, auto&& fn) {
    const std::span<const std::byte> s(buf.data(), n);
    const int calls = static_cast<int>(std::max<std::size_t>(200, 2000000 / (n + 64)));
    std::array<double, 9> rounds{};
    for (double& t : rounds) {
      std::uint32_t acc = 0;
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) acc ^= fn(s, static_cast<std::uint32_t>(i));  // independent calls
      const auto t1 = std::chrono::steady_clock::now();
      benchmark::DoNotOptimize(acc);
      t = std::chrono::duration<double, std::nano>(t1 - t0).count() / calls;
    }
    std::nth_element(rounds.begin(), rounds.begin() + 4, rounds.end());
    return rounds[4];
  };
  const auto on = [](crc::path p, crc::streams st = {}) {
    return [p, st](std::span<const std::byte> s, std::uint32_t seed) { return crc::crc32c_with(p, st, s, seed); };
  };
  const bool tty = isatty(STDERR_FILENO);
  const auto progress = [&](std::string_view what, std::size_t n) {
    if (tty) std::fprintf(stderr, "\r%.*s %zu bytes   ", static_cast<int>(what.size()), what.data(), n);
  };
  const auto clear = [&] {
    if (tty) std::fprintf(stderr, "\r%50s\r", "");
  };
  if (!crc::available(crc::path::sse42)) {
    std::printf("sse42 is not available on this CPU: no crossover to measure\n");
    return 0;
  }
  std::vector<std::size_t> sizes;
  for (std::size_t n = 16; n <= 4096; n += n < 512 ? 16 : n < 2048 ? 64 : 256) sizes.push_back(n);
  std::printf("%-16s %s\n", "folding path", "CRC-32C faster than sse42 from (bytes); ns at 64 / 256 / 1024 B, fold vs sse42");
  for (crc::path fold : {crc::path::pclmul, crc::path::vpclmul_avx2, crc::path::vpclmul_avx512}) {
    if (!crc::available(fold)) continue;
    std::size_t from = sizes.front();  // the first sampled size from which folding always wins
    std::string at;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const std::size_t n = sizes[i];
      progress(crc::to_string(fold), n);
      const double f = time_ns(n, on(fold)), x = time_ns(n, on(crc::path::sse42));
      if (f >= x) from = i + 1 < sizes.size() ? sizes[i + 1] : SIZE_MAX;
      if (n == 64 || n == 256 || n == 1024) {
        char cell[48];
        std::snprintf(cell, sizeof cell, " %.1f/%.1f", f, x);
        at.append(cell);
      }
    }
    clear();
    if (from == SIZE_MAX) std::printf("%-16s never (up to %zu bytes);%s\n", crc::to_string(fold).data(), sizes.back(), at.c_str());
    else std::printf("%-16s %zu;%s\n", crc::to_string(fold).data(), from, at.c_str());
  }
  // Folding alone against each crc32-stream setting, GB/s.
  const std::size_t big[] = {1024, 1536, 2048, 3072, 4096, 6144, 8192, 16384, 65536};
  for (crc::path fold : {crc::path::vpclmul_avx2, crc::path::vpclmul_avx512}) {
    if (!crc::available(fold)) continue;
    std::printf("\nCRC-32C on %s, GB/s: folding alone (off) and with three crc32 streams of W words per round\n%-7s %6s",
                crc::to_string(fold).data(), "bytes", "off");
    for (auto w : crc::stream_words_allowed) std::printf(" %5uw", unsigned{w});
    std::printf("%8s  best\n", PUSHWIRE_BENCH_ISAL ? "isa-l" : "");
    std::uint8_t winner = 0;    // the best setting at the largest size
    std::size_t winner_from = 0;  // the first size from which it beats folding alone at every larger one
    std::vector<std::pair<std::size_t, std::array<double, crc::stream_words_allowed.size() + 1>>> rows;
    for (std::size_t n : big) {
      progress(crc::to_string(fold), n);
      std::array<double, crc::stream_words_allowed.size() + 1> gbs{};
      gbs[0] = n / time_ns(n, on(fold));
      for (std::size_t k = 0; k < crc::stream_words_allowed.size(); ++k)
        gbs[k + 1] = n / time_ns(n, on(fold, {crc::stream_words_allowed[k], crc::streams_from_min}));
      double isal = 0;
#if PUSHWIRE_BENCH_ISAL
      isal = n / time_ns(n, [](std::span<const std::byte> s, std::uint32_t seed) {
        return crc32_iscsi(const_cast<unsigned char*>(reinterpret_cast<const unsigned char*>(s.data())),
                           static_cast<int>(s.size()), seed);
      });
#endif
      clear();
      const auto best = static_cast<std::size_t>(std::max_element(gbs.begin(), gbs.end()) - gbs.begin());
      std::printf("%-7zu", n);
      for (double g : gbs) std::printf(" %6.1f", g);
      if (isal > 0) std::printf(" %7.1f", isal);
      else std::printf(" %7s", "");
      std::printf("  %s\n", best == 0 ? "off" : (std::to_string(crc::stream_words_allowed[best - 1]) + "w").c_str());
      rows.push_back({n, gbs});
    }
    const auto& last = rows.back().second;
    const auto k = static_cast<std::size_t>(std::max_element(last.begin() + 1, last.end()) - last.begin());
    if (last[k] > last[0]) {
      winner = crc::stream_words_allowed[k - 1];
      winner_from = rows.back().first;
      for (std::size_t i = rows.size(); i-- > 0 && rows[i].second[k] > rows[i].second[0];) winner_from = rows[i].first;
    }
    const crc::streams d = crc::default_streams(fold);
    if (winner) std::printf("measured: streams=%u@%zu", unsigned{winner}, winner_from);
    else std::printf("measured: streams=off (folding alone wins at %zu bytes)", big[std::size(big) - 1]);
    std::printf("; this build's default: streams=%u@%u (PUSHWIRE_CRC_PATH=crc32c=%s,streams=W@BYTES or streams=off tries another)\n",
                unsigned{d.words}, static_cast<unsigned>(d.from), crc::to_string(fold).data());
  }
  return 0;
}

}  // namespace

// Reports the CRC paths in the benchmark context (a bad PUSHWIRE_CRC_PATH exits 2, saying why),
// then runs Google Benchmark, or --crc-crossover.
int main(int argc, char** argv) {
  namespace crc = wire::crc;
  const char* env = std::getenv("PUSHWIRE_CRC_PATH");
  const auto sel = crc::select(env ? env : "");
  if (sel.error != crc::select_errc{}) {
    std::fprintf(stderr, "pushwire-bench: PUSHWIRE_CRC_PATH=%s: %s: %.*s\n", env, wire::enum_name(sel.error).data(),
                 static_cast<int>(sel.culprit.size()), sel.culprit.data());
    return 2;
  }
  std::string avail;
  for (const auto& n : crc::path_names)
    if (crc::available(static_cast<crc::path>(n.value))) avail.append(avail.empty() ? "" : " ").append(n.name);
  benchmark::AddCustomContext("crc_paths_available", avail);
  benchmark::AddCustomContext("crc32_path", crc::describe(crc::selected().crc32));
  benchmark::AddCustomContext("crc32c_path", crc::describe(crc::selected().crc32c));
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--crc-crossover") return crc_crossover();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
