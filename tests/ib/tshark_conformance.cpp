// ctest "ib: stock tshark decodes pushwire's frames": frames built by pushwire (every RC, UC and
// UD opcode stock Wireshark 4.0 knows, payloads around the pad boundaries, ACK / RNR NAK / NAK,
// IPv4 and IPv6) go into a pcap; tshark's own InfiniBand dissector decodes it and every field must
// equal the value pushwire was asked to encode (the roce_packet, not pushwire's parser).
// Wireshark's payload heuristics (RPCoRDMA, EoIB, ...) are disabled: they claim short SEND
// payloads, throw, and hide the ICRC; what is compared is the IB layer. Wireshark shows
// AtomicETH's VA and R_Key under the RETH's field names.
// Exit status: 0 pass, 1 fail, 77 skip (tshark missing).
//
// usage: tshark_conformance WORKDIR
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <pushwire/ib/print.hpp>
#include <pushwire/ib/roce.hpp>
#include <pushwire/wire/pcap.hpp>

namespace {

using namespace pushwire;
using namespace pushwire::ib;

// The fields compared, in tshark's -e order.
const char* const fields[] = {
    "infiniband.bth.opcode", "infiniband.bth.se",     "infiniband.bth.m",       "infiniband.bth.padcnt",
    "infiniband.bth.tver",   "infiniband.bth.p_key",  "infiniband.bth.destqp",  "infiniband.bth.a",
    "infiniband.bth.psn",    "infiniband.reth.va",    "infiniband.reth.r_key",  "infiniband.reth.dmalen",
    "infiniband.immdt",      "infiniband.aeth.syndrome", "infiniband.aeth.msn", "infiniband.deth.q_key",
    "infiniband.deth.srcqp", "infiniband.invariant.crc", "infiniband.atomiceth.swapdt",
    "infiniband.atomiceth.cmpdt", "infiniband.atomicacketh.origremdt", "infiniband.ieth"};
constexpr std::size_t nfields = std::size(fields);

using row = std::array<std::optional<std::string>, nfields>;  // expected text per field; nullopt = absent

std::string num(std::uint64_t v) { return std::to_string(v); }

// What tshark must print, derived from the spec pushwire built the frame from.
row expected(const roce_packet& s, std::span<const std::byte> frame) {
  row r;
  const std::size_t pad = (4 - s.payload.size() % 4) % 4;
  r[0] = num(s.bth.opcode);
  r[1] = num(s.bth.se);
  r[2] = num(s.bth.m);
  r[3] = num(pad);
  r[4] = num(0);  // not the literal: g++-12 -O3 warns falsely (-Wrestrict) on optional<string> = "0"
  r[5] = num(s.bth.p_key);
  r[6] = num(s.bth.destqp);
  r[7] = num(s.bth.a);
  r[8] = num(s.bth.psn);
  if (const auto& h = s.ext.get<ext::reth>()) {
    r[9] = num(h->va);
    r[10] = num(h->r_key);
    r[11] = num(h->dmalen);
  }
  if (const auto& h = s.ext.get<ext::immdt>()) {
    char b[16];
    std::snprintf(b, sizeof b, "%08x", h->value);
    r[12] = b;
  }
  if (const auto& h = s.ext.get<ext::aeth>()) {
    r[13] = num(h->syndrome);
    r[14] = num(h->msn);
  }
  if (const auto& h = s.ext.get<ext::deth>()) {
    r[15] = num(h->q_key);
    r[16] = num(h->srcqp);
  }
  const auto icrc = frame.last(4);
  std::uint64_t be = 0;
  for (std::byte b : icrc) be = be << 8 | static_cast<std::uint8_t>(b);
  r[17] = num(be);
  if (const auto& h = s.ext.get<ext::atomiceth>()) {
    r[9] = num(h->va);  // Wireshark's names for AtomicETH's VA and R_Key
    r[10] = num(h->r_key);
    r[18] = num(h->swapdt);
    r[19] = num(h->cmpdt);
  }
  if (const auto& h = s.ext.get<ext::atomicacketh>()) r[20] = num(h->origremdt);
  if (const auto& h = s.ext.get<ext::ieth>()) {
    char b[16];
    std::snprintf(b, sizeof b, "%08x", h->value);
    r[21] = b;
  }
  return r;
}

// tshark prints numbers in decimal or 0x-hex, byte fields as hex; compare as numbers or text.
bool same(const std::string& got, const std::string& want, std::size_t field) {
  if (field == 12 || field == 21) return got == want;  // immdt, ieth: bytes
  char* end = nullptr;
  const unsigned long long v = std::strtoull(got.c_str(), &end, 0);
  return end && *end == '\0' && !got.empty() && std::to_string(v) == want;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: tshark_conformance WORKDIR\n";
    return 2;
  }
  if (std::system("command -v tshark >/dev/null 2>&1") != 0) {
    std::cout << "SKIP: tshark is not installed (apt-get install tshark)\n";
    return 77;
  }
  const std::string dir = argv[1];
  std::system(("mkdir -p '" + dir + "'").c_str());
  const std::string pcap_path = dir + "/pushwire-frames.pcap";

