#include "transport/transport_actor.hpp"
