#include "transport/poller.hpp"
