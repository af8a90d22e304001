// The process's own pages as the kernel keeps them, for the reference RNIC's implicit on-demand
// keys (rnic::host_pages; spec/verbs.md §3, implicit ODP): residency from mincore(2), mapping and
// protection from MADV_POPULATE_READ / MADV_POPULATE_WRITE (Linux 5.14: supported() says), which
// fault pages in without touching their bytes and refuse an unmapped range (ENOMEM) or one the
// access is not allowed on (EINVAL; EFAULT for a page that would raise SIGBUS) instead of raising
// a signal. A page absent by mincore (never touched, or evicted with MADV_DONTNEED or
// MADV_PAGEOUT) is a page fault for the device; a page the device then could not bring in
// (unmapped meanwhile, or without the access: PROT_NONE, or a write to a read-only page) is
// refused at its probes while it stays absent, instead of faulting again. Not thread-safe: one
// device's (under its lock) at a time. 64-bit address spaces only.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <vector>

static_assert(sizeof(void*) == 8, "implicit keys address a 64-bit space");

#include <pushwire/rnic/memory.hpp>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace pushwire::net {

class kernel_pages final : public rnic::host_pages {
 public:
  kernel_pages() : page_(static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE))) {}

  /// Whether the kernel has MADV_POPULATE_READ (Linux 5.14): without it nothing here works, and
  /// no implicit key should be offered.
  static bool supported() {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    void* p = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    const bool ok = ::madvise(p, page, MADV_POPULATE_WRITE) == 0;
    ::munmap(p, page);
    return ok;
  }

  rnic::errc probe(std::uint64_t va, std::uint64_t length, bool write) const override {
    std::uint64_t first = 0, bytes = 0;
    if (!span_of(va, length, first, bytes)) return rnic::errc::out_of_range;
    vec_.resize(static_cast<std::size_t>(bytes / page_));
    if (::mincore(as_ptr(first), static_cast<std::size_t>(bytes), vec_.data()) != 0) return rnic::errc::out_of_range;  // ENOMEM: not mapped
    for (std::size_t i = 0; i < vec_.size(); ++i)
      if (!(vec_[i] & 1)) {
        // Absent: a fault, unless fault_in() could not bring this page in for such an access (a
        // failed read refuses reads and writes, a failed write refuses writes).
        const std::uint64_t at = first + i * page_;
        for (const refusal& r : refused_)
          if (r.page == at && (!r.write || write)) return r.why;
        return rnic::errc::page_fault;
      }
    // Resident (a refusal of these pages is out of date), and populating again brings nothing
    // in but says whether the access is allowed.
    if (!refused_.empty()) std::erase_if(refused_, [&](const refusal& r) { return r.page >= first && r.page - first < bytes; });
    if (::madvise(as_ptr(first), static_cast<std::size_t>(bytes), write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0) return {};
    return errno == ENOMEM ? rnic::errc::out_of_range : rnic::errc::no_access_right;
  }

  bool fault_in(std::uint64_t va, std::uint64_t length, bool write) override {
    std::uint64_t first = 0, bytes = 0;
    if (!span_of(va, length, first, bytes)) return false;
    if (::madvise(as_ptr(first), static_cast<std::size_t>(bytes), write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0) {
      std::erase_if(refused_, [&](const refusal& r) { return r.page >= first && r.page - first < bytes; });  // resident now
      return true;
    }
    const rnic::errc why = errno == ENOMEM ? rnic::errc::out_of_range : rnic::errc::no_access_right;
    // remembered for the first page still absent, until it is resident (at most 64: the oldest go)
    vec_.resize(static_cast<std::size_t>(bytes / page_));
    std::uint64_t at = first;
    if (::mincore(as_ptr(first), static_cast<std::size_t>(bytes), vec_.data()) == 0)
      for (std::size_t i = 0; i < vec_.size(); ++i)
        if (!(vec_[i] & 1)) {
          at = first + i * page_;
          break;
        }
    std::erase_if(refused_, [&](const refusal& r) { return r.page == at && r.write == write; });
    if (refused_.size() == 64) refused_.erase(refused_.begin());
    refused_.push_back({at, write, why});
    return false;
  }

  /// Most bytes one access covers (a message: 2^31).
  static constexpr std::uint64_t max_bytes = std::uint64_t{1} << 31;

 private:
  struct refusal {
    std::uint64_t page;
    bool write;
    rnic::errc why;
  };
  static void* as_ptr(std::uint64_t a) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(a)); }
  /// The whole pages of [va, va + length): false when empty, wrapping or too long.
  bool span_of(std::uint64_t va, std::uint64_t length, std::uint64_t& first, std::uint64_t& bytes) const {
    if (length == 0 || length > max_bytes || length - 1 > ~std::uint64_t{0} - va) return false;
    first = va / page_ * page_;
    const std::uint64_t last = (va + (length - 1)) / page_ * page_;
    if (last > ~std::uint64_t{0} - page_) return false;
    bytes = last + page_ - first;
    return true;
  }

  std::uint64_t page_;
  mutable std::vector<unsigned char> vec_;
  mutable std::vector<refusal> refused_;
};

}  // namespace pushwire::net
