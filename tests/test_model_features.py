import pytest
import torch
import torchvision

import prenet


def test_vgg16_every_module_listed_and_parameters_accounted():
    model = torchvision.models.vgg16(weights=None)
    table = prenet.model_features(model, batch=32, gpu="V100", input_shape=(3, 224, 224))
    leaves = [m for m in model.modules() if not list(m.children())]
    assert len(table) == len(leaves)
    assert (table["kind"] == "conv2d").sum() == 13
    assert (table["kind"] == "linear").sum() == 3
    assert table["params"].sum() == sum(p.numel() for p in model.parameters())
    assert table.loc[0, "input_shape"] == (32, 3, 224, 224)
    assert (table["kind"] == "relu").sum() == 15
    assert (table["kind"] == "maxpool2d").sum() == 5
    assert table.loc[table["module"] == "AdaptiveAvgPool2d", "kind"].item() == "avgpool2d"
    uncovered = table[table["kind"].isna()]
    assert set(uncovered["module"]) == {"Dropout"}
    assert uncovered["note"].str.len().gt(0).all()
    assert model.training, "the walk restores the model's mode"


def test_features_scale_with_batch():
    model = torchvision.models.resnet18(weights=None)
    small = prenet.model_features(model, batch=1, input_shape=(3, 64, 64))
    large = prenet.model_features(model, batch=8, input_shape=(3, 64, 64))
    conv = large["kind"] == "conv2d"
    assert large.loc[conv, "forward_flops"].sum() == 8 * small.loc[conv, "forward_flops"].sum()
    # Batch norm's per-channel work does not grow with the batch: the whole model scales slightly below 8x.
    assert large["forward_flops"].sum() == pytest.approx(8 * small["forward_flops"].sum(), rel=1e-3)
    assert (large["kind"] == "conv2d").sum() == 20
    assert (large["kind"] == "batchnorm2d").sum() == 20
    assert large["kind"].notna().all(), "every module of ResNet-18 maps to a layer kind"


class TinyLanguageModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 16)
        self.encoder = torch.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, batch_first=True)
        self.lstm = torch.nn.LSTM(16, 8, batch_first=True, bidirectional=True)
        self.head = torch.nn.Linear(16, 50)

    def forward(self, tokens):
        out, _ = self.lstm(self.encoder(self.embed(tokens)))
        return self.head(out)


def test_each_module_keeps_its_own_mode():
    model = torchvision.models.resnet18(weights=None).train()
    model.bn1.eval()  # frozen statistics in a model being fine-tuned
    prenet.model_features(model, batch=2, input_shape=(3, 32, 32))
    assert model.training and not model.bn1.training and model.layer1[0].bn1.training


def test_sequence_model_kinds_and_shapes():
    model = TinyLanguageModel()
    table = prenet.model_features(model, batch=4, example_input=torch.randint(0, 50, (1, 12)))
    kinds = table.set_index("name")["kind"].to_dict()
    assert kinds["embed"] == "embedding"
    assert kinds["encoder.self_attn"] == "multihead_attention"
    assert kinds["encoder.norm1"] == "layer_norm"
    assert kinds["lstm"] == "lstm"
    assert "encoder.self_attn.out_proj" not in kinds, "children of a covered module are part of it"
    rows = table.set_index("name")
    assert rows.loc["encoder.self_attn", "seq_len"] == 12
    assert rows.loc["lstm", "directions"] == 2
    assert rows.loc["head", "seq_len"] == 12
    assert table["params"].sum() == sum(p.numel() for p in model.parameters())


def test_bad_inputs():
    model = torchvision.models.resnet18(weights=None)
    with pytest.raises(ValueError, match=r"rejected the input \(failed in module 'conv1', "
                                         r"given \(\d+, 5, 32, 32\)\).*3 channels"):
        prenet.model_features(model, input_shape=(5, 32, 32))
    with pytest.raises(ValueError, match="batch must be an integer >= 1"):
        prenet.model_features(model, batch=0, input_shape=(3, 32, 32))
    with pytest.raises(ValueError, match="unknown GPU"):
        prenet.model_features(model, gpu="Voodoo", input_shape=(3, 32, 32))
    with pytest.raises(ValueError, match="input_shape"):
        prenet.model_features(model)
    with pytest.raises(TypeError, match="torch.nn.Module"):
        prenet.model_features("resnet18", input_shape=(3, 32, 32))


def test_every_convolution_module_maps_to_a_kind_with_its_exact_work():
    """Conv1d, Conv3d, transposed, dilated and "same"-padded convolutions: the general kind, parameters as torch
    counts them and multiply-adds per output element as each module's definition gives them."""
    model = torch.nn.Sequential(torch.nn.Conv1d(16, 32, 5), torch.nn.Unflatten(1, (2, 16)),
                                torch.nn.Unflatten(3, (6, 10)), torch.nn.Conv3d(2, 4, 3, padding="same"),
                                torch.nn.Flatten(1, 2), torch.nn.Flatten(2, 3),
                                torch.nn.ConvTranspose1d(64, 8, 4, stride=2), torch.nn.Conv1d(8, 8, 3, dilation=2))
    table = prenet.model_features(model, batch=8, gpu="A100", input_shape=(16, 64))
    convolutions = table[table["module"].str.startswith("Conv")]
    assert (convolutions["kind"] == "convolution").all() and len(convolutions) == 4
    assert convolutions["params"].sum() == sum(p.numel() for p in model.parameters())
    # (outputs x taps per output, or for the transposed one inputs x outputs each scatters to) x 2, plus the bias
    expected = [8 * 32 * 60 * 16 * 5 * 2 + 8 * 32 * 60, 8 * 4 * 960 * 2 * 27 * 2 + 8 * 4 * 960,
                8 * 64 * 60 * 8 * 4 * 2 + 8 * 8 * 122, 8 * 8 * 118 * 8 * 3 * 2 + 8 * 8 * 118]
    assert convolutions["forward_flops"].tolist() == expected



class SelfAttention(torch.nn.Module):
    """Self-attention called with keywords, as torchvision's ViT calls it (a forward hook sees no inputs then), or
    positionally."""

    def __init__(self, keywords):
        super().__init__()
        self.attention, self.keywords = torch.nn.MultiheadAttention(32, 4, batch_first=True), keywords

    def forward(self, x):
        if self.keywords:
            return self.attention(query=x, key=x, value=x, need_weights=False)[0]
        return self.attention(x, x, x, need_weights=False)[0]


def test_attention_called_with_keywords_is_mapped_as_called_positionally():
    model = SelfAttention(keywords=True)
    keyword = prenet.model_features(model, batch=8, input_shape=(10, 32))
    positional = prenet.model_features(SelfAttention(keywords=False), batch=8, input_shape=(10, 32))
    assert keyword.equals(positional) and list(keyword["kind"]) == ["multihead_attention"]
    assert keyword.loc[0, "seq_len"] == 10 and "forward" not in vars(model.attention)  # left as it was


class Branching(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc(x * 2 if bool(x.sum() > 0) else x)


def test_the_walk_runs_on_meta_and_for_real_where_the_model_needs_values():
    # a model kept in fp16: torch 1.13 has no CPU kernels for it, the meta walk needs none
    half = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2)).half()
    assert list(prenet.model_features(half, batch=8, input_shape=(16,))["kind"]) == ["linear", "relu", "linear"]
    # a data-dependent branch, which meta tensors cannot take: walked for real
    assert list(prenet.model_features(Branching(), batch=8, input_shape=(16,))["kind"]) == ["linear"]
