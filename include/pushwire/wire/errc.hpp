// Error codes shared by every pushwire codec, and their std::error_code category.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace pushwire::wire {

/// Why a decode or an encode failed. The value 0 is never an error (std::error_code's "success").
/// The spec (spec/push-push.md, "Errors") gives the order in which a decoder checks for them.
enum class errc : std::uint8_t {
  /// The input ends before its fixed part, a counted array, or a sized byte string does.
  truncated = 1,
  /// The input is longer than its counts and sizes imply.
  trailing_bytes,
  /// A push-push function code that no message type has.
  unknown_function,
  /// A version field other than the one this library speaks (push-push v1).
  unsupported_version,
  /// A count that must be at least 1 is 0, or an uncounted array that must be non-empty is empty.
  zero_count,
  /// A count disagrees with the whole number of elements the frame holds.
  count_mismatch,
  /// A frame, or an indication, exceeds an explicit limit (e.g. msg::limits::max_frame).
  too_large,
  /// A reserved field that must be zero is not.
  reserved_nonzero,
  /// A field holds a value its definition forbids (e.g. a pool's element_size = 0, a value wider
  /// than its field on encode, CfgUtil data of the wrong size for its request code).
  invalid_field,
  /// A known function code, but not the one a typed decoder was asked for.
  wrong_function,
  /// An encoder's output buffer is smaller than the encoded size.
  no_space,
};

inline constexpr std::array errc_names{
    std::string_view{"truncated"},      std::string_view{"trailing_bytes"},
    std::string_view{"unknown_function"}, std::string_view{"unsupported_version"},
    std::string_view{"zero_count"},     std::string_view{"count_mismatch"},
    std::string_view{"too_large"},      std::string_view{"reserved_nonzero"},
    std::string_view{"invalid_field"},  std::string_view{"wrong_function"},
    std::string_view{"no_space"},
};

/// Every error code, in value order (for tests that must reach each one, and for documentation).
inline constexpr auto all_errc = [] {
  std::array<errc, errc_names.size()> a{};
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<errc>(i + 1);
  return a;
}();

/// The snake_case name of `e` (as printed by pushwire-dump), or "ok" for 0, or "unknown".
constexpr std::string_view to_string(errc e) noexcept {
  const auto i = static_cast<std::size_t>(e);
  if (i == 0) return "ok";
  return i <= errc_names.size() ? errc_names[i - 1] : std::string_view{"unknown"};
}

/// Where a decode failed: the code, the byte offset of the offending field in the input, and its
/// name ("" when no single field is to blame). Offsets are absolute within the buffer decoded.
struct error {
  errc code{};
  std::size_t offset = 0;
  std::string_view field{};
  friend constexpr bool operator==(const error&, const error&) = default;
};

class error_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "pushwire"; }
  std::string message(int v) const override {
    return std::string{to_string(static_cast<errc>(v))};
  }
};

inline const std::error_category& error_category() noexcept {
  static const error_category_impl c;
  return c;
}

inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

}  // namespace pushwire::wire

template <>
struct std::is_error_code_enum<pushwire::wire::errc> : std::true_type {};
