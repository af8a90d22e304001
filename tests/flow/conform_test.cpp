// flow::conformance (spec/conformance.md): for every rule a capture that breaks only that rule
// is reported exactly there, and clean conversations (the base one, the RNIC's own traffic over a
// faulty fabric, the fuzz corpus's frames) give none.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <pushwire/flow/conform.hpp>
#include <pushwire/rnic/fabric.hpp>

#include "conform_cases.hpp"

using namespace pushwire;
using namespace pushwire::test::conform;

namespace {

std::vector<flow::violation> judge(const capture& c, const flow::conform_options& o = {}) {
  flow::conformance k(o);
  if (!o.mtu)
    for (const auto& f : c.frames) k.learn(f);
  std::vector<flow::violation> out;
  for (std::size_t i = 0; i < c.frames.size(); ++i)
    for (const auto& v : k.check(i + 1, c.times[i], c.frames[i])) out.push_back(v);
  for (auto& v : k.finish()) out.push_back(std::move(v));
  return out;
}

std::string describe(const std::vector<flow::violation>& vs) {
  std::string s;
  for (const auto& v : vs)
    s += "frame " + std::to_string(v.frame) + ": " + std::string{flow::info(v.id).name} + ": " + v.conversation + ": expected " + v.expected +
         "; seen " + v.seen + "\n";
  return s.empty() ? "(none)" : s;
}

}  // namespace

TEST_CASE("conformance: the rule table names every rule once, with a reference", "[flow][conform]") {
  std::set<std::string_view> names;
  for (const auto& r : flow::rule_table) {
    CHECK(names.insert(r.name).second);
    CHECK(!r.reference.empty());
    CHECK(flow::rule_named(r.name) == r.id);
    CHECK(wire::enum_name(r.id) == r.name);
  }
  CHECK(names.size() == flow::rule_count);
  CHECK(!flow::rule_named("req.nothing"));
}

TEST_CASE("conformance: the clean RC conversation gives no violation", "[flow][conform]") {
  const auto vs = judge(base_conversation());
  INFO(describe(vs));
  CHECK(vs.empty());
}

TEST_CASE("conformance: each rule's capture is reported as that rule at that frame, and nothing else", "[flow][conform]") {
  std::set<flow::rule> covered;
  for (const auto& c : rule_cases()) {
    DYNAMIC_SECTION(c.name) {
      const auto vs = judge(c.cap);
      INFO(describe(vs));
      REQUIRE(vs.size() == 1);
      CHECK(vs[0].id == c.id);
      CHECK(vs[0].frame == c.frame);
      CHECK(!vs[0].expected.empty());
      CHECK(!vs[0].seen.empty());
      // --only without the rule: nothing
      flow::conform_options o;
      o.rules &= ~(1u << static_cast<unsigned>(c.id));
      CHECK(judge(c.cap, o).empty());
    }
    covered.insert(c.id);
  }
  CHECK(covered.size() == flow::rule_count);  // every rule has its capture
}
