// Automatic path migration as a capture shows it (IBTA vol. 1 17.2.8; spec/qos.md §9): an RC or
// UC QP's requests that move to another address pair, carrying BTH MigReq where they carried it
// clear. A QP armed for migration sends MigReq 0; once migrated, 1. The requests name only their
// destination QP, so a move is recognised when exactly one other address pair sent to that QP
// number with MigReq clear and has not moved before. flow::conformance (apm.psn_continuity) and
// flow::observer (pushwire-dump, the Wireshark plugin) both ask this watch. Sans-IO; bounded.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include <pushwire/flow/pp_track.hpp>

namespace pushwire::flow {

class path_watch {
 public:
  /// A path a QP's requests took: its address pair and its latest request's frame.
  struct path {
    host src, dst;
    std::uint64_t frame = 0;
  };
  /// `max`: address pairs remembered (beyond it, one QP's pairs are forgotten).
  explicit path_watch(std::size_t max = 4096) : max_(std::max<std::size_t>(max, 1)) {}

  /// An RC or UC request to QP `qp` from `src` to `dst`, MigReq `mig`, in frame `frame`: the
  /// path it left, when this request is the first on its pair and it migrated here.
  std::optional<path> on_request(std::uint32_t qp, const host& src, const host& dst, bool mig, std::uint64_t frame) {
    std::vector<entry>& es = by_qp_[qp];
    entry* from = nullptr;
    std::size_t armed = 0;
    for (entry& e : es) {
      if (e.p.src == src && e.p.dst == dst) {
        e.mig = mig;
        e.p.frame = frame;
        return std::nullopt;
      }
      if (!e.mig && !e.moved) ++armed, from = &e;
    }
    std::optional<path> out;
    if (mig && armed == 1) {
      from->moved = true;
      out = from->p;
    }
    if (count_ >= max_) {
      auto victim = by_qp_.begin();
      if (victim->first == qp && by_qp_.size() > 1) ++victim;
      count_ -= victim->second.size();
      if (victim->first == qp) victim->second.clear();
      else by_qp_.erase(victim);
    }
    by_qp_[qp].push_back({{src, dst, frame}, mig, false});
    ++count_;
    return out;
  }

 private:
  struct entry {
    path p;
    bool mig = false;    ///< its latest request carried MigReq
    bool moved = false;  ///< the QP migrated away from it
  };
  std::size_t max_, count_ = 0;
  std::unordered_map<std::uint32_t, std::vector<entry>> by_qp_;
};

}  // namespace pushwire::flow
