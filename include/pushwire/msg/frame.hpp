// frame: an owning, encoded push-push message. Decoded messages are views into the buffer they
// came from; a frame keeps the bytes, so a message can outlive its receive buffer.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include <pushwire/msg/message.hpp>

namespace pushwire::msg {

class frame {
 public:
  /// An empty frame (holds no message; view() must not be called).
  frame() = default;

  /// Encodes m (errors as msg::encode).
  template <message_type M>
  static result<frame> make(const M& m, const codec_options& lim = {}) {
    frame f;
    f.bytes_.resize(encoded_size(m));
    if (auto n = msg::encode(m, f.bytes_, lim); !n) return n.error();
    return f;
  }

  /// Copies and validates received bytes (errors as decode).
  static result<frame> copy(std::span<const std::byte> bytes, const codec_options& lim = {}) {
    if (auto r = decode(bytes, lim); !r) return r.error();
    frame f;
    f.bytes_.assign(bytes.begin(), bytes.end());
    return f;
  }

  std::span<const std::byte> bytes() const { return bytes_; }
  std::size_t size() const { return bytes_.size(); }

  /// The message, viewing this frame's bytes (valid while the frame lives and is unchanged).
  message view() const { return *decode(bytes_, {.max_frame = bytes_.size()}); }

  friend bool operator==(const frame&, const frame&) = default;

 private:
  std::vector<std::byte> bytes_;
};

}  // namespace pushwire::msg
