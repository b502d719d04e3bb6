// kernels/cuda/rnn_launch.hpp: the launchers rnn.cu defines (what they share and how they report: launch.hpp).
#pragma once
#include "kernels/cuda/launch.hpp"

namespace oar::cuda_kernels {

// lstm, gru, lstm_unit and gru_unit (the CPU kernels' math per element: kernels/cpu/lstm.hpp, gru.hpp,
// lstm_unit.hpp); the products h_{t-1} W run on cuBLAS between these launches. Activations are RnnAct's values
// (ops/rnn_common.hpp): 0 identity, 1 sigmoid, 2 tanh, 3 relu. Every function: f32, f64; k rows of D, one thread per
// element; `row_of` indexes the sequence layout (hs, cs) by a step's batch rows.
/// The gate inputs: out row r = x row row_of[r] (x row r without row_of) + bias (may be null), `rows` rows of
/// `width`. (The plain row copies between the layouts are sequence_shape.cu's copy_rows.)
int rnn_gate_inputs(Elem t, const void* x, const int64_t* row_of, const void* bias, void* out, int64_t rows, int64_t width, Stream s);
/// out[j] = the sum over rows of m [rows, width] (in double, a fixed order). `scratch`: channel_scratch_bytes(rows,
/// width, 1, 1).
int rnn_column_sums(Elem t, const void* m, int64_t rows, int64_t width, void* out, void* scratch, Stream s);
/// lstm's cell: D, the activations, the peepholes W_ic | W_fc | W_oc (3D values; null without).
struct LstmCell {
  int64_t d = 0;
  int gate = 1, cell = 2, candidate = 2;
  const void* peep = nullptr;
};
/// forward_row: g [k, 4D] holds the gate inputs and becomes the activated [c~, i, f, o]; c_prev [k, D] may be
/// null (zeros); writes c, h [k, D] and their rows row_of[i] of cs, hs.
int lstm_step(Elem t, const LstmCell& p, void* g, const void* c_prev, void* c, void* h, const int64_t* row_of, void* hs, void* cs, int64_t k, Stream s);
/// backward_row: writes dg [k, 4D]; adds the gradient of c_{t-1} to dc_prev (may be null). c_prev may be null.
int lstm_step_grad(Elem t, const LstmCell& p, const void* g, const void* c, const void* c_prev, const void* dh, const void* dc, void* dg, void* dc_prev,
                   int64_t k, Stream s);
/// The peepholes' gradients into dpeep [3D]: sums over rows of dg_i c_prev, dg_f c_prev (rows from `from` on) and
/// dg_o c (every row); c_prev of batch row r is c row prev[r] for r >= k0, c0 row r (sorted) below k0. `scratch`:
/// channel_scratch_bytes(rows, d, 1, 3).
int lstm_peephole_grad(Elem t, const void* dg, const void* c, const void* c0, const int64_t* prev, int64_t k0, int64_t from, int64_t rows, int64_t d,
                       void* dpeep, void* scratch, Stream s);
/// gru forward_step's first pass: u, r = gate(g's first 2D columns) in place; rh = r * hp (0 without hp).
int gru_gates(Elem t, int gate, void* g, const void* hp, void* rh, int64_t k, int64_t d, Stream s);
/// Its second: c = candidate(g's last D columns) in place; h = hp + u (c - hp) (u c without hp), and h's rows
/// row_of[i] of hs when hs is not null.
int gru_output(Elem t, int candidate, void* g, const void* hp, void* h, const int64_t* row_of, void* hs, int64_t k, int64_t d, Stream s);
/// backward_step's first pass: dg_u, dg_c (dg_r = 0 without hp); dhp += dh (1 - u) when dhp is not null.
int gru_gates_grad(Elem t, int gate, int candidate, const void* g, const void* hp, const void* dh, void* dg, void* dhp, int64_t k, int64_t d, Stream s);
/// Its second, from drh = dg_c W_c^T: dg_r = gate'(drh hp); dhp += drh r when dhp is not null.
int gru_reset_grad(Elem t, int gate, const void* g, const void* hp, const void* drh, void* dg, void* dhp, int64_t k, int64_t d, Stream s);
/// lstm_unit over x [n, 4D] ([i | f | o | g]) and c_prev [n, D]: writes c, h.
int lstm_unit(Elem t, const void* x, const void* c_prev, void* c, void* h, int64_t n, int64_t d, float forget_bias, Stream s);
/// Its gradient: dx [n, 4D] and dc_prev [n, D], either may be null.
int lstm_unit_grad(Elem t, const void* x, const void* c_prev, const void* c, const void* dc, const void* dh, void* dx, void* dc_prev, int64_t n,
                   int64_t d, float forget_bias, Stream s);

}  // namespace oar::cuda_kernels
