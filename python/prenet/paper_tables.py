"""The PreNeT paper's published figures (../shared/seeds), for display beside ours; never used in fitting.

Tables 4 and 5: test RMSE (ms, on the paper's own GPU measurements) of each model family with the Baseline and
the COCMCT feature sets, and the improvement column, as printed. Cells the extracted text leaves ambiguous are
kept as printed (first number = Baseline, last = COCMCT), so an improvement need not follow from the two.
"""

# native kind -> family -> (Baseline RMSE, COCMCT RMSE, improvement %)
PAPER_RMSE = {
    "multihead_attention": {"linear": (4.943, 3.005, 39.21), "random_forest": (0.543, 0.382, 29.65),
                            "gradient_boosting": (2.588, 0.709, 72.60), "xgboost": (0.56, 0.329, 41.25),
                            "mlp": (0.335, 0.312, 6.87)},
    "conv2d": {"linear": (18.612, 14.094, 24.27), "random_forest": (8.328, 8.220, 5.03),
               "gradient_boosting": (13.902, 9.377, 32.55), "xgboost": (8.935, 8.110, 9.23),
               "mlp": (9.633, 9.093, 5.61)},
    "embedding": {"linear": (3.984, 3.734, 6.28), "random_forest": (0.583, 0.382, 34.48),
                  "gradient_boosting": (1.943, 1.066, 45.14), "xgboost": (0.576, 0.387, 32.81),
                  "mlp": (0.363, 0.284, 21.76)},
    "linear": {"linear": (0.841, 0.772, 8.21), "random_forest": (0.127, 0.126, 7.87),
               "gradient_boosting": (0.383, 0.240, 37.34), "xgboost": (0.136, 0.125, 8.09),
               "mlp": (0.132, 0.129, 2.27)},
    "rnn": {"linear": (1.204, 0.853, 29.15), "random_forest": (0.387, 0.368, 30.49),
            "gradient_boosting": (0.905, 0.453, 49.94), "xgboost": (0.351, 0.28, 23.36),
            "mlp": (0.362, 0.219, 39.50)},
}

# The model chosen per layer kind in the paper's repository README ("selected prediction model").
PAPER_SELECTION = {"conv2d": "random_forest", "linear": "random_forest", "embedding": "mlp",
                   "multihead_attention": "mlp", "layer_norm": "mlp", "rnn": "mlp"}
