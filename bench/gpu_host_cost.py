"""What the host of a GPU machine spends per operation, with kernels too small to matter: on the CPU
(prenet.host_cost's measurement: dispatch per operator, module call, autograd node, optimizer tensor) and on
the GPU (the same loops on one-element CUDA tensors, no synchronisation inside a loop: the host's issue rate
when it, not the device, is the bottleneck). Compare with what prenet assumes for a GPU host (data/gpu_host_costs.json
for dispatch, data/gpu_launch_gaps.json for issuing a kernel).

Run on a GPU machine:  python bench/gpu_host_cost.py --out FILE.json
"""
import argparse
import json
import platform
import time

import torch

from prenet import host_cost


def per_call_us(step, calls, repeats=15):
    """Least time per call over `repeats` runs of `step` (which makes `calls` calls), synchronised at the ends."""
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        started = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    return 1e6 * min(times) / calls


def cuda_costs(n=2000, tensors=100):
    a, b = torch.ones(1, device="cuda"), torch.ones(1, device="cuda")
    layer = torch.nn.Linear(1, 1).cuda()
    x = torch.ones(1, 1, device="cuda")

    def ops():
        for _ in range(n):
            a + b

    def linears():
        for _ in range(n):
            layer(x)

    chain_length = 200
    leaf = torch.ones(1, device="cuda", requires_grad=True)

    def backward():
        y = leaf
        for _ in range(chain_length):
            y = y * 1.0
        y.backward()

    params = [torch.nn.Parameter(torch.ones(1, device="cuda")) for _ in range(tensors)]
    for p in params:
        p.grad = torch.ones_like(p)
    optimizers = {"sgd_momentum": torch.optim.SGD(params, lr=1e-3, momentum=0.9), "adam": torch.optim.Adam(params)}
    for optimizer in optimizers.values():
        optimizer.step()  # state made outside the timing
    forward_backward_us = per_call_us(backward, chain_length)
    forward_us = per_call_us(lambda: [leaf * 1.0 for _ in range(chain_length)], chain_length)
    return {"op_us": per_call_us(ops, n), "linear_forward_us": per_call_us(linears, n),
            "autograd_node_us": forward_backward_us - forward_us,
            "optimizer_step_us_per_tensor": {name: per_call_us(opt.step, tensors, repeats=30) / 1.0
                                             for name, opt in optimizers.items()}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    result = {"cpu": host_cost.measure(), "cuda": cuda_costs(),
              "environment": {"host_cpu": host_cost.cpu_model(), "gpu": torch.cuda.get_device_name(),
                              "torch": torch.__version__, "cuda": torch.version.cuda,
                              "python": platform.python_version(), "date": time.strftime("%Y-%m-%d")}}
    text = json.dumps(result, indent=1)
    with open(args.out, "w") as out:
        out.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
