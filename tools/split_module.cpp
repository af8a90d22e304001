// The split-model modules' code, compiled once for both programs (pushwire-host, pushwire-iou).
#include "split_module.hpp"

namespace pushwire::tools {

int host_main(int argc, char** argv) { return module_main(argc, argv, pp::role::host); }
int iou_main(int argc, char** argv) { return module_main(argc, argv, pp::role::iou); }

}  // namespace pushwire::tools
