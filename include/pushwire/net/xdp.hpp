// RoCEv2 and cells over AF_XDP (spec/net.md §6): one port of an rnic::device on one receive queue
// of a real interface, through libxdp's AF_XDP sockets (xdp/xsk.h) and libbpf.
// - A steering program (steer_program(), assembled here: no BPF object file to find at run time)
//   sends RoCEv2 (IPv4 or IPv6, UDP destination port 4791) and cells (EtherType 0x88B5), with or
//   without one 802.1Q tag, to the socket, and passes everything else to the kernel, so ARP,
//   neighbour discovery, ping and TCP keep working on the interface.
// - The program is attached through a BPF link: it goes when the port does, or when the process
//   dies. Native XDP first, generic (SKB) XDP where the driver refuses; zero-copy first, copy
//   mode where the driver refuses (veth: native, copy).
// - Whole Ethernet frames move both ways, so the ICRC covers the IP headers as they were on the
//   wire, whoever built them. An IP frame the device sends gets the interface's MAC as its source
//   and, as its destination, the MAC the kernel's neighbour table holds for its destination IP
//   (asked for, and waited for, when absent); cells keep the MACs the device gave them. A frame
//   for one of the interface's own addresses does not leave: the next receive() gives it back
//   (a NIC's local loopback; two QPs of one device, as rdma-core's tests connect them).
// - UMEM: `frames` frames of 4096 bytes, half for receiving and half for sending. A received
//   frame is given to the device from the UMEM and its frame goes back to the fill ring at once.
// - Needs CAP_NET_ADMIN and CAP_BPF (or root). ok() is false otherwise, with error() and why():
//   the caller falls back to net::udp_port and says so.
// - The same seeded faults as the other transports on the send path (net/fault_queue.hpp).
// Real I/O: nothing sans-IO includes it.
#pragma once

#include <linux/bpf.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <xdp/libxdp.h>
#include <xdp/xsk.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <list>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <pushwire/cell/format.hpp>
#include <pushwire/ib/encap.hpp>
#include <pushwire/net/address.hpp>
#include <pushwire/net/clock.hpp>
#include <pushwire/net/fault_queue.hpp>
#include <pushwire/rnic/device.hpp>
#include <pushwire/wire/ethernet.hpp>

namespace pushwire::net {

namespace xdp {

/// XDP verdicts (enum xdp_action).
inline constexpr std::uint32_t verdict_pass = XDP_PASS, verdict_redirect = XDP_REDIRECT;

/// A BPF program written instruction by instruction, with forward jumps to labels.
class assembler {
 public:
  using label = std::size_t;
  label make_label() {
    targets_.push_back(npos);
    return targets_.size() - 1;
  }
  void place(label l) { targets_[l] = code_.size(); }
  void mov(int dst, int src) { op(BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0); }
  void mov_imm(int dst, std::int32_t imm) { op(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm); }
  void add(int dst, int src) { op(BPF_ALU64 | BPF_ADD | BPF_X, dst, src, 0, 0); }
  void add_imm(int dst, std::int32_t imm) { op(BPF_ALU64 | BPF_ADD | BPF_K, dst, 0, 0, imm); }
  void and_imm(int dst, std::int32_t imm) { op(BPF_ALU64 | BPF_AND | BPF_K, dst, 0, 0, imm); }
  void lsh_imm(int dst, std::int32_t imm) { op(BPF_ALU64 | BPF_LSH | BPF_K, dst, 0, 0, imm); }
  /// dst = the 16 bits at dst read as big-endian (network order) on any host.
  void be16(int dst) { op(BPF_ALU | BPF_END | BPF_TO_BE, dst, 0, 0, 16); }
  /// dst = *(size *)(src + off); size BPF_B, BPF_H or BPF_W.
  void load(int size, int dst, int src, std::int16_t off) { op(static_cast<std::uint8_t>(BPF_LDX | size | BPF_MEM), dst, src, off, 0); }
  void jump_reg(int cmp, int dst, int src, label to) { jump(static_cast<std::uint8_t>(BPF_JMP | cmp | BPF_X), dst, src, 0, to); }
  void jump_imm(int cmp, int dst, std::int32_t imm, label to) { jump(static_cast<std::uint8_t>(BPF_JMP | cmp | BPF_K), dst, 0, imm, to); }
  void jump(label to) { jump(BPF_JMP | BPF_JA, 0, 0, 0, to); }
  /// dst = the map whose descriptor is fd (two instructions).
  void load_map(int dst, int fd) {
    op(BPF_LD | BPF_DW | BPF_IMM, dst, BPF_PSEUDO_MAP_FD, 0, fd);
    op(0, 0, 0, 0, 0);
  }
  void call(std::int32_t helper) { op(BPF_JMP | BPF_CALL, 0, 0, 0, helper); }
  void exit() { op(BPF_JMP | BPF_EXIT, 0, 0, 0, 0); }
  /// The program, its jumps resolved; empty when a label was never placed.
  std::vector<bpf_insn> finish() const {
    std::vector<bpf_insn> out = code_;
    for (const auto& [at, l] : jumps_) {
      if (targets_[l] == npos) return {};
      out[at].off = static_cast<std::int16_t>(static_cast<std::ptrdiff_t>(targets_[l]) - static_cast<std::ptrdiff_t>(at) - 1);
    }
    return out;
  }

