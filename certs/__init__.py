"""Certificate tooling for a deployment: one CA, a key and certificate per server and client."""
