#!/usr/bin/env bash
# Prints the description of a one-layer LSTM classifier on dense features (the model the
# data measurement scripts train): scripts/lstm-classifier-toml.sh FEATURES HIDDEN CLASSES
set -euo pipefail
cat <<TOML
[input]
kind = "dense"
features = $1

[recurrent]
cell = "lstm"
hidden = $2
layers = 1

[head]
on = "last"
layers = []

[loss]
kind = "cross_entropy"
classes = $3
TOML
