// pushwire-iou: the split-model driver's I/O-unit module (spec/split-model.md). Owns the LAN NIC
// (a TAP whose far side is the LAN); frames from the LAN go to the host by RDMA write into its
// pools, the host's frames go out on the LAN. Answers the host's CfgUtil requests.
// usage: pushwire-iou --local IP --peer IP [--peer IP ...] [--tap NAME] [--mtu N] [--mac MAC] [-v]
namespace pushwire::tools {
int iou_main(int argc, char** argv);  // split_module.cpp
}

int main(int argc, char** argv) { return pushwire::tools::iou_main(argc, argv); }
