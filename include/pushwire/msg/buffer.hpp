// Buffer management messages (split-model driver, IV.B.1): the target advertises RDMA-write receive pools,
// the initiator asks for more, pools are replenished and flushed. Layouts: spec/push-push.md.
#pragma once

#include <cstdint>

#include <pushwire/msg/header.hpp>

namespace pushwire::msg {

/// One advertised pool: an array of element_count buffers of element_size bytes each.
struct pool_descriptor {
  PUSHWIRE_STRUCT(pool_descriptor,
      /// Pool index the initiator names in idata, indications, updates and flushes.
      (std::uint32_t, pool_ref),
      /// Number of buffer elements, 1..2^31 - 1 (bits 30..0 of the word).
      (wire::bits<4, 30, 0, std::uint32_t>, element_count),
      /// Bytes per element, >= 1.
      (std::uint32_t, element_size),
      /// Memory handle (R_Key on RoCE) authorising RDMA writes into the pool.
      (std::uint32_t, memory_handle),
      /// Registered address of element 0; element i starts at address + i * element_size.
      (std::uint64_t, address),
      /// Implementation-specific context (e.g. ports and IP address).
      (std::uint64_t, pool_context),
      /// Bit 31 of the element_count word: the owner registered the elements implicitly (on
      /// demand), so an element's pages may be absent and a write into a cold element may be
      /// answered with a page-fault ACK and pause the writer (spec/push-push.md §5.1). Last
      /// member, so that positional initializers keep their meaning.
      (wire::bits<4, 31, 31, bool>, implicit));

  static constexpr wire::error wire_check(const pool_descriptor& d) {
    if (d.element_count == 0) return wire::field_error<pool_descriptor>(errc::invalid_field, "element_count");
    if (d.element_size == 0) return wire::field_error<pool_descriptor>(errc::invalid_field, "element_size");
    return {};
  }
};

/// BufferRecvPool, target -> initiator: advertises one or more receive pools.
struct buffer_recv_pool {
  PUSHWIRE_STRUCT(buffer_recv_pool,
      (msg::header<function::buffer_recv_pool>, header),
      (wire::counted<std::uint32_t, pool_descriptor, "pool_count", 1>, pools));
};

/// BufferRecvPoolGet, initiator -> target: asks for a new pool. No reply is required; the target
/// may answer with BufferRecvPool.
struct buffer_recv_pool_get {
  PUSHWIRE_STRUCT(buffer_recv_pool_get,
      (msg::header<function::buffer_recv_pool_get>, header),
      /// Bytes per element wanted.
      (std::uint32_t, element_size),
      /// Number of elements wanted, 0..2^31 - 1 (bits 30..0 of the word).
      (wire::bits<16, 30, 0, std::uint32_t>, element_count),
      /// Bit 31 of the word: the initiator asks for a pool registered implicitly (on demand);
      /// the target may grant one either way and says which in BufferRecvPool's flag.
      (wire::bits<16, 31, 31, bool>, implicit));
};

/// One range of elements returned to a pool for reuse.
struct pool_update_entry {
  PUSHWIRE_STRUCT(pool_update_entry,
      (std::uint32_t, pool_ref),
      /// Index of the first element returned.
      (std::uint32_t, first_element),
      /// Number of consecutive elements returned.
      (std::uint32_t, element_count));
};

/// BufferRecvPoolUpdate: replenishes existing pools (elements free again for RDMA writes).
struct buffer_recv_pool_update {
  PUSHWIRE_STRUCT(buffer_recv_pool_update,
      (msg::header<function::buffer_recv_pool_update>, header),
      (wire::counted<std::uint32_t, pool_update_entry, "entry_count", 1>, entries));
};

/// BufferPoolFlushRequest, either side: stop using these pools. The split-model document's figure: the pool
/// references fill the frame, N = (frame length - 12) / 4 >= 1, with no count field.
struct buffer_pool_flush_request {
  PUSHWIRE_STRUCT(buffer_pool_flush_request,
      (msg::header<function::buffer_pool_flush_request>, header),
      (wire::rest<std::uint32_t, 1>, pool_refs));
};

/// BufferPoolFlushReply: the pools are no longer used; transaction_context echoes the request.
struct buffer_pool_flush_reply {
  PUSHWIRE_STRUCT(buffer_pool_flush_reply,
      (msg::header<function::buffer_pool_flush_reply>, header));
};

}  // namespace pushwire::msg
