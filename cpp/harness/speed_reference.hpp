// The host's speed as each CPU row is timed: a fixed matrix product (the cores' arithmetic) and a fixed copy (the
// memory's bandwidth), timed right after the row with the same threads. This project's virtual machine runs
// stretches of minutes 1.2-1.7 times slower (data/README.md, bench/cpu_retime.py); with these two times beside every
// row, a fit can divide the machine's speed out instead of taking it for a property of the configuration.
#pragma once

#include <torch/torch.h>

namespace prenet::harness {

struct SpeedReference {
    double matmul_ms = 0;  // median of a 512 x 512 x 512 fp32 product, written into a kept output
    double copy_ms = 0;    // median of a copy of 16 MiB of fp32 into a kept tensor
};

class SpeedProbe {
public:
    SpeedProbe();  // makes the operands once: every probe times the same work on the same memory
    SpeedReference time();

private:
    torch::Tensor left_, right_, product_, source_, destination_;
};

}  // namespace prenet::harness