 private:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  void op(std::uint8_t code, int dst, int src, std::int16_t off, std::int32_t imm) {
    bpf_insn i{};
    i.code = code;
    i.dst_reg = static_cast<std::uint8_t>(dst) & 0xF;
    i.src_reg = static_cast<std::uint8_t>(src) & 0xF;
    i.off = off;
    i.imm = imm;
    code_.push_back(i);
  }
  void jump(std::uint8_t code, int dst, int src, std::int32_t imm, label to) {
    jumps_.emplace_back(code_.size(), to);
    op(code, dst, src, 0, imm);
  }
  std::vector<bpf_insn> code_;
  std::vector<std::size_t> targets_;
  std::vector<std::pair<std::size_t, label>> jumps_;
};

/// The steering program: RoCEv2 (UDP destination port `roce_port` over IPv4 without fragments,
/// with any header length of 20..60 bytes, or over IPv6 with UDP as the first next header) and
/// EtherType `cell_type`, each with or without one 802.1Q tag (the one tag wire::locate_payload
/// and the device read), go to the socket of the
/// receive queue in XSKMAP `map_fd`; everything else, a frame too short for the headers it
/// claims, and a frame of a queue with no socket, passes to the kernel. In C:
///
///   eth = data; if (eth + 14 > end) pass; type = eth->type;
///   if (type == 0x8100) { if (eth + 18 > end) pass; type = inner; eth += 4; }
///   if (type == cell_type) redirect;
///   if (type == 0x0800) { ip = eth + 14; if (ip + 20 > end || ip->protocol != 17 ||
///       (ip->frag_off & 0x3fff) || ip->ihl < 5) pass; udp = ip + 4 * ihl;
///       if (udp + 8 > end) pass; if (udp->dest == roce_port) redirect; }
///   if (type == 0x86dd) { if (eth + 62 > end || ip6->nexthdr != 17) pass;
///       if (udp->dest == roce_port) redirect; }
///   pass: return XDP_PASS;
///   redirect: return bpf_redirect_map(map, ctx->rx_queue_index, XDP_PASS);
inline std::vector<bpf_insn> steer_program(int map_fd, std::uint16_t roce_port = ib::roce_port, std::uint16_t cell_type = cell::ethertype) {
  assembler a;
  const auto pass = a.make_label(), redirect = a.make_label(), vlan = a.make_label(), l3 = a.make_label(), v4 = a.make_label(),
             v6 = a.make_label();
  // r6 ctx, r2 the Ethernet header (moved past a tag), r3 data_end, r4 and r5 scratch.
  a.mov(6, 1);
  a.load(BPF_W, 2, 6, offsetof(xdp_md, data));
  a.load(BPF_W, 3, 6, offsetof(xdp_md, data_end));
  a.mov(4, 2);
  a.add_imm(4, 14);
  a.jump_reg(BPF_JGT, 4, 3, pass);
  a.load(BPF_H, 5, 2, 12);
  a.be16(5);
  a.jump_imm(BPF_JEQ, 5, wire::ethertype_vlan, vlan);
  a.jump(l3);
  a.place(vlan);
  a.mov(4, 2);
  a.add_imm(4, 18);
  a.jump_reg(BPF_JGT, 4, 3, pass);
  a.load(BPF_H, 5, 2, 16);
  a.be16(5);
  a.add_imm(2, 4);
  a.place(l3);
  a.jump_imm(BPF_JEQ, 5, cell_type, redirect);
  a.jump_imm(BPF_JEQ, 5, 0x0800, v4);
  a.jump_imm(BPF_JEQ, 5, 0x86DD, v6);
  a.jump(pass);
  a.place(v4);
  a.mov(4, 2);
  a.add_imm(4, 14 + 20);
  a.jump_reg(BPF_JGT, 4, 3, pass);
  a.load(BPF_B, 4, 2, 14 + 9);  // protocol
  a.jump_imm(BPF_JNE, 4, 17, pass);
  a.load(BPF_H, 4, 2, 14 + 6);  // flags and fragment offset
  a.be16(4);
  a.and_imm(4, 0x3FFF);  // more fragments, or an offset: a fragment
  a.jump_imm(BPF_JNE, 4, 0, pass);
  a.load(BPF_B, 4, 2, 14);  // version and header length
  a.and_imm(4, 0x0F);
  a.lsh_imm(4, 2);
  a.jump_imm(BPF_JLT, 4, 20, pass);
  a.add(2, 4);  // r2 + 14: the UDP header
  a.mov(4, 2);
  a.add_imm(4, 14 + 8);
  a.jump_reg(BPF_JGT, 4, 3, pass);
  a.load(BPF_H, 4, 2, 14 + 2);  // destination port
  a.be16(4);
  a.jump_imm(BPF_JEQ, 4, roce_port, redirect);
  a.jump(pass);
  a.place(v6);
  a.mov(4, 2);
  a.add_imm(4, 14 + 40 + 8);
  a.jump_reg(BPF_JGT, 4, 3, pass);
  a.load(BPF_B, 4, 2, 14 + 6);  // next header
  a.jump_imm(BPF_JNE, 4, 17, pass);
  a.load(BPF_H, 4, 2, 14 + 40 + 2);
  a.be16(4);
  a.jump_imm(BPF_JEQ, 4, roce_port, redirect);
  a.jump(pass);
  a.place(redirect);
  a.load(BPF_W, 2, 6, offsetof(xdp_md, rx_queue_index));
  a.load_map(1, map_fd);
  a.mov_imm(3, XDP_PASS);  // no socket on this queue: to the kernel
  a.call(BPF_FUNC_redirect_map);
  a.exit();
  a.place(pass);
  a.mov_imm(0, XDP_PASS);
  a.exit();
  return a.finish();
}

/// Silences libxdp's and libbpf's messages while it lives (the port reports its own errors).
class quiet_libraries {
 public:
  quiet_libraries() : xdp_(libxdp_set_print(&none)), bpf_(libbpf_set_print(&none_bpf)) {}
  ~quiet_libraries() {
    libxdp_set_print(xdp_);
    libbpf_set_print(bpf_);
  }
  quiet_libraries(const quiet_libraries&) = delete;
  quiet_libraries& operator=(const quiet_libraries&) = delete;

