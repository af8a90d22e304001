// net::xdp_port (spec/net.md §6), in a network namespace of its own (a child process unshares
// one):
// - the steering program's verdict on frames written out byte by byte here, run by the kernel
//   (BPF_PROG_TEST_RUN) with the port's socket in its map: RoCEv2 and cells go to the socket,
//   everything else and every truncation to the kernel;
// - two reference RNICs on the two ends of a veth pair move an RC WRITE of 200 KB and a SEND over
//   AF_XDP, intact, with and without loss, their neighbours' MACs resolved through the kernel.
// Skips, visibly, where namespaces, veth or BPF are not allowed.
#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

#include <pushwire/net/xdp.hpp>

#include "../support/process.hpp"
#include "../support/transfer.hpp"
#include <pushwire/rnic/connect.hpp>

using namespace pushwire;

namespace {

using bytes = std::vector<std::uint8_t>;

bytes cat(std::initializer_list<bytes> parts) {
  bytes out;
  for (const bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
bytes eth(std::uint16_t type) { return {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, std::uint8_t(type >> 8), std::uint8_t(type)}; }
bytes tag(std::uint16_t tpid, std::uint16_t inner) { return {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, std::uint8_t(tpid >> 8), std::uint8_t(tpid), 0, 5, std::uint8_t(inner >> 8), std::uint8_t(inner)}; }
// IPv4 with `ihl` words of header (options zero), protocol, flags and fragment offset.
bytes ipv4(std::uint8_t proto, std::uint16_t frag = 0x4000, std::uint8_t ihl = 5) {
  bytes h(std::max<std::size_t>(20, 4u * ihl), 0);
  h[0] = static_cast<std::uint8_t>(0x40 | ihl);
  h[2] = 0, h[3] = 60;
  h[6] = static_cast<std::uint8_t>(frag >> 8), h[7] = static_cast<std::uint8_t>(frag);
  h[8] = 64, h[9] = proto;
  h[12] = 198, h[13] = 18, h[14] = 6, h[15] = 1;
  h[16] = 198, h[17] = 18, h[18] = 6, h[19] = 2;
  return h;
}
bytes first(const bytes& b, std::size_t n) { return bytes(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n)); }
bytes ipv6(std::uint8_t next) {
  bytes h(40, 0);
  h[0] = 0x60, h[5] = 24, h[6] = next, h[7] = 64;
  return h;
}
bytes udp(std::uint16_t sport, std::uint16_t dport) { return {std::uint8_t(sport >> 8), std::uint8_t(sport), std::uint8_t(dport >> 8), std::uint8_t(dport), 0, 24, 0, 0}; }
const bytes bth(12, 0x11), tail(4, 0x22);

// The program's verdict on `frame` (BPF_PROG_TEST_RUN), or -errno.
int verdict(int prog, const bytes& frame) {
  bpf_test_run_opts o{};
  o.sz = sizeof o;
  o.data_in = frame.data();
  o.data_size_in = static_cast<std::uint32_t>(frame.size());
  o.repeat = 1;
  if (::bpf_prog_test_run_opts(prog, &o) != 0) return -errno;
  return static_cast<int>(o.retval);
}

// The steering cases: 0 when every verdict is as written, else the failing case's number.
int steering() {
  if (std::system("ip link add pwxa type veth peer name pwxb && ip link set pwxa up && ip link set pwxb up") != 0) return 101;
  net::xdp_port port({.interface = "pwxa"});
  if (!port.ok()) return port.error() == EPERM || port.error() == EACCES ? 101 : 10;
  const int r = XDP_REDIRECT, p = XDP_PASS;
  const bytes roce4 = cat({eth(0x0800), ipv4(17), udp(0xC000, 4791), bth, tail});
  struct tcase {
    bytes frame;
    int want;
  };
  const std::vector<tcase> cases = {
      {roce4, r},
      {cat({tag(0x8100, 0x0800), ipv4(17), udp(0xC000, 4791), bth, tail}), r},
      {cat({tag(0x88A8, 0x0800), ipv4(17), udp(0xC000, 4791), bth, tail}), p},  // 802.1ad: the device reads one 802.1Q tag only
      {cat({eth(0x86DD), ipv6(17), udp(0xC000, 4791), bth, tail}), r},
      {cat({tag(0x8100, 0x86DD), ipv6(17), udp(0xC000, 4791), bth, tail}), r},
      {cat({eth(0x86DD), ipv6(0), bytes(8, 0), udp(0xC000, 4791), bth}), p},  // a hop-by-hop header first
      {cat({eth(0x88B5), bytes(40, 0x33)}), r},
      {cat({tag(0x8100, 0x88B5), bytes(40, 0x33)}), r},
      {cat({eth(0x0806), bytes(28, 0)}), p},                               // ARP
      {cat({eth(0x0800), ipv4(1), bytes(16, 0)}), p},                      // ICMP
      {cat({eth(0x0800), ipv4(6), udp(0xC000, 4791), bytes(20, 0)}), p},   // TCP to 4791
      {cat({eth(0x0800), ipv4(17), udp(0xC000, 4792), bth}), p},           // another UDP port
      {cat({eth(0x0800), ipv4(17), udp(4791, 53), bth}), p},               // 4791 as the source
      {cat({eth(0x0800), ipv4(17, 0x4000, 6), udp(0xC000, 4791), bth}), r},  // options
      {cat({eth(0x0800), ipv4(17, 0x4000, 15), udp(0xC000, 4791), bth}), r},  // 60 bytes of header
      {cat({eth(0x0800), first(ipv4(17, 0x4000, 4), 16), udp(0xC000, 4791), bth}), p},  // a header of 4 words, UDP after it
      {cat({eth(0x0800), ipv4(17, 0x2000), udp(0xC000, 4791), bth}), p},   // more fragments
      {cat({eth(0x0800), ipv4(17, 0x0001), udp(0xC000, 4791), bth}), p},   // a later fragment
      {cat({eth(0x0800), ipv4(17, 0x0000), udp(0xC000, 4791), bth}), r},   // DF clear, not a fragment
      {cat({eth(0x0800), ipv4(17, 0x4000, 15)}), p},                      // no room for UDP after 60 bytes of header
      {cat({eth(0x9000), bytes(40, 0)}), p},                               // another EtherType
  };
  for (std::size_t i = 0; i < cases.size(); ++i)
    if (verdict(port.program_fd(), cases[i].frame) != cases[i].want) return 20 + static_cast<int>(i);
  // Every truncation of a RoCEv2 frame short of its UDP header passes; from there on it goes to
  // the socket (the device judges the rest). The kernel takes no frame under 14 bytes.
  for (std::size_t n = 14; n <= roce4.size(); ++n)
    if (verdict(port.program_fd(), bytes(roce4.begin(), roce4.begin() + static_cast<std::ptrdiff_t>(n))) != (n >= 14 + 20 + 8 ? r : p))
      return 41 + static_cast<int>(n - 14);  // 41..69 (100 and 101 mean skipped)
  return 0;
}

// The running kernel's release is older than major.minor.
bool kernel_before(int major, int minor) {
  utsname u{};
  int ma = 0, mi = 0;
  if (::uname(&u) != 0 || std::sscanf(u.release, "%d.%d", &ma, &mi) != 2) return true;
  return ma < major || (ma == major && mi < minor);
}

struct xnode {
  net::xdp_port link;
  rnic::device dev;
  static rnic::device_config config(const net::xdp_port& l, std::uint8_t n) {
    rnic::port_config p;
    p.mac = l.mac();
    p.gid = rnic::gid_v4(198, 18, 6, n);
    rnic::device_config c;
    c.ports = {p};
    c.retry_forever = true;
    return c;
  }
  xnode(const char* ifname, std::uint8_t n, double loss) : link({.interface = ifname, .faults = {.loss = loss}, .seed = n}), dev(config(link, n)) {}
  void step() {
    const auto now = net::monotonic_ns();
    link.receive_into(dev, 0, now);
    dev.progress(now);
    link.send_from(dev, 0, now);
  }
};

// Two devices on the ends of a veth pair: 0 on success, else the step that failed.
// Link MTU 3000: one UMEM frame a packet, path MTU 2048. Link MTU 9000: multi-buffer, path MTU
// 4096, every WRITE packet in two UMEM frames each way.
int transfer(double loss, std::uint32_t link_mtu) {
  // One namespace holds both ends: each must take ARP from an address that is local here too.
  if (std::system((std::string("ip link add pwxa type veth peer name pwxb && ip addr add 198.18.6.1/24 dev pwxa && ip addr add 198.18.6.2/24 dev pwxb &&"
                              " sysctl -qw net.ipv4.conf.all.accept_local=1 net.ipv4.conf.pwxa.accept_local=1 net.ipv4.conf.pwxb.accept_local=1 &&"
                              " sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.pwxa.rp_filter=0 net.ipv4.conf.pwxb.rp_filter=0 &&"
                              " ip link set pwxa mtu ") + std::to_string(link_mtu) + " up && ip link set pwxb mtu " + std::to_string(link_mtu) + " up").c_str()) != 0)
    return 101;
  xnode a("pwxa", 1, loss), b("pwxb", 2, loss);
  if (!a.link.ok() || !b.link.ok()) return a.link.error() == EPERM || a.link.error() == EACCES ? 101 : 11;
  const bool jumbo = link_mtu > 4096;
  if (jumbo && (!a.link.multi_buffer() || !b.link.multi_buffer())) return kernel_before(6, 6) ? 101 : 13;  // XDP_USE_SG: Linux 6.6
  const std::uint32_t path = jumbo ? 4096 : 2048;
  if (a.link.path_mtu() != path) return 12;
  // The address vectors name no MAC: the ports find each other's through the kernel.
  auto av_of = [](std::uint8_t n) {
    rnic::address_vector av{};
    av.dgid = rnic::gid_v4(198, 18, 6, n);
    return av;
  };
  auto diagnose = [&] {  // where the frames went
    for (const xnode* x : {&a, &b}) {
      const auto st = x->link.stats();
      const auto& dc = x->dev.counters();
      std::fprintf(stderr, "xdp %s: native %d sent %llu received %llu resolving %llu waiting %zu rx_dropped %llu; device in %llu out %llu by_qp %llu\n",
                   x == &a ? "a" : "b", x->link.native(), static_cast<unsigned long long>(st.sent), static_cast<unsigned long long>(st.received),
                   static_cast<unsigned long long>(st.resolving), x->link.waiting(), static_cast<unsigned long long>(st.rx_dropped),
                   static_cast<unsigned long long>(dc.frames_in), static_cast<unsigned long long>(dc.frames_out),
                   static_cast<unsigned long long>(dc.dropped_by_qp));
    }
    std::fflush(stderr);
    (void)std::system("ip -s link show pwxa; ip -s link show pwxb");
  };
  if (const int failed = test::write_then_send(a, b, av_of(2), av_of(1), path, diagnose)) return failed;
  if (a.link.stats().sent < 200000 / path) return 24;  // 200000 bytes in packets of `path` bytes at most
  // Multi-buffer: the WRITE's packets left in two UMEM frames and arrived in two (3840 bytes a
  // received one); never without it.
  const auto as = a.link.stats(), bs = b.link.stats();
  if (jumbo ? as.sent_multi < 200000 / path || bs.received_multi < 200000 / path : as.sent_multi + bs.received_multi != 0) return 30;
  if (bs.too_long != 0) return 31;
  if (loss > 0 && a.link.stats().lost == 0) return 25;
  if (b.dev.counters().dropped_bad_frame != 0 || a.dev.counters().dropped_bad_frame != 0) return 26;  // every ICRC held
  // a asked the kernel for b's MAC (b's kernel learned a's from that ARP request)
  if (a.link.stats().resolving == 0) return 27;
  if (a.link.stats().unresolved != 0 || a.link.stats().too_large != 0) return 28;
  // A frame over the interface's MTU is refused here, not lost in the kernel.
  net::xdp_port& l = a.link;
  const std::vector<std::byte> big(link_mtu + 14 + 4 + 1, std::byte{0x5A});  // over the MTU even with a tag
  l.send(big, net::monotonic_ns());
  if (l.stats().too_large != 1 || l.waiting() != 0) return 29;
  return 0;
}

// One device on one end of a veth pair, two of its QPs connected to each other through the
// interface's own address: 0 when the transfer completes with every frame looped back in the
// port and none sent to the wire; else the step that failed.
int loopback() {
  if (std::system("ip link add pwxa type veth peer name pwxb && ip addr add 198.18.6.1/24 dev pwxa &&"
                  " ip link set pwxa mtu 3000 up && ip link set pwxb mtu 3000 up") != 0)
    return 101;
  xnode a("pwxa", 1, 0);
  if (!a.link.ok()) return a.link.error() == EPERM || a.link.error() == EACCES ? 101 : 11;
  rnic::address_vector self{};
  self.dgid = rnic::gid_v4(198, 18, 6, 1);
  if (const int failed = test::write_then_send(a, a, self, self, 2048)) return failed;
  const auto st = a.link.stats();
  if (st.looped < 100) return 24;  // 98 packets of the WRITE, the SEND, and their ACKs
  if (st.sent != 0 || st.resolving != 0 || st.unresolved != 0) return 25;
  if (a.dev.counters().dropped_bad_frame != 0) return 26;
  return 0;
}

}  // namespace

TEST_CASE("xdp: a device's frames to its interface's own address loop back in the port, none to the wire", "[net][xdp]") {
  const auto failed_step = test::in_new_netns(loopback, "no network namespace, veth or BPF here (needs root: CAP_NET_ADMIN and CAP_BPF)");
  if (failed_step) CHECK(*failed_step == 0);
}

TEST_CASE("xdp: the steering program sends RoCEv2 and cells to the socket and passes the rest to the kernel", "[net][xdp]") {
  const auto failed_case = test::in_new_netns(steering, "no network namespace, veth or BPF here (needs root: CAP_NET_ADMIN and CAP_BPF)");
  if (failed_case) CHECK(*failed_case == 0);
}

TEST_CASE("xdp: two devices on a veth pair move a 200 KB WRITE and a SEND over AF_XDP, with and without loss, at MTU 3000 and 9000", "[net][xdp]") {
  const double loss = GENERATE(0.0, 0.03);
  const std::uint32_t mtu = GENERATE(3000u, 9000u);
  INFO("loss " << loss << " link MTU " << mtu);
  const auto failed_step = test::in_new_netns([&] { return transfer(loss, mtu); }, "no network namespace, veth or BPF here (needs root: CAP_NET_ADMIN and CAP_BPF)");
  if (failed_step) CHECK(*failed_step == 0);
}
