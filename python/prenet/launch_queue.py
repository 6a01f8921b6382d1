"""How host and device time combine on a GPU: the host issues kernels one after another into a stream, and the
device runs each one when it has been issued and the one before it has finished. Within an epoch nothing waits
for the device (the protocol synchronises only at the epoch's ends), so the host may run ahead by many steps.

For kernels i = 1..n issued at times t_i (the host's running total of its own costs), with device times d_i:
    end_i = max(t_i, end_{i-1}) + d_i,
which unrolls to end_n = max(end_0 + sum_i d_i, max_i (t_i + sum_{j >= i} d_j)) (a max-plus recurrence), evaluated
here with array operations over all of an epoch's ops at once. An epoch ends when both the host and the device
are done.
"""
import numpy as np


def run(steps, host_start=0.0, device_end=0.0):
    """(host time, device end) after issuing `steps` in order: each an (host_ms, device_ms) pair of equal-length
    arrays, op by op (an op without a kernel has device time 0)."""
    for host_ms, device_ms in steps:
        host_ms, device_ms = np.asarray(host_ms, float), np.asarray(device_ms, float)
        if host_ms.shape != device_ms.shape:
            raise ValueError(f"host and device times differ in length ({host_ms.shape} vs {device_ms.shape})")
        if not len(host_ms):
            continue
        issued = host_start + np.cumsum(host_ms)
        after = np.cumsum(device_ms[::-1])[::-1]  # device time from each kernel to the step's end
        device_end = max(device_end + after[0], float(np.max(issued + after)))
        host_start = float(issued[-1])
    return host_start, device_end


def epoch_ms(steps):
    """Milliseconds from the first issue to the end of the last kernel (or of the host's work, if later)."""
    steps = list(steps)
    if not steps:
        return 0.0
    host, device = run([(np.concatenate([np.asarray(h, float) for h, _ in steps]),
                         np.concatenate([np.asarray(d, float) for _, d in steps]))])
    return max(host, device)
