#pragma once
// The Communicator and its verbs now live in paro/communicator/communicator.hpp; this header forwards there
// for code written against earlier releases and will be removed in a later one.

#include "paro/communicator/communicator.hpp"
