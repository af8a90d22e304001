// Capture files: wire::pcap::reader on arbitrary bytes, read as classic pcap or pcapng. Reading
// ends; every record lies inside the input, holds at most max_record bytes and no more than its
// original length, and names an interface of its section with that interface's link type; an
// error is truncated or bad_pcap at an offset inside the input. A file read to its end is
// written again as classic pcap (nanoseconds) and reads back as the same records.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include <pushwire/wire/pcap.hpp>

#include "provider.hpp"

using namespace pushwire;
namespace pcap = wire::pcap;

namespace {
void check_error(const wire::error& e, std::size_t size) {
  PUSHWIRE_FUZZ_CHECK(e.code == wire::errc::truncated || e.code == wire::errc::bad_pcap);
  PUSHWIRE_FUZZ_CHECK(e.offset <= size && !e.field.empty());
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  auto r = pcap::reader::open(file);
  if (!r) {
    check_error(r.error(), size);
    return 0;
  }
  std::vector<pcap::record> records;
  bool whole = false;
  // Every record takes at least 12 bytes of the file (a pcapng SPB; a classic record 16).
  for (std::size_t n = 0; n <= size / 12 + 1; ++n) {
    const auto x = r->next();
    if (!x) {
      check_error(x.error(), size);
      const auto again = r->next();  // a failed next() consumed nothing
      PUSHWIRE_FUZZ_CHECK(!again && again.error() == x.error());
      break;
    }
    if (!*x) {
      whole = true;
      break;
    }
    const pcap::record& rec = **x;
    PUSHWIRE_FUZZ_CHECK(size > 0 && rec.data.data() >= file.data() && rec.data.data() + rec.data.size() <= file.data() + size);
    PUSHWIRE_FUZZ_CHECK(rec.data.size() <= pcap::max_record && rec.data.size() <= rec.orig_len);
    if (r->file_format() == pcap::format::pcap) {
      PUSHWIRE_FUZZ_CHECK(rec.interface_id == 0 && rec.has_timestamp && rec.linktype == r->linktype());
    } else {
      const auto ifs = r->interfaces();
      PUSHWIRE_FUZZ_CHECK(rec.interface_id < ifs.size() && rec.linktype == ifs[rec.interface_id].linktype);
      if (!rec.has_timestamp) {  // an SPB: interface 0, cut to its snaplen
        PUSHWIRE_FUZZ_CHECK(rec.interface_id == 0 && rec.ts_ns == 0);
        PUSHWIRE_FUZZ_CHECK(ifs[0].snaplen == 0 || rec.data.size() <= ifs[0].snaplen);
      }
    }
    records.push_back(rec);
  }
  PUSHWIRE_FUZZ_CHECK(whole || r->next().has_value() == false);
  if (!whole || records.empty()) return 0;
  const std::uint32_t linktype = records[0].linktype;
  if (!std::all_of(records.begin(), records.end(), [&](const pcap::record& x) {
        return x.linktype == linktype && x.ts_ns / 1000000000u <= 0xFFFFFFFFu;
      }))
    return 0;
  std::vector<std::byte> copy;
  pcap::writer w{copy, pcap::resolution::nano, linktype};
  for (const auto& x : records) w.add(x.ts_ns, x.data);
  auto back = pcap::reader::open(copy);
  PUSHWIRE_FUZZ_CHECK(back.has_value());
  for (const auto& x : records) {
    const auto y = back->next();
    PUSHWIRE_FUZZ_CHECK(y && *y && std::ranges::equal((*y)->data, x.data) && (*y)->ts_ns == x.ts_ns && (*y)->linktype == linktype);
  }
  const auto end = back->next();
  PUSHWIRE_FUZZ_CHECK(end && !*end);
  return 0;
}
