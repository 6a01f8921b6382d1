"""BERT-base and GPT-2 small written in plain PyTorch, for machines without Hugging Face `transformers`.

They reproduce the architectures of `transformers.BertForSequenceClassification(BertConfig(num_labels=2))` and
`transformers.GPT2LMHeadModel(GPT2Config())` layer for layer (same parameter counts: 109,483,778 and 124,439,808;
GPT-2's output layer shares the token embedding), including their dropouts, their losses and GPT-2's
tanh-approximated GELU written as elementwise operations. Attention is by default scaled_dot_product_attention
(the library's "sdpa" implementation, its choice where the installed torch has that function, as on the GPU
machines whose epochs validate them): prenet.fused_attention's, torch's own where it exists, else its math path
written out, traced as a GPU runs it, one fused kernel each way, whichever torch traces it; attention="eager" writes
it out as two batched products and a softmax, as the library's "eager" implementation does (the stand-ins
measured on the H100 before 2026-11-27 afternoon ran so). Weights are initialised by PyTorch's defaults, not the
library's (timing does not depend on them). Beside them, a token decoder that steps a recurrent cell in Python
(CellDecoder), the way aten's fused cell kernels are used.
"""
import math

import torch
from torch import nn
from torch.nn import functional as F

from .fused_attention import scaled_dot_product_attention

BERT_BASE = dict(vocab_size=30522, hidden=768, layers=12, heads=12, intermediate=3072, max_positions=512,
                 type_vocab_size=2, layer_norm_eps=1e-12, dropout=0.1, num_labels=2, attention="sdpa")
GPT2_SMALL = dict(vocab_size=50257, hidden=768, layers=12, heads=12, max_positions=1024, layer_norm_eps=1e-5,
                  dropout=0.1, attention="sdpa")


def _split_heads(x, heads):
    """(batch, seq, heads * d) -> (batch, heads, seq, d)."""
    b, s, _ = x.shape
    return x.view(b, s, heads, -1).transpose(1, 2)


def _merge_heads(x):
    """(batch, heads, seq, d) -> (batch, seq, heads * d)."""
    b, h, s, d = x.shape
    return x.transpose(1, 2).reshape(b, s, h * d)


def _eager_attention(q, k, v, dropout_p=0.0, is_causal=False):
    """softmax(q k^T / sqrt(d)) v with dropout on the weights (Vaswani et al., 2017, eq. 1), written out as the
    library's "eager" attention: the score matrix made, masked, normalised and dropped out in memory."""
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if is_causal:
        future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).triu(1)
        scores = scores.masked_fill(future, torch.finfo(scores.dtype).min)
    weights = F.softmax(scores, dim=-1).type(v.dtype)
    return torch.matmul(F.dropout(weights, dropout_p, dropout_p > 0.0), v)


# the library's attn_implementation -> the function the stand-ins attend with
ATTENTION = {"sdpa": scaled_dot_product_attention, "eager": _eager_attention}


def _attention(c):
    if c["attention"] not in ATTENTION:
        raise ValueError(f"unknown attention '{c['attention']}'; the stand-ins take {', '.join(ATTENTION)}")
    return ATTENTION[c["attention"]]


class _BertLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.p, self.attend = c["heads"], c["dropout"], _attention(c)
        self.query, self.key, self.value = (nn.Linear(c["hidden"], c["hidden"]) for _ in range(3))
        self.attention_output = nn.Linear(c["hidden"], c["hidden"])
        self.attention_norm = nn.LayerNorm(c["hidden"], eps=c["layer_norm_eps"])
        self.intermediate = nn.Linear(c["hidden"], c["intermediate"])
        self.output = nn.Linear(c["intermediate"], c["hidden"])
        self.output_norm = nn.LayerNorm(c["hidden"], eps=c["layer_norm_eps"])

    def forward(self, x):
        q, k, v = (_split_heads(f(x), self.heads) for f in (self.query, self.key, self.value))
        context = _merge_heads(self.attend(q, k, v, dropout_p=self.p if self.training else 0.0))
        x = self.attention_norm(F.dropout(self.attention_output(context), self.p, self.training) + x)
        h = F.gelu(self.intermediate(x))
        return self.output_norm(F.dropout(self.output(h), self.p, self.training) + x)


