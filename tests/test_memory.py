"""prenet.training_memory: a training step's device memory by part, its activations as autograd saves them."""
import matplotlib
import pytest
import torch
import torch.nn as nn

import prenet
from idle_parameters import WithIdleParameters
from prenet import memory

matplotlib.use("Agg")


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.fc = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.Linear(8 * 16 * 16, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))


class Branching(SmallCnn):
    """A branch on a value: the meta device cannot run it."""

    def forward(self, x):
        return super().forward(x if x.sum() > 0 else -x)


def test_weights_gradients_state_and_data_are_counted_exactly():
    model = SmallCnn()
    got = prenet.training_memory(model, batch=4, input_shape=(3, 16, 16), dataset_size=10, optimizer="adam")
    parameters = sum(p.numel() for p in model.parameters())
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())   # running statistics and step counter
    assert got.weights == 4 * parameters + buffers
    assert got.gradients == 4 * parameters
    assert got.optimizer_state == 2 * 4 * parameters                      # Adam's two moments
    assert got.data == 10 * (3 * 16 * 16 * 4 + 8)  # the resident data set: images and their int64 class labels
    assert got.batch_data == 4 * (3 * 16 * 16 * 4 + 8)                     # one batch of it
    # the backward pass's start: the cross-entropy's gradients of the log-probabilities and of the logits, alive
    # together (4 samples x 10 classes, fp32, each)
    assert got.loss_gradients == 2 * 4 * 10 * 4
    assert got.total == (got.weights + got.gradients + got.optimizer_state + got.data + got.activations +
                         got.loss_gradients)
    assert got.streamed == got.total - got.data + got.batch_data
    small = prenet.training_memory(model, batch=16, input_shape=(3, 16, 16), dataset_size=10)
    assert small.batch_data == small.data                                  # a batch larger than the data set
    plain = prenet.training_memory(model, batch=4, input_shape=(3, 16, 16), optimizer="sgd_plain")
    assert plain.optimizer_state == 0 and plain.activations == got.activations
    # sizes in the unit the total reaches (a small model's in KiB, where GiB gave "0.00" for every part)
    assert f"training memory: {got.total / 2 ** 10:.2f} KiB (weights {got.weights / 2 ** 10:.2f}," in repr(got)
    assert " 0.00 " not in repr(got).split("; ")[0]


def test_a_language_models_labels_are_resident_data_one_a_token():
    """The protocol's cross-entropy over every token: a label per position, resident with the token ids (int64)."""
    tokens = nn.Sequential(nn.Embedding(50, 8), nn.Linear(8, 50))
    got = prenet.training_memory(tokens, batch=4, example_input=torch.randint(50, (1, 7)), dataset_size=10)
    assert got.data == 10 * (7 * 8 + 7 * 8) and got.batch_data == 4 * (7 * 8 + 7 * 8)


class OwnLoss(nn.Module):
    """A language model that returns its own loss beside its logits, as Hugging Face's do with labels: the next
    token's cross-entropy over shifted logits (a slice, made contiguous; by narrow, one slice in every torch version,
    where indexing slices the full dimension too in some)."""

    def __init__(self, vocab=500):
        super().__init__()
        self.embed, self.head = nn.Embedding(vocab, 16), nn.Linear(16, vocab)

    def forward(self, tokens):
        logits = self.head(self.embed(tokens))
        shifted = logits.narrow(1, 0, logits.shape[1] - 1).contiguous()
        loss = nn.functional.cross_entropy(shifted.flatten(0, 1), tokens[:, 1:].flatten())
        return {"loss": loss, "logits": logits}


@pytest.mark.parametrize("model", [nn.Sequential(nn.Embedding(500, 16), nn.Linear(16, 500)), OwnLoss()],
                         ids=["logits", "own loss"])
def test_a_large_vocabularys_loss_gradients_are_held_at_the_backward_passs_start(model):
    """Two gradients as large as the logits alive at once: the log-probabilities' and the logits' (with its own
    loss, of the shifted logits, and then the slice's backward makes the whole logits' gradient); views make none.
    For real as on meta."""
    tokens = torch.randint(500, (1, 33))
    got = prenet.training_memory(model, batch=8, example_input=tokens)
    logits, shifted = 8 * 33 * 500 * 4, 8 * 32 * 500 * 4
    assert got.loss_gradients == (2 * logits if isinstance(model, nn.Sequential) else shifted + logits)
    output = model(tokens.expand(8, -1))
    loss = output["loss"] if isinstance(output, dict) else nn.functional.cross_entropy(output.flatten(0, 1),
                                                                                        tokens.expand(8, -1).flatten())
    assert memory.loss_gradient_bytes(loss, output) == got.loss_gradients
    assert f"loss_gradients {got.loss_gradients / 2 ** 20:.2f} MiB" in repr(got)


