// pushwire-host: the split-model driver's host module (spec/split-model.md). A TAP interface for
// the host's IP stack, whose frames cross the fabric to the I/O unit's LAN NIC and back.
// usage: pushwire-host --local IP --peer IP [--tap NAME] [--mtu N] [-v]
namespace pushwire::tools {
int host_main(int argc, char** argv);  // split_module.cpp
}

int main(int argc, char** argv) { return pushwire::tools::host_main(argc, argv); }
