// net::packet_port (spec/net.md §5): two reference RNICs in cell framing, each on one end of a
// veth pair in a network namespace of its own (a child process unshares one), move an RC WRITE
// of 200 KB and a SEND as cells over AF_PACKET, intact, with and without injected loss.
// Skips, visibly, where namespaces, veth or AF_PACKET are not allowed.
#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include <pushwire/net/packet.hpp>
#include <pushwire/net/udp.hpp>

#include "../support/process.hpp"
#include "../support/transfer.hpp"
#include <pushwire/rnic/connect.hpp>

using namespace pushwire;

namespace {

struct node {
  net::packet_port link;
  rnic::device dev;
  static rnic::device_config config(const net::packet_port& l, std::uint8_t n) {
    rnic::port_config p;
    p.mac = l.mac();
    p.gid = rnic::gid_v4(198, 18, 5, n);
    p.framing = rnic::framing::cell;
    p.cell_payload = 1400;
    rnic::device_config c;
    c.ports = {p};
    c.retry_forever = true;
    return c;
  }
  node(const char* ifname, std::uint8_t n, double loss)
      : link({.interface = ifname, .faults = {.loss = loss}, .seed = n}), dev(config(link, n)) {}
  void step() {
    const auto now = net::monotonic_ns();
    link.receive_into(dev, 0, now);
    dev.progress(now);
    link.send_from(dev, 0, now);
  }
};

// The child's body: 0 on success, else the step that failed (10+: setup, 20+: checks).
int in_namespace(double loss) {
  if (std::system("ip link add pwpa type veth peer name pwpb && ip link set pwpa up && ip link set pwpb up") != 0) return 101;
  node a("pwpa", 1, loss), b("pwpb", 2, loss);
  if (!a.link.ok() || !b.link.ok()) return a.link.error() == EPERM || a.link.error() == EACCES ? 101 : 11;
  if (const int failed = test::write_then_send(a, b, rnic::address_of(b.dev), rnic::address_of(a.dev), 4096)) return failed;
  if (a.link.stats().sent < 143) return 24;  // 200000 bytes in cells of 1400 bytes at most
  if (loss > 0 && a.link.stats().lost == 0) return 25;
  if (b.dev.counters().dropped_bad_frame != 0) return 26;  // every cell CRC held across the veth
  return 0;
}

}  // namespace

TEST_CASE("packet: cells over AF_PACKET on a veth pair carry a 200 KB WRITE and a SEND intact, with and without loss", "[net][cells]") {
  const double loss = GENERATE(0.0, 0.03);
  INFO("loss " << loss);
  const std::optional<int> failed_step = test::in_new_netns([&] { return in_namespace(loss); }, "no network namespace, veth or AF_PACKET here (needs root and iproute2)");
  if (failed_step) CHECK(*failed_step == 0);
}
