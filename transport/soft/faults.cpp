#include "transport/soft/faults.hpp"

#include "rdmactor/error.hpp"
#include "transport/soft/soft_device.hpp"
#include "transport/soft/soft_queue_pair.hpp"

namespace rdmactor::transport::soft {

caf::error set_faults(device& dev, const fault_plan& plan) {
  auto* soft = dynamic_cast<soft_device*>(&dev);
  if (soft == nullptr)
    return make_error(errc::invalid_argument,
                      std::string{"fault injection needs a soft device, got "
                                  "a "}
                          + dev.kind() + " device");
  soft->set_faults(plan);
  return {};
}

caf::error set_faults(queue_pair& qp, const fault_plan& plan) {
  auto* soft = dynamic_cast<soft_queue_pair*>(&qp);
  if (soft == nullptr)
    return make_error(errc::invalid_argument,
                      "fault injection needs a queue pair of the soft "
                      "fabric");
  soft->set_faults(plan);
  return {};
}

size_t waiting_for_receive(const queue_pair& qp) {
  auto* soft = dynamic_cast<const soft_queue_pair*>(&qp);
  return soft != nullptr ? soft->waiting_for_receive() : 0;
}

uint64_t frames_read_by_owner(const queue_pair& qp) {
  auto* soft = dynamic_cast<const soft_queue_pair*>(&qp);
  return soft != nullptr ? soft->frames_read_by_owner() : 0;
}

uint64_t socket_writes(const queue_pair& qp) {
  auto* soft = dynamic_cast<const soft_queue_pair*>(&qp);
  return soft != nullptr ? soft->socket_writes() : 0;
}

uint64_t empty_socket_reads(const queue_pair& qp) {
  auto* soft = dynamic_cast<const soft_queue_pair*>(&qp);
  return soft != nullptr ? soft->empty_socket_reads() : 0;
}

} // namespace rdmactor::transport::soft
