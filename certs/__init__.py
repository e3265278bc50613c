"""Keys and pins: each party makes its own key where it runs; the deployment file pins it."""
