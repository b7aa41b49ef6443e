// Linked only into fluxtrain-devemu: the emulated GPU is Device::kCUDA from the process start.
#include "devemu.h"

namespace {
const bool registered = (ft::devemu::register_emulated_gpu(), true);
}  // namespace