def test_activations_are_what_autograd_saves_on_meta_as_for_real_and_grow_with_the_batch():
    model = SmallCnn().train()
    real = memory.saved_activations(model, torch.randn(4, 3, 16, 16))
    meta = memory.saved_activations(model, torch.empty(4, 3, 16, 16, device="meta"))
    assert real == meta > 0
    # conv saves its input; batch norm its input and statistics; relu its output; linear its (flattened) input:
    # the relu's output and the flattened view of it are one storage
    # the loss (the protocol's cross-entropy) saves its log-probabilities per sample, and a total weight (its labels,
    # which it saves too, are the data's: resident, as the protocol keeps them)
    per_sample = 4 * (3 * 16 * 16 + 2 * 8 * 16 * 16) + 4 * 10
    # + batch norm's saved mean and inverse deviation, and the loss's total weight
    assert meta == 4 * per_sample + 4 * 2 * 8 + 4
    assert memory.saved_activations(model, torch.empty(8, 3, 16, 16, device="meta")) == 8 * per_sample + 4 * 2 * 8 + 4


class Checkpointed(nn.Module):
    """Three residual MLP blocks, each run under torch.utils.checkpoint in the given form (None: not at all)."""

    def __init__(self, form):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16)) for _ in range(3))
        self.form = form

    def forward(self, x):
        for block in self.blocks:
            x = x + (block(x) if self.form is None else
                     torch.utils.checkpoint.checkpoint(block, x, use_reentrant=self.form == "reentrant"))
        return x


@pytest.mark.filterwarnings("ignore:None of the inputs have requires_grad")  # the first block's, in reentrant form
@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_checkpointed_segments_hold_their_inputs_and_save_one_segment_at_a_time(device):
    import torch.utils.checkpoint

    batch, floats = 8, 4
    # each block saves its input (the first Linear's), the GELU's input and the second Linear's input
    block_input, block_own = batch * 16 * floats, 2 * batch * 64 * floats
    # the loss (the protocol's cross-entropy) saves its log-probabilities and total weight (its labels are data)
    loss = batch * 16 * floats + floats
    x = torch.randn(batch, 16) if device == "cpu" else torch.empty(batch, 16, device="meta")
    plain = memory.saved_activations(Checkpointed(None).train(), x)
    assert plain == 3 * (block_input + block_own) + loss
    push = torch._C._autograd._push_saved_tensors_default_hooks
    forward = torch.utils.checkpoint.CheckpointFunction.forward
    for form in ("reentrant", "non-reentrant"):
        got = memory.saved_activations(Checkpointed(form).train(), x)
        # the three blocks' inputs are held; the backward pass saves one block's own tensors at a time, after the
        # loss's backward has freed what the loss saved
        assert got == 3 * block_input + max(block_own, loss), form
    assert torch._C._autograd._push_saved_tensors_default_hooks is push, "the hooks' entry point is put back"
    assert torch.utils.checkpoint.CheckpointFunction.forward is forward


class Funnel(nn.Module):
    """Three residual MLP blocks of 16 features, checkpointed in the given form, the first one wide inside."""

    def __init__(self, form, widths=(256, 16, 16)):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(16, w), nn.GELU(), nn.Linear(w, 16)) for w in widths)
        self.form = form

    def forward(self, x):
        for block in self.blocks:
            x = x + torch.utils.checkpoint.checkpoint(block, x, use_reentrant=self.form == "reentrant")
        return x


@pytest.mark.filterwarnings("ignore:None of the inputs have requires_grad")
@pytest.mark.parametrize("form", ["reentrant", "non-reentrant"])
def test_a_segment_runs_again_after_the_later_segments_freed_their_inputs(form):
    """The backward pass runs the last segment again first; by the time it reaches the first one, the later
    segments' inputs (and the loss's saves) are freed: the peak is the first segment's input and its own saves."""
    import torch.utils.checkpoint

    batch, floats = 8, 4
    got = memory.saved_activations(Funnel(form).train(), torch.randn(batch, 16))
    first_input, first_own = batch * 16 * floats, 2 * batch * 256 * floats
    assert got == first_input + first_own
    # holding every segment's input through the backward pass would have counted two more
    assert got < 3 * first_input + first_own


def test_training_memory_of_a_checkpointed_model_is_below_the_plain_ones():
    plain = prenet.training_memory(Checkpointed(None), batch=64, input_shape=(16,))
    checkpointed = prenet.training_memory(Checkpointed("non-reentrant"), batch=64, input_shape=(16,))
    assert checkpointed.weights == plain.weights and 0 < checkpointed.activations < plain.activations


def test_a_model_the_meta_device_cannot_run_is_measured_at_two_small_batches():
    model = Branching()
    got = prenet.training_memory(model, batch=16, input_shape=(3, 16, 16))
    assert got.activations == memory.saved_activations(model.train(), torch.rand(16, 3, 16, 16))


class CheckpointedIdle(WithIdleParameters):
    """The same behind a layer, in a reentrant checkpoint, which hides its segment's parameters until backward."""

    def __init__(self):
        super().__init__()
        self.pre = nn.Linear(16, 16)

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(super().forward, self.pre(x), use_reentrant=True)


