#pragma once

#include <memory>

#include "rdmactor/transport/fabric.hpp"
#include "transport/soft/registration.hpp"

namespace rdmactor::transport::soft {

class soft_device;

/// A registration handle of the soft fabric.  Keeps its device alive; its
/// destructor deregisters, waiting for a remote access in progress (one
/// memcpy or socket call) to end, so the memory may be freed afterwards.
class soft_memory_region final : public memory_region {
public:
  soft_memory_region(std::shared_ptr<soft_device> dev, registration_ptr reg);

  ~soft_memory_region() override;

private:
  std::shared_ptr<soft_device> dev_;
  registration_ptr reg_;
};

} // namespace rdmactor::transport::soft
