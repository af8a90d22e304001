// Data transfer messages (split-model driver, IV.B.2): SendData carries a small packet in the message
// itself; BufferRDMAIndicate tells the target which pool elements RDMA writes consumed.
#pragma once

#include <cstddef>
#include <cstdint>

#include <pushwire/msg/header.hpp>

namespace pushwire::msg {

/// SendData: packet data copied into the message frame (no reply expected).
struct send_data {
  PUSHWIRE_STRUCT(send_data,
      (msg::header<function::send_data>, header),
      (wire::counted<std::uint32_t, std::byte, "data_length">, data));
};

/// A transfer indication: RDMA writes placed byte_count bytes in element element_index of pool
/// pool_ref. It rides in idata when it fits (idata.hpp), else in BufferRDMAIndicate.
struct indication {
  PUSHWIRE_STRUCT(indication,
      (std::uint32_t, pool_ref),
      (std::uint32_t, element_index),
      /// Bytes placed (0 is allowed here; idata cannot carry it).
      (std::uint32_t, byte_count));
};

/// BufferRDMAIndicate, initiator -> target: the consumed elements.
struct buffer_rdma_indicate {
  PUSHWIRE_STRUCT(buffer_rdma_indicate,
      (msg::header<function::buffer_rdma_indicate>, header),
      (wire::counted<std::uint32_t, indication, "entry_count", 1>, entries));
};

}  // namespace pushwire::msg
