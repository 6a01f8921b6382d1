"""Recurrent layers as each device runs them: the CPU's loop of operators, cuDNN's one call (prenet.fused_recurrent)."""
import pytest
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import prenet
from prenet import fused_recurrent, op_trace, reference_models


class Tagger(nn.Module):
    def __init__(self, recurrent, bidirectional=False, with_state=False):
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.rnn = recurrent(16, 24, num_layers=2, batch_first=True, bidirectional=bidirectional)
        self.head = nn.Linear(24 * (2 if bidirectional else 1), 5)
        self.with_state = with_state

    def forward(self, ids):
        x = self.embed(ids)
        if self.with_state:
            shape = (2 * (2 if self.rnn.bidirectional else 1), x.shape[0], 24)
            state = torch.zeros(shape) if isinstance(self.rnn, (nn.GRU, nn.RNN)) else (torch.zeros(shape),) * 2
            return self.head(self.rnn(x, state)[0])
        return self.head(self.rnn(x)[0])


@pytest.mark.parametrize("recurrent, kind", [(nn.LSTM, "lstm"), (nn.GRU, "gru"), (nn.RNN, "rnn")])
@pytest.mark.parametrize("bidirectional, with_state", [(False, False), (True, True)])
@pytest.mark.filterwarnings("ignore:this machine.s CPU")
def test_each_layer_records_the_cpus_layer_operator_and_one_cudnn_call_each_way(recurrent, kind, bidirectional,
                                                                                with_state):
    model = Tagger(recurrent, bidirectional, with_state)
    ops = op_trace.trace_once(model, torch.randint(50, (3, 7)))
    cpu_operator = f"{fused_recurrent.CPU_OPERATORS[model.rnn.mode]}.input"
    # a GPU makes the zero initial states where none is given: h_0 (and c_0), (layers x directions, batch, hidden)
    zeros = [op for op in ops if op.runs_on == "cuda" and op.name == "zeros.default"]
    states = 0 if with_state else 2 if kind == "lstm" else 1
    state = (2 * (2 if bidirectional else 1), 3, 24)
    assert [(op.phase, op.outputs) for op in zeros] == [("forward", [state])] * states
    for runs_on, names in (("cuda", [fused_recurrent.FORWARD, fused_recurrent.BACKWARD]), ("cpu", [cpu_operator] * 2)):
        one_each_way = [op for op in ops if op.runs_on == runs_on and op.name != "zeros.default"]
        assert [(op.phase, op.name) for op in one_each_way] == list(zip(("forward", "backward"), names))
        assert all(op.module == "rnn" and op.arguments == [kind, 16, 24, 2, int(bidirectional), 1, 1]
                   for op in one_each_way)
        assert one_each_way[0].inputs == [(3, 7, 16)]
    # the layer's input gradient reaches the embedding through the boundary
    assert any(op.name.startswith("embedding_dense_backward") for op in ops)
    # a device keeps the operators it runs: the CPU its layer operator, a GPU the one call each way; each is costed
    # as the whole layer, the CPU's forward as timed inside training steps
    for gpu, names in (("A100", [fused_recurrent.FORWARD, fused_recurrent.BACKWARD]), ("cpu", [cpu_operator] * 2)):
        estimate = prenet.predict(model, batch=8, gpu=gpu, example_input=torch.randint(50, (1, 7))).ops
        layer = estimate[(estimate["module"] == "rnn") & ~estimate["op"].isin(["detach.default", "zeros.default"])]
        assert layer["op"].tolist() == names and set(layer["kind"]) == {kind}
        config = dict(layer["config"].iloc[0])
        assert config == {"batch": 8, "seq_len": 7, "input_size": 16, "hidden_size": 24, "num_layers": 2,
                          "bidirectional": int(bidirectional), "bias": 1}
        if gpu == "cpu":
            t = prenet.layer_time(kind, gpu="cpu", **config)
            assert layer["ms"].tolist() == pytest.approx([t["step_forward_ms"], t["backward_ms"]])