@pytest.mark.parametrize("build", [WithIdleParameters, CheckpointedIdle])
def test_gradients_and_optimizer_state_are_only_the_updated_parameters(build):
    model = build()
    got = prenet.training_memory(model, batch=4, input_shape=(16,), optimizer="adam")
    every = sum(p.numel() * 4 for p in model.parameters())
    loss = model(torch.randn(4, 16)).sum()  # what a real step updates, on the real model
    loss.backward()
    updated = sum(p.numel() * 4 for p in model.parameters() if p.grad is not None)
    assert got.weights == every and updated < every
    # all that require a gradient where a reentrant checkpoint hides them: an upper bound
    counted = every if build is CheckpointedIdle else updated
    assert (got.gradients, got.optimizer_state) == (counted, 2 * counted)
    student = model.student(torch.randn(4, 16)).sum()
    assert memory.updated_parameters(student, model) == list(model.student.parameters())


class Positions(nn.Module):
    """Positions made in the forward pass without a device (on the CPU by default)."""

    def __init__(self, device=None):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(100, 16, device=device), nn.Embedding(64, 16, device=device)
        self.out = nn.Linear(16, 100, device=device)

    def forward(self, ids):
        return self.out(torch.relu(self.tokens(ids) + self.positions(torch.arange(ids.shape[1]))))


def test_a_model_making_tensors_without_a_device_is_walked_on_meta_even_with_its_weights_there():
    """Its meta walk makes those tensors on meta (op_trace.factories_on_meta), so a model built on the meta device,
    which cannot be run for real, gets its memory too, the same as a real run's."""
    ids = torch.randint(100, (8, 12))
    real = memory.saved_activations(Positions().train(), ids)
    for device in (None, "meta"):
        got = prenet.training_memory(Positions(device), batch=8, example_input=ids[:1], optimizer="adam")
        assert got.activations == real
        assert got.gradients == sum(p.numel() * 4 for p in Positions().parameters())


def test_compare_says_where_the_training_memory_fits():
    model = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 4096))
    table = prenet.compare(model, batch=262144, gpus=["P4", "A100"], input_shape=(4096,), dataset_size=262144)
    fits = dict(zip(table["gpu"], table["fits"]))
    assert fits == {"Tesla P4": False, "NVIDIA A100-PCIE-40GB": True}
    ax = table.plot()  # the GPU it does not fit is drawn grey and says so
    bars = {label.get_text(): patch for label, patch in zip(ax.get_yticklabels(), ax.patches)}
    assert matplotlib.colors.to_hex(bars["Tesla P4"].get_facecolor()) == matplotlib.colors.to_hex("lightgrey")
    assert matplotlib.colors.to_hex(bars["NVIDIA A100-PCIE-40GB"].get_facecolor()) == matplotlib.colors.to_hex(
        "tab:blue")
    assert [t.get_text() for t in ax.texts if "does not fit" in t.get_text()] == [
        f" does not fit ({table.set_index('gpu').loc['Tesla P4', 'memory_gib']:.1f} GiB)"]
    expected = prenet.training_memory(model, batch=262144, input_shape=(4096,), dataset_size=262144)
    assert list(table["memory_gib"]) == pytest.approx([expected.streamed / memory.GIB] * 2)
    assert list(table["resident_memory_gib"]) == pytest.approx([expected.gib] * 2)
    assert 8 < expected.gib < 40


def test_compare_judges_a_large_data_set_streamed_and_resident_apart():
    # 40,000 images of 224 px in float32 are 22 GiB: resident, they overflow a 16 GB T4 that the step itself fits
    model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=4), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 56 * 56, 10))
    table = prenet.compare(model, batch=64, gpus=["T4"], input_shape=(3, 224, 224), dataset_size=40000)
    row = table.iloc[0]
    assert bool(row["fits"]) and not bool(row["fits_resident"])
    assert row["memory_gib"] < 1 < 22 < row["resident_memory_gib"]


class SparseLookup(nn.Module):
    """A table with sparse gradients looked up 5 times a sample; `branching`: a data-dependent branch that the meta
    device cannot take, so memory is measured for real at two small batches."""

    def __init__(self, branching=False):
        super().__init__()
        self.table, self.head, self.branching = nn.Embedding(100_000, 16, sparse=True), nn.Linear(16, 2), branching

    def forward(self, tokens):
        pooled = self.table(tokens).mean(1)
        if self.branching and bool(tokens.sum() >= 0):
            pooled = pooled * 2
        return self.head(pooled)


@pytest.mark.parametrize("branching", [False, True])
def test_a_sparse_gradient_holds_the_rows_looked_up_and_the_state_stays_dense(branching):
    tokens = torch.randint(0, 100_000, (1, 5))
    for optimizer, state_per_element in (("sgd_plain", 0), ("sgd", 4), ("adagrad", 4)):
        got = prenet.training_memory(SparseLookup(branching), batch=64, example_input=tokens, dataset_size=128,
                                     optimizer=optimizer)
        head = (16 * 2 + 2) * 4
        assert got.gradients == 64 * 5 * (16 * 4 + 8) + head  # each looked-up row's values and its int64 index
        assert got.optimizer_state == state_per_element * (100_000 * 16 + 16 * 2 + 2)