 private:
  static int none(enum libxdp_print_level, const char*, va_list) { return 0; }
  static int none_bpf(enum libbpf_print_level, const char*, va_list) { return 0; }
  libxdp_print_fn_t xdp_;
  libbpf_print_fn_t bpf_;
};

/// Multi-buffer AF_XDP (Linux 6.6; absent from older uapi headers): the bind flag that lets a
/// frame span several UMEM frames, and the descriptor option that says more of it follows.
inline constexpr std::uint16_t use_sg = 1 << 4;   // XDP_USE_SG
inline constexpr std::uint32_t pkt_contd = 1 << 0;  // XDP_PKT_CONTD

}  // namespace xdp

/// Where the steering program runs: the driver's own XDP hook, or the generic one after the
/// kernel built an skb (slower, but any interface has it).
enum class xdp_hook : std::uint8_t { automatic, native, generic };
/// How frames reach the UMEM: the driver places them there (zero-copy) or the kernel copies.
enum class xdp_copy : std::uint8_t { automatic, copy, zero_copy };

struct xdp_config {
  /// The interface (at most 15 characters).
  std::string interface = "eth0";
  /// The receive queue the socket binds. RoCE arriving on another queue passes to the kernel:
  /// give the interface one queue (ethtool -L IF combined 1), or steer UDP 4791 to this one.
  std::uint32_t queue = 0;
  /// UMEM frames of frame_size bytes, half to receive into and half to send from: 64..65536, a
  /// power of two (4096: 16 MiB).
  std::uint32_t frames = 4096;
  /// Descriptors of each ring (fill, completion, RX, TX): 64..16384, a power of two.
  std::uint32_t ring = 2048;
  /// Frames taken from the RX ring per round: 1..1024.
  std::uint32_t batch = 64;
  xdp_hook hook = xdp_hook::automatic;
  xdp_copy copy = xdp_copy::automatic;
  /// The UDP port the program steers (RoCEv2's).
  std::uint16_t roce_port = ib::roce_port;
  /// IP frames the device sends get the interface's MAC as source and their destination's
  /// neighbour as destination (false: they leave with the device's MACs).
  bool resolve = true;
  /// Frames larger than one UMEM frame span several (multi-buffer: the program loaded with
  /// BPF_F_XDP_HAS_FRAGS, the socket bound with XDP_USE_SG), up to xdp_port::max_buffers. Where
  /// the kernel or driver refuses it, or false: a frame fits one UMEM frame.
  bool multi_buffer = true;
  /// Faults applied to what this side sends, and their seed.
  rnic::direction_faults faults{};
  std::uint64_t seed = 1;
};

struct xdp_counters {
  std::uint64_t sent = 0, received = 0;  ///< frames (sent: handed to the TX ring)
  std::uint64_t kicks = 0, send_errors = 0;  ///< wake-ups of the kernel (sendto, recvfrom); failed ones
  std::uint64_t sent_multi = 0, received_multi = 0;  ///< of those, frames in more than one UMEM frame
  std::uint64_t too_long = 0;    ///< received frames over max_buffers UMEM frames, or with a part outside the UMEM: dropped
  std::uint64_t too_large = 0;   ///< frames over max_frame() bytes or the interface's MTU (with a tag), not sent
  std::uint64_t not_sendable = 0;  ///< frames shorter than an Ethernet header, not sent
  std::uint64_t resolving = 0;   ///< neighbour resolutions asked of the kernel
  std::uint64_t looped = 0;      ///< frames for the interface's own addresses, given back to receive()
  std::uint64_t routed = 0;      ///< destinations found behind a gateway (their frames take its MAC)
  std::uint64_t unresolved = 0;  ///< frames dropped after resolve_timeout with no neighbour
  std::uint64_t lost = 0, corrupted = 0, duplicated = 0, held = 0;  ///< injected faults
  /// The kernel's (XDP_STATISTICS): frames dropped (too big for a frame, or no room),
  /// invalid descriptors, and frames lost to a full RX ring or an empty fill ring.
  std::uint64_t rx_dropped = 0, rx_invalid = 0, tx_invalid = 0, rx_ring_full = 0, fill_ring_empty = 0;
};

class xdp_port {
 public:
  /// Bytes of each UMEM frame: the largest frame sent in one; a received frame has 256 bytes less
  /// (XDP_PACKET_HEADROOM), so 3840 bytes (an interface MTU of 3826).
  static constexpr std::uint32_t frame_size = 4096;
  static constexpr std::uint32_t max_receive = frame_size - XDP_PACKET_HEADROOM;
  /// With multi-buffer, the UMEM frames one frame may span: 4, so 15360 bytes received and
  /// 16384 sent (an interface MTU of 9000 fits).
  static constexpr std::uint32_t max_buffers = 4;
  /// How long a frame waits for its destination's neighbour before it is dropped, ns.
  static constexpr rnic::time_ns resolve_timeout = 3'000'000'000;
  /// How long opening retries a queue that is busy (EBUSY), ns.
  static constexpr rnic::time_ns busy_wait = 500'000'000;

