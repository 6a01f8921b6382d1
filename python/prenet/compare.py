"""prenet.compare: which GPU to rent or buy for a model. The model is traced once and its training epoch estimated
on every GPU asked for (prenet.predict's method), with the 80% interval, how far each GPU lies from the fitted
ones, and the cost of an epoch at a price per hour: the catalog's (data/gpu_prices.csv: source and date per row)
unless the caller gives their own."""
import csv
import functools
import math
from pathlib import Path

from .catalog import find_gpu, gpus as catalog_frame
from .collector_paused import collector_paused
from .estimate import _check, estimate_traced, trace_steps
from .lazy_modules import initialized
from .memory import GIB, training_memory
from .model_inputs import input_maker
from .predictors import UnsupportedPrecision, check_precision, resolve, served_as

PACKAGED_PRICES = Path(__file__).resolve().parent / "data" / "gpu_prices.csv"


@functools.lru_cache(maxsize=1)
def catalog_prices():
    """{catalog GPU name: {"usd_per_hour", "basis", "source", "date"}} from data/gpu_prices.csv."""
    with open(PACKAGED_PRICES, newline="") as handle:
        return {row["gpu"]: {**row, "usd_per_hour": float(row["usd_per_hour"])} for row in csv.DictReader(handle)}


def check_price(label, price):
    """Rejects a price per hour that is not a number >= 0, naming `label`."""
    if isinstance(price, bool) or not isinstance(price, (int, float)) or price < 0:
        raise ValueError(f"{label} must be a number >= 0, got {price!r}")


def dollars(amount):
    """US dollars as a person writes them: cents from ten cents up ($1,234.50), else two significant digits in
    decimals, never in powers of ten ($0.00057)."""
    rounded = float(f"{amount:.2g}")  # 0.0999 is $0.10, not $0.100
    if rounded >= 0.1 or rounded <= 0:
        return f"${amount:,.2f}"
    return f"${rounded:.{1 - math.floor(math.log10(rounded))}f}"


@functools.lru_cache(maxsize=1)
def _comparison_class():
    import pandas as pd

    class Comparison(pd.DataFrame):
        """One row per GPU, fastest epoch first; .plot() draws epoch time with its interval and the cost, grey
        where the training step does not fit the GPU's memory even with the data streamed."""

        @property
        def _constructor(self):
            return Comparison

        def plot(self, ax=None, top=20):
            import matplotlib.pyplot as plt

            rows = self.head(top).iloc[::-1]
            made = ax is None
            if made:
                _, ax = plt.subplots(figsize=(8, 0.35 * len(rows) + 1.5))
            low = rows["epoch_seconds"] - rows["interval_low_s"]
            high = rows["interval_high_s"] - rows["epoch_seconds"]
            colors = ["tab:blue" if fits else "lightgrey" for fits in rows["fits"]]
            ax.barh(rows["gpu"], rows["epoch_seconds"], xerr=[low, high], capsize=2, color=colors)
            for y, (seconds, cost, fits, gib, bound) in enumerate(zip(
                    rows["interval_high_s"], rows["cost_per_epoch_usd"], rows["fits"], rows["memory_gib"],
                    rows["bound"])):
                notes = ([f"{dollars(cost)}/epoch"] if cost == cost else []) + (  # cost not NaN
                    [] if fits else [f"does not fit ({gib:.1f} GiB)"]) + (["host-bound"] if bound == "host" else [])
                if notes:
                    ax.annotate(" " + "; ".join(notes), (seconds, y), va="center", fontsize=8)
            ax.set_xlabel("predicted seconds per epoch (80% interval)")
            ax.set_title("Which GPU: epoch time and cost")
            if made:
                ax.figure.tight_layout()  # room for long GPU names
            return ax

    return Comparison


