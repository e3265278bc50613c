# One image for the servers (mpc-party), the client (mpc-client) and the certificate tool.
FROM python:3.11-slim

WORKDIR /opt/mpcnet
COPY pyproject.toml setup.py README.md ./
COPY mpcnet ./mpcnet
COPY parties ./parties
COPY client ./client
COPY certs ./certs
COPY data ./data
# editable, so that the bundled data/ stays next to the code for mpc-demo and bench; a C
# compiler only for the build of the Z_2^128 loops (mpcnet/_ring128.c), removed after it
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install --no-cache-dir -e . \
    && apt-get purge -y --auto-remove gcc libc6-dev && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home /var/lib/mpcnet mpc \
    && mkdir -p /var/lib/mpcnet /etc/mpcnet \
    && chown mpc /var/lib/mpcnet

# Keys are mounted read-only per container; the process runs as an unprivileged user whose
# uid must be able to read its key (docker-compose.yml uses MPC_UID, default 10001).
USER mpc
EXPOSE 7101 7102 7103 7104
CMD ["mpc-party", "--help"]