  /// Loads and attaches the program and binds the socket. On failure ok() is false, error() is
  /// the errno and why() names the step (interface, map, program, umem, socket, attach).
  explicit xdp_port(const xdp_config& c) : cfg_(c), rng_(c.seed) {
    cfg_.batch = std::clamp<std::uint32_t>(cfg_.batch, 1, 1024);
    const auto pow2 = [](std::uint32_t v, std::uint32_t lo, std::uint32_t hi) { return v >= lo && v <= hi && (v & (v - 1)) == 0; };
    if (!pow2(cfg_.frames, 64, 65536) || !pow2(cfg_.ring, 64, 16384)) {
      fail(EINVAL, "config: frames and ring must be powers of two (64..65536, 64..16384)");
      return;
    }
    faulty_ = any_fault(cfg_.faults);
    ifindex_ = cfg_.interface.size() < IFNAMSIZ ? ::if_nametoindex(cfg_.interface.c_str()) : 0;
    if (ifindex_ == 0) {
      fail(ENODEV, "interface");
      return;
    }
    if (const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0); s >= 0) {
      ifreq r{};
      std::strncpy(r.ifr_name, cfg_.interface.c_str(), IFNAMSIZ - 1);
      if (::ioctl(s, SIOCGIFHWADDR, &r) == 0) std::memcpy(mac_.data(), r.ifr_hwaddr.sa_data, 6);
      if (::ioctl(s, SIOCGIFMTU, &r) == 0) mtu_ = static_cast<std::uint32_t>(r.ifr_mtu);
      ::close(s);
    }
    const xdp::quiet_libraries quiet;
    map_fd_ = ::bpf_map_create(BPF_MAP_TYPE_XSKMAP, "pushwire_xsks", 4, 4, std::max<std::uint32_t>(64, cfg_.queue + 1), nullptr);
    if (map_fd_ < 0) {
      fail(errno, "map");
      return;
    }
    const auto prog = xdp::steer_program(map_fd_, cfg_.roce_port);
    std::vector<char> log(1 << 16);
    bpf_prog_load_opts po{};
    po.sz = sizeof po;
    po.log_buf = log.data();
    po.log_size = static_cast<std::uint32_t>(log.size());
    po.log_level = 0;
    if (cfg_.multi_buffer) {  // a kernel before 5.18 refuses the flag: loaded without it
      po.prog_flags = BPF_F_XDP_HAS_FRAGS;
      prog_fd_ = ::bpf_prog_load(BPF_PROG_TYPE_XDP, "pushwire_steer", "GPL", prog.data(), prog.size(), &po);
      frags_ = prog_fd_ >= 0;
      po.prog_flags = 0;
    }
    if (prog_fd_ < 0) prog_fd_ = ::bpf_prog_load(BPF_PROG_TYPE_XDP, "pushwire_steer", "GPL", prog.data(), prog.size(), &po);
    if (prog_fd_ < 0) {
      fail(errno, "program");
      return;
    }
    area_size_ = std::size_t{cfg_.frames} * frame_size;
    void* area = ::mmap(nullptr, area_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (area == MAP_FAILED) {
      fail(errno, "umem");
      return;
    }
    area_ = static_cast<std::byte*>(area);
    const bool try_zero_copy = cfg_.copy != xdp_copy::copy, try_copy = cfg_.copy != xdp_copy::zero_copy;
    int e = EINVAL;
    // EBUSY: a socket on the queue; the kernel releases a closed socket's queue in the
    // background (its buffer pool is freed by a work item), so a port opened right after this
    // process closed one finds the queue busy for a moment: tried again for up to busy_wait.
    for (const rnic::time_ns until = monotonic_ns() + busy_wait;;) {
      if (try_zero_copy) {
        e = open_socket(XDP_ZEROCOPY);
        zero_copy_ = e == 0;
      }
      if (e != 0 && try_copy) e = open_socket(XDP_COPY);
      if (e != EBUSY || monotonic_ns() >= until) break;
      ::usleep(2000);
    }
    if (e != 0) {
      fail(e, xsk_ ? "socket" : umem_ ? "socket" : "umem");
      return;
    }
    if (const int r = ::xsk_socket__update_xskmap(xsk_, map_fd_); r != 0) {
      fail(-r, "socket");
      return;
    }
    // The program last: RoCE goes to the socket from the moment it is attached.
    for (const xdp_hook h : {xdp_hook::native, xdp_hook::generic}) {
      if (cfg_.hook != xdp_hook::automatic && cfg_.hook != h) continue;
      bpf_link_create_opts lo{};
      lo.sz = sizeof lo;
      lo.flags = h == xdp_hook::native ? XDP_FLAGS_DRV_MODE : XDP_FLAGS_SKB_MODE;
      link_fd_ = ::bpf_link_create(prog_fd_, static_cast<int>(ifindex_), BPF_XDP, &lo);
      if (link_fd_ >= 0) {
        native_ = h == xdp_hook::native;
        break;
      }
      e = errno;
      if (e == EBUSY || e == EEXIST) break;  // another XDP program is on the interface: left alone
    }
    if (link_fd_ < 0) {
      fail(e, e == EBUSY || e == EEXIST ? "attach: another XDP program is attached to the interface" : "attach");
      return;
    }
    for (std::uint32_t k = 0; k < cfg_.frames / 2; ++k) rx_free_.push_back(std::uint64_t{k} * frame_size);
    for (std::uint32_t k = cfg_.frames / 2; k < cfg_.frames; ++k) tx_free_.push_back(std::uint64_t{k} * frame_size);
    refill();
  }
  xdp_port(const xdp_port&) = delete;
  xdp_port& operator=(const xdp_port&) = delete;
  ~xdp_port() { close_all(); }

