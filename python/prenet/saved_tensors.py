"""What autograd keeps of a forward pass for the backward pass, and for how long: the peak of a training step's
activations (prenet.memory).

Without checkpointing, every tensor the forward pass saves is held until the backward pass starts, so the peak is
their sum (each storage once). Activation checkpointing changes that: a checkpointed segment keeps only its inputs,
and the backward pass runs the segment again to save its tensors then, one segment at a time, after the nodes made
later (the loss's among them) have run and freed theirs. The peak is then the larger of the end of the forward pass
and the largest of the segments' runs (SavedTensors.peak_bytes). Both of PyTorch's forms are followed:
- non-reentrant (`use_reentrant=False`): the segment installs saved-tensor hooks of its own, which hide its saves
  from an outer hook. Every hook that other code pushes reports what it packs, as one segment. A tensor made before
  the segment began is one of its inputs. Offloading hooks (`save_on_cpu`) are counted the same way.
- reentrant (`torch.utils.checkpoint.CheckpointFunction`): the segment runs without gradients and saves its inputs,
  which the outer hook sees. Its backward runs it again with gradients, so here it is run a second time with
  gradients, and its saves are counted as one segment.
"""
import contextlib


def _storage(tensor):
    return tensor.untyped_storage() if hasattr(tensor, "untyped_storage") else tensor.storage()


def storage_key(tensor):
    """One key per storage: views, detached aliases and the tensor itself share it."""
    return _storage(tensor)._cdata


def storage_nbytes(tensor):
    """The bytes of the whole storage a saved tensor keeps alive (a view keeps all of it)."""
    return _storage(tensor).nbytes()


class SavedTensors:
    """Storages saved for the backward pass, by who keeps them: `own` (by the step, held until its backward),
    `held` (a checkpointed segment's inputs, with `held_by`: {key: the first segment holding it}) and `segments`
    (each segment's own saves); {key: (tensor, bytes)} each, the tensor kept so that no key is reused.
    `excluded`: keys of storages counted elsewhere (the weights);
    `made`: {key: (the order its storage was first made in, a tensor of it)} (made_order)."""

    def __init__(self, excluded=()):
        self.excluded = set(excluded)
        self.own, self.held, self.held_by, self.segments, self.made = {}, {}, {}, [], {}
        self.starts = []  # per segment: len(made) when it began

    def pack_own(self, tensor):
        self.own[storage_key(tensor)] = (tensor, storage_nbytes(tensor))
        return tensor

    def begin_segment(self):
        self.segments.append({})
        self.starts.append(len(self.made))
        return len(self.segments) - 1

    def pack_in_segment(self, segment, tensor):
        """A tensor saved inside `segment`: one of its inputs (held) when its storage was made before the segment
        began or outside the block (the model's inputs), else one of the segment's own saves."""
        key = storage_key(tensor)
        made = self.made.get(key)
        before = made is None or made[0] < self.starts[segment]
        (self.held if before else self.segments[segment])[key] = (tensor, storage_nbytes(tensor))
        if before:
            self.held_by.setdefault(key, segment)

    def peak_bytes(self):
        """The larger of the step's two high points: the end of the forward pass (the saves outside segments and
        the segments' inputs), and each segment's run in the backward pass (last segment first): what is still
        alive then, the saves outside segments made before that segment began and the inputs of that segment and
        of the earlier ones (what later nodes and segments saved was freed as they ran, earlier in the backward
        pass), plus that segment's own saves. Without segments, all saves."""
        counted = set(self.excluded)

        def fresh(part):  # {key: bytes} of the part's storages not counted in an earlier part
            keys = part.keys() - counted
            counted.update(keys)
            return {key: part[key][1] for key in keys}

        own, held = fresh(self.own), fresh(self.held)
        segments = [sum(size for key, (_, size) in segment.items() if key not in counted) for segment in self.segments]

        def made_before(key, start):  # a storage made outside the block (the model's inputs) counts as earliest
            made = self.made.get(key)
            return made is None or made[0] < start

        reruns = [sum(size for key, size in own.items() if made_before(key, start)) +
                  sum(size for key, size in held.items() if self.held_by[key] <= index) + segment
                  for index, (start, segment) in enumerate(zip(self.starts, segments))]
        return max([sum(own.values()) + sum(held.values()), *reruns])


@contextlib.contextmanager
def made_order(saved):
    """Within the block, the storage of every operator's output is numbered in the order it was first made
    (saved.made), through a dispatch mode."""
    from torch import Tensor
    from torch.utils._python_dispatch import TorchDispatchMode

    class Numbering(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for value in (out if isinstance(out, (tuple, list)) else (out,)):
                if isinstance(value, Tensor):
                    saved.made.setdefault(storage_key(value), (len(saved.made), value))
            return out

    with Numbering():
        yield


@contextlib.contextmanager
def _hooks(pack):
    """Saved-tensor hooks `pack` (and an identity unpack) pushed directly, past segments_followed's reporting."""
    import torch

    torch._C._autograd._push_saved_tensors_default_hooks(pack, lambda tensor: tensor)
    try:
        yield
    finally:
        torch._C._autograd._pop_saved_tensors_default_hooks()


@contextlib.contextmanager
def segments_followed(saved):
    """Within the block, saved-tensor hooks that other code pushes (non-reentrant checkpointing, offloading) and
    reentrant checkpointed segments report their saves to `saved` as segments (the module's description)."""
    import torch
    import torch.utils.checkpoint

    autograd = torch._C._autograd
    push = autograd._push_saved_tensors_default_hooks

    def reporting_push(pack, unpack):
        segment = saved.begin_segment()

        def reporting_pack(tensor):
            saved.pack_in_segment(segment, tensor)
            return pack(tensor)
        return push(reporting_pack, unpack)

    checkpoint_function = getattr(torch.utils.checkpoint, "CheckpointFunction", None)
    original_forward = checkpoint_function.forward if checkpoint_function is not None else None

    def forward_then_rerun(ctx, run_function, preserve_rng_state, *args):
        outputs = original_forward(ctx, run_function, preserve_rng_state, *args)
        # what the backward pass saves when it runs the segment again with gradients (its inputs detached there
        # too: they share their storages, made before the segment, so they count as its inputs)
        rerun = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args]
        segment = saved.begin_segment()
        with torch.enable_grad(), _hooks(lambda tensor: saved.pack_in_segment(segment, tensor) or tensor):
            run_function(*rerun)
        return outputs

    autograd._push_saved_tensors_default_hooks = reporting_push
    if original_forward is not None:
        checkpoint_function.forward = staticmethod(forward_then_rerun)
    try:
        yield
    finally:
        autograd._push_saved_tensors_default_hooks = push
        if original_forward is not None:
            checkpoint_function.forward = staticmethod(original_forward)
