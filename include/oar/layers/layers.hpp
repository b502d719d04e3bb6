// oar/layers/layers.hpp: every layer function (the user-facing builders).
#pragma once
#include "oar/layers/activations.hpp"
#include "oar/layers/control_flow.hpp"
#include "oar/layers/expr.hpp"
#include "oar/layers/loss.hpp"
#include "oar/layers/metrics.hpp"
#include "oar/layers/nn.hpp"
#include "oar/layers/recurrent.hpp"
#include "oar/layers/recurrent_group.hpp"
#include "oar/layers/sequence.hpp"
#include "oar/layers/sequence_shape.hpp"
#include "oar/layers/static_rnn.hpp"
#include "oar/layers/tensor.hpp"
