#include <pushwire/wire/pcap.hpp>

#include "../support/test_support.hpp"

using namespace pushwire;
namespace pcap = wire::pcap;
using wire::errc;

TEST_CASE("pcap: write, read back, both resolutions", "[wire][pcap]") {
  for (auto res : {pcap::resolution::micro, pcap::resolution::nano}) {
    std::vector<std::byte> file;
    pcap::writer w{file, res};
    const auto a = test::copy(test::hex<"0102030405">()), b = test::copy(test::hex<"ff">());
    w.add(1'700'000'000'123'456'789ull, a);
    w.add(1'700'000'001'000'000'000ull, b);
    auto r = pcap::reader::open(file);
    REQUIRE(r.has_value());
    CHECK(r->linktype() == pcap::linktype_ethernet);
    CHECK(r->timestamps() == res);
    auto x = r->next();
    REQUIRE(x.has_value());
    REQUIRE(x->has_value());
    CHECK(std::ranges::equal((*x)->data, a));
    CHECK((*x)->ts_ns == (res == pcap::resolution::nano ? 1'700'000'000'123'456'789ull : 1'700'000'000'123'456'000ull));
    auto y = r->next();
    REQUIRE(y->has_value());
    CHECK(std::ranges::equal((*y)->data, b));
    auto end = r->next();
    REQUIRE(end.has_value());
    CHECK_FALSE(end->has_value());
  }
}

TEST_CASE("pcap: big-endian files, and malformed ones", "[wire][pcap]") {
  // A big-endian header (as written on a big-endian host) with one 2-byte record.
  const auto be = test::copy(test::hex<"a1b2c3d4 0002 0004 00000000 00000000 0000ffff 00000001"
                                       "00000001 00000002 00000002 00000002 abcd">());
  auto r = pcap::reader::open(be);
  REQUIRE(r.has_value());
  CHECK(r->byte_swapped());
  auto x = r->next();
  REQUIRE(x->has_value());
  CHECK((*x)->ts_ns == 1'000'002'000ull);
  CHECK((*x)->data.size() == 2);
  auto bad_magic = be;
  bad_magic[0] = std::byte{0};
  CHECK(pcap::reader::open(bad_magic).error() == wire::error{errc::bad_pcap, 0, "magic"});
  auto bad_version = be;
  bad_version[5] = std::byte{3};
  CHECK(pcap::reader::open(bad_version).error().field == "version");
  CHECK(pcap::reader::open(std::span(be).first(23)).code() == errc::truncated);
  for (std::size_t k = 25; k < be.size(); ++k) {
    auto cut = pcap::reader::open(std::span(be).first(k));
    REQUIRE(cut.has_value());
    CHECK(cut->next().code() == errc::truncated);
  }
  auto huge = be;
  huge[32] = std::byte{0x7f};  // incl_len 0x7f000002
  auto h = pcap::reader::open(huge);
  CHECK(h->next().error() == wire::error{errc::bad_pcap, 32, "incl_len"});
}
