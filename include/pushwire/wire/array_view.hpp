// array_view<T>: a read-only sequence of T that is either a span of native T (what a caller
// builds a message from) or wire bytes decoded element by element on access (what a decoder
// returns: no copy, no allocation). Elements are returned by value.
#pragma once

#include <compare>
#include <cstddef>
#include <iterator>
#include <span>

namespace pushwire::wire {

template <class T>
class array_view {
 public:
  using value_type = T;
  /// Decodes one already-validated element from its wire bytes.
  using decode_fn = T (*)(const std::byte*);

  constexpr array_view() = default;
  constexpr array_view(std::span<const T> s) : native_(s.data()), n_(s.size()) {}  // NOLINT

  /// n elements of `stride` bytes each at p; `f` decodes one.
  static constexpr array_view from_wire(const std::byte* p, std::size_t n, std::size_t stride,
                                        decode_fn f) {
    array_view v;
    v.wired_ = true;
    v.wire_ = p;
    v.n_ = n;
    v.stride_ = stride;
    v.decode_ = f;
    return v;
  }

  constexpr std::size_t size() const { return n_; }
  constexpr bool empty() const { return n_ == 0; }
  constexpr T operator[](std::size_t i) const {
    return wired_ ? decode_(wire_ + i * stride_) : native_[i];
  }
  constexpr T front() const { return (*this)[0]; }
  constexpr T back() const { return (*this)[n_ - 1]; }

  /// True when the elements are still wire bytes (a decoder's result).
  constexpr bool wire_backed() const { return wired_; }
  /// The wire bytes (only when wire_backed()).
  constexpr std::span<const std::byte> wire_bytes() const { return {wire_, n_ * stride_}; }

  class iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using iterator_concept = std::random_access_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using reference = T;
    using pointer = void;

    constexpr iterator() = default;
    constexpr iterator(const array_view* v, std::size_t i) : v_(v), i_(i) {}
    constexpr T operator*() const { return (*v_)[i_]; }
    constexpr T operator[](difference_type d) const {
      return (*v_)[static_cast<std::size_t>(static_cast<difference_type>(i_) + d)];
    }
    constexpr iterator& operator++() { ++i_; return *this; }
    constexpr iterator operator++(int) { auto t = *this; ++i_; return t; }
    constexpr iterator& operator--() { --i_; return *this; }
    constexpr iterator operator--(int) { auto t = *this; --i_; return t; }
    constexpr iterator& operator+=(difference_type d) {
      i_ = static_cast<std::size_t>(static_cast<difference_type>(i_) + d);
      return *this;
    }
    constexpr iterator& operator-=(difference_type d) { return *this += -d; }
    friend constexpr iterator operator+(iterator a, difference_type d) { return a += d; }
    friend constexpr iterator operator+(difference_type d, iterator a) { return a += d; }
    friend constexpr iterator operator-(iterator a, difference_type d) { return a -= d; }
    friend constexpr difference_type operator-(iterator a, iterator b) {
      return static_cast<difference_type>(a.i_) - static_cast<difference_type>(b.i_);
    }
    friend constexpr bool operator==(iterator a, iterator b) { return a.i_ == b.i_; }
    friend constexpr auto operator<=>(iterator a, iterator b) { return a.i_ <=> b.i_; }

   private:
    const array_view* v_ = nullptr;
    std::size_t i_ = 0;
  };

  constexpr iterator begin() const { return {this, 0}; }
  constexpr iterator end() const { return {this, n_}; }

  /// Element-wise, whatever the backing.
  friend constexpr bool operator==(const array_view& a, const array_view& b) {
    if (a.n_ != b.n_) return false;
    for (std::size_t i = 0; i < a.n_; ++i)
      if (!(a[i] == b[i])) return false;
    return true;
  }

 private:
  // An explicit mode, not `wire_ != nullptr`: g++ -fsanitize=undefined will not fold pointer-vs-null
  // comparisons in constant expressions.
  bool wired_ = false;
  const T* native_ = nullptr;
  const std::byte* wire_ = nullptr;
  std::size_t n_ = 0;
  std::size_t stride_ = 0;
  decode_fn decode_ = nullptr;
};

}  // namespace pushwire::wire
