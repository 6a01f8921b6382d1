"""Where a predicted step's device time goes, drawn (Estimate.plot): by module, and by operator with the optimizer's
update beside them, forward and backward stacked."""

# Operators drawn by name in the by-operator panel; the rest share one bar.
TOP_OPERATORS = 8


def operator_times(ops, optimizer_ms, top=TOP_OPERATORS):
    """(names, forward ms, backward ms) per operator of a step's `ops` (Estimate.ops), the `top` with the most device
    time by name (aten's, without its overload: "convolution", "convolution_backward"), the rest as "other
    operators", and the optimizer's update (`optimizer_ms`, not among the ops) last; largest first."""
    names = ops["op"].str.split(".").str[0]
    by_phase = ops.assign(name=names).pivot_table(index="name", columns="phase", values="ms", aggfunc="sum",
                                                  fill_value=0.0)
    by_phase = by_phase.reindex(columns=["forward", "backward"], fill_value=0.0)
    by_phase = by_phase.loc[by_phase.sum(axis=1).sort_values(ascending=False).index]
    shown, rest = by_phase.iloc[:top], by_phase.iloc[top:]
    rows = [(name, row["forward"], row["backward"]) for name, row in shown.iterrows()]
    if len(rest):
        rows.append((f"other operators ({len(rest)})", rest["forward"].sum(), rest["backward"].sum()))
    if optimizer_ms > 0:
        rows.append(("optimizer update", 0.0, optimizer_ms))
    rows.sort(key=lambda row: row[1] + row[2], reverse=True)
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


def plot_step(estimate, top=15, ax=None):
    """Horizontal bars of the `top` modules by share of the step (forward and backward device time stacked), on
    `ax` where given; else a figure with a second panel of device time by operator (operator_times). Returns the
    modules' axes (its `.figure` holds both panels)."""
    import matplotlib.pyplot as plt

    layers = estimate.layers
    table = layers.sort_values("step_share", ascending=False).head(top).iloc[::-1]
    made = ax is None
    if made:
        rows = max(len(table), TOP_OPERATORS + 2)
        figure, (ax, by_operator) = plt.subplots(1, 2, figsize=(14, 0.35 * rows + 2),
                                                 gridspec_kw={"width_ratios": [3, 2]})
    ax.barh(table["name"], table["forward_ms"], label="forward")
    ax.barh(table["name"], table["backward_ms"], left=table["forward_ms"], label="backward")
    ax.set_xlabel("device milliseconds per step")
    title = f"Where the step goes: batch {estimate.batch} on {estimate.gpu}"
    if estimate.bound == "host":  # the bars are device time, which does not set this step's pace
        title += (f"\nhost-bound: the host's {estimate.host_ms:.1f} ms a step set the pace, the device's work is "
                  f"{estimate.device_ms:.1f} ms")
    ax.legend()
    if not made:
        ax.set_title(title)
        return ax
    shown_ms = float((table["forward_ms"] + table["backward_ms"]).sum())
    ax.set_title(f"by module: the {len(table)} of {len(layers)} with the most time "
                 f"({shown_ms / estimate.device_ms:.0%} of the device's {estimate.device_ms:.1f} ms)", fontsize=10)
    names, forward, backward = operator_times(estimate.ops, estimate.optimizer_ms)
    names, forward, backward = names[::-1], forward[::-1], backward[::-1]
    by_operator.barh(names, forward, label="forward")
    by_operator.barh(names, backward, left=forward, label="backward (and the update)")
    by_operator.set_xlabel("device milliseconds per step")
    by_operator.set_title("by operator", fontsize=10)
    by_operator.legend()
    figure.suptitle(title)
    figure.tight_layout()  # room for long module names
    return ax