  bool ok() const { return link_fd_ >= 0; }
  int error() const { return err_; }
  /// The step that failed, for a message ("" when ok()).
  const std::string& why() const { return why_; }
  /// The socket's descriptor (readable when frames wait in the RX ring), -1 when not ok().
  int fd() const { return xsk_ ? ::xsk_socket__fd(xsk_) : -1; }
  /// The interface's MAC: the device port's MAC must be it.
  const wire::mac_address& mac() const { return mac_; }
  unsigned ifindex() const { return ifindex_; }
  /// The interface's MTU (IP bytes), and the largest the port can receive: min(mtu(), 3826), or
  /// with multi-buffer min(mtu(), 15346).
  std::uint32_t mtu() const { return mtu_; }
  std::uint32_t usable_mtu() const {
    return std::min<std::uint32_t>(mtu_, (sg_ ? max_buffers : 1) * max_receive - wire::eth_header_size);
  }
  /// The largest frame sent: frame_size, or with multi-buffer max_buffers of them.
  std::uint32_t max_frame() const { return (sg_ ? max_buffers : 1) * frame_size; }
  /// The path MTU RoCE over this port can use, at most `at_most`: IPv4, UDP, BTH, RETH, ImmDt and
  /// ICRC (64 bytes) around each packet's payload must fit usable_mtu() (2048 at most in one UMEM
  /// frame; 4096 with multi-buffer and an interface MTU of 4160 or more).
  std::uint32_t path_mtu(std::uint32_t at_most = 4096) const { return std::min(at_most, path_mtu_for(usable_mtu(), 64)); }
  /// The program runs at the driver's hook (else the generic one); frames are not copied.
  bool native() const { return native_; }
  bool zero_copy() const { return zero_copy_; }
  /// Frames may span several UMEM frames (xdp_config::multi_buffer, and the kernel took it).
  bool multi_buffer() const { return sg_; }
  /// The steering program's descriptor (for BPF_PROG_TEST_RUN in tests).
  int program_fd() const { return prog_fd_; }
  xdp_counters stats() const {
    xdp_counters s = stats_;
    xdp_statistics k{};
    socklen_t len = sizeof k;
    if (xsk_ && ::getsockopt(fd(), SOL_XDP, XDP_STATISTICS, &k, &len) == 0) {
      s.rx_dropped = k.rx_dropped, s.rx_invalid = k.rx_invalid_descs, s.tx_invalid = k.tx_invalid_descs;
      s.rx_ring_full = k.rx_ring_full, s.fill_ring_empty = k.rx_fill_ring_empty_descs;
    }
    return s;
  }

  /// Sends the frames the device has for its port `port` (and held-back frames now due). The
  /// port takes them while fewer than `ring` frames wait in its own queue (held back, or refused
  /// by a full TX ring; frames waiting for a neighbour do not count, so one unreachable peer does
  /// not hold back the others); the rest stay in the device's transmit queue, whose limit holds its
  /// requesters back, rather than here, where they would only wait longer. Returns the frames
  /// handed to the TX ring.
  std::size_t send_from(rnic::device& d, std::size_t port, rnic::time_ns now) {
    std::size_t sent = q_.empty() ? 0 : flush(now);
    take_frames(d, port, [&](std::span<const std::byte> f) { queue(f, now); }, [&] { return !full(); });
    return sent + flush(now);
  }
  /// `ring` frames wait in the port's own queue (held back, or refused by a full TX ring; not
  /// those waiting for a neighbour): a caller stops giving more.
  bool full() const { return q_.size() - resolving_ >= cfg_.ring; }
  /// Receives what waits in the RX ring (up to `rounds` batches) and gives each frame to the
  /// device at time now. Returns the frames taken.
  std::size_t receive_into(rnic::device& d, std::size_t port, rnic::time_ns now, int rounds = 4) {
    return receive([&](std::span<std::byte> frame) { d.receive(port, frame, now); }, rounds);
  }
  /// Receives what waits (up to `rounds` batches) and gives each frame to
  /// `sink(std::span<std::byte>)`, which may change its bytes but not keep them.
  template <class Sink>
  std::size_t receive(Sink&& sink, int rounds = 4) {
    if (!ok()) return 0;
    std::size_t total = 0;
    if (!looped_.empty()) {  // (frames the sink's work loops back wait for the next call)
      std::swap(looped_, delivering_);
      for (auto& b : delivering_) {
        sink(std::span<std::byte>(b.data(), b.size()));
        loop_spare_.push_back(std::move(b));
      }
      total += delivering_.size();
      delivering_.clear();
    }
    for (int k = 0; k < rounds; ++k) {
      std::uint32_t idx = 0;
      const std::uint32_t n = ::xsk_ring_cons__peek(&rx_, cfg_.batch, &idx);
      if (n == 0) break;
      std::size_t frames = 0;
      for (std::uint32_t i = 0; i < n; ++i) {
        const xdp_desc* d = ::xsk_ring_cons__rx_desc(&rx_, idx + i);
        const bool valid = d->addr + d->len <= area_size_, more = d->options & xdp::pkt_contd;
        if (more || parts_) {  // a frame in several UMEM frames: gathered (multi-buffer)
          if (valid && parts_ < max_buffers && !part_bad_) gather_.insert(gather_.end(), area_ + d->addr, area_ + d->addr + d->len);
          else part_bad_ = true;
          ++parts_;
          if (!more) {
            if (part_bad_) ++stats_.too_long;
            else sink(std::span<std::byte>(gather_.data(), gather_.size())), ++frames, ++stats_.received_multi;
            gather_.clear();
            parts_ = 0;
            part_bad_ = false;
          }
        } else if (valid) {
          sink(std::span<std::byte>(area_ + d->addr, d->len));
          ++frames;
        }
        rx_free_.push_back(d->addr & ~std::uint64_t{frame_size - 1});
      }
      ::xsk_ring_cons__release(&rx_, n);
      total += frames;
      stats_.received += frames;
      refill();
      if (n < cfg_.batch) break;
    }
    refill();
    if (::xsk_ring_prod__needs_wakeup(&fill_)) {
      (void)::recvfrom(fd(), nullptr, 0, MSG_DONTWAIT, nullptr, nullptr);
      ++stats_.kicks;
    }
    return total;
  }
  /// Queues one Ethernet frame to leave at the next flush(), with the configured faults.
  void send(std::span<const std::byte> frame, rnic::time_ns now) { queue(frame, now); }

