"""Plaintext reference layer: the logistic regression the servers train, in float64.

The same model, objective and steps as ``mpcnet.train.logreg`` without the fixed point, so a
private model can be compared with it, and the model format the model owner receives:

- columns standardised as scikit-learn's StandardScaler does (population standard deviation;
  scale 1 for a constant column);
- one weight vector per class against the rest (one for two classes: the second class), with
  an intercept that is not penalised;
- objective, per class: sum_i logloss_i + (l2 / 2) |w|^2, i.e. scikit-learn's
  LogisticRegression with C = 1 / l2;
- full-batch gradient descent with heavy-ball momentum, from zero:
  v <- momentum v - (learning_rate / m) grad, w <- w + v, for ``epochs`` epochs;
- the gradient uses the piecewise-linear sigmoid ``approximate`` (the servers' secure
  sigmoid; error below ``SIGMOID_ERROR`` everywhere); predictions use the exact one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SIGMOID_BREAKPOINTS = (1.65625, 3.96875)
SIGMOID_STEPS = (39, 16)
SIGMOID_STEP_BITS = 8
SIGMOID_ERROR = 0.0190
"""The largest |approximate(z) - 1 / (1 + e^-z)| over every real z."""


@dataclass(frozen=True)
class Training:
    """The hyper-parameters of a training job (the defaults were measured on the bundled
    datasets: bench.accuracy)."""

    epochs: int = 200
    learning_rate: float = 1.0
    l2: float = 1.0
    momentum: float = 0.9


DEFAULT_TRAINING = Training()


@dataclass
class Model:
    """A trained model as its owner receives it: predict on a row x of D' with
    sigmoid(coef ((x - mean) / scale) + intercept) per class."""

    classes: list[str]
    columns: list[str]
    coef: np.ndarray       # one row per class (one row for two classes: the second class)
    intercept: np.ndarray
    mean: np.ndarray
    scale: np.ndarray

    def scores(self, x: np.ndarray) -> np.ndarray:
        """The linear scores of the rows of x (m x len(columns)), one column per coef row."""
        return ((np.asarray(x, dtype=np.float64) - self.mean) / self.scale) @ self.coef.T \
            + self.intercept

    def predict(self, x: np.ndarray) -> list[str]:
        """The predicted class of every row of x."""
        z = self.scores(x)
        best = (z[:, 0] > 0).astype(int) if z.shape[1] == 1 else z.argmax(axis=1)
        return [self.classes[int(i)] for i in best]

    def as_json(self) -> dict[str, object]:
        return {"classes": self.classes, "columns": self.columns,
                "coef": self.coef.tolist(), "intercept": self.intercept.tolist(),
                "mean": self.mean.tolist(), "scale": self.scale.tolist()}


def approximate(z: np.ndarray) -> np.ndarray:
    """The servers' sigmoid: 1/2 + sum_i (a_i / 2^8) clamp(z, -h_i, h_i)."""
    z = np.asarray(z, dtype=np.float64)
    out = np.full(z.shape, 0.5)
    for h, a in zip(SIGMOID_BREAKPOINTS, SIGMOID_STEPS, strict=True):
        out += a / 2**SIGMOID_STEP_BITS * np.clip(z, -h, h)
    return out


def standardise(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x - mean) / scale, mean and scale, as StandardScaler."""
    x = np.asarray(x, dtype=np.float64)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    return (x - mean) / scale, mean, scale


def targets(codes: np.ndarray, n_classes: int) -> np.ndarray:
    """The 0/1 targets, one column per weight vector."""
    onehot = (np.asarray(codes)[:, None] == np.arange(n_classes)[None, :]).astype(np.float64)
    return onehot[:, 1:] if n_classes == 2 else onehot


def fit(x: np.ndarray, codes: np.ndarray, n_classes: int,
        training: Training = DEFAULT_TRAINING) -> tuple[np.ndarray, np.ndarray]:
    """(coef, intercept) trained on the standardised rows x as the servers do."""
    m, k = x.shape
    xa = np.hstack([x, np.ones((m, 1))])
    y = targets(codes, n_classes)
    w = np.zeros((k + 1, y.shape[1]))
    v = np.zeros_like(w)
    penalised = np.r_[np.ones(k), 0.0][:, None]
    for _ in range(training.epochs):
        grad = xa.T @ (approximate(xa @ w) - y) + training.l2 * penalised * w
        v = training.momentum * v - training.learning_rate / m * grad
        w = w + v
    return w[:k].T, w[k]
