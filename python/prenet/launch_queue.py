"""How host and device time combine on a GPU: the host issues kernels one after another into a stream, and the
device runs each one when it has been issued and the one before it has finished. Within an epoch nothing waits
for the device (the protocol synchronises only at the epoch's ends), so the host may run ahead by many steps.

For kernels i = 1..n issued at times t_i (the host's running total of its own costs), with device times d_i:
    end_i = max(t_i, end_{i-1}) + d_i,
which unrolls to end_n = max(end_0 + sum_i d_i, max_i (t_i + sum_{j >= i} d_j)) (a max-plus recurrence), evaluated
with array operations once per distinct step (StepSummary) and then step by step. An epoch ends when both the
host and the device are done. A step may wait for the device part-way (fp16's GradScaler reads whether any
gradient overflowed before the optimizer's step): it is then two summaries, the first marked `waits`, after which
the host starts no earlier than the device's end.
"""
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StepSummary:
    """What the queue needs of one step: the host's total, the device's total, and the lag
    max_i (t_i + sum_{j >= i} d_j), t_i the host's running total at op i from the step's start (the latest the
    device can finish the step when it starts it idle)."""
    host_ms: float
    device_ms: float
    lag_ms: float
    waits: bool = False  # the host waits for the device at the end of it


def summarize(host_ms, device_ms, waits=False):
    """The StepSummary of a step given op by op: equal-length arrays of host and device milliseconds (an op
    without a kernel has device time 0); `waits`: the host then waits for the device."""
    host_ms, device_ms = np.asarray(host_ms, float), np.asarray(device_ms, float)
    if host_ms.shape != device_ms.shape:
        raise ValueError(f"host and device times differ in length ({host_ms.shape} vs {device_ms.shape})")
    if not len(host_ms):
        return StepSummary(0.0, 0.0, 0.0, waits)
    after = np.cumsum(device_ms[::-1])[::-1]  # device time from each kernel to the step's end
    return StepSummary(float(host_ms.sum()), float(after[0]), float(np.max(np.cumsum(host_ms) + after)), waits)


def run(steps, host_start=0.0, device_end=0.0):
    """(host time, device end) after issuing `steps` in order: each a StepSummary or an (host_ms, device_ms)
    pair of arrays (summarize); a step repeated is best summarized once."""
    for step in steps:
        step = step if isinstance(step, StepSummary) else summarize(*step)
        device_end = max(device_end + step.device_ms, host_start + step.lag_ms)
        host_start += step.host_ms
        if step.waits:
            host_start = max(host_start, device_end)
    return host_start, device_end


def epoch_ms(steps):
    """Milliseconds from the first issue to the end of the last kernel (or of the host's work, if later)."""
    host, device = run(steps)
    return max(host, device)


def run_repeated(runs, host_start=0.0, device_end=0.0):
    """(host time, device end) after issuing, in order, each run of `runs`: (the StepSummary parts of one step,
    how many times it repeats), as run() over every step, at a cost that grows with the log of the repeats (an
    epoch of 10^8 samples at batch 1 included). Each part maps (host, device end) max-plus linearly (run's
    recurrence: device' = max(device + D, host + L); host' = host + H, or max(host + H, device') where the host
    waits), so a step is the max-plus product of its parts' matrices and its repeats that product's power,
    taken by squaring."""
    for parts, count in runs:
        step = _IDENTITY
        for part in parts:
            step = _max_plus(_matrix(part), step)
        power, result = step, _IDENTITY
        while count:
            if count & 1:
                result = _max_plus(power, result)
            power, count = _max_plus(power, power), count >> 1
        host_start, device_end = (max(result[i][0] + host_start, result[i][1] + device_end) for i in (0, 1))
    return host_start, device_end


def epoch_ms_repeated(runs):
    """epoch_ms over runs of repeated steps (run_repeated)."""
    return max(run_repeated(runs))


_NONE = float("-inf")  # max-plus zero
_IDENTITY = ((0.0, _NONE), (_NONE, 0.0))


def _matrix(part):
    """The max-plus matrix of a StepSummary on (host, device end)."""
    host = max(part.host_ms, part.lag_ms) if part.waits else part.host_ms
    return ((host, part.device_ms if part.waits else _NONE), (part.lag_ms, part.device_ms))


def _max_plus(a, b):
    """The max-plus product a (x) b of 2x2 matrices: (a (x) b)_ij = max_k a_ik + b_kj."""
    return tuple(tuple(max(a[i][0] + b[0][j], a[i][1] + b[1][j]) for j in (0, 1)) for i in (0, 1))