  /// Hands the frames whose time has come to the TX ring, in order, and wakes the kernel to send
  /// them. A frame whose destination is still being resolved waits (other destinations pass
  /// it); one that found no room waits with everything after it. Returns the frames handed over.
  std::size_t flush(rnic::time_ns now) {
    if (!ok()) return 0;
    reclaim();
    for (auto it = q_.out.begin(); it != q_.out.end();) {
      if (it->at > now) {
        ++it;
        continue;
      }
      const emit_result r = emit(it->bytes, now);
      if (r == emit_result::no_room) break;
      if (r == emit_result::unresolved) {
        if (now - it->since >= resolve_timeout) {
          ++stats_.unresolved;
          retire(it++);
        } else {
          if (!it->resolving) it->resolving = true, ++resolving_;
          it->at = now + recheck_interval;
          ++it;
        }
        continue;
      }
      retire(it++);
    }
    const std::size_t sent = unsubmitted_frames_;
    if (unsubmitted_ > 0) {
      ::xsk_ring_prod__submit(&tx_, unsubmitted_);
      stats_.sent += unsubmitted_frames_;
      unsubmitted_ = 0;
      unsubmitted_frames_ = 0;
    }
    kick();
    reclaim();
    return sent;
  }
  /// For net::device_loop: the loop may sleep unless frames looped back wait (arm()), and it
  /// reads the port after every sleep (disarm()), since those frames make no descriptor readable.
  bool arm() const { return looped_.empty(); }
  void disarm(bool) const {}
  /// Frames waiting (held back, refused by a full ring, or waiting for a neighbour).
  std::size_t waiting() const { return q_.size(); }
  /// When the next waiting frame is due (for a caller's poll timeout), if any: at once while the
  /// kernel has left descriptors on the TX ring and asked to be woken again.
  std::optional<rnic::time_ns> next_due() const {
    if (kick_again_ || !looped_.empty()) return rnic::time_ns{0};
    return net::next_due(q_);
  }

 private:
  static constexpr rnic::time_ns recheck_interval = 1'000'000;  ///< a neighbour asked for: looked up again after, ns
  static constexpr rnic::time_ns neighbour_ttl = 1'000'000'000;  ///< a known neighbour: looked up again after, ns
  static constexpr int max_kicks = 64;  ///< sendto() calls per flush while the kernel answers EAGAIN

  struct pending {
    rnic::time_ns at = 0, since = 0;
    std::vector<std::byte> bytes;
    bool resolving = false;  ///< waits for its destination's neighbour (counted in resolving_)
  };
  struct neighbour_state {
    std::array<std::uint8_t, 16> ip{};
    bool v6 = false, known = false;
    bool local = false;  ///< an address of the interface's own: its frames loop back
    rnic::time_ns local_checked = 0;  ///< when `local` was last looked up (getifaddrs)
    wire::mac_address mac{};
    rnic::time_ns checked = 0, asked = 0;
    /// The address whose MAC frames for `ip` take: ip, or the gateway of the route to it
    /// (net::gateway; looked up again with `local`).
    std::array<std::uint8_t, 16> hop{};
  };
  enum class emit_result { sent, no_room, unresolved };

