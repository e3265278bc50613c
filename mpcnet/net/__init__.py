"""Layer: network. Channels move numpy arrays between parties; the round engine counts them."""
