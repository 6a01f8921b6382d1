"""A model converted for distributed training (torch.nn.SyncBatchNorm.convert_sync_batchnorm) run as on one GPU.
SyncBatchNorm refuses any tensor off a GPU (meta and CPU tensors included), and in training asks the process group
for its size; on one GPU it runs the plain batch norm (F.batch_norm, as its parent class does). prenet predicts one
GPU's step, so within its walks such a layer runs that plain batch norm; synchronising statistics between GPUs is
not modelled.
"""
import contextlib


@contextlib.contextmanager
def as_on_one_gpu(model):
    """Within the block, every SyncBatchNorm of `model` runs as the batch norm it is on one GPU (its parent class's
    forward); afterwards it is as it was, also when the block fails."""
    import types

    from torch.nn.modules.batchnorm import SyncBatchNorm, _BatchNorm

    from .model_state import forwards_replaced

    with forwards_replaced({module: types.MethodType(_BatchNorm.forward, module) for module in model.modules()
                            if isinstance(module, SyncBatchNorm)}):
        yield model
