"""Per-sample, per-output gradients of an embedding's table, from its indices and output sensitivities, as the
entries they hold.

An embedding looks up row t_i(p) of its table W (vocabulary x width) at each position p of sample i, so the
derivative of output k of the model for sample i with respect to W is the sensitivity d_ik(p) = df_k/dz(p) added
into row t_i(p), summed over positions (the backward pass's index_add, one sample and one output at a time; none
into the padding row, whose gradient PyTorch keeps zero). A row of the kernel's Jacobian is then as wide as the
table but holds at most positions x width entries: they are given as (row, column, value) triples, which a sketch
takes one by one (prenet.tangent_kernel.CountSketch.add_entries) without ever making the table-wide rows.
"""


def embedding_gradient_entries(module, indices, sensitivity):
    """(rows, columns, values) of the gradients of the K outputs with respect to `module`'s table, given its indices
    (samples, *positions) and the outputs' sensitivities (samples, K, *positions, width): row i*K + k (sample-major),
    column t * width + j for entry j of table row t, as the table's elements are numbered. Repeated lookups of a
    row give repeated (row, column) pairs, whose values add up."""
    import torch

    samples, outputs = sensitivity.shape[:2]
    width = module.embedding_dim
    tokens = indices.reshape(samples, 1, -1, 1).expand(samples, outputs, -1, width)
    d = sensitivity.reshape(samples, outputs, -1, width)
    rows = torch.arange(samples * outputs).reshape(samples, outputs, 1, 1).expand_as(d)
    columns = tokens * width + torch.arange(width)
    if module.padding_idx is not None:
        kept = tokens != module.padding_idx
        return rows[kept], columns[kept], d[kept]
    return rows.reshape(-1), columns.reshape(-1), d.reshape(-1)
