#include "common/error.hpp"
