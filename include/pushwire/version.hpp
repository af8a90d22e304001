// The library version (also the CMake package version).
#pragma once

#define PUSHWIRE_VERSION_MAJOR 0
#define PUSHWIRE_VERSION_MINOR 1
#define PUSHWIRE_VERSION_PATCH 0
#define PUSHWIRE_VERSION_STRING "0.1.0"
