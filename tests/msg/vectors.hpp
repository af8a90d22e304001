// One hand-written vector per push-push message: the exact bytes (spelled here from the spec's
// tables, not produced by the encoder) and the value they mean.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string_view>

#include <pushwire/msg/msg.hpp>

#include "../support/test_support.hpp"

namespace pushwire::vec {

template <class M, std::size_t N>
struct vcase {
  using message = M;
  std::string_view name;
  std::array<std::byte, N> bytes;
  M value;
};
template <class M, std::size_t N>
vcase(std::string_view, std::array<std::byte, N>, M) -> vcase<M, N>;

inline constexpr std::array<msg::pool_descriptor, 2> pools{{
    {.pool_ref = 7, .element_count = 64, .element_size = 256, .memory_handle = 0x11223344,
     .address = 0x00007f0000001000, .pool_context = 0xaabbccddeeff0011},
    {.pool_ref = 8, .element_count = 1, .element_size = 4096, .memory_handle = 0x55667788,
     .address = 0x0000000100000000, .pool_context = 0, .implicit = true},
}};
inline constexpr vcase recv_pool{
    "BufferRecvPool",
    test::hex<"0101 0001 0102030405060708 00000002"
              "00000007 00000040 00000100 11223344 00007f0000001000 aabbccddeeff0011"
              "00000008 80000001 00001000 55667788 0000000100000000 0000000000000000">(),
    msg::buffer_recv_pool{.header = {.transaction_context = 0x0102030405060708}, .pools = pools}};

inline constexpr vcase pool_get{
    "BufferRecvPoolGet", test::hex<"0102 0001 0000000000000001 00000800 00000020">(),
    msg::buffer_recv_pool_get{
        .header = {.transaction_context = 1}, .element_size = 2048, .element_count = 32}};
inline constexpr vcase pool_get_implicit{
    "BufferRecvPoolGet (implicit)", test::hex<"0102 0001 0000000000000002 00010000 80000100">(),
    msg::buffer_recv_pool_get{
        .header = {.transaction_context = 2}, .element_size = 65536, .element_count = 256, .implicit = true}};

inline constexpr std::array<msg::pool_update_entry, 2> updates{{
    {.pool_ref = 7, .first_element = 0, .element_count = 16},
    {.pool_ref = 8, .first_element = 100, .element_count = 1},
}};
inline constexpr vcase pool_update{
    "BufferRecvPoolUpdate",
    test::hex<"0103 0001 0000000000000010 00000002"
              "00000007 00000000 00000010 00000008 00000064 00000001">(),
    msg::buffer_recv_pool_update{.header = {.transaction_context = 0x10}, .entries = updates}};

inline constexpr std::array<std::uint32_t, 3> flush_refs{7, 8, 0xffffffff};
inline constexpr vcase flush_request{
    "BufferPoolFlushRequest",
    test::hex<"0104 0001 00000000deadbeef 00000007 00000008 ffffffff">(),
    msg::buffer_pool_flush_request{.header = {.transaction_context = 0xdeadbeef},
                                   .pool_refs = flush_refs}};

inline constexpr vcase flush_reply{
    "BufferPoolFlushReply", test::hex<"0105 0001 00000000deadbeef">(),
    msg::buffer_pool_flush_reply{.header = {.transaction_context = 0xdeadbeef}}};

inline constexpr auto hello = test::hex<"68656c6c6f">();
inline constexpr vcase send_data{
    "SendData", test::hex<"0201 0001 0000000000000002 00000005 68656c6c6f">(),
    msg::send_data{.header = {.transaction_context = 2}, .data = std::span<const std::byte>(hello)}};

inline constexpr std::array<msg::indication, 1> indications{{
    {.pool_ref = 300, .element_index = 5, .byte_count = 70000},
}};
inline constexpr vcase rdma_indicate{
    "BufferRDMAIndicate",
    test::hex<"0202 0001 0000000000000003 00000001 0000012c 00000005 00011170">(),
    msg::buffer_rdma_indicate{.header = {.transaction_context = 3}, .entries = indications}};

inline constexpr auto mac_bytes = test::hex<"020000000001">();
inline constexpr vcase cfg_request{
    "CfgUtilRequest",
    test::hex<"0301 0001 0000000000000004 0002 0000 00000006 020000000001">(),
    msg::cfg_util_request{.header = {.transaction_context = 4},
                          .request_code = msg::cfg::request_code::set_mac_address,
                          .data = std::span<const std::byte>(mac_bytes)}};

inline constexpr auto link_bytes = test::hex<"00000001 000186a0">();
inline constexpr vcase cfg_reply{
    "CfgUtilReply",
    test::hex<"0302 0001 0000000000000004 0005 0000 00000008 00000001 000186a0">(),
    msg::cfg_util_reply{.header = {.transaction_context = 4},
                        .request_code = msg::cfg::request_code::get_link_state,
                        .status = msg::cfg::status::success,
                        .data = std::span<const std::byte>(link_bytes)}};

/// Calls f(c) for every vector, in function-code order.
template <class F>
void for_each_case(F&& f) {
  f(recv_pool);
  f(pool_get);
  f(pool_get_implicit);
  f(pool_update);
  f(flush_request);
  f(flush_reply);
  f(send_data);
  f(rdma_indicate);
  f(cfg_request);
  f(cfg_reply);
}

/// encode(c.value) is exactly c.bytes.
template <class C>
constexpr bool encodes_exactly(const C& c) {
  std::array<std::byte, std::tuple_size_v<decltype(c.bytes)> + 8> out{};
  auto n = msg::encode(c.value, out);
  if (!n || *n != c.bytes.size()) return false;
  for (std::size_t i = 0; i < c.bytes.size(); ++i)
    if (out[i] != c.bytes[i]) return false;
  return true;
}

/// decode(c.bytes) is exactly c.value.
template <class C>
constexpr bool decodes_exactly(const C& c) {
  auto r = msg::decode<typename C::message>(c.bytes);
  return r && *r == c.value;
}

}  // namespace pushwire::vec
