// flow::conformance (spec/conformance.md): for every rule a capture that breaks only that rule
// is reported exactly there, and clean conversations (the base one, the RNIC's own traffic over a
// faulty fabric, the fuzz corpus's frames) give none; nor do captures that differ from the wire
// as captures of real NICs do (transmitted and received frames skewed, one direction mostly
// missing), unless the capture is declared complete.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <pushwire/flow/conform.hpp>
#include <pushwire/rnic/fabric.hpp>

#include "../ib/public_frames.hpp"
#include "../rnic/harness.hpp"
#include "conform_cases.hpp"

using namespace pushwire;
using namespace pushwire::test::conform;

namespace {

flow::conform_options complete() {
  flow::conform_options o;
  o.complete = true;
  return o;
}

std::vector<flow::violation> judge(const capture& c, const flow::conform_options& o = {}) {
  flow::conformance k(o);
  if (!o.mtu)
    for (const auto& f : c.frames) k.learn(f);
  std::vector<flow::violation> out;
  for (std::size_t i = 0; i < c.frames.size(); ++i)
    for (const auto& v : k.check(i + 1, c.times[i], c.frames[i])) out.push_back(v);
  for (auto& v : k.finish()) out.push_back(std::move(v));
  return out;
}

/// Two reference RNICs over a faulty link, RC SEND, WRITE (with immediate), READ and atomics
/// both ways, the fabric's tap read back as the capture.
capture rnic_capture(rnic::framing f, std::uint64_t seed, const rnic::link_config& link, const std::string& path) {
  namespace tr = pushwire::test::rnic;
  rnic::device_config cfg;
  cfg.retry_forever = true;
  tr::pair w(f, seed, link, cfg);
  REQUIRE(w.fab.tap(path) == rnic::errc{});
  const auto [qa, qb] = w.connect(rnic::qp_type::rc, 1024);
  for (std::uint32_t i = 0; i < 40; ++i) {
    const std::uint32_t len = 1 + (i * 977) % 5000;
    const auto s = w.a.at(0x1000 + i * 8192, len), r = w.b.at(0x1000 + i * 8192, 8192);
    REQUIRE(w.b.dev->post_recv(qb, {.wr_id = i, .sg_list = {&r, 1}}) == rnic::errc{});
    switch (i % 5) {
      case 0: REQUIRE(w.a.dev->post_send(qa, {.wr_id = i, .opcode = rnic::wr_opcode::send, .sg_list = {&s, 1}}) == rnic::errc{}); break;
      case 1:
        REQUIRE(w.a.dev->post_send(qa, {.wr_id = i, .opcode = rnic::wr_opcode::rdma_write_with_imm, .sg_list = {&s, 1}, .imm = i,
                                        .remote_addr = w.b.addr(0x80000 + i * 8192), .rkey = w.b.mr.rkey}) == rnic::errc{});
        break;
      case 2:
        REQUIRE(w.a.dev->post_send(qa, {.wr_id = i, .opcode = rnic::wr_opcode::rdma_read, .sg_list = {&s, 1},
                                        .remote_addr = w.b.addr(0x80000 + i * 8192), .rkey = w.b.mr.rkey}) == rnic::errc{});
        break;
      case 3: {
        const auto a8 = w.a.at(0xF8000 + i * 8, 8);
        REQUIRE(w.a.dev->post_send(qa, {.wr_id = i, .opcode = rnic::wr_opcode::atomic_fetch_and_add, .sg_list = {&a8, 1},
                                        .remote_addr = w.b.addr(0xF0000), .rkey = w.b.mr.rkey, .compare_add = 1}) == rnic::errc{});
        break;
      }
      default:  // the other way
        REQUIRE(w.b.dev->post_send(qb, {.wr_id = i, .opcode = rnic::wr_opcode::rdma_write, .sg_list = {&r, 1},
                                        .remote_addr = w.a.addr(0xA0000 + i * 8192), .rkey = w.a.mr.rkey}) == rnic::errc{});
    }
  }
  // until every request completed (32 from a, 8 from b), then a little longer for the last ACKs
  std::size_t done_a = 0, done_b = 0;
  const bool all_done = w.fab.run([&] {
    done_a += w.a.poll_send().size();
    for (const auto& c : w.b.poll_send()) {
      ++done_b;
      if (c.status != rnic::wc_status::success) UNSCOPED_INFO("b's wr " << c.wr_id << ": " << wire::enum_name(c.status));
    }
    return done_a == 32 && done_b == 8;
  }, w.fab.now() + 1'000'000'000);
  INFO(done_a << " and " << done_b << " completions");
  REQUIRE(all_done);
  w.fab.run_until(w.fab.now() + 100'000);
  if (link.a_to_b.loss > 0) {
    REQUIRE(w.fab.counters().lost > 0);  // the faults happened
    REQUIRE(w.fab.counters().duplicated > 0);
  }
  auto c = capture::read(path);
  REQUIRE(c);
  return *c;
}

std::string describe(const std::vector<flow::violation>& vs) {
  std::string s;
  for (const auto& v : vs)
    s += "frame " + std::to_string(v.frame) + ": " + std::string{flow::info(v.id).name} + ": " + v.conversation + ": expected " + v.expected +
         "; seen " + v.seen + "\n";
  return s.empty() ? "(none)" : s;
}

}  // namespace

TEST_CASE("conformance: the rule table names every rule once, with a reference", "[flow][conform]") {
  std::set<std::string_view> names;
  for (const auto& r : flow::rule_table) {
    CHECK(names.insert(r.name).second);
    CHECK(!r.reference.empty());
    CHECK(flow::rule_named(r.name) == r.id);
    CHECK(wire::enum_name(r.id) == r.name);
  }
  CHECK(names.size() == flow::rule_count);
  CHECK(!flow::rule_named("req.nothing"));
}

TEST_CASE("conformance: the clean RC conversation gives no violation", "[flow][conform]") {
  const auto vs = judge(base_conversation());
  INFO(describe(vs));
  CHECK(vs.empty());
}

TEST_CASE("conformance: a program run again on the same hosts and QP numbers starts a new connection", "[flow][conform]") {
  // perftest run twice: the second run's PSNs start elsewhere and its responder's MSN at 1 again.
  for (const std::uint32_t second : {5'000'000u, 200'000u, 9'000'000u}) {
    capture c;
    const auto d = c.keep(bytes(64, 9));
    for (std::uint32_t i = 0; i < 3; ++i) {
      c.roce(write_only(100 + i, d));
      c.roce(ack(100 + i, 1 + i), false);
    }
    for (std::uint32_t i = 0; i < 2; ++i) {
      c.roce(write_only(ib::psn_add(second, i), d));
      c.roce(ack(ib::psn_add(second, i), 1 + i), false);
    }
    const auto vs = judge(c);
    INFO("second connection from PSN " << second << ": " << describe(vs));
    CHECK(vs.empty());
  }
}

TEST_CASE("conformance: a QP that migrates to its alternate path and resumes in sequence breaks no rule", "[flow][conform]") {
  // The base conversation's requests (PSNs 100..107, MigReq clear) end with a SEND at 108 lost on
  // the old path; A resends it on the alternate path with MigReq, then goes on; B answers there.
  for (const std::uint32_t resume : {109u, 108u, 107u, 105u}) {
    capture c = base_conversation();
    const auto d = c.keep(bytes(64, 9));
    packet lost = req(opcode::rc_send_only, 108, d);
    c.roce(lost, true);  // (its ACK never comes)
    for (std::uint32_t psn = resume; psn <= 109; ++psn) {
      packet w = req(opcode::rc_send_only, psn, d);
      w.mig_req = true;
      c.add(capture::roce_frame(w, true, true));
      packet a = ack(psn, psn - 102);
      a.mig_req = true;
      c.add(capture::roce_frame(a, false, true));
    }
    const auto vs = judge(c);
    INFO("resumed at PSN " << resume << ": " << describe(vs));
    CHECK(vs.empty());
  }
  // Across the PSN wrap: the old path's last is 0xFFFFFF; resuming at 0 breaks nothing, at 1 it
  // skipped PSN 0 (a complete capture reports it at once; otherwise only the responder's asking
  // for it would tell).
  for (const std::uint32_t resume : {0u, 1u}) {
    capture c;
    const auto d = c.keep(bytes(64, 9));
    for (const std::uint32_t psn : {0xFFFFFEu, 0xFFFFFFu}) {
      c.roce(req(opcode::rc_send_only, psn, d), true);
      c.roce(ack(psn, 1), false);
    }
    packet w = req(opcode::rc_send_only, resume, d);
    w.mig_req = true;
    const std::size_t at = c.add(capture::roce_frame(w, true, true));
    INFO("resumed at PSN " << resume);
    CHECK(judge(c).empty());
    const auto vs = judge(c, complete());
    INFO(describe(vs));
    if (resume == 0) {
      CHECK(vs.empty());
    } else {
      REQUIRE(vs.size() == 1);
      CHECK(vs[0].id == flow::rule::apm_psn_continuity);
      CHECK(vs[0].frame == at);
    }
  }
  // A UC requester does not resend: what the dying path lost is skipped, and no rule breaks.
  {
    capture c;
    const auto d = c.keep(bytes(64, 9));
    c.roce(req(opcode::uc_send_only, 40, d), true);
    packet w = req(opcode::uc_send_only, 45, d);
    w.mig_req = true;
    c.add(capture::roce_frame(w, true, true));
    CHECK(judge(c, complete()).empty());
  }
  // The same QP number on another address pair without MigReq is another connection, not judged.
  capture other = base_conversation();
  other.add(capture::roce_frame(req(opcode::rc_send_only, 500, other.keep(bytes(64, 9))), true, true));
  CHECK(judge(other).empty());
}

TEST_CASE("conformance: each rule's capture is reported as that rule at that frame, and nothing else", "[flow][conform]") {
  std::set<flow::rule> covered;
  for (const auto& c : rule_cases()) {
    DYNAMIC_SECTION(c.name) {
      const auto vs = judge(c.cap);
      INFO(describe(vs));
      REQUIRE(vs.size() == 1);
      CHECK(vs[0].id == c.id);
      CHECK(vs[0].frame == c.frame);
      CHECK(!vs[0].expected.empty());
      CHECK(!vs[0].seen.empty());
      // --only without the rule: nothing
      flow::conform_options o;
      o.rules &= ~(1u << static_cast<unsigned>(c.id));
      CHECK(judge(c.cap, o).empty());
      // A complete capture: the same, at the same frame
      const auto cv = judge(c.cap, complete());
      INFO("complete: " << describe(cv));
      REQUIRE(cv.size() == 1);
      CHECK(cv[0].id == c.id);
      CHECK(cv[0].frame == c.frame);
    }
    covered.insert(c.id);
  }
  CHECK(covered.size() == flow::rule_count);  // every rule has its capture
}

TEST_CASE("conformance: what only a complete capture shows is reported with complete, and not without", "[flow][conform]") {
  for (const auto& c : complete_cases()) {
    DYNAMIC_SECTION(c.name) {
      const auto tolerant = judge(c.cap);
      INFO("without complete: " << describe(tolerant));
      CHECK(tolerant.empty());
      const auto vs = judge(c.cap, complete());
      INFO("complete: " << describe(vs));
      REQUIRE(vs.size() == 1);
      CHECK(vs[0].id == c.id);
      CHECK(vs[0].frame == c.frame);
    }
  }
  CHECK(judge(base_conversation(), complete()).empty());
}

TEST_CASE("conformance: a response the capture shows before its request waits for it", "[flow][conform]") {
  // B's ACK for PSN 103 (frame 5) a frame before A's SEND 103: explained when the SEND comes.
  capture c = base_conversation();
  std::swap(c.frames[4], c.frames[5]);  // frames 5 and 6: ACK 103, then SEND 103
  const auto vs = judge(c);
  INFO(describe(vs));
  CHECK(vs.empty());
  // Its request never sent, though A goes on (PSNs 104 to 107, in sequence): reported at the end,
  // at the response's frame.
  capture never = base_conversation({.edit = [](std::size_t i, packet& p) {
    if (i == 6) p.psn = 150;
  }});
  flow::conformance k;
  for (const auto& f : never.frames) k.learn(f);
  for (std::size_t i = 0; i < never.frames.size(); ++i) CHECK(k.check(i + 1, never.times[i], never.frames[i]).empty());
  const auto late = k.finish();
  INFO(describe(late));
  REQUIRE(late.size() == 1);
  CHECK(late[0].id == flow::rule::resp_ack_psn);
  CHECK(late[0].frame == 6);
  CHECK(late[0].seen.find("PSN 150; never sent") != std::string::npos);
  // An ACK for PSN 108 at the capture's end: nothing of A's after it, so its request may simply
  // not have been recorded before the capture stopped.
  const auto end = judge(base_conversation({.edit = [](std::size_t i, packet& p) {
    if (i == 13) p.psn = 108;
  }}));
  INFO(describe(end));
  CHECK(end.empty());
}

TEST_CASE("conformance: a skipped PSN the responder asked for is the requester's, one nobody mentions is the capture's", "[flow][conform]") {
  // A skips PSN 101 and nothing in the capture answers it: the capture may have missed both.
  capture silent;
  const auto d = silent.keep(bytes(64, 9));
  silent.roce(write_only(100, d));
  silent.roce(req(opcode::rc_send_only, 102, d));
  silent.roce(req(opcode::rc_send_only, 103, d));
  CHECK(judge(silent).empty());
  // B's NAK asks for 101 (even recorded before the packet that skipped it): A's.
  capture asked;
  const auto e = asked.keep(bytes(64, 9));
  asked.roce(write_only(100, e));
  asked.roce(nak(101, ib::nak_code::psn_sequence_error, 1), false);
  asked.roce(req(opcode::rc_send_only, 102, e));
  asked.roce(write_only(100, e));
  asked.roce(req(opcode::rc_send_only, 102, e));
  const auto vs = judge(asked);
  INFO(describe(vs));
  REQUIRE(vs.size() == 1);
  CHECK(vs[0].id == flow::rule::req_psn_sequence);
  CHECK(vs[0].frame == 3);
  CHECK(vs[0].seen.find("NAK at frame 2") != std::string::npos);
  // Resent after the NAK: nothing.
  asked.roce(req(opcode::rc_send_only, 101, e));
  CHECK(judge(asked).empty());
}

TEST_CASE("conformance: captures of real NICs: transmitted and received frames skewed, one direction mostly missing", "[flow][conform][rnic]") {
  // The reference RNICs' traffic over a clean link (SEND, WRITE with immediate, READ, atomics,
  // both directions), then recorded as a capture tool on host A would: A's frames stamped
  // later than B's by 10 and 30 times the first round trip (B answers coalesced, some 10 round
  // trips late: its responses then come before the requests they answer); only one in five of one
  // host's frames; one in three of A's frames and (nearly) none of B's.
  const std::string path = PUSHWIRE_WORKDIR "/conform-rnic-clean.pcap";
  const capture wire = rnic_capture(rnic::framing::roce, 5, rnic::link_config{}, path);
  REQUIRE(wire.frames.size() > 100);
  REQUIRE(judge(wire).empty());
  REQUIRE(judge(wire, complete()).empty());  // the tap sees every frame, in order
  const auto [a, b, rtt] = hosts_of(wire);
  REQUIRE(rtt > 0);
  struct variant {
    std::string name;
    capture cap;
    flow::rule shows;  ///< what complete() then reports (the pattern is there)
  };
  const std::vector<variant> variants{
      {"skewed by 10 round trips", skewed(wire, a, 10 * rtt), flow::rule::resp_ack_psn},
      {"skewed by 30 round trips", skewed(wire, a, 30 * rtt), flow::rule::resp_ack_psn},
      {"all of A, one in five of B", one_way(wire, a, 5), flow::rule::req_psn_sequence},
      {"all of B, one in five of A", one_way(wire, b, 5), flow::rule::req_psn_sequence},
      {"one in three of A, none of B but the first", one_way(one_way(wire, a, wire.frames.size()), b, 3), flow::rule::req_psn_sequence},
      {"the base conversation skewed", skewed(base_conversation(), mac_a, 3500), flow::rule::resp_ack_psn},
  };
  for (const auto& v : variants) {
    DYNAMIC_SECTION(v.name) {
      const auto vs = judge(v.cap);
      INFO(v.cap.frames.size() << " frames: " << describe(vs));
      CHECK(vs.empty());
      const auto cv = judge(v.cap, complete());
      CHECK(std::any_of(cv.begin(), cv.end(), [&](const flow::violation& x) { return x.id == v.shows; }));
    }
  }
}

TEST_CASE("conformance: the inferred MTU is per request stream: two QP pairs of the same hosts at 1024 and 4096", "[flow][conform]") {
  // The base conversation (MTU 1024, to QP 0x12) and, beside it, a 4096-MTU WRITE to QP 0x13.
  // Inferred per host pair, the 4096 would make the 1024-byte FIRST and MIDDLE short.
  constexpr std::uint32_t qp_c = 0x13, qp_d = 0x14;
  capture c = base_conversation({.after = [](std::size_t i, capture& k) {
    if (i != 3) return;
    const auto big = k.keep(bytes(4096, 9)), tail = k.keep(bytes(100, 10));
    packet f = write_first(500, big, 4196);
    f.dest_qp = qp_c;
    k.roce(f);
    k.roce(req(opcode::rc_rdma_write_last, 501, tail, qp_c));
    k.roce(ack(501, 1, qp_d), false);
  }});
  const auto vs = judge(c);
  INFO(describe(vs));
  CHECK(vs.empty());
}

TEST_CASE("conformance: frames others published (scapy's UC SENDs, a ConnectX-4 Lx CNP) give no violation", "[flow][conform]") {
  using namespace pushwire::test::public_frames;
  capture c;
  c.add({v4_frame.begin(), v4_frame.end()});
  c.add({v6_frame.begin(), v6_frame.end()});
  c.add({cx4_cnp.begin(), cx4_cnp.end()});
  for (const bool whole : {false, true}) {
    flow::conform_options o;
    o.complete = whole;
    flow::conformance k(o);
    for (std::size_t i = 0; i < c.frames.size(); ++i) CHECK(k.check(i + 1, c.times[i], c.frames[i]).empty());
    CHECK(k.finish().empty());
    CHECK(k.summary().roce == 3);
  }
}

TEST_CASE("conformance: the reference RNIC's own traffic over a lossy, duplicating, reordering fabric gives no violation",
          "[flow][conform][rnic]") {
  // Every operation of the soak's mix is in test::rnic's harness; here a smaller mix, both
  // framings, with the fabric's tap as the capture.
  for (const auto framing : {rnic::framing::roce, rnic::framing::cell}) {
    for (std::uint64_t seed : {1u, 2u, 3u, 4u}) {
      DYNAMIC_SECTION(wire::enum_name(framing) << " seed " << seed) {
        const std::string path = PUSHWIRE_WORKDIR "/conform-rnic.pcap";
        rnic::link_config link{};
        link.a_to_b = link.b_to_a = {.loss = 0.05, .duplicate = 0.05, .reorder = 0.05};
        const auto cap = rnic_capture(framing, seed, link, path);
        INFO(cap.frames.size() << " frames");
        REQUIRE(cap.frames.size() > 100);
        const auto vs = judge(cap);
        INFO(describe(vs));
        CHECK(vs.empty());
      }
    }
  }
}

TEST_CASE("conformance: frames the capture cut (snaplen 128) are judged by their headers", "[flow][conform]") {
  for (const bool bad_psn : {false, true}) {
    auto c = base_conversation({.edit = [&](std::size_t i, packet& p) {
      if (bad_psn && i == 4) p.psn = bogus_ack_psn;  // resp.ack_psn, as in its rule capture
    }});
    flow::conformance k;
    std::vector<flow::violation> all;
    for (std::size_t i = 0; i < c.frames.size(); ++i) {
      auto f = c.frames[i];
      const std::size_t wire = f.size();
      f.resize(std::min<std::size_t>(f.size(), 128));
      for (const auto& v : k.check(i + 1, c.times[i], f, wire)) all.push_back(v);
    }
    for (auto& v : k.finish()) all.push_back(v);
    INFO(describe(all));
    CHECK(all.size() == (bad_psn ? 1u : 0u));
    CHECK(k.summary().roce == c.frames.size());
  }
}

TEST_CASE("conformance: a corrupted capture never crashes and every violation names a frame it was given", "[flow][conform]") {
  std::mt19937_64 rng(7);
  auto cases = rule_cases();
  for (int round = 0; round < 200; ++round) {
    const auto& src = cases[rng() % cases.size()].cap;
    flow::conformance k;
    std::vector<flow::violation> all;
    for (std::size_t i = 0; i < src.frames.size(); ++i) {
      auto f = src.frames[i];
      if (!f.empty() && rng() % 3 == 0) f[rng() % f.size()] ^= static_cast<std::byte>(1u << (rng() % 8));
      if (rng() % 8 == 0) f.resize(rng() % (f.size() + 1));
      for (const auto& v : k.check(i + 1, src.times[i], f)) all.push_back(v);
    }
    for (auto& v : k.finish()) all.push_back(v);
    for (const auto& v : all) {
      CHECK(v.frame >= 1);
      CHECK(v.frame <= src.frames.size());
    }
  }
}