def test_the_model_trains_as_without_the_boundary_and_is_left_as_it_was():
    """Traced for real, the layer's weights get the gradients they get without it; afterwards its forward is
    the class's again."""
    torch.manual_seed(0)
    model, ids = Tagger(nn.LSTM), torch.randint(50, (3, 7))
    model(ids).float().mean().backward()
    expected = [p.grad.clone() for p in model.rnn.parameters()]
    model.zero_grad(set_to_none=True)
    recorder = op_trace._recorder()
    with fused_recurrent.fused_recurrent_layers(model.named_modules(), recorder), recorder:
        model(ids).float().mean().backward()
    for got, want in zip((p.grad for p in model.rnn.parameters()), expected):
        assert torch.allclose(got, want, atol=1e-6)
    assert "forward" not in vars(model.rnn)


def Decoder(cell, steps=4):
    """A cell stepped in Python, its state carried over: the first step starts from none (zeros)."""
    return reference_models.CellDecoder(cell, vocab=50, dim=16, hidden=24, steps=steps, outputs=5)


@pytest.mark.parametrize("cell, gates, fused", [(nn.LSTMCell, 4, "_thnn_fused_lstm_cell"),
                                                (nn.GRUCell, 3, "_thnn_fused_gru_cell")])
@pytest.mark.parametrize("meta", [True, False])
@pytest.mark.filterwarnings("ignore:this machine.s CPU")
def test_a_cell_records_the_gpus_two_products_and_fused_kernel_each_step(cell, gates, fused, meta):
    """aten's CUDA branch of lstm_cell and gru_cell: the input's and the state's product with their weights and
    one fused kernel (after a zero state at the first step); backward the fused kernel's backward and the
    products' gradients: both weights', the input's (the embedding's weight needs it) and the state's from the
    second step on."""
    model, steps = Decoder(cell), 4
    ids = torch.randint(50, (3, steps))
    ops = op_trace.trace_once(model, ids.to("meta") if meta else ids, meta=meta)
    gpu = [op for op in ops if op.runs_on == "cuda"]
    assert all(op.module == "cell" for op in gpu)
    forward = [op for op in gpu if op.phase == "forward"]
    zeros = (2 if cell is nn.LSTMCell else 1) * ["zeros.default"]
    assert [op.name for op in forward] == zeros + ["mm.default", "mm.default", f"{fused}.default"] * steps
    assert forward[len(zeros)].inputs == [(3, 16), (16, gates * 24)]
    assert forward[len(zeros) + 1].inputs == [(3, 24), (24, gates * 24)] and forward[0].outputs == [(3, 24)]
    backward = [op.name for op in gpu if op.phase == "backward"]
    assert sum(name.startswith(fused) for name in backward) == steps
    # per step the two weights' gradients, the input's (the embedding needs it) and the state's after the first
    assert backward.count("mm.default") == 2 * steps + steps + (steps - 1)
    cpu = [op for op in ops if op.runs_on == "cpu"]
    assert {"forward", "backward"} == {op.phase for op in cpu} and not any(fused in op.name for op in cpu)
    a100 = prenet.predict(model, batch=64, gpu="A100", example_input=ids[:1]).ops
    here = prenet.predict(model, batch=64, gpu="cpu", example_input=ids[:1]).ops
    assert a100["op"].str.startswith(fused).sum() == 2 * steps and not here["op"].str.startswith(fused).any()
    assert (a100["module"] == "cell").sum() < 0.5 * (here["module"] == "cell").sum()


def test_a_cell_trains_as_without_the_boundary_and_an_rnn_cell_is_left_alone():
    torch.manual_seed(0)
    model, ids = Decoder(nn.LSTMCell), torch.randint(50, (3, 4))
    model(ids).float().mean().backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    recorder = op_trace._recorder()
    with fused_recurrent.fused_recurrent_layers(model.named_modules(), recorder), recorder:
        model(ids).float().mean().backward()
    for got, want in zip((p.grad for p in model.parameters()), expected):
        assert torch.allclose(got, want, atol=1e-6)
    assert "forward" not in vars(model.cell)
    # torch.nn.RNNCell has no fused kernel: its operators on every device
    assert not [op for op in op_trace.trace_once(Decoder(nn.RNNCell), ids) if op.runs_on]


def test_projections_keep_their_operators_everywhere():
    lstm = nn.LSTM(8, 12, proj_size=4, batch_first=True)
    ops = op_trace.trace_once(lstm, torch.randn(2, 5, 8))
    assert not [op for op in ops if op.runs_on]


