// pushwire-dump: decodes push-push messages and prints them as text or JSON.
//
//   pushwire-dump [--json] [--max-frame N] --hex HEX     one message given as hex ('-': stdin)
//
// Exit status: 0 decoded; 1 usage; 2 malformed input (one line on stderr naming the errc).
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <string>
#include <string_view>

#include <pushwire/msg/msg.hpp>
#include <pushwire/version.hpp>
#include <pushwire/wire/hex.hpp>

namespace {

using namespace pushwire;

constexpr int exit_usage = 1;
constexpr int exit_malformed = 2;

int usage(const char* why) {
  if (why) std::cerr << "pushwire-dump: " << why << "\n";
  std::cerr << "usage: pushwire-dump [--json] [--max-frame N] --hex HEX|-\n"
               "  --hex HEX       decode one push-push message given in hex ('-' reads stdin)\n"
               "  --json          print one JSON object instead of text\n"
               "  --max-frame N   largest frame accepted, bytes (default 4096)\n"
               "exit status: 0 decoded, 1 usage, 2 malformed input\n";
  return exit_usage;
}

/// "count_mismatch at byte 12 (pool_count)"
std::string describe(const wire::error& e) {
  std::string s{wire::to_string(e.code)};
  s += " at byte " + std::to_string(e.offset);
  if (!e.field.empty()) s += " (" + std::string{e.field} + ")";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  std::optional<std::string> hex;
  msg::limits lim;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--json") {
      json = true;
    } else if (a == "--hex" && i + 1 < argc) {
      hex = argv[++i];
    } else if (a == "--max-frame" && i + 1 < argc) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(argv[++i], &end, 10);
      if (!end || *end != '\0' || v == 0) return usage("--max-frame needs a positive number");
      lim.max_frame = static_cast<std::size_t>(v);
    } else if (a == "--version") {
      std::cout << "pushwire-dump " PUSHWIRE_VERSION_STRING "\n";
      return 0;
    } else if (a == "--help" || a == "-h") {
      usage(nullptr);
      return 0;
    } else {
      return usage(("unknown argument: " + std::string{a}).c_str());
    }
  }
  if (!hex) return usage("nothing to decode: give --hex");
  if (*hex == "-") hex = std::string(std::istreambuf_iterator<char>(std::cin), {});

  const auto bytes = wire::parse_hex(*hex);
  if (!bytes) {
    std::cerr << "pushwire-dump: error: input is not hex\n";
    return exit_malformed;
  }
  const auto m = msg::decode_any(*bytes, lim);
  if (!m) {
    std::cerr << "pushwire-dump: error: " << describe(m.error()) << "\n";
    return exit_malformed;
  }
  std::cout << (json ? msg::to_json(*m) + "\n" : msg::to_text(*m));
  return 0;
}