class BertForSequenceClassification(nn.Module):
    """BERT encoder, pooler (first token, dense, tanh) and a classifier; `forward(input_ids, labels=None)`
    returns {"logits", "loss"} (cross-entropy when labels are given)."""

    def __init__(self, **overrides):
        super().__init__()
        c = {**BERT_BASE, **overrides}
        self.p, self.num_labels = c["dropout"], c["num_labels"]
        self.word_embeddings = nn.Embedding(c["vocab_size"], c["hidden"])
        self.position_embeddings = nn.Embedding(c["max_positions"], c["hidden"])
        self.token_type_embeddings = nn.Embedding(c["type_vocab_size"], c["hidden"])
        self.embedding_norm = nn.LayerNorm(c["hidden"], eps=c["layer_norm_eps"])
        self.layers = nn.ModuleList(_BertLayer(c) for _ in range(c["layers"]))
        self.pooler = nn.Linear(c["hidden"], c["hidden"])
        self.classifier = nn.Linear(c["hidden"], c["num_labels"])

    def forward(self, input_ids, labels=None):
        seq = input_ids.shape[1]
        positions = torch.arange(seq, device=input_ids.device).unsqueeze(0)
        token_types = torch.zeros_like(input_ids)
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_types)
        x = F.dropout(self.embedding_norm(x + self.position_embeddings(positions)), self.p, self.training)
        for layer in self.layers:
            x = layer(x)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        logits = self.classifier(F.dropout(pooled, self.p, self.training))
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = F.cross_entropy(logits.view(-1, self.num_labels), labels.view(-1))
        return out


def gelu_tanh(x):
    """GELU's tanh approximation (Hendrycks and Gimpel, 2016, section 2), as GPT-2's elementwise operations."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class _GPT2Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.p, self.attend = c["heads"], c["dropout"], _attention(c)
        self.ln_1 = nn.LayerNorm(c["hidden"], eps=c["layer_norm_eps"])
        self.c_attn = nn.Linear(c["hidden"], 3 * c["hidden"])
        self.c_proj = nn.Linear(c["hidden"], c["hidden"])
        self.ln_2 = nn.LayerNorm(c["hidden"], eps=c["layer_norm_eps"])
        self.c_fc = nn.Linear(c["hidden"], 4 * c["hidden"])
        self.mlp_proj = nn.Linear(4 * c["hidden"], c["hidden"])

    def forward(self, x):
        q, k, v = (_split_heads(t, self.heads) for t in self.c_attn(self.ln_1(x)).split(x.shape[-1], dim=2))
        context = self.attend(q, k, v, dropout_p=self.p if self.training else 0.0, is_causal=True)
        x = x + F.dropout(self.c_proj(_merge_heads(context)), self.p, self.training)
        h = self.mlp_proj(gelu_tanh(self.c_fc(self.ln_2(x))))
        return x + F.dropout(h, self.p, self.training)


class GPT2LMHeadModel(nn.Module):
    """GPT-2 decoder with the language-model head tied to the token embedding; `forward(input_ids, labels=None)`
    returns {"logits", "loss"} (next-token cross-entropy on float32 logits when labels are given)."""

    def __init__(self, **overrides):
        super().__init__()
        c = {**GPT2_SMALL, **overrides}
        self.p = c["dropout"]
        self.wte = nn.Embedding(c["vocab_size"], c["hidden"])
        self.wpe = nn.Embedding(c["max_positions"], c["hidden"])
        self.blocks = nn.ModuleList(_GPT2Block(c) for _ in range(c["layers"]))
        self.ln_f = nn.LayerNorm(c["hidden"], eps=c["layer_norm_eps"])
        self.lm_head = nn.Linear(c["hidden"], c["vocab_size"], bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, input_ids, labels=None):
        seq = input_ids.shape[1]
        positions = torch.arange(seq, device=input_ids.device).unsqueeze(0)
        x = F.dropout(self.wte(input_ids) + self.wpe(positions), self.p, self.training)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        out = {"logits": logits}
        if labels is not None:
            # next-token targets: labels shifted left, the last position ignored
            targets = F.pad(labels, (0, 1), value=-100)[:, 1:]
            out["loss"] = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1),
                                          ignore_index=-100)
        return out


def bert_base(attention="sdpa"):
    return BertForSequenceClassification(attention=attention)


def gpt2_small(attention="sdpa"):
    return GPT2LMHeadModel(attention=attention)


class CellDecoder(nn.Module):
    """A recurrent cell (nn.LSTMCell, nn.GRUCell, nn.RNNCell) stepped in Python over `steps` tokens, its state
    carried from step to step (the first starts from none: zeros), each step's output mapped to `outputs`
    classes (default: the vocabulary)."""

    def __init__(self, cell=nn.LSTMCell, vocab=2000, dim=128, hidden=256, steps=20, outputs=None):
        super().__init__()
        self.embed, self.cell, self.steps = nn.Embedding(vocab, dim), cell(dim, hidden), steps
        self.head = nn.Linear(hidden, outputs or vocab)

    def forward(self, ids):
        x, state, outputs = self.embed(ids), None, []
        for t in range(self.steps):
            state = self.cell(x[:, t], state)
            outputs.append(state[0] if isinstance(state, tuple) else state)
        return self.head(torch.stack(outputs, 1))
