"""Data-owner and analyst client (``mpc-client``) and the one-command demo (``mpc-demo``)."""
