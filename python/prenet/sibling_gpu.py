"""A GPU that is a fitted GPU's sibling: the same architecture, SM count and CUDA cores, other clocks, memory
bandwidth or memory size (the V100 SXM2 beside the V100 PCIe that NeuSight measured). The unseen-GPU bundle alone
times it worse than the seen-GPU bundle times the sibling (VGG-16 at batch 64: the unseen bundle puts the V100 PCIe
itself at 515 ms a step where the seen one, within 4% on held-out layers, says 389), and so made the faster SXM2
slower than the PCIe card (471 ms). A sibling's estimate is therefore the seen bundle's for the fitted sibling,
scaled by how much faster or slower the unseen bundle, which learned across devices from their specifications,
finds the GPU than that sibling (per layer configuration and part: forward, backward, optimizer).
"""
import functools
import math

from .catalog import find_gpu
from .uncertainty import extrapolation

# What makes two GPUs siblings: the same chip, enabled alike (timing specs that may differ: clocks, bandwidth).
SAME_CHIP = ("architecture", "sm_count", "cuda_cores")


@functools.lru_cache(maxsize=None)
def fitted_sibling(gpu, fitted):
    """The device of `fitted` (a tuple) closest to `gpu` (canonical catalog names) among those with its SAME_CHIP
    specs, or None where none has them."""
    spec = find_gpu(gpu)
    same = [name for name in fitted if all(find_gpu(name)[key] == spec[key] for key in SAME_CHIP)]
    if not same:
        return None
    return min(same, key=lambda name: (extrapolation(gpu, [name])["distance"], name))


def _scaled(anchor, there, here):
    """`anchor` (a time in ms, or a dict of them and their bases) times here / there, key by key."""
    def ratio(a, t, h):
        return a * h / t if t and math.isfinite(h / t) else a

    if isinstance(anchor, dict):
        return {key: ratio(value, there[key], here[key]) if key.endswith("_ms") else value
                for key, value in anchor.items()}
    return ratio(anchor, there, here)


class SiblingBundle:
    """A native bundle's interface (estimate, predict, update_ms, has) for a GPU timed through its fitted
    sibling: `seen` (the seen-GPU bundle) on `sibling`, times `unseen` on the GPU over `unseen` on the sibling.
    `launch_gaps(device)`: ({kind: ms}, the machine's ms) of the launch gap on `device` (prenet.launch_gap);
    `holds_gaps`: (seen, unseen), whether each bundle's predictions hold the gap (fitted on latencies), to be taken
    off its kernels as prenet.estimate takes it off. Gaps a caller passes (prenet.estimate's, {} included) are the
    GPU's own, for the unseen bundle's call on it, and each bundle's own are taken off for the sibling; a call
    without them (prenet.predict_layer) takes none off, as a bundle called alone does."""

    def __init__(self, seen, unseen, sibling, launch_gaps, holds_gaps):
        self.seen, self.unseen, self.sibling = seen, unseen, sibling
        self._launch_gaps, self._holds = launch_gaps, dict(zip((id(seen), id(unseen)), holds_gaps))

    def _gaps(self, bundle, device, given, machine=False):
        """The gaps to take off `bundle`'s kernels on `device`, for a call given `given` gaps (None: none)."""
        if given is None or not self._holds[id(bundle)]:
            return {}
        kinds, machine_ms = self._launch_gaps(device)
        return {"add": machine_ms} if machine else kinds

    def _on_sibling(self, call, given, machine=False):
        """`call(bundle, device, gaps)` of the seen bundle and of the unseen one on the sibling, each with its own
        gaps where a call is `given` any (machine: the machine's, as an optimizer's update takes)."""
        anchor = call(self.seen, self.sibling, self._gaps(self.seen, self.sibling, given, machine))
        there = call(self.unseen, self.sibling, self._gaps(self.unseen, self.sibling, given, machine))
        return anchor, there

    def has(self, kind, mode):
        return self.seen.has(kind, mode) and self.unseen.has(kind, mode)

    def estimate(self, kind, configs, catalog, device, optimizer, precision="fp32", gaps_ms=None,
                 with_cuda_core=False):
        def call(bundle, name, gaps):
            return bundle.estimate(kind, configs, catalog, name, optimizer, precision, gaps, with_cuda_core)

        anchor, there = self._on_sibling(call, gaps_ms)
        here = call(self.unseen, device, gaps_ms or {})
        return [_scaled(a, t, h) for a, t, h in zip(anchor, there, here)]

    def predict(self, kind, mode, configs, catalog, device, optimizer="sgd"):
        def call(bundle, name, _):
            return bundle.predict(kind, mode, configs, catalog, name, optimizer)

        anchor, there = self._on_sibling(call, None)
        here = call(self.unseen, device, None)
        return [_scaled(a, t, h) for a, t, h in zip(anchor, there, here)]

    def update_ms(self, groups, catalog, device, optimizer, gaps_ms=None):
        def call(bundle, name, gaps):
            return bundle.update_ms(groups, catalog, name, optimizer, gaps)

        anchor, there = self._on_sibling(call, gaps_ms, machine=True)
        here = call(self.unseen, device, gaps_ms or {})
        return [_scaled(a, t, h) for a, t, h in zip(anchor, there, here)]
