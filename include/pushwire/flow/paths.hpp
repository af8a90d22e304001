// Automatic path migration as a capture shows it (IBTA vol. 1 17.2.8; spec/qos.md §9): an RC or
// UC QP's requests that move to another address pair, carrying BTH MigReq where they carried it
// clear. A QP armed for migration sends MigReq 0; once migrated, 1. The requests name only their
// destination QP, so a move is recognised by PSN: the pair the QP's requests left is, among the
// pairs they take now with MigReq clear, the one whose latest PSN is nearest the new pair's first
// (within psn_window; a tie names none). A pair left may be taken again (a migration back).
// flow::conformance (apm.psn_continuity) and flow::observer (pushwire-dump, the Wireshark plugin)
// both ask this watch. Sans-IO; bounded.
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
  /// PSNs (modulo 2^24) within which a request on a new pair may continue an old pair's: beyond
  /// it, the new pair's requests are another connection's to the same QP number.
  static constexpr std::uint32_t psn_window = 1u << 16;
  /// `max`: address pairs remembered, all QP numbers together (beyond it, one QP's pairs are
  /// forgotten).
  explicit path_watch(std::size_t max = 4096) : max_(std::max<std::size_t>(max, 1)) {}

  /// An RC or UC request to QP `qp` from `src` to `dst` with PSN `psn` and MigReq `mig`, in frame
  /// `frame`: the path it left, when it migrated here. It did when its pair is not one the QP's
  /// requests take now (new, or left before), MigReq is set, and one pair the QP's requests take
  /// now with MigReq clear is the nearest in PSN, within psn_window. That pair is left then.
  std::optional<path> on_request(std::uint32_t qp, const host& src, const host& dst, std::uint32_t psn, bool mig, std::uint64_t frame) {
    std::vector<entry>& es = by_qp_[qp];
    const auto here = std::find_if(es.begin(), es.end(), [&](const entry& e) { return e.p.src == src && e.p.dst == dst; });
    if (here != es.end() && here->active) {
      here->mig = mig, here->psn = psn, here->p.frame = frame;
      return std::nullopt;
    }
    std::optional<path> out;
    if (mig) {
      entry* best = nullptr;
      std::uint32_t nearest = psn_window + 1;
      bool tie = false;
      for (entry& e : es) {
        if (!e.active || e.mig) continue;
        const std::uint32_t d = distance(e.psn, psn);
        if (d < nearest) best = &e, nearest = d, tie = false;
        else if (d == nearest) tie = true;
      }
      if (best && !tie) {
        best->active = false;
        out = best->p;
      }
    }
    if (here != es.end()) {
      *here = {{src, dst, frame}, psn, mig, true};
      return out;
    }
    if (count_ >= max_) {
      auto victim = by_qp_.begin();
      if (victim->first == qp && by_qp_.size() > 1) ++victim;
      count_ -= victim->second.size();
      if (victim->first == qp) victim->second.clear();
      else by_qp_.erase(victim);
    }
    by_qp_[qp].push_back({{src, dst, frame}, psn, mig, true});
    ++count_;
    return out;
  }

 private:
  struct entry {
    path p;
    std::uint32_t psn = 0;  ///< its latest request's PSN
    bool mig = false;       ///< its latest request carried MigReq
    bool active = true;     ///< the QP's requests take it now (it was not left since its latest)
  };
  /// The distance of two PSNs on the 2^24 circle.
  static std::uint32_t distance(std::uint32_t a, std::uint32_t b) {
    const std::uint32_t d = (a - b) & 0xFFFFFFu;
    return std::min(d, 0x1000000u - d);
  }
  std::size_t max_, count_ = 0;
  std::unordered_map<std::uint32_t, std::vector<entry>> by_qp_;
};

}  // namespace pushwire::flow
