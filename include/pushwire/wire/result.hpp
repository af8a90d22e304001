// result<T>: a value or a wire::error. Never throws, never allocates; usable in constant expressions.
#pragma once

#include <exception>
#include <type_traits>
#include <utility>

#include <pushwire/wire/errc.hpp>

namespace pushwire::wire {

/// Holds a T or an error. T must be default-constructible; on error the T is value-initialised and
/// unreachable through the accessors, so a failed decode never exposes partial data.
template <class T>
class [[nodiscard]] result {
  static_assert(std::is_default_constructible_v<T>, "result<T> needs a default-constructible T");

 public:
  using value_type = T;

  constexpr result(const T& v) : value_(v) {}  // NOLINT: implicit by design
  constexpr result(T&& v) : value_(std::move(v)) {}  // NOLINT
  /// `e.code` must not be 0.
  constexpr result(wire::error e) : error_(e) {}  // NOLINT
  constexpr result(errc e) : error_{e} {}  // NOLINT

  constexpr bool has_value() const noexcept { return error_.code == errc{}; }
  constexpr explicit operator bool() const noexcept { return has_value(); }

  /// Precondition: has_value(). Violations terminate (and are not constant expressions).
  constexpr const T& value() const& {
    if (!has_value()) std::terminate();
    return value_;
  }
  constexpr T& value() & {
    if (!has_value()) std::terminate();
    return value_;
  }
  constexpr T&& value() && {
    if (!has_value()) std::terminate();
    return std::move(value_);
  }
  constexpr const T& operator*() const& { return value(); }
  constexpr T& operator*() & { return value(); }
  constexpr const T* operator->() const { return &value(); }
  constexpr T* operator->() { return &value(); }

  constexpr T value_or(T fallback) const { return has_value() ? value_ : fallback; }

  /// The error (code 0 when has_value()).
  constexpr const wire::error& error() const noexcept { return error_; }
  constexpr errc code() const noexcept { return error_.code; }

 private:
  T value_{};
  wire::error error_{};
};

}  // namespace pushwire::wire
