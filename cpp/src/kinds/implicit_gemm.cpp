// A convolution as the implicit GEMM cuDNN runs it as (NVIDIA, "Convolutional Layers User's Guide", convolution
// algorithms): rows are the batch's output positions, the inner dimension the taps each output reads
// (c_in / groups x kernel positions), columns c_out; on tensor cores on NHWC tensors, so that PyTorch's NCHW ones
// are transposed there and back (same guide, "Tensor Layouts in Memory").
#include "kinds.hpp"

namespace prenet::kinds {

KernelWork implicit_gemm(std::int64_t rows, std::int64_t inner, std::int64_t columns, std::int64_t bias) {
    return {"linear", {{"batch", 1}, {"seq_len", rows}, {"in_features", inner}, {"out_features", columns},
                       {"bias", bias}}};
}

// A read and a write of each element: 2/3 of an add's passes.
KernelWork layout_transposes(std::int64_t elements) {
    return {"add", {{"batch", 1}, {"features", elements}}, kUnaryElementPasses / kBinaryElementPasses};
}

}  // namespace prenet::kinds