  void fail(int e, const char* why) {
    err_ = e;
    why_ = why;
    close_all();
  }
  void close_all() {
    if (link_fd_ >= 0) ::close(link_fd_);
    link_fd_ = -1;
    if (xsk_) ::xsk_socket__delete(xsk_);
    xsk_ = nullptr;
    if (umem_) (void)::xsk_umem__delete(umem_);
    umem_ = nullptr;
    if (area_) ::munmap(area_, area_size_);
    area_ = nullptr;
    if (prog_fd_ >= 0) ::close(prog_fd_);
    prog_fd_ = -1;
    if (map_fd_ >= 0) ::close(map_fd_);
    map_fd_ = -1;
  }
  // The socket with `mode` (XDP_ZEROCOPY or XDP_COPY), multi-buffer where the kernel (6.6) and,
  // for zero-copy, the driver take it (else without). 0, or an errno.
  int open_socket(std::uint16_t mode) {
    if (frags_) {
      const int e = open_socket(mode, true);
      if (e != EINVAL && e != EOPNOTSUPP) return e;
    }
    return open_socket(mode, false);
  }
  // The UMEM (made again for each attempt: its rings are set up once per socket) and the socket
  // with `mode`, and XDP_USE_SG if `sg`. 0, or an errno.
  int open_socket(std::uint16_t mode, bool sg) {
    if (umem_) (void)::xsk_umem__delete(umem_);
    umem_ = nullptr;
    xsk_umem_config uc{};
    uc.fill_size = cfg_.ring;
    uc.comp_size = cfg_.ring;
    uc.frame_size = frame_size;
    uc.frame_headroom = 0;
    uc.flags = 0;
    if (const int r = ::xsk_umem__create(&umem_, area_, area_size_, &fill_, &comp_, &uc); r != 0) {
      umem_ = nullptr;
      return -r;
    }
    xsk_socket_config sc{};
    sc.rx_size = cfg_.ring;
    sc.tx_size = cfg_.ring;
    sc.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;
    sc.xdp_flags = 0;
    sc.bind_flags = static_cast<std::uint16_t>(XDP_USE_NEED_WAKEUP | mode | (sg ? xdp::use_sg : 0));
    if (const int r = ::xsk_socket__create(&xsk_, cfg_.interface.c_str(), cfg_.queue, umem_, &rx_, &tx_, &sc); r != 0) {
      xsk_ = nullptr;
      return -r;
    }
    sg_ = sg;
    return 0;
  }
  // Gives free receive frames to the fill ring.
  void refill() {
    const std::uint32_t want = static_cast<std::uint32_t>(std::min<std::size_t>(rx_free_.size(), ::xsk_prod_nb_free(&fill_, static_cast<std::uint32_t>(rx_free_.size()))));
    if (want == 0) return;
    std::uint32_t idx = 0;
    if (::xsk_ring_prod__reserve(&fill_, want, &idx) != want) return;
    for (std::uint32_t i = 0; i < want; ++i) {
      *::xsk_ring_prod__fill_addr(&fill_, idx + i) = rx_free_.back();
      rx_free_.pop_back();
    }
    ::xsk_ring_prod__submit(&fill_, want);
  }
  // Wakes the kernel to send what the TX ring holds. In copy mode it sends a batch (32) per call
  // and answers EAGAIN while more wait: it is called again, up to max_kicks times here, and the
  // rest at the next flush (next_due() asks for one at once).
  void kick() {
    kick_again_ = false;
    if (outstanding_ == 0 || !::xsk_ring_prod__needs_wakeup(&tx_)) return;
    for (int k = 0; k < max_kicks; ++k) {
      ++stats_.kicks;
      if (::sendto(fd(), nullptr, 0, MSG_DONTWAIT, nullptr, 0) >= 0) return;
      if (errno != EAGAIN && errno != EBUSY) {
        if (errno != ENOBUFS && errno != EINTR) ++stats_.send_errors;  // (interface down): the transport's retries cover it
        return;
      }
      if (::xsk_prod_nb_free(&tx_, cfg_.ring) == cfg_.ring) return;  // the kernel took every descriptor
    }
    kick_again_ = true;
  }
  // Takes back the frames the kernel has sent.
  void reclaim() {
    std::uint32_t idx = 0;
    const std::uint32_t n = ::xsk_ring_cons__peek(&comp_, cfg_.ring, &idx);
    for (std::uint32_t i = 0; i < n; ++i) tx_free_.push_back(*::xsk_ring_cons__comp_addr(&comp_, idx + i));
    if (n) ::xsk_ring_cons__release(&comp_, n);
    outstanding_ -= std::min<std::size_t>(outstanding_, n);
  }
  void queue(std::span<const std::byte> f, rnic::time_ns now) {
    if (f.size() < wire::eth_header_size) {
      ++stats_.not_sendable;
      return;
    }
    if (f.size() > std::min<std::size_t>(max_frame(), std::size_t{mtu_} + wire::eth_header_size + 4)) {
      ++stats_.too_large;
      return;
    }
    if (!ok()) return;
    if (!faulty_ && q_.empty()) {
      const emit_result r = emit(f, now);
      if (r == emit_result::sent) return;
      pending& p = q_.push(f);
      p.at = r == emit_result::unresolved ? now + recheck_interval : now;
      p.since = now;
      p.resolving = r == emit_result::unresolved;
      resolving_ += p.resolving;
      return;
    }
    pending& p = q_.push(f);
    p.at = p.since = now;
    p.resolving = false;
    apply_faults(q_, cfg_.faults, rng_, stats_);
  }
  void retire(send_queue<pending>::iterator it) {
    resolving_ -= it->resolving;
    q_.retire(it);
  }
  // One frame into a free UMEM frame and onto the TX ring (submitted by flush()).
  emit_result emit(std::span<const std::byte> f, rnic::time_ns now) {
    wire::mac_address dst{};
    const neighbour_found found = cfg_.resolve ? destination_mac(f, now, dst) : neighbour_found::not_ip;
    if (found == neighbour_found::unknown) return emit_result::unresolved;
    if (found == neighbour_found::local) {
      loop_back(f);
      return emit_result::sent;
    }
    const bool rewrite = found == neighbour_found::known;
    // One descriptor per UMEM frame the frame spans, each but the last marked to continue.
    const std::uint32_t parts = static_cast<std::uint32_t>((f.size() + frame_size - 1) / frame_size);
    if (tx_free_.size() < parts) reclaim();
    if (tx_free_.size() < parts) return emit_result::no_room;
    std::uint32_t idx = 0;
    if (::xsk_ring_prod__reserve(&tx_, parts, &idx) != parts) return emit_result::no_room;
    for (std::uint32_t k = 0; k < parts; ++k) {
      const std::uint64_t addr = tx_free_.back();
      tx_free_.pop_back();
      const std::size_t at = std::size_t{k} * frame_size, len = std::min<std::size_t>(frame_size, f.size() - at);
      std::byte* p = area_ + addr;
      std::memcpy(p, f.data() + at, len);
      if (rewrite && k == 0) {
        std::memcpy(p, dst.data(), 6);
        std::memcpy(p + 6, mac_.data(), 6);
      }
      xdp_desc* d = ::xsk_ring_prod__tx_desc(&tx_, idx + k);
      d->addr = addr;
      d->len = static_cast<std::uint32_t>(len);
      d->options = k + 1 < parts ? xdp::pkt_contd : 0;
    }
    unsubmitted_ += parts;
    outstanding_ += parts;
    ++unsubmitted_frames_;
    stats_.sent_multi += parts > 1;
    return emit_result::sent;
  }
  enum class neighbour_found { not_ip, known, unknown, local };
  // A frame for one of the interface's own addresses, kept for the next receive() with the
  // interface's MAC as both addresses (buffers reused).
  void loop_back(std::span<const std::byte> f) {
    std::vector<std::byte> b;
    if (!loop_spare_.empty()) {
      b = std::move(loop_spare_.back());
      loop_spare_.pop_back();
    }
    b.assign(f.begin(), f.end());
    std::memcpy(b.data(), mac_.data(), 6);
    std::memcpy(b.data() + 6, mac_.data(), 6);
    looped_.push_back(std::move(b));
    ++stats_.looped;
  }
  // The MAC of an IP frame's destination (into `out`), from the kernel's neighbour table (asked
  // for when absent): known, not known yet, or not_ip (another frame, which keeps its MACs).
  neighbour_found destination_mac(std::span<const std::byte> f, rnic::time_ns now, wire::mac_address& out) {
    const auto l2 = wire::locate_payload(f);
    if (!l2) return neighbour_found::not_ip;
    const bool v6 = l2->type == ib::ethertype_ipv6;
    if (!v6 && l2->type != ib::ethertype_ipv4) return neighbour_found::not_ip;
    const std::size_t at = l2->offset + (v6 ? 24 : 16), len = v6 ? 16 : 4;
    if (f.size() < at + len) return neighbour_found::unknown;
    std::array<std::uint8_t, 16> ip{};
    std::memcpy(ip.data(), f.data() + at, len);
    neighbour_state* n = nullptr;
    for (auto& e : neighbours_)
      if (e.v6 == v6 && e.ip == ip) n = &e;
    if (!n) {
      neighbours_.push_back({.ip = ip, .v6 = v6});
      n = &neighbours_.back();
      n->checked = now - neighbour_ttl;  // look it up now
      n->asked = now - neighbour_ttl;
      n->local_checked = now - neighbour_ttl;
    }
    const rnic::time_ns again = n->known ? neighbour_ttl : recheck_interval;
    if (now - n->checked >= again) {
      n->checked = now;
      if (now - n->local_checked >= neighbour_ttl) {
        n->local_checked = now;
        n->local = configured_on(cfg_.interface, std::span<const std::uint8_t>(ip.data(), len));
        const auto gw = n->local ? std::nullopt : gateway(ifindex_, std::span<const std::uint8_t>(ip.data(), len));
        if (gw && n->hop != *gw) ++stats_.routed;
        n->hop = gw.value_or(ip);
      }
      if (n->local) {
        n->known = true;
        return neighbour_found::local;
      }
      const auto hop = std::span<const std::uint8_t>(n->hop.data(), len);
      const auto e = neighbour(ifindex_, hop);
      n->known = e.has_value();
      if (e) n->mac = e->mac;
      else if (now - n->asked >= neighbour_ttl) {
        n->asked = now;
        ++stats_.resolving;
        (void)resolve_neighbour(ifindex_, hop);
      }
    }
    if (n->local) return neighbour_found::local;
    if (!n->known) return neighbour_found::unknown;
    out = n->mac;
    return neighbour_found::known;
  }

