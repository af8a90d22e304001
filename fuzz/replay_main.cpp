// The replay driver: runs a fuzz target's LLVMFuzzerTestOneInput on every file named on the
// command line (directories are walked), so corpora and regressions run in ctest with any
// compiler. Prints how many inputs ran; a crash or a failed invariant aborts. Fails when the
// arguments name no file at all (a corpus moved or renamed would otherwise replay nothing).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "provider.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::size_t ran = 0;
  auto run = [&](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    const std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    ++ran;
  };
  for (int i = 1; i < argc; ++i) {
    const fs::path p = argv[i];
    if (fs::is_directory(p)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) run(f);
    } else if (fs::exists(p)) {
      run(p);
    }
  }
  if (ran == 0) {
    std::printf("no input file found: the corpus is missing\n");
    return 1;
  }
  LLVMFuzzerTestOneInput(nullptr, 0);  // the empty input, always
  std::printf("%zu inputs replayed\n", ran + 1);
  return 0;
}
