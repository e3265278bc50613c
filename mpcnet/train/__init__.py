"""Layer: train. Private model training on the shares of a selection's result (Fig. 1, step 2B)."""
