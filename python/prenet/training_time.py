"""prenet.predict_training: how long until a model is trained, and what it costs: the number of SGD steps
(given as epochs, or predicted for a target loss by prenet.predict_steps) times the predicted time of each step on
a GPU (prenet.predict), with both parts shown."""
import math
from dataclasses import dataclass, field

from .compare import catalog_prices, check_price
from .estimate import predict
from .training_steps import dataset_arrays, dataset_length, predict_steps


@dataclass
class TrainingTime:
    """Total predicted training time: `steps` steps (`epochs` of the data set) at the step times of `estimate`."""
    gpu: str
    batch: int
    dataset_size: int
    steps: object
    epochs: object
    total_seconds: object
    cost: object
    price_per_hour: object
    estimate: object = field(repr=False)
    steps_prediction: object = field(repr=False)

    def __repr__(self):
        if isinstance(self.steps, list):  # several target losses
            def each(target, steps, seconds, cost):
                if steps is None:
                    return f"loss {target:.4g} not reached"
                return (f"loss {target:.4g} in {steps} steps, {seconds:.4g} s"
                        + ("" if cost is None else f", cost {cost:.4g} USD"))
            reached = "; ".join(each(*row) for row in zip(self.steps_prediction.target_loss, self.steps,
                                                          self.total_seconds, self.cost))
            shortfall = ("" if all(self.steps) else f" (within {self.steps_prediction.max_steps} predicted steps: "
                         f"{self.steps_prediction.shortfall()})")
            price = "" if self.price_per_hour is None else f", at {self.price_per_hour:g} USD per hour"
            return (f"<prenet training time on {self.gpu}, {1e3 * self.estimate.step_seconds:.2f} ms per step of "
                    f"batch {self.batch}: {reached}{shortfall}{price}>")
        if self.steps is None:
            return (f"<prenet training time: the target loss is not reached within "
                    f"{self.steps_prediction.max_steps} predicted steps ({self.steps_prediction.shortfall()}); "
                    "one epoch takes "
                    f"{self.estimate.epoch_seconds:.3f} s on {self.gpu}>")
        where = ("given" if self.steps_prediction is None else
                 f"predicted for loss {self.steps_prediction.target_loss:.4g}")
        cost = "" if self.cost is None else f", cost {self.cost:.4g} USD at {self.price_per_hour:g} USD per hour"
        return (f"<prenet training time: {self.total_seconds:.4g} s on {self.gpu} = {self.steps} steps "
                f"({where}; {self.epochs:.2f} epochs of {self.dataset_size}) x "
                f"{1e3 * self.estimate.step_seconds:.2f} ms per step of batch {self.batch}{cost}"
                f"{self.estimate._memory_text()}>")


# predict_training's arguments as its errors name them; the command line gives its flags instead.
ARGUMENT_NAMES = {"dataset": "the dataset", "target_loss": "target_loss", "epochs": "epochs",
                  "dataset_size": "dataset_size", "input_shape": "input_shape", "example_input": "example_input",
                  "samples": "input_shape (one sample's, without the batch) or example_input"}


def check_data_source(dataset_given, target_loss_given, description, names=ARGUMENT_NAMES):
    """Raises ValueError unless the training samples come from one place: the dataset, or a description of it
    (`description`: {argument: value or None} of dataset_size and the sample's shape), and from the dataset itself
    for a target loss. `names`: each argument as the user gave it (ARGUMENT_NAMES' keys; "samples": how a sample's
    shape is given)."""
    described = [names[name] for name, value in description.items() if value is not None]
    if dataset_given and described:
        raise ValueError(f"{', '.join(described)}: the data set gives its size and samples; give {names['dataset']} "
                         "or describe it, not both")
    if not dataset_given and target_loss_given:
        raise ValueError(f"{names['target_loss']}: the steps to a loss are predicted from the data itself "
                         f"(predict_steps); give {names['dataset']}")
    if not dataset_given and description.get("dataset_size") is None:
        raise ValueError(f"give {names['dataset']}, or with {names['epochs']} describe it: {names['dataset_size']} "
                         f"(samples per epoch) and {names['samples']}")


