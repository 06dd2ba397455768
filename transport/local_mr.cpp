#include "transport/local_mr.hpp"