@collector_paused
def compare(model, batch=32, gpus="all", price_per_hour=None, input_shape=None, example_input=None,
            dataset_size=1024, optimizer="sgd", precision="fp32", progress=True):
    """A Comparison (a pandas DataFrame) of `model`'s training epoch on each GPU of `gpus` ("all": the whole catalog;
    or a list of names), sorted by epoch time: epoch and step seconds, the 80% interval, how the predictors serve
    the GPU (`served`: prenet.predictors.served_as), the nearest fitted GPU and the distance to it, the training
    memory (prenet.training_memory, in GiB) with the data copied in a batch at a time (`memory_gib`, `fits`) and
    with the whole data set resident on the device as the protocol's timed epochs have it (`resident_memory_gib`,
    `fits_resident`), whether each fits the GPU's memory, the price per hour used (`price_per_hour` {name: USD}
    overrides the catalog's) with its source, and the cost of an epoch (NaN where no price is known). With
    gpus="all" and a mixed precision, GPUs without that type are left out and named in `.attrs["unsupported"]`.
    `progress`: as prenet.predict's (a bar while a model is traced for real, once that has taken two seconds)."""
    import pandas as pd

    batch, dataset_size, optimizer = _check(model, batch, dataset_size, optimizer)
    precision = check_precision(precision)
    every = isinstance(gpus, str) and gpus.lower() == "all"  # in any case, as GPU names are taken
    names = list(catalog_frame()["name"]) if every else [gpus] if isinstance(gpus, str) else gpus
    if not names:
        raise ValueError('gpus must be "all", a GPU name or a non-empty list of GPU names')
    if any(isinstance(name, str) and name.lower() == "cpu" for name in names):
        raise ValueError("compare ranks GPUs, and 'cpu' is none: for this machine's CPU, prenet.predict(model, "
                         "gpu='cpu')")
    canonical = [find_gpu(name)["name"] for name in names]          # unknown names fail here, with suggestions
    for name in canonical:
        resolve(name)
    prices = {}
    for name, price in (price_per_hour or {}).items():
        check_price(f"price_per_hour[{name!r}]", price)
        prices[find_gpu(name)["name"]] = {"usd_per_hour": float(price), "source": "given", "date": ""}
    model = initialized(model, input_maker(model, input_shape, example_input))  # once for the trace and the memory
    traced = trace_steps(model, batch, dataset_size, input_shape, example_input, precision, progress)
    memory = training_memory(model, batch, input_shape, example_input, dataset_size, optimizer, precision)
    rows, unsupported = [], {}
    for name in dict.fromkeys(canonical):
        try:
            estimate = estimate_traced(traced, batch, name, dataset_size, optimizer, precision)
        except UnsupportedPrecision as error:
            if gpus != "all":
                raise
            unsupported[name] = str(error)  # "all": a GPU without the precision's type is left out, and said so
            continue
        price = prices.get(name) or catalog_prices().get(name)
        low, high = estimate.interval_seconds or (float("nan"), float("nan"))
        usd = price["usd_per_hour"] if price else float("nan")
        rows.append({"gpu": name, "epoch_seconds": estimate.epoch_seconds, "interval_low_s": low,
                     "interval_high_s": high, "step_seconds": estimate.step_seconds,
                     "bound": estimate.bound,
                     "served": served_as(name), "nearest_fitted": estimate.extrapolation["nearest"],
                     "distance": estimate.extrapolation["distance"], "memory_gib": memory.streamed / GIB,
                     "fits": memory.fits(find_gpu(name)["memory_gb"], resident=False),
                     "resident_memory_gib": memory.gib, "fits_resident": memory.fits(find_gpu(name)["memory_gb"]),
                     "usd_per_hour": usd,
                     "cost_per_epoch_usd": estimate.epoch_seconds / 3600.0 * usd,
                     "price_source": (price["source"] + (f" ({price['date']})" if price["date"] else "")
                                      if price else "")})
    frame = pd.DataFrame(rows).sort_values("epoch_seconds").reset_index(drop=True)
    table = _comparison_class()(frame)
    table.attrs["unsupported"] = unsupported
    return table
