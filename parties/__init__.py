"""The MPC server process (``mpc-party``): TLS listener, mesh, durable storage, jobs, roles."""
