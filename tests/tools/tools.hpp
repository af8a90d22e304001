// The tools under test (pushwire-dump, pushwire-gen, pushwire-conform, pushwire-rnic) and a scratch directory, as CMake passes them
// to pushwire-test-tools; each run goes through the shell (support/process.hpp).
#pragma once

#include <string>

#include "../support/process.hpp"

#ifndef PUSHWIRE_DUMP
#error "PUSHWIRE_DUMP must name the pushwire-dump executable"
#endif
#ifndef PUSHWIRE_GEN
#error "PUSHWIRE_GEN must name the pushwire-gen executable"
#endif
#ifndef PUSHWIRE_CONFORM
#error "PUSHWIRE_CONFORM must name the pushwire-conform executable"
#endif
#ifndef PUSHWIRE_RNIC
#error "PUSHWIRE_RNIC must name the pushwire-rnic executable"
#endif
#ifndef PUSHWIRE_WORKDIR
#error "PUSHWIRE_WORKDIR must name a scratch directory"
#endif

namespace pushwire::test {

/// pushwire-dump ARGS, with stdin_text on its standard input.
inline run_result run_dump(const std::string& args, const std::string& stdin_text = {}) {
  return run_command("'" PUSHWIRE_DUMP "' " + args, stdin_text);
}
/// pushwire-gen ARGS.
inline run_result run_gen(const std::string& args) { return run_command("'" PUSHWIRE_GEN "' " + args); }
/// pushwire-conform ARGS.
inline run_result run_conform(const std::string& args) { return run_command("'" PUSHWIRE_CONFORM "' " + args); }
/// pushwire-rnic ARGS.
inline run_result run_rnic(const std::string& args) { return run_command("'" PUSHWIRE_RNIC "' " + args); }

}  // namespace pushwire::test