class PackedTagger(nn.Module):
    def __init__(self, batch_first=True):
        super().__init__()
        self.embed, self.rnn = nn.Embedding(50, 16), nn.GRU(16, 24, 2, batch_first=batch_first, bidirectional=True)
        self.head = nn.Linear(48, 5)

    def forward(self, ids, lengths):
        x = self.embed(ids) if self.rnn.batch_first else self.embed(ids).transpose(0, 1)
        packed = pack_padded_sequence(x, lengths, batch_first=self.rnn.batch_first, enforce_sorted=False)
        output, _ = pad_packed_sequence(self.rnn(packed)[0], batch_first=self.rnn.batch_first)
        return self.head(output)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.filterwarnings("ignore:this machine.s CPU")
def test_a_packed_sequence_is_one_cudnn_call_over_its_steps_and_trains_as_without_the_boundary(batch_first):
    """cuDNN runs the longest sample's steps; the recorded batch is the mean over them, keeping the
    sequence's (sample, step) pairs: lengths 9, 7 and 12 are 28 pairs over 12 steps, a batch of 2."""
    torch.manual_seed(0)
    model, inputs = PackedTagger(batch_first), (torch.randint(50, (3, 12)), torch.tensor([9, 7, 12]))
    ops = op_trace.trace_once(model, inputs)
    fused = [op for op in ops if op.runs_on == "cuda"]
    assert [op.name for op in fused] == ["zeros.default", fused_recurrent.FORWARD, fused_recurrent.BACKWARD]
    fused = fused[1:]  # after the GRU's zero h_0
    assert fused[0].inputs == [(2, 12, 16) if batch_first else (12, 2, 16)]
    assert fused[0].arguments == ["gru", 16, 24, 2, 1, 1, int(batch_first)]
    model(*inputs).float().mean().backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    recorder = op_trace._recorder()
    with fused_recurrent.fused_recurrent_layers(model.named_modules(), recorder), recorder:
        model(*inputs).float().mean().backward()
    for got, want in zip((p.grad for p in model.parameters()), expected):
        assert torch.allclose(got, want, atol=1e-6)
    # the example's length for every sample: its (batch, steps) at the batch predicted
    example = (inputs[0][:1], inputs[1][:1])
    a100 = prenet.predict(model, batch=32, gpu="A100", example_input=example).ops
    assert a100.loc[a100["op"] == fused_recurrent.FORWARD, "inputs"].tolist() == [
        [(32, 9, 16) if batch_first else (9, 32, 16)]]
    here = prenet.predict(model, batch=32, gpu="cpu", example_input=example).ops
    layer = here[(here["module"] == "rnn") & (here["op"] != "detach.default")]
    assert layer["op"].tolist() == ["gru.data"] * 2 and layer["inputs"].tolist() == [
        [(32, 9, 16) if batch_first else (9, 32, 16)]] * 2


def test_a_gpu_runs_the_recurrent_kind_in_tf32_by_default_where_it_has_it():
    """cuDNN's RNN descriptor follows torch.backends.cudnn.allow_tf32 (on by default), as convolutions do."""
    config = dict(batch=64, seq_len=50, input_size=512, hidden_size=1024, num_layers=2)
    for gpu, faster in (("A100", True), ("H100", True), ("V100", False)):
        default = prenet.layer_time("lstm", gpu=gpu, **config)
        strict = prenet.layer_time("lstm", gpu=gpu, precision="fp32_strict", **config)
        if faster:
            assert default["forward_ms"] < 0.8 * strict["forward_ms"] and default["backward_ms"] < strict["backward_ms"]
        else:
            assert default == strict


def test_a_users_own_forward_of_a_recurrent_layer_is_put_back_after_a_trace():
    model = Tagger(nn.LSTM)
    calls = []

    def patched(*args, **kwargs):  # a user's instance patch, kept around the class's forward
        calls.append(1)
        return nn.LSTM.forward(model.rnn, *args, **kwargs)

    model.rnn.forward = patched
    op_trace.trace_once(model, torch.randint(50, (3, 7)))
    assert vars(model.rnn)["forward"] is patched  # the trace's own forward had been deleted, the patch with it
    model(torch.randint(50, (2, 5)))
    assert calls == [1]
