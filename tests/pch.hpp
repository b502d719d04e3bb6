// tests/pch.hpp: the precompiled header of every test executable.
#pragma once
#include <doctest/doctest.h>

#include <oar/oar.hpp>
