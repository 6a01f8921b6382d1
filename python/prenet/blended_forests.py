"""The "blend" candidate for unseen GPUs: the mean of two tree ensembles fitted to one target (log of time over the
kernel bound), one reading every input of "ours" (the layer, its exact counts, its roofline and the GPU's figures),
the other those inputs less the GPU's figures ("efficiency": the device enters through its roofline only). In time,
the geometric mean of the two predictions. Each alone errs on other held-out GPUs: ours where a GPU's figures say
little of its efficiency, efficiency where they say much (results/unseen_gpu_device.md compares the three).

A sum of tree ensembles is a tree ensemble, so the mean is written as one xgboost model (merged_model): every tree
of both, each leaf value halved, the second's splits renumbered to the full list of inputs and the base scores
averaged. The native core reads it as any other forest (cpp/src/regressors/tree_ensemble.cpp)."""
import json

import numpy as np

# Objectives whose prediction is the margin itself (base score plus the trees' leaves), so that the mean of two
# predictions is the prediction of the merged forest.
IDENTITY_OBJECTIVES = ("reg:squarederror",)


def gpu_free(names):
    """Positions in `names` of the inputs that are not a GPU's figures (the "gpu_" columns of prenet.training)."""
    return [i for i, name in enumerate(names) if not name.startswith("gpu_")]


class BlendedForests:
    """Two unfitted xgboost regressors (`full`, `reduced`) and the positions of the inputs `reduced` reads
    (gpu_free of the full input names); fit and predict take the full inputs, as every prenet model does."""

    def __init__(self, full, reduced, reduced_columns):
        if not reduced_columns:
            raise ValueError("the reduced forest needs at least one input")
        self.full, self.reduced, self.reduced_columns = full, reduced, list(reduced_columns)

    def fit(self, x, y):
        self.full.fit(x, y)
        self.reduced.fit(x[:, self.reduced_columns], y)
        return self

    def predict(self, x):
        return 0.5 * (np.asarray(self.full.predict(x), float) +
                      np.asarray(self.reduced.predict(x[:, self.reduced_columns]), float))

    def merged_model(self):
        """The xgboost JSON model (Booster.save_raw("json")'s layout) whose prediction is `predict`'s."""
        merged = json.loads(self.full.get_booster().save_raw("json"))
        other = json.loads(self.reduced.get_booster().save_raw("json"))
        for model in (merged, other):
            objective = model["learner"]["objective"]["name"]
            if objective not in IDENTITY_OBJECTIVES:
                raise ValueError(f"forests of objective {objective!r} cannot be averaged as one forest; "
                                 f"supported: {', '.join(IDENTITY_OBJECTIVES)}")
        for tree in other["learner"]["gradient_booster"]["model"]["trees"]:
            tree["split_indices"] = [self.reduced_columns[i] for i in tree["split_indices"]]
        booster = merged["learner"]["gradient_booster"]["model"]
        booster["trees"] += other["learner"]["gradient_booster"]["model"]["trees"]
        for number, tree in enumerate(booster["trees"]):
            tree["id"] = number
            tree["split_conditions"] = [0.5 * value if left == -1 else value
                                        for value, left in zip(tree["split_conditions"], tree["left_children"])]
        booster["tree_info"] = [0] * len(booster["trees"])
        booster["gbtree_model_param"]["num_trees"] = str(len(booster["trees"]))
        scores = [float(model["learner"]["learner_model_param"]["base_score"]) for model in (merged, other)]
        merged["learner"]["learner_model_param"]["base_score"] = repr(0.5 * sum(scores))
        return merged
