"""The sweep over f's inputs: each input's Jacobian block by its gradients against finite
differences (full mode) or random projections (fast mode), with the mode chosen first."""