  std::vector<std::byte> file;
  wire::pcap::writer w{file};
  std::vector<row> want;
  std::vector<std::string> what;
  std::vector<std::byte> payload(8), buf(512);
  std::uint64_t t = 1'700'000'000'000'000'000ull;
  auto add = [&](roce_packet s, const std::string& label) {
    const std::size_t n = build(s, buf).value();
    const std::span<const std::byte> f(buf.data(), n);
    w.add(t += 1000, f);
    want.push_back(expected(s, f));
    what.push_back(label);
  };
  bool v6 = false;
  for (const opcode_info& o : opcodes) {
    if (o.tp != transport::rc && o.tp != transport::uc && o.tp != transport::ud) continue;
    if (o.any(op_class::flush | op_class::atomic_write)) continue;  // newer than Wireshark 4.0
    if (o.is(op_class::read_as_write)) continue;                      // pushwire's own: unknown to Wireshark
    for (std::size_t len = 0; len <= 5; ++len) {
      if (!o.payload && len) continue;
      roce_packet s;
      s.eth.src = {2, 0, 0, 0, 0, 1};
      s.eth.dst = {2, 0, 0, 0, 0, 2};
      v6 = !v6;
      s.v6 = v6;
      if (v6) {
        s.ip6.src = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        s.ip6.dst = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
        s.ip6.flow = 0x12345;
      } else {
        s.ip4.src = {10, 0, 0, 1};
        s.ip4.dst = {10, 0, 0, 2};
      }
      s.bth = {.opcode = o.code, .se = len % 2 == 1, .m = len == 3, .p_key = static_cast<std::uint16_t>(0x8000 + len),
               .destqp = 0x00ABCD + len, .a = len != 2, .psn = 0xFFFFFD + static_cast<std::uint32_t>(len)};
      s.bth.psn = s.bth.psn & 0xFFFFFF;
      if (o.has(ext::deth)) s.ext.set<ext::deth>({.q_key = 0x80010000 + static_cast<std::uint32_t>(len), .srcqp = 0x77});
      if (o.has(ext::reth)) s.ext.set<ext::reth>({.va = 0x7f0000001000 + len, .r_key = 0xCAFE0000 + static_cast<std::uint32_t>(len), .dmalen = static_cast<std::uint32_t>(4096 + len)});
      if (o.has(ext::immdt)) s.ext.set<ext::immdt>({.value = 0x07050100 + static_cast<std::uint32_t>(len)});
      if (o.has(ext::ieth)) s.ext.set<ext::ieth>({.value = 0x1234});
      if (o.has(ext::aeth)) s.ext.set<ext::aeth>({.syndrome = 0x1F, .msn = 0x100 + static_cast<std::uint32_t>(len)});
      if (o.has(ext::atomiceth)) s.ext.set<ext::atomiceth>({.va = 0x1000, .r_key = 0x55, .swapdt = 1, .cmpdt = 2});
      if (o.has(ext::atomicacketh)) s.ext.set<ext::atomicacketh>({.origremdt = 0x99});
      payload.resize(len);
      for (std::size_t i = 0; i < len; ++i) payload[i] = static_cast<std::byte>(0x30 + i);
      s.payload = payload;
      add(s, std::string{o.name} + " payload " + std::to_string(len) + (v6 ? " IPv6" : " IPv4"));
    }
  }
  // ACK with credits, RNR NAKs, every NAK code.
  for (std::uint8_t syn : {0x00, 0x1F, 0x21, 0x30, 0x3F, 0x60, 0x61, 0x62, 0x63, 0x64}) {
    for (bool six : {false, true}) {
      roce_packet s;
      if (six) s.v6 = true, s.ip6.src = {0xfd, 1}, s.ip6.dst = {0xfd, 2};
      s.bth = {.opcode = code(opcode::rc_acknowledge), .p_key = 0xFFFF, .destqp = 0x11, .psn = 42};
      s.ext.set<ext::aeth>({.syndrome = syn, .msn = 0xABCDEF});
      add(s, "ACK syndrome " + std::to_string(syn) + (six ? " IPv6" : " IPv4"));
    }
  }
  std::ofstream(pcap_path, std::ios::binary).write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));

  // The protocols whose heuristics sit on infiniband.payload, as this tshark lists them (not
  // "ethertype", which Ethernet itself needs).
  std::string heur;
  if (FILE* h = popen("tshark -G heuristic-decodes 2>/dev/null", "r")) {
    char l[256];
    while (std::fgets(l, sizeof l, h)) {
      std::string s = l;
      if (!s.starts_with("infiniband.payload\t")) continue;
      s = s.substr(19);
      s = s.substr(0, s.find('\t'));
      if (s != "ethertype") heur += " --disable-protocol " + s;
    }
    pclose(h);
  }
  std::string cmd = "WIRESHARK_ABORT_ON_DISSECTOR_BUG=1 tshark" + heur + " -r '" + pcap_path +
                    "' -T fields -E separator='|' -E occurrence=f";
  for (const char* f : fields) cmd += std::string(" -e ") + f;
  cmd += " 2>'" + dir + "/tshark.stderr'";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return 1;
  std::string out;
  char chunk[4096];
  std::size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, p)) > 0) out.append(chunk, n);
  const int status = pclose(p);
  if (status != 0) {
    std::cout << "FAIL: tshark exited with " << status << "\n";
    return 1;
  }
  std::istringstream lines(out);
  std::string line;
  std::size_t i = 0, failures = 0, compared = 0;
  while (std::getline(lines, line)) {
    if (i >= want.size()) {
      std::cout << "FAIL: tshark printed more frames than were written\n";
      return 1;
    }
    std::vector<std::string> cols;
    std::size_t start = 0, bar;
    while ((bar = line.find('|', start)) != std::string::npos) {
      cols.push_back(line.substr(start, bar - start));
      start = bar + 1;
    }
    cols.push_back(line.substr(start));
    cols.resize(nfields);
    for (std::size_t k = 0; k < nfields; ++k) {
      const auto& w = want[i][k];
      const bool ok = w ? same(cols[k], *w, k) : cols[k].empty();
      ++compared;
      if (!ok) {
        ++failures;
        std::cout << "FAIL frame " << i + 1 << " (" << what[i] << "): " << fields[k] << " = '" << cols[k]
                  << "', pushwire encoded " << (w ? "'" + *w + "'" : std::string{"nothing"}) << "\n";
      }
    }
    ++i;
  }
  if (i != want.size()) {
    std::cout << "FAIL: tshark decoded " << i << " frames, " << want.size() << " were written\n";
    return 1;
  }
  std::cout << want.size() << " frames, " << compared << " fields compared with stock tshark, " << failures
            << " disagreements\n";
  return failures ? 1 : 0;
}
