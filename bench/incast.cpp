// pushwire-incast: the 8-to-1 incast of spec/qos.md §3 in virtual time (tests/rnic/incast.hpp),
// with DCQCN for 200 ms and without for 50 ms, as JSON lines for bench/incast.py's plots:
//   {"dcqcn":true,"t_us":50,"queue":123456,"done":[bytes per flow...]}   every 50 µs
//   {"dcqcn":true,"summary":{...}}                                        at the end of each run
#include <cstdio>
#include <string>

#include "../tests/rnic/incast.hpp"

using namespace pushwire;
using namespace pushwire::test::rnic;

int main() {
  for (const bool dcqcn : {true, false}) {
    const time_ns duration = dcqcn ? 200'000'000 : 50'000'000, window = duration / 4;
    const auto r = incast(dcqcn, duration, window, [&](time_ns t, std::uint64_t queue, const std::vector<std::uint64_t>& done) {
      if (t % 50'000) return;
      std::string d;
      for (const auto v : done) {
        if (!d.empty()) d += ',';
        d.append(std::to_string(v));
      }
      std::printf("{\"dcqcn\":%s,\"t_us\":%llu,\"queue\":%llu,\"done\":[%s]}\n", dcqcn ? "true" : "false",
                  static_cast<unsigned long long>(t / 1000), static_cast<unsigned long long>(queue), d.c_str());
    });
    std::printf("{\"dcqcn\":%s,\"summary\":{\"tail_drops\":%llu,\"window_drops\":%llu,\"marked\":%llu,\"goodput\":%.4f,\"jain\":%.4f}}\n",
                dcqcn ? "true" : "false", static_cast<unsigned long long>(r.sw.tail_drops), static_cast<unsigned long long>(r.window_drops),
                static_cast<unsigned long long>(r.sw.marked), r.goodput, r.jain);
  }
  return 0;
}