  xdp_config cfg_;
  std::mt19937_64 rng_;
  bool faulty_ = false, native_ = false, zero_copy_ = false;
  bool frags_ = false;  ///< the program was loaded with BPF_F_XDP_HAS_FRAGS
  bool sg_ = false;     ///< the socket is bound with XDP_USE_SG
  unsigned ifindex_ = 0;
  std::uint32_t mtu_ = 1500;
  wire::mac_address mac_{};
  int err_ = 0;
  std::string why_;
  int map_fd_ = -1, prog_fd_ = -1, link_fd_ = -1;
  std::byte* area_ = nullptr;
  std::size_t area_size_ = 0;
  xsk_umem* umem_ = nullptr;
  xsk_socket* xsk_ = nullptr;
  xsk_ring_prod fill_{}, tx_{};
  xsk_ring_cons comp_{}, rx_{};
  std::vector<std::uint64_t> rx_free_, tx_free_;  ///< UMEM frames not lent to the kernel
  std::uint32_t unsubmitted_ = 0;                  ///< TX descriptors written, not yet submitted
  std::uint32_t unsubmitted_frames_ = 0;           ///< the frames they hold
  std::vector<std::byte> gather_;                  ///< a received frame's UMEM frames so far (multi-buffer)
  std::uint32_t parts_ = 0;                        ///< how many
  bool part_bad_ = false;                          ///< one was invalid, or too many: the frame is dropped
  std::size_t outstanding_ = 0;                    ///< TX descriptors the kernel has not completed
  bool kick_again_ = false;                        ///< the last kick left descriptors the kernel asked to be woken for
  send_queue<pending> q_;
  std::size_t resolving_ = 0;  ///< frames of q_ waiting for a neighbour
  std::vector<neighbour_state> neighbours_;
  std::vector<std::vector<std::byte>> looped_, loop_spare_, delivering_;  ///< frames looped back
  xdp_counters stats_{};
};

}  // namespace pushwire::net