def predict_training(model, dataset=None, gpu="V100", batch=32, lr=0.01, momentum=0.0, loss="cross_entropy",
                     epochs=None, target_loss=None, price_per_hour=None, precision="fp32", optimizer=None,
                     dataset_size=None, input_shape=None, example_input=None, **steps_options):
    """Predicted total training time on `dataset` (see predict_steps for its form) on `gpu`: give either `epochs` (then
    steps = epochs x ceil(N / batch)) or `target_loss` (SGD's steps predicted by predict_steps with `lr`,
    `momentum`, `loss` and `steps_options`; a list of losses gives steps, epochs, seconds and cost as lists). With
    `epochs` the data set may be described instead of given: `dataset_size` samples of `input_shape` (one sample's,
    without the batch) or like `example_input`, as prenet.predict takes them. The step time is prenet.predict's for
    this model, batch and data set size, with `optimizer` (as predict takes it; with epochs only) or else SGD (with
    momentum when momentum > 0). `price_per_hour` gives the cost (default: the catalog's USD price for the GPU
    where data/gpu_prices.csv has one)."""
    if (epochs is None) == (target_loss is None):
        raise ValueError("give exactly one of epochs (a number > 0) and target_loss")
    if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, (int, float)) or epochs <= 0):
        raise ValueError(f"epochs must be a number > 0, got {epochs!r}")
    if epochs is not None and steps_options:
        raise ValueError(f"{', '.join(sorted(steps_options))}: options of predict_steps, which predicts the steps "
                         "for a target_loss; with epochs the steps are given")
    if target_loss is not None and optimizer is not None:
        raise ValueError("with target_loss the steps are SGD's (predict_steps), with lr and momentum; give epochs "
                         "to time another optimizer")
    if price_per_hour is not None:
        check_price("price_per_hour", price_per_hour)
    check_data_source(dataset is not None, target_loss is not None,
                      dict(dataset_size=dataset_size, input_shape=input_shape, example_input=example_input))
    if dataset is not None:
        dataset_size = dataset_length(dataset)
        example_input, _ = dataset_arrays(dataset, [0])
    estimate = predict(model, batch=batch, gpu=gpu, input_shape=input_shape, example_input=example_input,
                       dataset_size=dataset_size, optimizer=optimizer or ("sgd" if momentum > 0 else "sgd_plain"),
                       precision=precision)
    if price_per_hour is None and estimate.gpu in catalog_prices():
        price_per_hour = catalog_prices()[estimate.gpu]["usd_per_hour"]  # the catalog's, with its source
    per_epoch = estimate.iterations
    steps_prediction = None
    if epochs is not None:
        steps = math.ceil(epochs * per_epoch)
    else:
        steps_prediction = predict_steps(model, dataset, loss=loss, target_loss=target_loss, lr=lr, batch=batch,
                                         momentum=momentum, **steps_options)
        steps = steps_prediction.steps

    def timed(count):  # (epochs, seconds, cost) of `count` steps; Nones for a target not reached
        if count is None:
            return None, None, None
        # Whole epochs at the predicted epoch time (its last, partial batch included), the rest at full-batch steps.
        whole, rest = divmod(count, per_epoch)
        total = whole * estimate.epoch_seconds + rest * estimate.step_seconds
        return count / per_epoch, total, None if price_per_hour is None else total / 3600.0 * price_per_hour

    # a list of target losses (predict_steps takes one) gives a list of each, in its order
    epochs, total, cost = (list(column) for column in zip(*map(timed, steps))) if isinstance(steps, list) \
        else timed(steps)
    return TrainingTime(gpu=estimate.gpu, batch=batch, dataset_size=dataset_size, steps=steps, epochs=epochs,
                        total_seconds=total, cost=cost, price_per_hour=price_per_hour, estimate=estimate,
                        steps_prediction=steps_prediction)
